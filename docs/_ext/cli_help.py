"""An MkDocs hook: the CLI reference shows what ``hotseam <command> --help`` prints.

``docs/cli.md`` holds a marker per command (``<!-- hotseam-help: run -->``, an empty name
for ``hotseam`` itself); each is replaced by the help text of hotseam's own argument
parser, formatted for a fixed width, when the site is built. The page therefore cannot fall
behind the parser. A marker naming no command, or a command with no marker, fails the
build.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from typing import Any

MARKER = re.compile(r"^<!-- hotseam-help: ?(?P<command>[a-z-]*) -->$", re.M)
WIDTH = 90  # COLUMNS: the help is wrapped at 88, which a code block shows whole


def commands() -> list[str]:
    """Every subcommand of ``hotseam``, in the order ``hotseam --help`` lists them."""
    from hotseam.cli import _COMMANDS

    return list(_COMMANDS)


def help_text(command: str) -> str:
    """What ``COLUMNS=90 hotseam [command] --help`` prints."""
    from hotseam.cli import build_parser

    arguments = [command, "--help"] if command else ["--help"]
    output = io.StringIO()
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(WIDTH)
    try:
        with contextlib.redirect_stdout(output), contextlib.suppress(SystemExit):
            build_parser({command} if command else set()).parse_args(arguments)
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous
    return output.getvalue()


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """Replace each marker of the page with its command's help, in a text block."""
    from mkdocs.exceptions import PluginError  # only the build has mkdocs; the tests do not

    found = [match["command"] for match in MARKER.finditer(markdown)]
    if not found:
        return markdown
    known = commands()
    unknown = sorted(set(found) - {"", *known})
    missing = [command for command in ["", *known] if command not in found]
    if unknown or missing:
        raise PluginError(
            f"{page.file.src_path}: hotseam-help markers name no command {unknown} "
            f"or miss the commands {missing}"
        )
    return MARKER.sub(lambda match: f"```text\n{help_text(match['command'])}```", markdown)
