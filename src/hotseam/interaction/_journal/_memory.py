"""The in-memory engine (``memory:``): the journal's behaviour without a file, for tests.

Each ``open_journal("memory:")`` is a new, empty journal that lives as long as it is open;
share the open object to share the journal. Records are stored as the same rows the SQL
engines store (requests and answers as JSON), and each method does its whole change without
yielding to the event loop, which is what makes it one transaction.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import anyio.lowlevel

from ._codec import (
    ASK_COLUMNS,
    DAEMON_COLUMNS,
    RUN_COLUMNS,
    ask_from_row,
    daemon_from_row,
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
    change_event,
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
from ._store import Journal

__all__ = ["MemoryJournal"]

_Row = dict[str, Any]


class MemoryJournal(Journal):
    """A journal held in this process's memory."""

    engine = "memory"

    def __init__(self, *, liveness_timeout: float) -> None:
        super().__init__("memory:", liveness_timeout=liveness_timeout)
        self._daemon_rows: dict[str, _Row] = {}
        self._run_rows: dict[str, _Row] = {}
        self._ask_rows: dict[str, _Row] = {}

    def _changed(self, asks: Sequence[AskRecord]) -> None:
        self._notices.publish([change_event(ask.id, ask.run_id, ask.state.value) for ask in asks])

    def _cleared(self, ask: AskRecord) -> None:
        self._notices.publish([change_event(ask.id, ask.run_id, CLEARED)])

    # -- daemons ------------------------------------------------------------------------------

    async def _register_daemon(
        self, daemon_id: str, name: str, host: str, pid: int, agent: str | None
    ) -> DaemonRecord:
        await anyio.lowlevel.checkpoint()
        now = time.time()
        self._daemon_rows[daemon_id] = {
            "id": daemon_id,
            "name": name,
            "host": host,
            "pid": pid,
            "agent": agent,
            "started_at": now,
            "heartbeat_at": now,
            "stopped_at": None,
        }
        return self._daemon(daemon_id)

    async def _heartbeat(self, daemon_id: str) -> DaemonRecord:
        await anyio.lowlevel.checkpoint()
        row = self._live_daemon_row(daemon_id)
        row["heartbeat_at"] = time.time()
        return self._daemon(daemon_id)

    async def _stop_daemon(self, daemon_id: str) -> DaemonRecord:
        await anyio.lowlevel.checkpoint()
        row = self._daemon_row(daemon_id)
        if row["stopped_at"] is None:
            row["stopped_at"] = time.time()
        return self._daemon(daemon_id)

    async def _get_daemon(self, daemon_id: str) -> DaemonRecord | None:
        await anyio.lowlevel.checkpoint()
        return self._daemon(daemon_id) if daemon_id in self._daemon_rows else None

    async def _daemons(self) -> list[DaemonRecord]:
        await anyio.lowlevel.checkpoint()
        return [self._daemon(daemon_id) for daemon_id in self._daemon_rows]

    # -- runs ---------------------------------------------------------------------------------

    async def _start_run(self, run_id: str, agent: str, daemon_id: str) -> RunRecord:
        await anyio.lowlevel.checkpoint()
        self._live_daemon_row(daemon_id)["heartbeat_at"] = time.time()
        existing = self._unfinished(agent)
        if existing is not None:
            raise run_exists(existing)
        now = time.time()
        self._run_rows[run_id] = {
            "id": run_id,
            "agent": agent,
            "daemon_id": daemon_id,
            "state": RunState.RUNNING.value,
            "started_at": now,
            "claimed_at": now,
            "finished_at": None,
        }
        return self._run(run_id)

    async def _get_run(self, run_id: str) -> RunRecord | None:
        await anyio.lowlevel.checkpoint()
        return self._run(run_id) if run_id in self._run_rows else None

    async def _unfinished_run(self, agent: str) -> RunRecord | None:
        await anyio.lowlevel.checkpoint()
        return self._unfinished(agent)

    async def _runs(
        self, states: frozenset[RunState], agent: str | None, limit: int | None
    ) -> list[RunOverview]:
        await anyio.lowlevel.checkpoint()
        wanted = {state.value for state in states}
        rows = [
            row
            for row in self._run_rows.values()
            if row["state"] in wanted and (agent is None or row["agent"] == agent)
        ]
        rows.sort(key=lambda row: (row["started_at"], row["id"]), reverse=True)
        overviews = []
        for row in rows[:limit]:
            counts: dict[AskState, int] = {}
            for ask in self._ask_rows.values():
                if ask["run_id"] == row["id"]:
                    state = AskState(ask["state"])
                    counts[state] = counts.get(state, 0) + 1
            run = self._run(row["id"])
            overviews.append(RunOverview(run, self._daemon(run.daemon_id), counts))
        return overviews

    async def _claim_run(self, run_id: str, daemon_id: str) -> RunRecord:
        await anyio.lowlevel.checkpoint()
        self._live_daemon_row(daemon_id)["heartbeat_at"] = time.time()
        run = self._run(self._run_row(run_id)["id"])
        if not run.unfinished:
            raise run_finished(run)
        if run.daemon_id != daemon_id and self._alive(self._daemon_rows.get(run.daemon_id)):
            raise run_claimed(run, daemon_id)
        row = self._run_rows[run_id]
        row["daemon_id"] = daemon_id
        row["claimed_at"] = time.time()
        return self._run(run_id)

    async def _end_run(
        self, run_id: str, state: RunState, owner: str | None
    ) -> tuple[RunRecord, list[AskRecord]]:
        await anyio.lowlevel.checkpoint()
        run = self._run(self._run_row(run_id)["id"])
        if not run.unfinished:
            raise run_finished(run)
        if owner is not None and run.daemon_id != owner:
            raise run_claimed(run, owner)
        now = time.time()
        self._run_rows[run_id].update(state=state.value, finished_at=now)
        ask_state = AskState.ABANDONED if state is RunState.ABANDONED else AskState.WITHDRAWN
        settled = []
        for row in self._ask_rows.values():
            if row["run_id"] == run_id and row["state"] == AskState.PENDING.value:
                row.update(state=ask_state.value, settled_at=now)
                settled.append(row)
        return self._run(run_id), [self._ask(row) for row in _by_seq(settled)]

    # -- asks ---------------------------------------------------------------------------------

    async def _record_ask(
        self,
        ask_id: str,
        run_id: str,
        seq: int,
        key: str | None,
        digest: str,
        request: str,
        owner: str | None,
    ) -> tuple[AskRecord, bool]:
        await anyio.lowlevel.checkpoint()
        run = self._run(self._run_row(run_id)["id"])
        if not run.unfinished:
            raise run_finished(run)
        if owner is not None and run.daemon_id != owner:
            raise run_claimed(run, owner)
        if ask_id in self._ask_rows:
            return self._ask(self._ask_rows[ask_id]), False
        for row in self._ask_rows.values():
            if (
                row["run_id"] == run_id
                and row["state"] != AskState.ABANDONED.value
                and row["caller_key"] == key
                and (key is not None or row["seq"] == seq)
            ):
                raise ask_conflict(run_id, seq, ask_id, key)
        row = {
            "id": ask_id,
            "run_id": run_id,
            "seq": seq,
            "caller_key": key,
            "digest": digest,
            "request": request,
            "state": AskState.PENDING.value,
            "code": None,
            "answer": None,
            "settled_by": None,
            "created_at": time.time(),
            "settled_at": None,
        }
        self._ask_rows[ask_id] = row
        return self._ask(row), True

    async def _get_ask(self, ask_id: str) -> AskRecord | None:
        await anyio.lowlevel.checkpoint()
        row = self._ask_rows.get(ask_id)
        return None if row is None else self._ask(row)

    async def _run_asks(self, run_id: str) -> list[AskRecord]:
        await anyio.lowlevel.checkpoint()
        rows = [row for row in self._ask_rows.values() if row["run_id"] == run_id]
        return [self._ask(row) for row in _by_seq(rows)]

    async def _list_asks(self, states: frozenset[AskState], limit: int | None) -> list[AskRecord]:
        await anyio.lowlevel.checkpoint()
        wanted = {state.value for state in states}
        rows = [row for row in self._ask_rows.values() if row["state"] in wanted]
        rows.sort(key=lambda row: (row["created_at"], row["id"]), reverse=True)
        return [self._ask(row) for row in rows[:limit]]

    async def _list_entries(
        self, states: frozenset[AskState], agent: str | None, limit: int | None
    ) -> list[InboxEntry]:
        await anyio.lowlevel.checkpoint()
        wanted = {state.value for state in states}
        rows = [
            row
            for row in self._ask_rows.values()
            if row["state"] in wanted
            and (agent is None or self._run_rows[row["run_id"]]["agent"] == agent)
        ]
        rows.sort(key=lambda row: (row["created_at"], row["id"]), reverse=True)
        return [self._entry(row) for row in rows[:limit]]

    async def _settle_ask(
        self, ask_id: str, state: AskState, code: str | None, answer: str | None, by: str | None
    ) -> Settlement:
        await anyio.lowlevel.checkpoint()
        row = self._ask_rows.get(ask_id)
        if row is None:
            raise unknown("ask", ask_id)
        if row["state"] != AskState.PENDING.value:
            return Settlement(False, self._ask(row))
        run = self._run(row["run_id"])
        if state is AskState.ANSWERED and not run.unfinished:
            raise run_finished(run)
        row.update(state=state.value, code=code, answer=answer, settled_by=by)
        row["settled_at"] = time.time()
        return Settlement(True, self._ask(row))

    async def _abandon_asks(self, run_id: str, from_seq: int) -> list[AskRecord]:
        await anyio.lowlevel.checkpoint()
        run = self._run(self._run_row(run_id)["id"])
        if not run.unfinished:
            raise run_finished(run)
        now = time.time()
        changed = []
        for row in self._ask_rows.values():
            if (
                row["run_id"] == run_id
                and row["seq"] >= from_seq
                and row["state"] != AskState.ABANDONED.value
            ):
                row["state"] = AskState.ABANDONED.value
                row["settled_at"] = row["settled_at"] or now
                changed.append(row)
        return [self._ask(row) for row in _by_seq(changed)]

    async def _clear(self, ask_id: str) -> AskRecord:
        await anyio.lowlevel.checkpoint()
        row = self._ask_rows.get(ask_id)
        if row is None:
            raise unknown("ask", ask_id)
        ask = self._ask(row)
        if ask.state is not AskState.ABANDONED:
            raise not_abandoned(ask)
        del self._ask_rows[ask_id]
        return ask

    async def _inbox(self) -> list[InboxEntry]:
        await anyio.lowlevel.checkpoint()
        rows = [row for row in self._ask_rows.values() if row["state"] == AskState.PENDING.value]
        rows.sort(key=lambda row: (row["created_at"], row["id"]))
        return [self._entry(row) for row in rows]

    async def _purge(
        self, states: frozenset[AskState], older_than: float, dry_run: bool
    ) -> PurgeReport:
        await anyio.lowlevel.checkpoint()
        cutoff = time.time() - older_than
        wanted = {state.value for state in states}
        asks = {
            ask_id
            for ask_id, row in self._ask_rows.items()
            if row["state"] in wanted
            and row["settled_at"] is not None
            and row["settled_at"] < cutoff
        }
        asked = {row["run_id"] for ask_id, row in self._ask_rows.items() if ask_id not in asks}
        runs = {
            run_id
            for run_id, row in self._run_rows.items()
            if row["state"] != RunState.RUNNING.value
            and row["finished_at"] < cutoff
            and run_id not in asked
        }
        owners = {row["daemon_id"] for run_id, row in self._run_rows.items() if run_id not in runs}
        daemons = {
            daemon_id
            for daemon_id, row in self._daemon_rows.items()
            if not self._alive(row) and row["heartbeat_at"] < cutoff and daemon_id not in owners
        }
        if not dry_run:
            for ask_id in asks:
                del self._ask_rows[ask_id]
            for run_id in runs:
                del self._run_rows[run_id]
            for daemon_id in daemons:
                del self._daemon_rows[daemon_id]
        return PurgeReport(len(asks), len(runs), len(daemons))

    # -- rows ---------------------------------------------------------------------------------

    def _alive(self, row: _Row | None) -> bool:
        return (
            row is not None
            and row["stopped_at"] is None
            and row["heartbeat_at"] > time.time() - self.liveness_timeout
        )

    def _daemon_row(self, daemon_id: str) -> _Row:
        row = self._daemon_rows.get(daemon_id)
        if row is None:
            raise unknown("daemon", daemon_id)
        return row

    def _live_daemon_row(self, daemon_id: str) -> _Row:
        """The daemon's row; ``DAEMON_STOPPED`` when it was marked stopped."""
        row = self._daemon_row(daemon_id)
        if row["stopped_at"] is not None:
            raise daemon_stopped(self._daemon(daemon_id))
        return row

    def _run_row(self, run_id: str) -> _Row:
        row = self._run_rows.get(run_id)
        if row is None:
            raise unknown("run", run_id)
        return row

    def _unfinished(self, agent: str) -> RunRecord | None:
        for run_id, row in self._run_rows.items():
            if row["agent"] == agent and row["state"] == RunState.RUNNING.value:
                return self._run(run_id)
        return None

    def _daemon(self, daemon_id: str) -> DaemonRecord:
        row = self._daemon_rows[daemon_id]
        return daemon_from_row([*(row[column] for column in DAEMON_COLUMNS), self._alive(row)])

    def _run(self, run_id: str) -> RunRecord:
        row = self._run_rows[run_id]
        return run_from_row([row[column] for column in RUN_COLUMNS])

    @staticmethod
    def _ask(row: _Row) -> AskRecord:
        return ask_from_row([row[column] for column in ASK_COLUMNS])

    def _entry(self, row: _Row) -> InboxEntry:
        run = self._run(row["run_id"])
        return InboxEntry(self._ask(row), run, self._daemon(run.daemon_id))


def _by_seq(rows: list[_Row]) -> list[_Row]:
    return sorted(rows, key=lambda row: (row["seq"], row["created_at"]))
