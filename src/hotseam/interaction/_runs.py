"""Agent runs in a journal: the unit that resumes after a restart and never replays once done.

A *run* is one call of an agent's function, until it returns or raises. Every ``ask()``
inside it is recorded at its position in the run (0, 1, 2…, or by the caller's ``key``).
When the process dies inside a run (``kill -9``, a crash, a deploy), the next start of the
agent *resumes* it: the answered questions return their recorded answers at once, in order;
the pending one is asked again under the same id, and an answer given meanwhile, from any
inbox, is delivered once. Replay stops at the first question that differs from the record:
from there the run asks anew, and the superseded records are abandoned.

A finished run (returned or raised) never replays and its pending questions are withdrawn,
so an agent that loops ("Deploy now?" per task) never receives yesterday's answer. A
cancelled run (the process stopping, ``hotseam dev`` re-running an agent) is left to resume.

A journal out of reach (a full disk, a server restarting) delays what must be recorded,
never fails it: :meth:`JournalDaemon.persist` retries with back-off, says so once at error
level (and in ``hotseam status``, from ``journal_waits()``) and once when it is back.

Three names, three things: a :class:`Journal` holds the records, a :class:`JournalDaemon` is
this process writing to it (registered, kept alive by a heartbeat, marked stopped at the
end), and :data:`JOURNALING` is the seam whose provider says a context records its asks.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio

from .._core import AbortSignal, Scope, Seam, get_logger
from ._errors import ErrorCode, UserInteractionError
from ._journal import (
    AskRecord,
    AskState,
    DaemonRecord,
    Journal,
    JournalError,
    JournalErrorCode,
    RunRecord,
    open_journal,
)

T = TypeVar("T")

_log = get_logger("hotseam.interaction")

RETRY_FIRST = 0.05
"""Seconds before the first new try of a write the journal could not take."""
RETRY_MAX = 2.0
"""The longest wait between two tries (the back-off doubles up to it)."""

_UNAVAILABLE = JournalErrorCode.JOURNAL_UNAVAILABLE.value
_open_journals: weakref.WeakSet[JournalDaemon] = weakref.WeakSet()


@dataclass(slots=True)
class _Outage:
    """The journal out of reach: since when (monotonic), why, and what waits for it."""

    since: float
    error: str
    waiting: dict[int, str] = field(default_factory=dict)


class JournalDaemon:
    """This process as one daemon of a journal: what it writes (runs, asks, answers) goes
    through it, waiting out the journal's outages. Open it with :meth:`open`, provide it as
    :data:`JOURNALING`; :meth:`run` starts or resumes a run.

    Attributes:
        journal: The journal itself.
        daemon: This process's record in it.
    """

    __slots__ = ("__weakref__", "_outage", "_runs", "_tickets", "daemon", "journal")

    def __init__(self, journal: Journal, daemon: DaemonRecord) -> None:
        self.journal = journal
        self.daemon = daemon
        self._runs: dict[str, AgentRun] = {}  # the runs open in this process, by agent
        self._outage: _Outage | None = None
        self._tickets = itertools.count()

    async def persist(
        self,
        what: str,
        operation: Callable[[], Awaitable[T]],
        *,
        shown: bool = True,
        signal: AbortSignal | None = None,
    ) -> T:
        """``operation()`` (one journal call), tried again with back-off for as long as the
        journal is out of reach (``JOURNAL_UNAVAILABLE``); other errors are raised.

        An outage is logged once, at error level; a ``shown`` wait (it holds up a question
        or an answer) is listed by ``what`` in ``journal_waits()``, and only such a write
        ends the outage (a read may work meanwhile). Cancelling the caller ends the wait,
        recording nothing; so does ``signal``, raising ``ASK_ABORTED``.
        """
        ticket = next(self._tickets)

        def unreachable(error: JournalError) -> None:
            self._unreachable(error, what)
            if shown and self._outage is not None:
                self._outage.waiting[ticket] = what

        try:
            result = await _retried(operation, unreachable, signal)
        finally:
            if self._outage is not None:
                self._outage.waiting.pop(ticket, None)
        if shown:  # a read that works says nothing of the writes
            self._reachable()
        return result

    def _unreachable(self, error: JournalError, what: str) -> None:
        if self._outage is not None:
            self._outage.error = str(error)
            return
        self._outage = _Outage(time.monotonic(), str(error))
        _log.error(
            "journal.unreachable",
            url=self.journal.url,
            code=error.code,
            waiting=what,
            summary=f"the journal {self.journal.url} cannot be reached ({error}): questions "
            f"wait for it (here: {what}), tried again with back-off up to every "
            f"{RETRY_MAX:g} s; nothing fails or is asked twice meanwhile",
        )

    def _reachable(self) -> None:
        outage, self._outage = self._outage, None
        if outage is not None:
            waited = time.monotonic() - outage.since
            _log.warning(
                "journal.reachable",
                url=self.journal.url,
                waited_s=round(waited, 3),
                summary=f"the journal {self.journal.url} is back after {waited:.1f} s",
            )

    def waits(self) -> dict[str, Any] | None:
        """While the journal is out of reach: for how long, why, and what waits for it."""
        outage = self._outage
        if outage is None:
            return None
        return {
            "url": self.journal.url,
            "seconds": round(time.monotonic() - outage.since, 1),
            "error": outage.error,
            "waiting": list(outage.waiting.values()),
        }

    def __repr__(self) -> str:
        return f"<JournalDaemon {self.journal.url} daemon={self.daemon.name!r}>"

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls, journal: Journal | str | None = None, *, name: str, agent: str | None = None
    ) -> AsyncIterator[JournalDaemon]:
        """Write to ``journal`` (a :class:`Journal`, or a URL to open: ``None`` is the
        embedded default file) as the daemon ``name`` for the block.

        Raises:
            JournalError: the journal cannot be opened (a bad URL, a newer schema...).
        """
        async with contextlib.AsyncExitStack() as stack:
            if not isinstance(journal, Journal):
                journal = await stack.enter_async_context(open_journal(journal))
            opened = journal
            # Opened, the journal was reached: what fails from here is an outage (a
            # server restarting just now), waited for. Before, a failure to reach it is
            # not told from a wrong URL, password or folder, and is raised.
            daemon = await _reached(
                opened.url,
                "this daemon's registration",
                lambda: opened.register_daemon(name, agent=agent),
            )
            journaling = cls(journal, daemon)
            _open_journals.add(journaling)
            # A scope's task, not a task group around the block: the block's own errors
            # reach the caller as they are. The heartbeat ends before the daemon is marked
            # stopped: a beat after the stop would take it for replaced and register again.
            try:
                async with Scope("journal heartbeat") as beats:
                    beats.spawn(journaling._beat, name="journal heartbeat")
                    yield journaling
            finally:
                _open_journals.discard(journaling)
                await _record_stop(journal, journaling.daemon)

    async def _beat(self) -> None:
        """Heartbeats until cancelled. Declared stopped by another process (a stall longer
        than the liveness timeout), it registers again: its next runs are its own."""
        while True:
            try:
                await self.journal.keep_alive(self.daemon.id)
            except JournalError as error:
                _log.error(
                    "journal.daemon_replaced",
                    code=error.code,
                    daemon_id=self.daemon.id,
                    summary=f"this daemon was marked stopped in the journal ({error.code}); "
                    "registering again (a run it owned may have been taken over)",
                )
                daemon = self.daemon
                self.daemon = await self.persist(
                    "this daemon's registration",
                    lambda daemon=daemon: self.journal.register_daemon(  # type: ignore[misc]
                        daemon.name, agent=daemon.agent
                    ),
                    shown=False,
                )

    @contextlib.asynccontextmanager
    async def run(self, agent: str, *, fresh: bool = False) -> AsyncIterator[AgentRun]:
        """Run ``agent`` (its key: the same key resumes the same unfinished run) for the
        block; inside it, :func:`current_run` is the run and every ask is recorded in it.

        Its unfinished run is resumed (taken over from a dead daemon) unless ``fresh``
        abandons it. Returning finishes the run, raising fails it; a cancelled block
        leaves it to resume.

        Raises:
            JournalError: ``RUN_CLAIMED`` when a live daemon runs the agent already.
        """
        run = await self.persist(
            f"the start of a run of {agent!r}", lambda: self._start(agent, fresh)
        )
        self._runs[agent] = run
        token = _current.set(run)
        outcome: bool | None = None  # None: cancelled, left to resume
        try:
            yield run
            outcome = False
        except BaseException as error:
            if not isinstance(error, anyio.get_cancelled_exc_class()):
                outcome = True
            raise
        finally:
            _current.reset(token)
            if self._runs.get(agent) is run:
                del self._runs[agent]
            if outcome is not None:
                await self._end(run, failed=outcome)

    async def running_elsewhere(self, agent: str) -> DaemonRecord | None:
        """The live daemon (not this one) whose run of ``agent`` is unfinished, if any (a
        gone process of this machine is marked stopped, and does not count); an outage is
        waited out."""
        look = f"a look at the run of {agent!r}"
        record = await self.persist(look, lambda: self.journal.unfinished_run(agent), shown=False)
        if record is None or record.daemon_id == self.daemon.id:
            return None
        await self._release_if_dead(record.daemon_id)
        owner_id = record.daemon_id
        try:
            owner = await self.persist(look, lambda: self.journal.get_daemon(owner_id), shown=False)
        except JournalError:
            return None
        return owner if owner.alive else None

    async def _start(self, agent: str, fresh: bool) -> AgentRun:
        journal = self.journal
        record = await journal.unfinished_run(agent)
        if record is not None and fresh:
            if record.daemon_id != self.daemon.id:
                # Taken first (RUN_CLAIMED while its owner lives): a fresh start abandons
                # a run nobody runs, never the one a daemon started for this agent at the
                # same time just began.
                await self._release_if_dead(record.daemon_id)
                record = await journal.claim_run(record.id, self.daemon.id)
            await journal.abandon_run(record.id)
            _log.info("run.abandoned", agent=agent, run_id=record.id, why="a fresh start")
            record = None
        if record is None:
            record = await journal.start_run(agent, self.daemon.id)
            return AgentRun(self, record, [])
        if record.daemon_id != self.daemon.id:
            await self._release_if_dead(record.daemon_id)
            record = await journal.claim_run(record.id, self.daemon.id)
        recorded = [
            ask for ask in await journal.run_asks(record.id) if ask.state != AskState.ABANDONED
        ]
        _log.info(
            "run.resumed",
            agent=agent,
            run_id=record.id,
            recorded=len(recorded),
            summary=f"resuming the unfinished run of {agent!r}: {len(recorded)} question(s) "
            "recorded",
        )
        return AgentRun(self, record, recorded)

    async def _release_if_dead(self, daemon_id: str) -> None:
        """A previous owner of the run known to be gone is marked stopped at once, rather
        than after its heartbeat times out: a process of this machine that is gone (``kill
        -9``), or a daemon of this process no longer open (its stop went unrecorded: the
        journal was out of reach as it closed)."""
        with contextlib.suppress(JournalError):
            owner = await self.journal.get_daemon(daemon_id)
            if not owner.alive or owner.host != socket.gethostname():
                return
            if owner.pid == os.getpid():
                if any(open_.daemon.id == owner.id for open_ in list(_open_journals)):
                    return
            elif pid_alive(owner.pid):
                return
            await self.journal.stop_daemon(owner.id)
            _log.info("run.owner_gone", daemon_id=owner.id, pid=owner.pid)

    async def _end(self, run: AgentRun, *, failed: bool) -> None:
        """Record the run's end, until the journal takes it (an unfinished run would resume
        and ask again). The first try is shielded, so an end that comes with a stop is
        recorded; an outage is retried until the process stops (logged: it resumes)."""
        run_id = run.record.id
        tries = 0

        async def finish() -> None:
            nonlocal tries
            tries += 1
            await self.journal.finish_run(run_id, failed=failed, owner=self.daemon.id)

        try:
            with anyio.CancelScope(shield=True):
                try:
                    await finish()
                    return
                except JournalError as error:
                    if error.code != _UNAVAILABLE:
                        raise
                    self._unreachable(error, f"the end of run {run_id[:12]}")
            await self.persist(f"the end of run {run_id[:12]}", finish)
        except JournalError as error:  # taken over meanwhile, or already ended
            if tries > 1 and error.code == JournalErrorCode.RUN_FINISHED.value:
                return  # a try whose reply was lost had recorded it
            _log.warning("run.not_finished", run_id=run_id, code=error.code)
        except anyio.get_cancelled_exc_class():
            _log.error(
                "run.not_finished",
                run_id=run_id,
                code=_UNAVAILABLE,
                summary=f"stopped before the journal {self.journal.url} recorded the end of "
                f"run {run_id[:12]}: the next start of {run.agent!r} resumes it",
            )
            raise


@dataclass(eq=False, slots=True)
class AgentRun:
    """A run of an agent in a journal (see the module docstring).

    Attributes:
        journal: The journal (and daemon) it is recorded in.
        record: The run's record as it was when it started or resumed.
        recorded: The asks recorded before this process took the run, in order.
    """

    journal: JournalDaemon
    record: RunRecord
    recorded: list[AskRecord]
    replayed: int = 0
    answered_from_journal: int = 0
    """Asks of this process the journal answered (settled before they were asked here):
    what a gate reads to tell a decision replayed from one given now."""
    last_replayed: AskRecord | None = None
    """The record the last of those was answered from (when it was settled, by whom)."""
    _next: int = field(default=0, repr=False)
    _replaying: bool = field(default=True, repr=False)
    _taken: set[str] = field(default_factory=set, repr=False)
    placing: anyio.Lock = field(default_factory=anyio.Lock, repr=False)
    """Held while an ask takes its place in the run (see ``ask()``): one at a time."""

    @property
    def id(self) -> str:
        """The run's id."""
        return self.record.id

    @property
    def agent(self) -> str:
        """The agent's key."""
        return self.record.agent

    @property
    def resumed(self) -> bool:
        """True when the run existed before this process started it (it may replay)."""
        return bool(self.recorded) or self.replayed > 0

    def take_position(self, key: str | None = None) -> int:
        """The position of the next ask in the run; a keyed ask takes the next number
        without using it up (adding or removing one moves no other ask)."""
        position = self._next
        if key is None:
            self._next += 1
        return position

    def recorded_at(self, position: int, key: str | None) -> AskRecord | None:
        """The record an ask at ``position`` (or with ``key``) would replay, while replaying:
        a look only (an agent may look before it asks); none once an ask has taken it."""
        if not self._replaying:
            return None
        for record in self.recorded:
            if record.id not in self._taken and (
                (key is not None and record.key == key)
                or (key is None and record.key is None and record.seq == position)
            ):
                return record
        return None

    def take_recorded(self, position: int, key: str | None) -> AskRecord | None:
        """:meth:`recorded_at`, taken by the ask being placed: a record goes to one ask only
        (a key asked twice in a resumed run is refused, as in a run that never stopped)."""
        record = self.recorded_at(position, key)
        if record is not None:
            self._taken.add(record.id)
        return record

    async def diverged(self, position: int) -> None:
        """The ask at ``position`` differs from the record: replay ends here, and the
        records from ``position`` on are abandoned (the agent asks anew)."""
        self._replaying = False
        abandoned = await self.journal.journal.abandon_asks(self.record.id, position)
        self.recorded = [record for record in self.recorded if record.seq < position]
        _log.info(
            "run.diverged",
            run_id=self.record.id,
            position=position,
            abandoned=len(abandoned),
            summary=f"the agent asked something else at question {position + 1}: "
            f"{len(abandoned)} recorded question(s) abandoned, asking anew",
        )


JOURNALING: Seam[JournalDaemon] = Seam("journal", JournalDaemon)
"""The ask journal of a context: with a provider, every ``ask()`` is recorded (see
:class:`JournalDaemon`); without one, asks live in this process only."""

_current: ContextVar[AgentRun | None] = ContextVar("hotseam_agent_run", default=None)


async def _pause(seconds: float, signal: AbortSignal | None) -> None:
    """Sleep between two tries; ``ASK_ABORTED`` when ``signal`` fires first."""
    if signal is None:
        await anyio.sleep(seconds)
        return
    with signal.cancel_scope(raise_reason=False) as scope:
        await anyio.sleep(seconds)
    if scope.cancelled_caught:
        error = UserInteractionError(
            "the question was aborted while it waited for the journal", ErrorCode.ASK_ABORTED
        )
        error.reason = signal.reason
        raise error


async def _reached(url: str, what: str, operation: Callable[[], Awaitable[T]]) -> T:
    """:meth:`JournalDaemon.persist` for the time before there is a :class:`JournalDaemon`
    (the outage said once at error level and once when it is back)."""
    since: list[float] = []

    def unreachable(error: JournalError) -> None:
        if not since:
            since.append(time.monotonic())
            _log.error(
                "journal.unreachable",
                url=url,
                code=error.code,
                waiting=what,
                summary=f"the journal {url} cannot be reached ({error}): {what} waits "
                f"for it, tried again with back-off up to every {RETRY_MAX:g} s",
            )

    result = await _retried(operation, unreachable)
    if since:
        waited = time.monotonic() - since[0]
        _log.warning(
            "journal.reachable",
            url=url,
            waited_s=round(waited, 3),
            summary=f"the journal {url} is back after {waited:.1f} s",
        )
    return result


STOP_RETRY_FOR = 5.0
"""For how long what a stopping daemon must not lose (its stop mark, an answer given and
not yet recorded) is tried again through an outage (seconds)."""


async def through_stop(
    journal: Journal, operation: Callable[[], Awaitable[T]], failures: list[JournalError]
) -> T | None:
    """``operation()`` shielded from the caller's cancellation (a stop), tried again through
    an outage for :data:`STOP_RETRY_FOR`: its result, or None when the journal did not take
    it (each failure appended to ``failures``; a closed journal is not waited for)."""

    def unreachable(error: JournalError) -> None:
        if journal.closed:
            raise error  # nothing to wait for: it will not open again
        failures.append(error)

    with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_RETRY_FOR):
        try:
            return await _retried(operation, unreachable)
        except JournalError as error:
            failures.append(error)
    return None


async def _record_stop(journal: Journal, daemon: DaemonRecord) -> None:
    """Mark ``daemon`` stopped, so that the next daemon of its agents takes their unfinished
    runs over at once, however soon it starts (one in this process has the same pid, and
    would otherwise wait for the heartbeat to age past the liveness timeout). A stop left
    unrecorded is said at warning, never silently."""
    failures: list[JournalError] = []
    if await through_stop(journal, lambda: journal.stop_daemon(daemon.id), failures) is not None:
        return
    _log.warning(
        "journal.stop_not_recorded",
        daemon_id=daemon.id,
        code=failures[-1].code if failures else None,
        summary=f"this daemon's stop was not recorded in the journal {journal.url} "
        f"({failures[-1] if failures else f'still out of reach after {STOP_RETRY_FOR:g} s'}): "
        "another daemon takes its unfinished runs over once its heartbeat is older than the "
        "liveness timeout",
    )


async def _retried(
    operation: Callable[[], Awaitable[T]],
    unreachable: Callable[[JournalError], object],
    signal: AbortSignal | None = None,
) -> T:
    """``operation()``, tried again with back-off while the journal is out of reach (each
    such failure told to ``unreachable``); any other error is raised."""
    delay = RETRY_FIRST
    while True:
        try:
            return await operation()
        except JournalError as error:
            if error.code != _UNAVAILABLE:
                raise
            unreachable(error)
        await _pause(delay, signal)
        delay = min(delay * 2, RETRY_MAX)


def journal_waits() -> list[dict[str, Any]]:
    """For each journal of this process out of reach: its URL, for how long (seconds), the
    last error, and what waits for it (what ``hotseam status`` shows)."""
    return [wait for journal in list(_open_journals) if (wait := journal.waits()) is not None]


def current_run() -> AgentRun | None:
    """The agent run the calling code is inside (:meth:`JournalDaemon.run`), if any."""
    return _current.get()


def pid_alive(pid: int) -> bool:
    """True while a process ``pid`` runs here. A killed process nobody reaped (a zombie:
    in a container whose first process does not reap) is dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc here: the signal's answer stands
    return stat.rpartition(")")[2].split()[:1] != ["Z"]
