"""Where a journal is: the URL forms hotseam accepts, and the default file.

* ``memory:`` — a new, empty SQLite journal in this process's memory (tests);
* ``sqlite:///abs/path.sqlite3`` (or SQLAlchemy's ``sqlite:////abs/path.sqlite3``),
  ``sqlite:relative/path``, or a plain path — an SQLite file (the embedded default);
* ``postgresql://…`` or ``postgres://…`` — a PostgreSQL database, as libpq reads the URL
  (``?host=/run/postgresql`` for a Unix socket, ``options=-csearch_path%3Dname`` for a schema).

Anything else with a scheme (``mysql://``, ``sqlite://host/x``) is refused with an error that
names the accepted forms. The default journal is ``journal.sqlite3`` in hotseam's state
folder, ``$XDG_STATE_HOME/hotseam`` or ``~/.local/state/hotseam`` (the folder that also keeps
the web inbox's token).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from ._errors import JournalError, JournalErrorCode

JOURNAL_FILE_NAME = "journal.sqlite3"

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_FORMS = "memory:, sqlite:///PATH, a file path, or postgresql://USER@HOST/DATABASE"


@dataclass(frozen=True, slots=True)
class JournalLocation:
    """A parsed journal URL.

    Attributes:
        engine: ``"memory"``, ``"sqlite"`` or ``"postgresql"``.
        target: The SQLite file path, or the PostgreSQL URL for libpq (password kept).
        shown: The location fit for logs and errors (a password replaced by ``***``).
    """

    engine: Literal["memory", "sqlite", "postgresql"]
    target: str
    shown: str


def state_folder() -> Path:
    """hotseam's state folder: ``$XDG_STATE_HOME/hotseam``, else ``~/.local/state/hotseam``.

    The same rule as the web inbox's kept token (``providers/_web/_security.state_dir``,
    which this layer may not import).
    """
    base = os.environ.get("XDG_STATE_HOME", "")
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "hotseam"


def default_journal_path() -> Path:
    """The embedded journal's default file (its folder is made 0700 when opened)."""
    return state_folder() / JOURNAL_FILE_NAME


def parse_journal_url(url: str | os.PathLike[str]) -> JournalLocation:
    """Tell which engine ``url`` names and where.

    Raises:
        JournalError: ``JOURNAL_INVALID_URL`` naming the URL and the accepted forms.
    """
    if isinstance(url, os.PathLike):
        url = os.fspath(url)
    if not isinstance(url, str) or not url.strip():
        raise _invalid(repr(url), "it is empty")
    text = url.strip()
    if text == "memory:":
        return JournalLocation("memory", "", "memory:")
    match = _SCHEME.match(text)
    scheme = match.group(1).lower() if match else None
    if scheme is None or len(scheme) == 1:  # a plain path (a drive letter is a path too)
        return _sqlite_file(text, text)
    if scheme in ("postgresql", "postgres"):
        return _postgres(text)
    if scheme == "sqlite":
        rest = text[len("sqlite:") :]
        if rest.startswith("//"):
            parts = urlsplit(text)
            if parts.netloc:
                raise _invalid(text, f"an SQLite file has no host ({parts.netloc!r}): {_FORMS}")
            if parts.query or parts.fragment:
                raise _invalid(text, "an SQLite file URL takes no ?query or #fragment")
            rest = re.sub(r"^/+", "/", parts.path)  # sqlite:////abs (SQLAlchemy's) too
        return _sqlite_file(rest, text)
    if scheme == "memory":
        raise _invalid(text, "the in-memory journal is written exactly 'memory:'")
    raise _invalid(text, f"unknown journal engine {scheme!r}; use {_FORMS}")


def _sqlite_file(path: str, url: str) -> JournalLocation:
    if not path or path.endswith("/"):
        raise _invalid(url, "it names no SQLite file")
    if "\0" in path:
        raise _invalid(url, "the path contains a NUL character")
    expanded = os.path.expanduser(path)
    return JournalLocation("sqlite", expanded, expanded)


def _postgres(url: str) -> JournalLocation:
    try:
        urlsplit(url).port  # noqa: B018 (a port that is not a number raises here)
    except ValueError as error:
        raise _invalid(url, str(error)) from None
    return JournalLocation("postgresql", url, redact(url))


def redact(url: str) -> str:
    """``url`` with its password (in the user part or a ``password=`` parameter) as ``***``."""
    parts = urlsplit(url)
    user, at, host = parts.netloc.rpartition("@")
    if at and ":" in user:
        url = urlunsplit(
            (parts.scheme, f"{user.partition(':')[0]}:***@{host}", parts.path, parts.query, "")
        )
    return re.sub(r"((?:[?&])password=)[^&]*", r"\1***", url)


def _invalid(url: str, why: str) -> JournalError:
    shown = redact(url)
    return JournalError(
        f"invalid journal URL {shown}: {why}",
        JournalErrorCode.JOURNAL_INVALID_URL,
        details={"url": shown},
    )
