"""What the two SQL engines share: each primitive is one :class:`~._sql.Sql` operation run in
one transaction on a worker thread (``_write``) or as one query (``_read``)."""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import TypeVar

from ._records import (
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
from ._sql import Db, Sql
from ._store import Journal

__all__ = ["SqlJournal"]

T = TypeVar("T")


class SqlJournal(Journal):
    """A journal in an SQL database; the engine says how to run a transaction."""

    def __init__(self, url: str, *, liveness_timeout: float) -> None:
        super().__init__(url, liveness_timeout=liveness_timeout)
        self._sql = Sql(self.liveness_timeout)

    @abc.abstractmethod
    async def _write(self, operation: Callable[[Db], T], *, durable: bool = False) -> T:
        """Run ``operation`` in one write transaction (committed, or rolled back if it
        raises) on a worker thread. ``durable``: the commit must survive a power cut, not
        only a crash of this process (an answer, how an ask or a run ended); the engine
        may make other commits cheaper."""

    @abc.abstractmethod
    async def _read(self, operation: Callable[[Db], T]) -> T:
        """Run ``operation`` (one query) on a worker thread."""

    async def _register_daemon(
        self, daemon_id: str, name: str, host: str, pid: int, agent: str | None
    ) -> DaemonRecord:
        return await self._write(
            lambda db: self._sql.register_daemon(db, daemon_id, name, host, pid, agent)
        )

    async def _heartbeat(self, daemon_id: str) -> DaemonRecord:
        return await self._write(lambda db: self._sql.heartbeat(db, daemon_id))

    async def _stop_daemon(self, daemon_id: str) -> DaemonRecord:
        return await self._write(lambda db: self._sql.stop_daemon(db, daemon_id))

    async def _get_daemon(self, daemon_id: str) -> DaemonRecord | None:
        return await self._read(lambda db: self._sql.daemon(db, daemon_id))

    async def _daemons(self) -> list[DaemonRecord]:
        return await self._read(self._sql.daemons)

    async def _start_run(self, run_id: str, agent: str, daemon_id: str) -> RunRecord:
        return await self._write(lambda db: self._sql.start_run(db, run_id, agent, daemon_id))

    async def _get_run(self, run_id: str) -> RunRecord | None:
        return await self._read(lambda db: self._sql.run(db, run_id))

    async def _unfinished_run(self, agent: str) -> RunRecord | None:
        return await self._read(lambda db: self._sql.unfinished_run(db, agent))

    async def _runs(
        self, states: frozenset[RunState], agent: str | None, limit: int | None
    ) -> list[RunOverview]:
        return await self._read(lambda db: self._sql.runs(db, states, agent, limit))

    async def _claim_run(self, run_id: str, daemon_id: str) -> RunRecord:
        return await self._write(lambda db: self._sql.claim_run(db, run_id, daemon_id))

    async def _end_run(
        self, run_id: str, state: RunState, owner: str | None
    ) -> tuple[RunRecord, list[AskRecord]]:
        return await self._write(
            lambda db: self._sql.end_run(db, run_id, state, owner), durable=True
        )

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
        return await self._write(
            lambda db: self._sql.record_ask(db, ask_id, run_id, seq, key, digest, request, owner)
        )

    async def _get_ask(self, ask_id: str) -> AskRecord | None:
        return await self._read(lambda db: self._sql.ask(db, ask_id))

    async def _run_asks(self, run_id: str) -> list[AskRecord]:
        return await self._read(lambda db: self._sql.run_asks(db, run_id))

    async def _list_asks(self, states: frozenset[AskState], limit: int | None) -> list[AskRecord]:
        return await self._read(lambda db: self._sql.list_asks(db, states, limit))

    async def _list_entries(
        self, states: frozenset[AskState], agent: str | None, limit: int | None
    ) -> list[InboxEntry]:
        return await self._read(lambda db: self._sql.list_entries(db, states, agent, limit))

    async def _settle_ask(
        self, ask_id: str, state: AskState, code: str | None, answer: str | None, by: str | None
    ) -> Settlement:
        return await self._write(
            lambda db: self._sql.settle_ask(db, ask_id, state, code, answer, by), durable=True
        )

    async def _abandon_asks(self, run_id: str, from_seq: int) -> list[AskRecord]:
        return await self._write(lambda db: self._sql.abandon_asks(db, run_id, from_seq))

    async def _clear(self, ask_id: str) -> AskRecord:
        return await self._write(lambda db: self._sql.clear(db, ask_id))

    async def _inbox(self) -> list[InboxEntry]:
        return await self._read(self._sql.inbox)

    async def _purge(
        self, states: frozenset[AskState], older_than: float, dry_run: bool
    ) -> PurgeReport:
        if not dry_run:
            return await self._write(lambda db: self._sql.purge(db, states, older_than))

        def counted(db: Db) -> PurgeReport:
            raise _RolledBack(self._sql.purge(db, states, older_than))

        try:
            return await self._write(counted)
        except _RolledBack as done:  # the transaction was rolled back: nothing deleted
            return done.report


class _RolledBack(Exception):  # noqa: N818 (not an error: how a dry run ends its transaction)
    """Raised inside a write transaction to roll it back, carrying what it counted."""

    def __init__(self, report: PurgeReport) -> None:
        super().__init__("dry run")
        self.report = report
