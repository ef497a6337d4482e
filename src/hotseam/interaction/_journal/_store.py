"""The journal's one async interface: :class:`Journal`, whatever engine stores it.

The public methods live here and check what every engine must check the same way (names,
states, codes); each engine implements the ``_`` primitives of :class:`~._base.JournalBase`,
in one transaction each. An open journal belongs to the event loop that opened it
(``open_journal``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import AsyncIterator, Collection
from typing import TYPE_CHECKING, NoReturn

import anyio
import anyio.abc

from ..._core import get_logger
from ._base import JournalBase
from ._codec import answer_json, request_json
from ._errors import JournalError, JournalErrorCode
from ._notices import Subscription
from ._records import (
    SETTLED_STATES,
    AskRecord,
    AskState,
    DaemonRecord,
    InboxEntry,
    PurgeReport,
    RunOverview,
    RunRecord,
    RunState,
    Settlement,
    question_digest,
)
from ._refusals import unknown

if TYPE_CHECKING:
    from .._model import AskUserQuestionAnswer, AskUserQuestionRequest

__all__ = ["Journal"]

_log = get_logger("hotseam.journal")


class Journal(JournalBase):
    """An open ask journal: daemons, their agents' runs, and every ask with its answer.

    Obtained from :func:`open_journal` (``async with open_journal(url) as journal``). The
    three engines (``memory``, ``sqlite``, ``postgresql``) behave the same; a contract test
    suite holds each to every method's documented behaviour.

    Attributes:
        engine: ``"memory"``, ``"sqlite"`` or ``"postgresql"``.
        url: Where the journal is, fit to show (a password is replaced by ``***``).
        liveness_timeout: A daemon is alive while its last heartbeat is younger than this
            many seconds (and it was not marked stopped).
    """

    # -- daemons ------------------------------------------------------------------------------

    async def register_daemon(
        self,
        name: str,
        *,
        agent: str | None = None,
        host: str | None = None,
        pid: int | None = None,
    ) -> DaemonRecord:
        """Record a daemon process (alive from now on); ``host``/``pid`` default to this one."""
        self._check_open()
        _nonblank("name", name)
        daemon = await self._register_daemon(
            uuid.uuid4().hex,
            name,
            host if host is not None else socket.gethostname(),
            pid if pid is not None else os.getpid(),
            agent,
        )
        _log.info(
            "journal.daemon_registered",
            daemon_id=daemon.id,
            name=name,
            host=daemon.host,
            pid=daemon.pid,
            agent=agent,
        )
        return daemon

    async def heartbeat(self, daemon_id: str) -> DaemonRecord:
        """Say the daemon is alive now.

        Raises:
            JournalError: ``DAEMON_UNKNOWN``; ``DAEMON_STOPPED`` when it was marked stopped
                (another process found it dead and may have taken its runs).
        """
        self._check_open()
        return await self._heartbeat(daemon_id)

    async def stop_daemon(self, daemon_id: str) -> DaemonRecord:
        """Mark a daemon stopped (itself at a clean stop, or another one found dead): its
        runs can be claimed at once. Stopping a stopped daemon changes nothing.

        Raises:
            JournalError: ``DAEMON_UNKNOWN``.
        """
        self._check_open()
        daemon = await self._stop_daemon(daemon_id)
        _log.info("journal.daemon_stopped", daemon_id=daemon_id, name=daemon.name)
        return daemon

    async def get_daemon(self, daemon_id: str) -> DaemonRecord:
        """The daemon as it is now (``alive`` included). Raises ``DAEMON_UNKNOWN``."""
        self._check_open()
        daemon = await self._get_daemon(daemon_id)
        if daemon is None:
            raise unknown("daemon", daemon_id)
        return daemon

    async def daemons(self) -> list[DaemonRecord]:
        """Every daemon in the journal, in the order they registered."""
        self._check_open()
        return await self._daemons()

    async def keep_alive(self, daemon_id: str, *, interval: float | None = None) -> NoReturn:
        """Heartbeat every ``interval`` seconds (default: a third of ``liveness_timeout``)
        until cancelled. A journal out of reach is warned about and tried again with
        back-off (from 0.2 s up to ``interval``), so the beat resumes as soon as it is back.

        Raises:
            JournalError: ``DAEMON_STOPPED`` or ``DAEMON_UNKNOWN``: the daemon lost its place.
        """
        period = self.liveness_timeout / 3 if interval is None else interval
        unreachable = False
        wait = period
        while True:
            await anyio.sleep(wait)
            try:
                await self.heartbeat(daemon_id)
            except JournalError as error:
                if error.code != JournalErrorCode.JOURNAL_UNAVAILABLE:
                    raise
                if not unreachable:
                    _log.warning(
                        "journal.heartbeat_failed",
                        summary=f"cannot reach the journal {self.url} to say this daemon is "
                        f"alive ({error}); trying again soon, then every {period:g} s",
                        daemon_id=daemon_id,
                    )
                    wait = min(period, 0.1)
                # Soon after an outage ends, not a whole period later: a beat missed for
                # longer than the liveness would let another daemon take this one's runs.
                wait = min(period, wait * 2)
                unreachable = True
            else:
                if unreachable:
                    _log.info("journal.heartbeat_recovered", daemon_id=daemon_id)
                unreachable = False
                wait = period

    # -- runs ---------------------------------------------------------------------------------

    async def start_run(self, agent: str, daemon_id: str) -> RunRecord:
        """Start a run of ``agent`` owned by ``daemon_id``.

        Raises:
            JournalError: ``RUN_EXISTS`` when the agent has an unfinished run (resume it
                with :meth:`claim_run`, or :meth:`abandon_run` it first; the existing run's
                id is in ``details``); ``DAEMON_UNKNOWN``; ``DAEMON_STOPPED``.
        """
        self._check_open()
        _nonblank("agent", agent)
        run = await self._start_run(uuid.uuid4().hex, agent, daemon_id)
        _log.info("journal.run_started", run_id=run.id, agent=agent, daemon_id=daemon_id)
        return run

    async def get_run(self, run_id: str) -> RunRecord:
        """The run as it is now. Raises ``RUN_UNKNOWN``."""
        self._check_open()
        run = await self._get_run(run_id)
        if run is None:
            raise unknown("run", run_id)
        return run

    async def unfinished_run(self, agent: str) -> RunRecord | None:
        """The agent's run that neither finished nor was abandoned, if there is one."""
        self._check_open()
        return await self._unfinished_run(agent)

    async def runs(
        self,
        *,
        states: Collection[RunState] | None = None,
        agent: str | None = None,
        limit: int | None = None,
    ) -> list[RunOverview]:
        """Runs in these states (default: all), of ``agent`` when given, newest first (by
        their start), at most ``limit``; each with its owner daemon and how many asks it
        holds in each state (what an operator reads to learn why an agent resumed)."""
        self._check_open()
        _check_limit(limit)
        chosen = frozenset(RunState) if states is None else frozenset(map(RunState, states))
        return await self._runs(chosen, agent, limit)

    async def claim_run(self, run_id: str, daemon_id: str) -> RunRecord:
        """Make ``daemon_id`` the owner of an unfinished run, to resume it.

        Atomic: of two processes claiming the same run at once, exactly one wins. A run
        whose owner is alive (and is not ``daemon_id``) cannot be claimed; one whose owner
        is dead or stopped can. Claiming a run one already owns returns it.

        Raises:
            JournalError: ``RUN_CLAIMED`` (the live owner's id in ``details``),
                ``RUN_FINISHED``, ``RUN_UNKNOWN``, ``DAEMON_UNKNOWN``, ``DAEMON_STOPPED``.
        """
        self._check_open()
        run = await self._claim_run(run_id, daemon_id)
        _log.info("journal.run_claimed", run_id=run_id, agent=run.agent, daemon_id=daemon_id)
        return run

    async def finish_run(
        self, run_id: str, *, failed: bool = False, owner: str | None = None
    ) -> RunRecord:
        """End a run whose agent function returned (``failed``: raised). Its pending asks
        are withdrawn in the same transaction: a finished run is never answered again.

        Args:
            owner: When given, the run must still belong to this daemon (``RUN_CLAIMED``
                otherwise): a daemon that stalled past its liveness cannot end a run that
                another daemon took over.

        Raises:
            JournalError: ``RUN_FINISHED``, ``RUN_UNKNOWN``, ``RUN_CLAIMED``.
        """
        self._check_open()
        state = RunState.FAILED if failed else RunState.FINISHED
        run, settled = await self._end_run(run_id, state, owner)
        self._changed(settled)
        _log.info("journal.run_ended", run_id=run_id, state=state.value, withdrawn=len(settled))
        return run

    async def abandon_run(self, run_id: str) -> RunRecord:
        """Give up an unfinished run (a fresh start, an operator): its pending asks become
        ``abandoned``, answers to them are refused, and it is never resumed.

        Raises:
            JournalError: ``RUN_FINISHED``, ``RUN_UNKNOWN``.
        """
        self._check_open()
        run, settled = await self._end_run(run_id, RunState.ABANDONED, None)
        self._changed(settled)
        _log.info("journal.run_abandoned", run_id=run_id, agent=run.agent, asks=len(settled))
        return run

    # -- asks ---------------------------------------------------------------------------------

    async def record_ask(
        self,
        ask_id: str,
        run_id: str,
        seq: int,
        request: AskUserQuestionRequest,
        *,
        key: str | None = None,
        digest: str | None = None,
        owner: str | None = None,
    ) -> AskRecord:
        """Record a pending ask at position ``seq`` of an unfinished run.

        Idempotent: when ``ask_id`` is already recorded, that record is returned unchanged
        (whatever its run, position, digest or state: compare them).

        Args:
            digest: Default ``question_digest(request)``.
            owner: When given, the run must belong to this daemon (``RUN_CLAIMED``).

        Raises:
            JournalError: ``RUN_FINISHED``, ``RUN_UNKNOWN``, ``RUN_CLAIMED``, and
                ``ASK_CONFLICT`` when another live (not abandoned) ask holds ``seq``.
        """
        self._check_open()
        _nonblank("ask_id", ask_id)
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise ValueError(f"seq must be an int >= 0, got {seq!r}")
        ask, created = await self._record_ask(
            ask_id,
            run_id,
            seq,
            key,
            digest if digest is not None else question_digest(request),
            request_json(request),
            owner,
        )
        if created:
            self._changed([ask])
            _log.debug("journal.ask_recorded", ask_id=ask_id, run_id=run_id, seq=seq)
        return ask

    async def get_ask(self, ask_id: str) -> AskRecord:
        """The ask as it is now. Raises ``ASK_UNKNOWN``."""
        self._check_open()
        ask = await self._get_ask(ask_id)
        if ask is None:
            raise unknown("ask", ask_id)
        return ask

    async def run_asks(self, run_id: str) -> list[AskRecord]:
        """The asks of a run in ``seq`` order (abandoned ones included, before the live ask
        that took their place)."""
        self._check_open()
        return await self._run_asks(run_id)

    async def list_asks(
        self, *, states: Collection[AskState] | None = None, limit: int | None = None
    ) -> list[AskRecord]:
        """Asks in these states (default: all), newest first, at most ``limit``."""
        self._check_open()
        _check_limit(limit)
        chosen = frozenset(AskState) if states is None else frozenset(map(AskState, states))
        return await self._list_asks(chosen, limit)

    async def list_entries(
        self,
        *,
        states: Collection[AskState] | None = None,
        agent: str | None = None,
        limit: int | None = None,
    ) -> list[InboxEntry]:
        """Like :meth:`list_asks` (newest first), each ask with its run and the run's daemon;
        only the asks of ``agent``'s runs when given."""
        self._check_open()
        _check_limit(limit)
        chosen = frozenset(AskState) if states is None else frozenset(map(AskState, states))
        return await self._list_entries(chosen, agent, limit)

    async def answer_ask(
        self, ask_id: str, answer: AskUserQuestionAnswer, *, by: str | None = None
    ) -> Settlement:
        """Record the answer to a pending ask: the first answer wins, in one statement.

        Args:
            by: Who answers, for the record and for losers (an inbox, a host, a client).

        Returns:
            ``Settlement(won=True, ...)`` for the winner; ``won=False`` with the record as
            settled first (:meth:`Settlement.error` gives ``ALREADY_ANSWERED``).

        Raises:
            JournalError: ``ASK_UNKNOWN``; ``RUN_FINISHED`` for a pending ask whose run is
                no longer running (refused; never recorded).
        """
        self._check_open()
        settlement = await self._settle_ask(
            ask_id, AskState.ANSWERED, None, answer_json(answer), by
        )
        self._settled(settlement)
        return settlement

    async def settle_ask(
        self, ask_id: str, state: AskState, *, code: str | None = None, by: str | None = None
    ) -> Settlement:
        """Settle a pending ask as ``failed`` (with ``code``), ``withdrawn`` or ``abandoned``.

        Only a pending ask changes; otherwise ``won`` is False and the record says what
        happened first.

        Raises:
            JournalError: ``ASK_UNKNOWN``.
            ValueError: ``answered`` (use :meth:`answer_ask`) or ``pending``; a ``failed``
                without a code, or a code with another state.
        """
        self._check_open()
        state = AskState(state)
        if state not in SETTLED_STATES or state is AskState.ANSWERED:
            raise ValueError(
                f"settle_ask takes failed, withdrawn or abandoned, not {state} (an answer is "
                "recorded by answer_ask)"
            )
        if (state is AskState.FAILED) != (code is not None):
            raise ValueError("a code is given with state failed, and only then")
        settlement = await self._settle_ask(ask_id, state, code, None, by)
        self._settled(settlement)
        return settlement

    async def abandon_asks(self, run_id: str, from_seq: int) -> list[AskRecord]:
        """Mark every ask of an unfinished run at ``seq >= from_seq`` abandoned, whatever
        its state (a resumed run asked something else there: those records are superseded).

        Returns the asks it changed, in ``seq`` order.

        Raises:
            JournalError: ``RUN_FINISHED``, ``RUN_UNKNOWN``.
        """
        self._check_open()
        abandoned = await self._abandon_asks(run_id, from_seq)
        self._changed(abandoned)
        if abandoned:
            _log.info(
                "journal.asks_abandoned", run_id=run_id, from_seq=from_seq, asks=len(abandoned)
            )
        return abandoned

    async def wait_settled(self, ask_id: str) -> AskRecord:
        """Wait until the ask is no longer pending and return it as settled.

        Woken at once by a settlement made through this journal object; from other
        processes by ``NOTIFY`` on PostgreSQL (milliseconds) and by polling on SQLite
        (within ``poll_interval``). Cancel it (a timeout, a signal) to stop waiting.

        Raises:
            JournalError: ``ASK_UNKNOWN``; ``JOURNAL_UNAVAILABLE`` once the journal closed.
        """
        self._check_open()
        with self._notices.watch(ask_id) as watch:
            while True:
                ask = await self.get_ask(ask_id)
                if not ask.pending:
                    return ask
                await watch.wait()
                self._check_open()
                if watch.settled is not None:  # settled through this object: as it was
                    return watch.settled

    async def clear(self, ask_id: str) -> AskRecord:
        """Remove an abandoned ask from the journal (nobody will read an answer to it): the
        change feed tells ``cleared``, so every inbox that shows it drops it.

        Returns:
            The ask as it was recorded.

        Raises:
            JournalError: ``ASK_UNKNOWN`` (never recorded, or cleared or purged already);
                ``ASK_NOT_ABANDONED`` for a pending ask (answer or dismiss it) or one
                settled otherwise (it stays until purged).
        """
        self._check_open()
        ask = await self._clear(ask_id)
        self._cleared(ask)
        _log.info("journal.ask_cleared", ask_id=ask.id, run_id=ask.run_id)
        return ask

    async def inbox(self) -> list[InboxEntry]:
        """Every pending ask of every daemon, oldest first, with its run and its daemon
        (``daemon.alive``: is the asker up? An ask of a dead daemon still takes an answer,
        held for its resume)."""
        self._check_open()
        return await self._inbox()

    @contextlib.asynccontextmanager
    async def subscribe(self) -> AsyncIterator[Subscription]:
        """Within the block, an async iterator of :class:`JournalEvent` (created, settled,
        resync) for changes made from now on, by any process. Subscribe, then list: no
        change falls in between."""
        self._check_open()
        with self._notices.subscribe() as subscription:
            await self._attach(subscription)
            yield subscription

    async def purge(
        self,
        *,
        older_than: float,
        states: Collection[AskState] = SETTLED_STATES,
        dry_run: bool = False,
    ) -> PurgeReport:
        """Delete what retention no longer keeps: asks in ``states`` settled more than
        ``older_than`` seconds ago, then ended runs left without asks, then stopped or
        dead daemons left without runs (each also older than that). Pending asks and
        unfinished runs are never purged.

        Args:
            dry_run: Count what would be deleted, in the same transaction, and delete
                nothing (it is rolled back).

        Raises:
            ValueError: ``pending`` among ``states``, or a negative age.
        """
        self._check_open()
        chosen = frozenset(map(AskState, states))
        if AskState.PENDING in chosen:
            raise ValueError("pending asks are never purged: abandon their run first")
        if not older_than >= 0:
            raise ValueError(f"older_than must be seconds >= 0, got {older_than!r}")
        report = await self._purge(chosen, float(older_than), dry_run)
        if dry_run:
            return report
        _log.info(
            "journal.purged",
            asks=report.asks,
            runs=report.runs,
            daemons=report.daemons,
            older_than=older_than,
        )
        return report

    # -- shared -------------------------------------------------------------------------------

    def _settled(self, settlement: Settlement) -> None:
        ask = settlement.ask
        if settlement.won:
            self._changed([ask])
        _log.info(
            "journal.ask_settled" if settlement.won else "journal.ask_settle_lost",
            ask_id=ask.id,
            run_id=ask.run_id,
            state=ask.state.value,
            code=ask.code,
            by=ask.settled_by,
        )


def _check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be an int >= 0, got {limit!r}")


def _nonblank(what: str, value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")
