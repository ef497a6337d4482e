"""What each engine implements under :class:`~._store.Journal`'s public methods.

The primitives below are each one transaction (or one query) of an engine; the public
methods check their arguments first, the same way for every engine. The hooks say what an
engine does at its start and stop, and how it wakes this process's waiters and feed
readers when it changes an ask.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence

import anyio
import anyio.abc

from ._errors import JournalError, JournalErrorCode
from ._notices import Notices, Subscription
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

__all__ = ["JournalBase"]


class JournalBase(abc.ABC):
    """The engine's side of a journal: its primitives, its lifecycle and its wake-ups."""

    engine: str

    def __init__(self, url: str, *, liveness_timeout: float) -> None:
        if not liveness_timeout > 0 or math.isinf(liveness_timeout):
            raise ValueError(f"liveness_timeout must be seconds > 0, got {liveness_timeout!r}")
        self.url = url
        self.liveness_timeout = float(liveness_timeout)
        self._notices = Notices()
        self._closed = False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"

    # -- lifecycle and wake-ups ---------------------------------------------------------------

    async def _start(self, task_group: anyio.abc.TaskGroup) -> None:  # noqa: B027
        """Open connections and start background tasks in ``task_group``."""

    async def _stop(self) -> None:  # noqa: B027
        """Close connections (background tasks are cancelled by the caller)."""

    async def _attach(self, subscription: Subscription) -> None:
        """Start telling ``subscription`` the changes from now on (it was registered, not yet
        armed: an engine whose changes arrive late arms it once the earlier ones are in)."""
        subscription.arm()

    def _changed(self, asks: Sequence[AskRecord]) -> None:
        """These asks were created or settled through this object: wake their waiters."""
        self._notices.wake_with(asks)

    def _cleared(self, ask: AskRecord) -> None:
        """This ask was cleared through this object: wake its waiters (they find it gone)."""
        self._notices.wake([ask.id])

    def _check_open(self) -> None:
        if self._closed:
            raise JournalError(
                f"the journal {self.url} is closed", JournalErrorCode.JOURNAL_UNAVAILABLE
            )

    async def _closing(self) -> None:
        """Refuse new calls and wake every waiter and reader (they see the journal closed)."""
        self._closed = True
        self._notices.close()

    # -- primitives ---------------------------------------------------------------------------

    @abc.abstractmethod
    async def _register_daemon(
        self, daemon_id: str, name: str, host: str, pid: int, agent: str | None
    ) -> DaemonRecord: ...

    @abc.abstractmethod
    async def _heartbeat(self, daemon_id: str) -> DaemonRecord: ...

    @abc.abstractmethod
    async def _stop_daemon(self, daemon_id: str) -> DaemonRecord: ...

    @abc.abstractmethod
    async def _get_daemon(self, daemon_id: str) -> DaemonRecord | None: ...

    @abc.abstractmethod
    async def _daemons(self) -> list[DaemonRecord]: ...

    @abc.abstractmethod
    async def _start_run(self, run_id: str, agent: str, daemon_id: str) -> RunRecord: ...

    @abc.abstractmethod
    async def _get_run(self, run_id: str) -> RunRecord | None: ...

    @abc.abstractmethod
    async def _unfinished_run(self, agent: str) -> RunRecord | None: ...

    @abc.abstractmethod
    async def _runs(
        self, states: frozenset[RunState], agent: str | None, limit: int | None
    ) -> list[RunOverview]: ...

    @abc.abstractmethod
    async def _claim_run(self, run_id: str, daemon_id: str) -> RunRecord: ...

    @abc.abstractmethod
    async def _end_run(
        self, run_id: str, state: RunState, owner: str | None
    ) -> tuple[RunRecord, list[AskRecord]]: ...

    @abc.abstractmethod
    async def _record_ask(
        self,
        ask_id: str,
        run_id: str,
        seq: int,
        key: str | None,
        digest: str,
        request: str,
        owner: str | None,
    ) -> tuple[AskRecord, bool]: ...

    @abc.abstractmethod
    async def _get_ask(self, ask_id: str) -> AskRecord | None: ...

    @abc.abstractmethod
    async def _run_asks(self, run_id: str) -> list[AskRecord]: ...

    @abc.abstractmethod
    async def _list_asks(
        self, states: frozenset[AskState], limit: int | None
    ) -> list[AskRecord]: ...

    @abc.abstractmethod
    async def _list_entries(
        self, states: frozenset[AskState], agent: str | None, limit: int | None
    ) -> list[InboxEntry]: ...

    @abc.abstractmethod
    async def _settle_ask(
        self, ask_id: str, state: AskState, code: str | None, answer: str | None, by: str | None
    ) -> Settlement: ...

    @abc.abstractmethod
    async def _abandon_asks(self, run_id: str, from_seq: int) -> list[AskRecord]: ...

    @abc.abstractmethod
    async def _clear(self, ask_id: str) -> AskRecord:
        """Delete the ask if it is abandoned, in one transaction, announcing ``cleared``;
        ``ASK_UNKNOWN`` or ``ASK_NOT_ABANDONED`` otherwise."""

    @abc.abstractmethod
    async def _inbox(self) -> list[InboxEntry]: ...

    @abc.abstractmethod
    async def _purge(
        self, states: frozenset[AskState], older_than: float, dry_run: bool
    ) -> PurgeReport:
        """Delete (or with ``dry_run``, count without deleting) what retention no longer
        keeps, in one transaction."""
