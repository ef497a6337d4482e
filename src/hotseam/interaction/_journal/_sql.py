"""The SQL both engines speak: their dialects, one transaction's handle, shared lookups.

An engine differs only in a :class:`Dialect` (the clock, row locks, parameter marks, how a
change is announced) and in how it runs a transaction (its :class:`Db`), so the first
answer wins by the same ``UPDATE ... WHERE state = 'pending' ... RETURNING`` on both.
Everything here runs inside one transaction and raises a :class:`JournalError` (which
rolls it back) for what a caller must be told.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ._codec import (
    ASK_COLUMNS,
    DAEMON_COLUMNS,
    RUN_COLUMNS,
    ask_from_row,
    daemon_from_row,
    run_from_row,
)
from ._records import CLEARED, AskRecord, DaemonRecord, RunRecord, RunState
from ._refusals import daemon_stopped, known, run_finished

Row = tuple[Any, ...]


@dataclass(frozen=True)
class Dialect:
    """What differs between the two SQL engines, as SQL fragments.

    Attributes:
        now: The journal's clock in seconds since the epoch.
        share / update: Row-lock suffixes of a SELECT (empty where a write transaction
            already locks the whole database, as SQLite's ``BEGIN IMMEDIATE`` does).
        change_log: Whether the journal keeps ``hotseam_changes``, the log its change feed
            reads back (SQLite; PostgreSQL's feed is ``NOTIFY``).
        param: The driver's parameter mark (texts are written with ``?``).
        real: The type of a time column.
        table_exists: A query with one parameter, a table name, giving a row if it exists.
    """

    now: str
    share: str
    update: str
    change_log: bool
    param: str
    real: str
    table_exists: str
    _cache: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def sql(self, text: str) -> str:
        """``text`` with this dialect's fragments and parameter marks."""
        done = self._cache.get(text)
        if done is None:
            done = text.format(
                now=self.now,
                share=self.share,
                update=self.update,
                real=self.real,
            )
            if self.param != "?":
                done = done.replace("?", self.param)
            self._cache[text] = done
        return done


class Db(abc.ABC):
    """One transaction on one connection (a DB-API connection whose ``execute`` returns a
    cursor, as both sqlite3's and psycopg's do).

    Attributes:
        ttl: The journal's liveness timeout: a daemon is alive while its heartbeat is
            younger than this many seconds.
    """

    def __init__(self, connection: Any, dialect: Dialect, ttl: float = 0.0) -> None:
        self.connection = connection
        self.dialect = dialect
        self.ttl = ttl

    def all(self, text: str, params: Sequence[object] = ()) -> list[Row]:
        """The rows of a query (or of a statement's RETURNING)."""
        rows: list[Row] = self.connection.execute(self.dialect.sql(text), params).fetchall()
        return rows

    def one(self, text: str, params: Sequence[object] = ()) -> Row | None:
        """The first row of a query, or ``None``."""
        rows = self.all(text, params)
        return rows[0] if rows else None

    def count(self, text: str, params: Sequence[object] = ()) -> int:
        """Run a statement without RETURNING; the number of rows it changed."""
        rowcount: int = self.connection.execute(self.dialect.sql(text), params).rowcount
        return rowcount

    def asks(self, text: str, params: Sequence[object] = ()) -> list[AskRecord]:
        """The asks a query (or a statement's RETURNING) gives, as records."""
        return [ask_from_row(row) for row in self.all(text, params)]

    def announce(self, asks: Sequence[AskRecord], *, cleared: bool = False) -> None:
        """These asks changed (or were ``cleared``) in this transaction: tell the other
        processes (at commit)."""
        if asks:
            self.publish([(a.id, a.run_id, CLEARED if cleared else a.state.value) for a in asks])

    @abc.abstractmethod
    def publish(self, changes: Sequence[tuple[str, str, str]]) -> None:
        """Tell the other processes, at commit, of these changes: ``(ask id, run id, mark)``
        where the mark is the ask's new state or ``cleared`` (:func:`change_event`)."""

    # -- lookups several operations make ------------------------------------------------------

    def daemon(self, daemon_id: str) -> DaemonRecord | None:
        row = self.one(SELECT_DAEMON, (self.ttl, daemon_id))
        return None if row is None else daemon_from_row(row)

    def known_daemon(self, daemon_id: str) -> DaemonRecord:
        """The daemon; ``DAEMON_UNKNOWN`` when there is none."""
        return known("daemon", daemon_id, self.daemon(daemon_id))

    def heartbeat(self, daemon_id: str) -> DaemonRecord:
        """Refresh the heartbeat of a daemon that was not stopped (its liveness, proven)."""
        if not self.count(
            "UPDATE hotseam_daemons SET heartbeat_at = {now} WHERE id = ? AND stopped_at IS NULL",
            (daemon_id,),
        ):
            raise daemon_stopped(self.known_daemon(daemon_id))
        return self.known_daemon(daemon_id)

    def run(self, run_id: str) -> RunRecord | None:
        row = self.one(SELECT_RUN, (run_id,))
        return None if row is None else run_from_row(row)

    def unfinished_run(self, agent: str) -> RunRecord | None:
        row = self.one(
            f"SELECT {RUN} FROM hotseam_runs WHERE agent = ? AND state = ?",
            (agent, RunState.RUNNING.value),
        )
        return None if row is None else run_from_row(row)

    def locked_run(self, run_id: str, lock: str) -> RunRecord:
        """The run, locked (``lock``: the dialect's share or update suffix), still running."""
        run = run_from_row(known("run", run_id, self.one(SELECT_RUN + lock, (run_id,))))
        if not run.unfinished:
            raise run_finished(run)
        return run

    def ask(self, ask_id: str) -> AskRecord | None:
        row = self.one(SELECT_ASK, (ask_id,))
        return None if row is None else ask_from_row(row)


def columns(names: Sequence[str], alias: str = "") -> str:
    """``a.x, a.y, ...``: the column list of a select."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + name for name in names)


def marks(values: Sequence[object] | frozenset[Any]) -> str:
    """``?, ?, ?``: one parameter mark per value (of an ``IN (...)``)."""
    return ", ".join("?" for _ in values)


def limited(limit: int | None) -> str:
    """The ``LIMIT`` clause of ``limit`` (none when it is None)."""
    return "" if limit is None else f" LIMIT {int(limit)}"


ASK = columns(ASK_COLUMNS)
ASK_A = columns(ASK_COLUMNS, "a")
RUN = columns(RUN_COLUMNS)
RUN_R = columns(RUN_COLUMNS, "r")
ALIVE = "(d.stopped_at IS NULL AND d.heartbeat_at > {now} - ?)"
DAEMON_D = f"{columns(DAEMON_COLUMNS, 'd')}, {ALIVE}"
ENTRY_FROM = (
    f"SELECT {ASK_A}, {RUN_R}, {DAEMON_D} FROM hotseam_asks a"
    " JOIN hotseam_runs r ON r.id = a.run_id"
    " JOIN hotseam_daemons d ON d.id = r.daemon_id"
)
SELECT_DAEMON = f"SELECT {DAEMON_D} FROM hotseam_daemons d WHERE d.id = ?"
SELECT_RUN = f"SELECT {RUN} FROM hotseam_runs WHERE id = ?"
SELECT_ASK = f"SELECT {ASK} FROM hotseam_asks WHERE id = ?"
SETTLED = "state = ?, code = ?, answer = ?, settled_by = ?, settled_at = {now}"
