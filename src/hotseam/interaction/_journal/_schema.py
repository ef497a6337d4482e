"""The journal's tables, their version, and the migrations from older versions.

``hotseam_meta`` holds ``schema_version`` (and the hotseam that last wrote the schema). On
open, inside one write transaction (under an advisory lock on PostgreSQL, so that processes
opening a new database at once make it once):

* no tables: version :data:`SCHEMA_VERSION` is created;
* an older version: each migration ``n -> n + 1`` runs in turn;
* a newer version: refused (``JOURNAL_NEWER``), naming both versions and the journal — an
  older hotseam cannot know what a newer one's records mean.

Version 0 is the layout of hotseam's unreleased first journal (no ``hotseam_meta`` table;
asks without ``settled_by``; no change log). Version 2 adds ``partial`` to asks: the
answers given so far to the questions of a pending ask of several, so that a resumed run
asks only the rest. Version 3 adds approval rules (``hotseam_rules``) and their uses
(``hotseam_rule_uses``). A new journal is made at the current version in statements that
processes making it at once may all run (``IF NOT EXISTS``).
"""

from __future__ import annotations

from collections.abc import Callable

from ._errors import JournalError, JournalErrorCode
from ._sql import Db

SCHEMA_VERSION = 3
"""The version this hotseam writes."""

_STATES = "'pending', 'answered', 'failed', 'withdrawn', 'abandoned'"
_RUN_STATES = "'running', 'finished', 'failed', 'abandoned'"

_META = "CREATE TABLE IF NOT EXISTS hotseam_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"

_INDEXES = [
    # At most one unfinished run per agent (two starts at once: one wins, RUN_EXISTS).
    "CREATE UNIQUE INDEX IF NOT EXISTS hotseam_runs_unfinished ON hotseam_runs (agent)"
    " WHERE state = 'running'",
    # At most one live ask per position of a run (abandoned ones make room); an ask the
    # caller keyed is known by its key instead, wherever it comes in the run.
    "CREATE UNIQUE INDEX IF NOT EXISTS hotseam_asks_position ON hotseam_asks (run_id, seq)"
    " WHERE state <> 'abandoned' AND caller_key IS NULL",
    "CREATE UNIQUE INDEX IF NOT EXISTS hotseam_asks_key ON hotseam_asks (run_id, caller_key)"
    " WHERE state <> 'abandoned' AND caller_key IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS hotseam_asks_pending ON hotseam_asks (created_at)"
    " WHERE state = 'pending'",
    "CREATE INDEX IF NOT EXISTS hotseam_asks_settled ON hotseam_asks (settled_at)",
    "CREATE INDEX IF NOT EXISTS hotseam_runs_daemon ON hotseam_runs (daemon_id)",
]

_RULES = [
    "CREATE TABLE IF NOT EXISTS hotseam_rules ("
    " id TEXT PRIMARY KEY, tool TEXT NOT NULL, allow INTEGER NOT NULL, arguments TEXT NOT NULL,"
    " scope TEXT NOT NULL CHECK (scope IN ('run', 'daemon', 'journal')), scope_id TEXT,"
    " reason TEXT, created_by TEXT, created_at {real} NOT NULL, revoked_at {real},"
    " revoked_by TEXT)",
    "CREATE TABLE IF NOT EXISTS hotseam_rule_uses ("
    " id TEXT PRIMARY KEY, rule_id TEXT NOT NULL REFERENCES hotseam_rules (id),"
    " digest TEXT NOT NULL, run_id TEXT, agent TEXT, at {real} NOT NULL)",
    "CREATE INDEX IF NOT EXISTS hotseam_rule_uses_rule ON hotseam_rule_uses (rule_id)",
]

_CURRENT = [
    _META,
    "CREATE TABLE IF NOT EXISTS hotseam_daemons ("
    " id TEXT PRIMARY KEY, name TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL,"
    " agent TEXT, started_at {real} NOT NULL, heartbeat_at {real} NOT NULL,"
    " stopped_at {real})",
    "CREATE TABLE IF NOT EXISTS hotseam_runs ("
    " id TEXT PRIMARY KEY, agent TEXT NOT NULL,"
    " daemon_id TEXT NOT NULL REFERENCES hotseam_daemons (id),"
    f" state TEXT NOT NULL CHECK (state IN ({_RUN_STATES})),"
    " started_at {real} NOT NULL, claimed_at {real} NOT NULL, finished_at {real})",
    "CREATE TABLE IF NOT EXISTS hotseam_asks ("
    " id TEXT PRIMARY KEY, run_id TEXT NOT NULL REFERENCES hotseam_runs (id),"
    " seq INTEGER NOT NULL, caller_key TEXT, digest TEXT NOT NULL, request TEXT NOT NULL,"
    f" state TEXT NOT NULL CHECK (state IN ({_STATES})), code TEXT, answer TEXT,"
    " settled_by TEXT, created_at {real} NOT NULL, settled_at {real}, partial TEXT)",
    *_INDEXES,
    *_RULES,
]


# SQLite's change feed reads this log back in order (writers are serialised, so the numbers
# follow commit order); PostgreSQL announces changes with NOTIFY and has no such table.
_CHANGE_LOG = (
    "CREATE TABLE IF NOT EXISTS hotseam_changes ("
    " change_no INTEGER PRIMARY KEY AUTOINCREMENT, ask_id TEXT NOT NULL, run_id TEXT NOT NULL,"
    " state TEXT NOT NULL, at {real} NOT NULL)"
)


def _migrate_0_to_1(db: Db) -> None:
    """Version 0 had no meta table, no change log, and asks without ``settled_by``."""
    db.count("ALTER TABLE hotseam_asks ADD COLUMN settled_by TEXT")
    db.count(_META)
    for statement in _INDEXES:
        db.count(statement)
    if db.dialect.change_log:
        db.count(_CHANGE_LOG)


def _migrate_1_to_2(db: Db) -> None:
    """Version 2 keeps a pending ask's answers to some of its questions (JSON, or NULL)."""
    db.count("ALTER TABLE hotseam_asks ADD COLUMN partial TEXT")


def _migrate_2_to_3(db: Db) -> None:
    """Version 3 keeps approval rules and their uses."""
    for statement in _RULES:
        db.count(statement)


MIGRATIONS: dict[int, Callable[[Db], None]] = {
    0: _migrate_0_to_1,
    1: _migrate_1_to_2,
    2: _migrate_2_to_3,
}
"""``MIGRATIONS[n]`` turns a version ``n`` journal into version ``n + 1``."""


def ensure_schema(db: Db, where: str) -> int | None:
    """Make the journal's tables current, in the caller's write transaction.

    Args:
        where: The journal as shown in errors (a file, a URL without password).

    Returns:
        The version found (``None`` for a new journal).

    Raises:
        JournalError: ``JOURNAL_NEWER``; ``JOURNAL_CORRUPT`` for an unreadable version.
    """
    from ... import __version__

    found = _version(db, where)
    if found is not None and found > SCHEMA_VERSION:
        raise _newer(db, where, found)
    if found is None:
        for statement in _CURRENT:
            db.count(statement)
        if db.dialect.change_log:
            db.count(_CHANGE_LOG)
    else:
        for version in range(found, SCHEMA_VERSION):
            MIGRATIONS[version](db)
    if found != SCHEMA_VERSION:
        _set(db, "schema_version", str(SCHEMA_VERSION))
        _set(db, "hotseam_version", __version__)
    return found


def schema_is_current(db: Db, where: str) -> bool:
    """True when the journal is at :data:`SCHEMA_VERSION` already: a read, so that opening a
    current journal never waits for another process's write transaction.

    Raises:
        JournalError: ``JOURNAL_NEWER``.
    """
    found = _version(db, where)
    if found is not None and found > SCHEMA_VERSION:
        raise _newer(db, where, found)
    return found == SCHEMA_VERSION


def _newer(db: Db, where: str, found: int) -> JournalError:
    from ... import __version__

    written_by = db.one("SELECT value FROM hotseam_meta WHERE key = 'hotseam_version'")
    by = f" (hotseam {written_by[0]})" if written_by else ""
    return JournalError(
        f"the journal {where} was written by a newer hotseam{by}: its schema version is "
        f"{found}, and this hotseam ({__version__}) reads versions up to {SCHEMA_VERSION}. "
        "Upgrade hotseam, or use another journal",
        JournalErrorCode.JOURNAL_NEWER,
        details={"found": found, "supported": SCHEMA_VERSION},
    )


def _version(db: Db, where: str) -> int | None:
    """The schema version of the journal: ``None`` when it has no tables yet."""
    if db.one(db.dialect.table_exists, ("hotseam_meta",)) is not None:
        row = db.one("SELECT value FROM hotseam_meta WHERE key = 'schema_version'")
        if row is None:
            raise JournalError(
                f"the journal {where} has a hotseam_meta table without a schema version",
                JournalErrorCode.JOURNAL_CORRUPT,
            )
        try:
            return int(row[0])
        except ValueError:
            raise JournalError(
                f"the journal {where} has an unreadable schema version {row[0]!r}",
                JournalErrorCode.JOURNAL_CORRUPT,
            ) from None
    if db.one(db.dialect.table_exists, ("hotseam_asks",)) is not None:
        return 0
    return None


def _set(db: Db, key: str, value: str) -> None:
    db.count(
        "INSERT INTO hotseam_meta (key, value) VALUES (?, ?)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )
