"""The journal's operations in SQL, shared by the SQLite and PostgreSQL engines.

One text per operation, written once: the two engines differ only in a :class:`Dialect`
(the clock, row locks, parameter marks, how a change is announced) and in how they run a
transaction (:class:`Db`). So the first answer wins by the same statement on both::

    UPDATE hotseam_asks SET state = 'answered', ... WHERE id = ? AND state = 'pending'
      AND EXISTS (SELECT 1 FROM hotseam_runs WHERE ... state = 'running' FOR SHARE)
    RETURNING ...

Each function below runs inside one transaction, in a worker thread, and raises a
:class:`JournalError` (which rolls the transaction back) for what a caller must be told.
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
    entry_from_row,
    run_from_row,
)
from ._records import (
    CLEARED,
    AskRecord,
    AskState,
    DaemonRecord,
    InboxEntry,
    PurgeReport,
    RunOverview,
    RunRecord,
    RunState,
    Settlement,
)
from ._refusals import (
    ask_conflict,
    daemon_stopped,
    not_abandoned,
    run_claimed,
    run_exists,
    run_finished,
    unknown,
)

__all__ = ["Db", "Dialect", "Row", "Sql"]

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
    cursor, as both sqlite3's and psycopg's do)."""

    def __init__(self, connection: Any, dialect: Dialect) -> None:
        self.connection = connection
        self.dialect = dialect

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

    def announce(self, asks: Sequence[AskRecord], *, cleared: bool = False) -> None:
        """These asks changed (or were ``cleared``) in this transaction: tell the other
        processes (at commit)."""
        if asks:
            self.publish([(a.id, a.run_id, CLEARED if cleared else a.state.value) for a in asks])

    @abc.abstractmethod
    def publish(self, changes: Sequence[tuple[str, str, str]]) -> None:
        """Tell the other processes, at commit, of these changes: ``(ask id, run id, mark)``
        where the mark is the ask's new state or ``cleared`` (:func:`change_event`)."""


def _columns(names: Sequence[str], alias: str = "") -> str:
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + name for name in names)


_ASK = _columns(ASK_COLUMNS)
_ASK_A = _columns(ASK_COLUMNS, "a")
_RUN = _columns(RUN_COLUMNS)
_RUN_R = _columns(RUN_COLUMNS, "r")
_ALIVE = "(d.stopped_at IS NULL AND d.heartbeat_at > {now} - ?)"
_DAEMON_D = f"{_columns(DAEMON_COLUMNS, 'd')}, {_ALIVE}"
_ENTRY_FROM = (
    f"SELECT {_ASK_A}, {_RUN_R}, {_DAEMON_D} FROM hotseam_asks a"
    " JOIN hotseam_runs r ON r.id = a.run_id"
    " JOIN hotseam_daemons d ON d.id = r.daemon_id"
)

_SELECT_DAEMON = f"SELECT {_DAEMON_D} FROM hotseam_daemons d WHERE d.id = ?"
_SELECT_RUN = f"SELECT {_RUN} FROM hotseam_runs WHERE id = ?"
_SELECT_ASK = f"SELECT {_ASK} FROM hotseam_asks WHERE id = ?"
_SETTLED = "state = ?, code = ?, answer = ?, settled_by = ?, settled_at = {now}"


class Sql:
    """The operations, given the journal's liveness timeout (seconds)."""

    def __init__(self, liveness_timeout: float) -> None:
        self.ttl = liveness_timeout

    # -- daemons ------------------------------------------------------------------------------

    def daemon(self, db: Db, daemon_id: str) -> DaemonRecord | None:
        row = db.one(_SELECT_DAEMON, (self.ttl, daemon_id))
        return None if row is None else daemon_from_row(row)

    def daemons(self, db: Db) -> list[DaemonRecord]:
        rows = db.all(
            f"SELECT {_DAEMON_D} FROM hotseam_daemons d ORDER BY d.started_at, d.id", (self.ttl,)
        )
        return [daemon_from_row(row) for row in rows]

    def register_daemon(
        self, db: Db, daemon_id: str, name: str, host: str, pid: int, agent: str | None
    ) -> DaemonRecord:
        db.count(
            "INSERT INTO hotseam_daemons (id, name, host, pid, agent, started_at, heartbeat_at)"
            " VALUES (?, ?, ?, ?, ?, {now}, {now})",
            (daemon_id, name, host, pid, agent),
        )
        return self._daemon(db, daemon_id)

    def heartbeat(self, db: Db, daemon_id: str) -> DaemonRecord:
        """Refresh the heartbeat of a daemon that was not stopped (its liveness, proven)."""
        if not db.count(
            "UPDATE hotseam_daemons SET heartbeat_at = {now} WHERE id = ? AND stopped_at IS NULL",
            (daemon_id,),
        ):
            daemon = self._daemon(db, daemon_id)
            raise daemon_stopped(daemon)
        return self._daemon(db, daemon_id)

    def stop_daemon(self, db: Db, daemon_id: str) -> DaemonRecord:
        db.count(
            "UPDATE hotseam_daemons SET stopped_at = {now} WHERE id = ? AND stopped_at IS NULL",
            (daemon_id,),
        )
        return self._daemon(db, daemon_id)

    # -- runs ---------------------------------------------------------------------------------

    def run(self, db: Db, run_id: str) -> RunRecord | None:
        row = db.one(_SELECT_RUN, (run_id,))
        return None if row is None else run_from_row(row)

    def unfinished_run(self, db: Db, agent: str) -> RunRecord | None:
        row = db.one(
            f"SELECT {_RUN} FROM hotseam_runs WHERE agent = ? AND state = ?",
            (agent, RunState.RUNNING.value),
        )
        return None if row is None else run_from_row(row)

    def runs(
        self, db: Db, states: frozenset[RunState], agent: str | None, limit: int | None
    ) -> list[RunOverview]:
        """One query: the chosen runs, each joined with its daemon and its asks counted by
        state (one row per run and state)."""
        if not states or limit == 0:
            return []
        marks = ", ".join("?" for _ in states)
        params: list[object] = [self.ttl, *sorted(state.value for state in states)]
        of_agent = ""
        if agent is not None:
            of_agent = " AND agent = ?"
            params.append(agent)
        tail = "" if limit is None else f" LIMIT {int(limit)}"
        grouped = f"{_RUN_R}, {_columns(DAEMON_COLUMNS, 'd')}, a.state"
        rows = db.all(
            f"SELECT {_RUN_R}, {_DAEMON_D}, a.state, COUNT(a.id) FROM"
            f" (SELECT {_RUN} FROM hotseam_runs WHERE state IN ({marks}){of_agent}"
            f" ORDER BY started_at DESC, id DESC{tail}) r"
            " JOIN hotseam_daemons d ON d.id = r.daemon_id"
            " LEFT JOIN hotseam_asks a ON a.run_id = r.id"
            f" GROUP BY {grouped} ORDER BY r.started_at DESC, r.id DESC",
            params,
        )
        width = len(RUN_COLUMNS)
        found: dict[str, tuple[RunRecord, DaemonRecord, dict[AskState, int]]] = {}
        for row in rows:  # in order: a run's rows follow one another
            run_id, state, count = row[0], row[-2], row[-1]
            if run_id not in found:
                found[run_id] = (run_from_row(row[:width]), daemon_from_row(row[width:-2]), {})
            if state is not None:
                found[run_id][2][AskState(state)] = int(count)
        return [RunOverview(run, daemon, asks) for run, daemon, asks in found.values()]

    def start_run(self, db: Db, run_id: str, agent: str, daemon_id: str) -> RunRecord:
        self.heartbeat(db, daemon_id)
        row = db.one(
            "INSERT INTO hotseam_runs (id, agent, daemon_id, state, started_at, claimed_at)"
            " VALUES (?, ?, ?, ?, {now}, {now}) ON CONFLICT DO NOTHING"
            f" RETURNING {_RUN}",
            (run_id, agent, daemon_id, RunState.RUNNING.value),
        )
        if row is None:  # the agent's one unfinished run exists (a unique index says so)
            existing = self.unfinished_run(db, agent)
            assert existing is not None
            raise run_exists(existing)
        return run_from_row(row)

    def claim_run(self, db: Db, run_id: str, daemon_id: str) -> RunRecord:
        """Lock the run's row, then decide: of two claimers, the second sees the first's
        claim (and its owner alive) once the first commits."""
        self.heartbeat(db, daemon_id)
        run = self._locked_run(db, run_id, db.dialect.update)
        if run.daemon_id != daemon_id:
            owner = self.daemon(db, run.daemon_id)
            if owner is not None and owner.alive:
                raise run_claimed(run, daemon_id)
        row = db.one(
            "UPDATE hotseam_runs SET daemon_id = ?, claimed_at = {now} WHERE id = ?"
            f" RETURNING {_RUN}",
            (daemon_id, run_id),
        )
        assert row is not None
        return run_from_row(row)

    def end_run(
        self, db: Db, run_id: str, state: RunState, owner: str | None
    ) -> tuple[RunRecord, list[AskRecord]]:
        run = self._locked_run(db, run_id, db.dialect.update)
        if owner is not None and run.daemon_id != owner:
            raise run_claimed(run, owner)
        row = db.one(
            "UPDATE hotseam_runs SET state = ?, finished_at = {now} WHERE id = ?"
            f" RETURNING {_RUN}",
            (state.value, run_id),
        )
        assert row is not None
        ask_state = AskState.ABANDONED if state is RunState.ABANDONED else AskState.WITHDRAWN
        settled = self._asks(
            db,
            "UPDATE hotseam_asks SET state = ?, settled_at = {now}"
            f" WHERE run_id = ? AND state = ? RETURNING {_ASK}",
            (ask_state.value, run_id, AskState.PENDING.value),
        )
        settled.sort(key=lambda ask: (ask.seq, ask.created_at))
        db.announce(settled)
        return run_from_row(row), settled

    # -- asks ---------------------------------------------------------------------------------

    def ask(self, db: Db, ask_id: str) -> AskRecord | None:
        row = db.one(_SELECT_ASK, (ask_id,))
        return None if row is None else ask_from_row(row)

    def run_asks(self, db: Db, run_id: str) -> list[AskRecord]:
        return self._asks(
            db,
            f"SELECT {_ASK} FROM hotseam_asks WHERE run_id = ? ORDER BY seq, created_at, id",
            (run_id,),
        )

    def list_asks(self, db: Db, states: frozenset[AskState], limit: int | None) -> list[AskRecord]:
        if not states or limit == 0:
            return []
        marks = ", ".join("?" for _ in states)
        tail = "" if limit is None else f" LIMIT {int(limit)}"
        return self._asks(
            db,
            f"SELECT {_ASK} FROM hotseam_asks WHERE state IN ({marks})"
            f" ORDER BY created_at DESC, id DESC{tail}",
            sorted(state.value for state in states),
        )

    def list_entries(
        self, db: Db, states: frozenset[AskState], agent: str | None, limit: int | None
    ) -> list[InboxEntry]:
        if not states or limit == 0:
            return []
        marks = ", ".join("?" for _ in states)
        params: list[object] = [self.ttl, *sorted(state.value for state in states)]
        of_agent = ""
        if agent is not None:
            of_agent = " AND r.agent = ?"
            params.append(agent)
        tail = "" if limit is None else f" LIMIT {int(limit)}"
        rows = db.all(
            f"{_ENTRY_FROM} WHERE a.state IN ({marks}){of_agent}"
            f" ORDER BY a.created_at DESC, a.id DESC{tail}",
            params,
        )
        return [entry_from_row(row) for row in rows]

    def record_ask(
        self,
        db: Db,
        ask_id: str,
        run_id: str,
        seq: int,
        key: str | None,
        digest: str,
        request: str,
        owner: str | None,
    ) -> tuple[AskRecord, bool]:
        """Within a share lock on the run: an ask is never added to a run that finishes."""
        run = self._locked_run(db, run_id, db.dialect.share)
        if owner is not None and run.daemon_id != owner:
            raise run_claimed(run, owner)
        existing = self.ask(db, ask_id)
        if existing is not None:
            return existing, False
        row = db.one(
            "INSERT INTO hotseam_asks (id, run_id, seq, caller_key, digest, request, state,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, {now})"
            f" ON CONFLICT DO NOTHING RETURNING {_ASK}",
            (ask_id, run_id, seq, key, digest, request, AskState.PENDING.value),
        )
        if row is None:
            existing = self.ask(db, ask_id)
            if existing is not None:  # recorded at the same instant by another process
                return existing, False
            raise ask_conflict(run_id, seq, ask_id, key)
        ask = ask_from_row(row)
        db.announce([ask])
        return ask, True

    def settle_ask(
        self,
        db: Db,
        ask_id: str,
        state: AskState,
        code: str | None,
        answer: str | None,
        by: str | None,
    ) -> Settlement:
        """One UPDATE decides: only a pending ask changes (first answer wins), and an answer
        only while its run is running (a finished run is never answered)."""
        running = (
            " AND EXISTS (SELECT 1 FROM hotseam_runs r WHERE r.id = hotseam_asks.run_id"
            " AND r.state = ?{share})"
        )
        params: list[object] = [state.value, code, answer, by, ask_id, AskState.PENDING.value]
        if state is AskState.ANSWERED:
            params.append(RunState.RUNNING.value)
        row = db.one(
            f"UPDATE hotseam_asks SET {_SETTLED} WHERE id = ? AND state = ?"
            f"{running if state is AskState.ANSWERED else ''} RETURNING {_ASK}",
            params,
        )
        if row is not None:
            ask = ask_from_row(row)
            db.announce([ask])
            return Settlement(True, ask)
        current = self.ask(db, ask_id)
        if current is None:
            raise unknown("ask", ask_id)
        if current.pending:  # only an answer can miss a pending ask: its run ended
            run = self.run(db, current.run_id)
            assert run is not None
            raise run_finished(run)
        return Settlement(False, current)

    def abandon_asks(self, db: Db, run_id: str, from_seq: int) -> list[AskRecord]:
        """With the run's row locked first, as ``end_run`` does: the two never deadlock."""
        self._locked_run(db, run_id, db.dialect.update)
        asks = self._asks(
            db,
            "UPDATE hotseam_asks SET state = ?, settled_at = COALESCE(settled_at, {now})"
            " WHERE run_id = ? AND seq >= ? AND state <> ?"
            f" RETURNING {_ASK}",
            (AskState.ABANDONED.value, run_id, from_seq, AskState.ABANDONED.value),
        )
        asks.sort(key=lambda ask: (ask.seq, ask.created_at))
        db.announce(asks)
        return asks

    def clear(self, db: Db, ask_id: str) -> AskRecord:
        """One DELETE decides (an abandoned ask stays abandoned: of two clears, one wins and
        the other finds it gone)."""
        row = db.one(
            f"DELETE FROM hotseam_asks WHERE id = ? AND state = ? RETURNING {_ASK}",
            (ask_id, AskState.ABANDONED.value),
        )
        if row is None:
            current = self.ask(db, ask_id)
            if current is None:
                raise unknown("ask", ask_id)
            raise not_abandoned(current)
        ask = ask_from_row(row)
        db.announce([ask], cleared=True)
        return ask

    def inbox(self, db: Db) -> list[InboxEntry]:
        rows = db.all(
            f"{_ENTRY_FROM} WHERE a.state = ? ORDER BY a.created_at, a.id",
            (self.ttl, AskState.PENDING.value),
        )
        return [entry_from_row(row) for row in rows]

    def purge(self, db: Db, states: frozenset[AskState], older_than: float) -> PurgeReport:
        if states:
            marks = ", ".join("?" for _ in states)
            asks = db.count(
                f"DELETE FROM hotseam_asks WHERE state IN ({marks}) AND settled_at < {{now}} - ?",
                [*sorted(state.value for state in states), older_than],
            )
        else:
            asks = 0
        runs = db.count(
            "DELETE FROM hotseam_runs WHERE state <> ? AND finished_at < {now} - ?"
            " AND NOT EXISTS (SELECT 1 FROM hotseam_asks a WHERE a.run_id = hotseam_runs.id)",
            (RunState.RUNNING.value, older_than),
        )
        daemons = db.count(
            "DELETE FROM hotseam_daemons WHERE heartbeat_at < {now} - ?"
            " AND (stopped_at IS NOT NULL OR heartbeat_at < {now} - ?)"
            " AND NOT EXISTS (SELECT 1 FROM hotseam_runs r WHERE r.daemon_id = hotseam_daemons.id)",
            (older_than, self.ttl),
        )
        return PurgeReport(asks, runs, daemons)

    # -- helpers ------------------------------------------------------------------------------

    def _daemon(self, db: Db, daemon_id: str) -> DaemonRecord:
        daemon = self.daemon(db, daemon_id)
        if daemon is None:
            raise unknown("daemon", daemon_id)
        return daemon

    def _locked_run(self, db: Db, run_id: str, lock: str) -> RunRecord:
        """The run, locked (``lock``: the dialect's share or update suffix), still running."""
        row = db.one(_SELECT_RUN + lock, (run_id,))
        if row is None:
            raise unknown("run", run_id)
        run = run_from_row(row)
        if not run.unfinished:
            raise run_finished(run)
        return run

    @staticmethod
    def _asks(db: Db, text: str, params: Sequence[object]) -> list[AskRecord]:
        return [ask_from_row(row) for row in db.all(text, params)]
