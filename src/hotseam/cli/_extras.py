"""The CLI's checks for the optional integrations: a command or an option whose extra is not
installed stops before anything starts, with one line that names the extra (exit 2)."""

from __future__ import annotations

import os

from .._extras import install_hint, missing

COMMAND_EXTRAS = {"acp": "acp", "mcp": "mcp", "inbox": "web"}
"""The subcommands that are an integration's surface, and the extra each needs."""


def needs(what: str, extra: str) -> str:
    """The line that says ``what`` needs ``extra`` and how to install it."""
    return f"{what} needs the {extra} extra: {install_hint(extra)}"


def command_needs(command: str) -> str | None:
    """The line to print when ``hotseam COMMAND`` cannot run for a missing extra, else
    ``None``."""
    extra = COMMAND_EXTRAS.get(command)
    if extra is None or missing(extra) is None:
        return None
    return needs(f"hotseam {command}", extra)


def check_journal(url: str | os.PathLike[str]) -> None:
    """Parse the journal URL and check that its engine's driver is installed.

    Raises:
        JournalError: the URL is not one.
        ValueError: a PostgreSQL journal without the postgres extra.
    """
    from ..interaction.journal import parse_journal_url

    location = parse_journal_url(url)
    if location.engine == "postgresql" and missing("postgres") is not None:
        raise ValueError(needs(f"the journal {location.shown}", "postgres"))
