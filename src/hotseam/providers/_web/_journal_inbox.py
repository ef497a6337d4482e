"""The inbox of many daemons: every pending ask of a journal, on the web inbox's page.

``hotseam inbox --journal URL`` serves a :class:`JournalInbox` with the app, page, API and
guard of a daemon's own inbox (``build_app`` takes either, through ``ServedInbox``). It
keeps a mirror of the journal's pending asks, each with the run and the daemon that asks:

* the journal's change feed adds and removes questions as any process records or settles
  them (a daemon, its own web inbox, another fleet inbox);
* every ``refresh`` seconds the pending asks are listed again, since some changes are not
  on the feed: a daemon that stops heart-beating (it is shown *down*: its questions still
  take an answer, held for its resume), one marked stopped, a run taken over by a
  restarted daemon;
* a question whose run is abandoned stays, marked so, until someone clears it (nobody will
  read an answer to it any more). Clearing removes it from the journal (``Journal.clear``),
  so every inbox drops it at once (the feed says ``cleared``), and none shows it again.

Deciding goes to the journal: ``answer_ask`` records the first answer in one transaction,
so of two inboxes answering at once exactly one gets ``200``; the other gets ``409
ALREADY_ANSWERED`` with what was answered and by whom, and every open page of either hears
``removed``. A question keeps the journal's ask id, the id the asking daemon's own inbox
shows it under.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import anyio.abc

from ..._core import get_logger
from ...interaction import (
    ASK_CANCELLED,
    ASK_TIMEOUT,
    AskRecord,
    AskState,
    AskUserQuestionRequest,
    DaemonRecord,
    InboxEntry,
    Journal,
    JournalError,
    JournalErrorCode,
    JournalEvent,
    RunRecord,
)
from ._inbox import (
    Audience,
    Decision,
    InboxError,
    Subscription,
    answer_label,
    parse_answer,
    question_dict,
    shown_answer,
)

__all__ = ["DEFAULT_REFRESH", "JournalInbox", "inbox_identity"]

T = TypeVar("T")

DEFAULT_REFRESH = 2.0
"""Seconds between two listings of the journal (liveness and run owners are not on the
change feed); less when the journal's liveness timeout is short."""

_RECENT = 1024  # outcomes remembered, so a late second answer hears what happened
_BURST = 16  # more changes than this at once: list everything again instead

_log = get_logger("hotseam.providers.web")


def inbox_identity() -> str:
    """How this inbox signs what it settles in the journal: ``inbox HOST:PID``."""
    return f"inbox {socket.gethostname()}:{os.getpid()}"


@dataclass(eq=False, slots=True)
class _Shown:
    """One question on the pages: the ask with its run and daemon as last read."""

    ask: AskRecord
    run: RunRecord
    daemon: DaemonRecord
    seq: int
    abandoned: bool = False

    def to_dict(self) -> dict[str, Any]:
        daemon = self.daemon
        return {
            **question_dict(self.ask.id, self.seq, self.ask.created_at, self.ask.request),
            "state": "abandoned" if self.abandoned else "pending",
            "daemon": {
                "id": daemon.id,
                "name": daemon.name,
                "host": daemon.host,
                "pid": daemon.pid,
                "agent": daemon.agent,
                "up": daemon.alive,
                "stopped": daemon.stopped_at is not None,
            },
            "run": {"id": self.run.id, "agent": self.run.agent},
        }

    def looks(self) -> tuple[object, ...]:
        """What a page shows of the asker (a heartbeat alone changes nothing shown)."""
        daemon = self.daemon
        return (self.run.id, daemon.id, daemon.alive, daemon.stopped_at is None, self.abandoned)


@dataclass(eq=False)
class JournalInbox:
    """Every pending ask of ``journal``, for the web app (a ``ServedInbox``).

    Run :meth:`follow` in a task (it keeps the mirror until cancelled); the web app calls
    the rest. ``by`` is how answers and dismissals made here are signed in the journal.
    """

    journal: Journal
    by: str = field(default_factory=inbox_identity)
    refresh: float | None = None
    _entries: OrderedDict[str, _Shown] = field(default_factory=OrderedDict, init=False)
    _decided: OrderedDict[str, Decision] = field(default_factory=OrderedDict, init=False)
    _deciding: dict[str, anyio.Lock] = field(default_factory=dict, init=False)
    _audience: Audience = field(default_factory=Audience, init=False)
    _seq: int = field(default=0, init=False)
    _stale: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if self.refresh is None:
            self.refresh = min(DEFAULT_REFRESH, self.journal.liveness_timeout / 4)
        if not (self.refresh > 0 and math.isfinite(self.refresh)):
            raise ValueError(f"refresh must be seconds > 0, got {self.refresh!r}")

    def __len__(self) -> int:
        return len(self._entries)

    # -- what the web app calls -----------------------------------------------------------------

    @property
    def subscribers(self) -> int:
        """How many event streams are open."""
        return len(self._audience)

    def snapshot(self) -> list[dict[str, Any]]:
        """Every question shown (pending, or abandoned and not cleared), oldest first."""
        return [entry.to_dict() for entry in self._entries.values()]

    def subscribe(self) -> Subscription:
        """An event stream whose first event is the snapshot."""
        return self._audience.subscribe(self.snapshot())

    def close(self, note: str) -> None:
        """End every stream with ``closing`` (the questions stay in the journal)."""
        self._audience.close(note)

    async def submit_answer(
        self, question_id: str, body: object, *, client: str | None
    ) -> dict[str, Any]:
        """Record an answer in the journal, checked as a daemon's own inbox checks it.

        Raises:
            InboxError: 400/422 for an answer the question does not take, 404 for an
                unknown question, 409 when it was settled first (``ALREADY_ANSWERED`` says
                with what and by whom), 503 when the journal cannot be reached. Nothing
                changes in any of these cases.
        """
        async with self._decision(question_id):
            entry, request, daemon = await self._open(question_id)
            answer = parse_answer(request, body)
            settlement = await self._call(self.journal.answer_ask(question_id, answer, by=self.by))
            if not settlement.won:
                raise self._lost(settlement.ask, entry)
            held = daemon.name if not daemon.alive else None
            note = "answered" if held is None else f"answered; held for {held}'s resume"
            self._remove(
                question_id,
                Decision("answered", note, client, shown_answer(answer, request), held_for=held),
            )
            _log.info(
                "web.fleet_answered",
                ask_id=question_id,
                daemon=daemon.name,
                daemon_up=daemon.alive,
                by=self.by,
            )
            return {} if held is None else {"heldFor": held}

    async def submit_dismissal(self, question_id: str, *, client: str | None) -> dict[str, Any]:
        """Settle the ask as failed with ``ASK_CANCELLED`` (its agent's ask raises it)."""
        async with self._decision(question_id):
            entry, _, _ = await self._open(question_id)
            settlement = await self._call(
                self.journal.settle_ask(
                    question_id, AskState.FAILED, code=ASK_CANCELLED, by=self.by
                )
            )
            if not settlement.won:
                raise self._lost(settlement.ask, entry)
            self._remove(question_id, Decision("dismissed", "dismissed", client))
            _log.info("web.fleet_dismissed", ask_id=question_id, by=self.by)
            return {}

    async def submit_clear(self, question_id: str, *, client: str | None) -> dict[str, Any]:
        """Remove an abandoned question from the journal: it leaves every page of every
        inbox (they hear ``cleared`` on the feed), and no inbox shows it again.

        Raises:
            InboxError: 409 ``NOT_ABANDONED`` for a question still waiting for its answer;
                404 for an unknown one; 409 for one settled otherwise; 503 when the journal
                cannot be reached (nothing changes).
        """
        async with self._decision(question_id):
            entry = self._entries.get(question_id)
            if entry is not None and not entry.abandoned:
                raise _not_abandoned(question_id)
            if entry is None:
                recent = self._decided.get(question_id)
                if recent is not None and recent.outcome == "cleared":
                    return {}
            try:
                await self.journal.clear(question_id)
            except JournalError as error:
                if error.code == JournalErrorCode.ASK_NOT_ABANDONED:
                    ask = await self._ask(question_id, entry)
                    refusal = _not_abandoned(question_id) if ask.pending else self._lost(ask, None)
                    raise refusal from None
                if error.code != JournalErrorCode.ASK_UNKNOWN:
                    raise _unavailable(error) from None
                if entry is None:
                    raise InboxError(
                        404, "UNKNOWN_QUESTION", f"no question with id {question_id!r}"
                    ) from None
                # Shown here, gone from the journal: cleared elsewhere (or purged) already.
            if entry is not None:
                self._remove(question_id, Decision("cleared", "cleared", client))
            _log.info("web.fleet_cleared", ask_id=question_id, by=self.by)
            return {}

    # -- keeping the mirror ---------------------------------------------------------------------

    async def follow(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Keep the mirror until cancelled or the journal closes; started once listed.

        Changes on the feed are applied as they come; everything is listed again every
        ``refresh`` seconds, after a ``resync``, a burst, or a journal out of reach (which
        is warned about once, and tried again).
        """
        assert self.refresh is not None
        async with self.journal.subscribe() as feed:
            for item in await self.journal.inbox():
                self._add(item)
            task_status.started()
            due = anyio.current_time() + self.refresh
            ended = False
            while not ended:
                batch: list[JournalEvent | None] = []
                with anyio.move_on_after(max(0.0, due - anyio.current_time())):
                    batch.append(await anext(feed, None))
                    with anyio.move_on_after(0):  # what else is queued already
                        while len(batch) <= _BURST and batch[-1] is not None:
                            batch.append(await anext(feed, None))
                ended = None in batch  # the journal closed
                events = [event for event in batch if event is not None]
                full = (
                    self._stale
                    or anyio.current_time() >= due
                    or len(events) > _BURST
                    or any(event.kind == "resync" for event in events)
                )
                try:
                    if full:
                        due = anyio.current_time() + self.refresh
                        await self._relist()
                    else:
                        for event in events:
                            await self._apply(event)
                except JournalError as error:
                    if error.code != JournalErrorCode.JOURNAL_UNAVAILABLE:
                        raise
                    if not self._stale:
                        _log.warning(
                            "web.fleet_journal_unreachable",
                            summary=f"cannot read the journal {self.journal.url} ({error}); "
                            f"the inbox shows what it knew, and tries again every "
                            f"{self.refresh:g} s",
                        )
                    self._stale = True
                    continue
                if self._stale:
                    _log.info("web.fleet_journal_recovered", url=self.journal.url)
                    self._stale = False

    async def _apply(self, event: JournalEvent) -> None:
        ask_id = event.ask_id
        if ask_id is None or ask_id in self._deciding:
            return  # a decision made here in flight tells the pages itself
        if event.kind == "cleared":
            if ask_id in self._entries:
                self._remove(ask_id, Decision("cleared", "cleared in another inbox"))
            return
        if event.kind == "created" and ask_id not in self._entries:
            try:
                ask = await self.journal.get_ask(ask_id)
                if ask.pending:
                    run = await self.journal.get_run(ask.run_id)
                    daemon = await self.journal.get_daemon(run.daemon_id)
                    known = self._entries.keys() | self._deciding.keys() | self._decided.keys()
                    if ask_id not in known:  # nothing decided it while this was read
                        self._add(InboxEntry(ask, run, daemon))
                    return
            except JournalError as error:
                if error.code == JournalErrorCode.JOURNAL_UNAVAILABLE:
                    raise
                return  # purged meanwhile, or unreadable: the next listing says
        await self._settled(ask_id)

    async def _relist(self) -> None:
        """List every pending ask again: add the new, refresh the askers, settle the gone."""
        listing = await self.journal.inbox()
        pending = set()
        for item in listing:
            pending.add(item.ask.id)
            entry = self._entries.get(item.ask.id)
            if entry is None:
                if item.ask.id not in self._deciding and item.ask.id not in self._decided:
                    self._add(item)
                continue
            before = entry.looks()
            entry.run, entry.daemon = item.run, item.daemon
            if entry.looks() != before:
                self._audience.publish({"type": "changed", "question": entry.to_dict()})
        gone = [
            ask_id
            for ask_id, entry in self._entries.items()
            if not entry.abandoned and ask_id not in pending
        ]
        for ask_id in gone:
            await self._settled(ask_id)
        abandoned = [ask_id for ask_id, entry in self._entries.items() if entry.abandoned]
        for ask_id in abandoned:  # cleared or purged while the feed missed it
            await self._still_recorded(ask_id)

    async def _still_recorded(self, ask_id: str) -> None:
        """An abandoned question no longer in the journal leaves the pages."""
        try:
            await self.journal.get_ask(ask_id)
        except JournalError as error:
            if error.code == JournalErrorCode.JOURNAL_UNAVAILABLE:
                raise
            if ask_id in self._entries and ask_id not in self._deciding:
                self._remove(ask_id, Decision("cleared", "no longer in the journal"))

    async def _settled(self, ask_id: str) -> None:
        """A shown question left ``pending`` somewhere: say how on every page."""
        entry = self._entries.get(ask_id)
        if entry is None or entry.abandoned or ask_id in self._deciding:
            return
        try:
            ask = await self.journal.get_ask(ask_id)
        except JournalError as error:
            if error.code == JournalErrorCode.JOURNAL_UNAVAILABLE:
                raise
            if self._entries.get(ask_id) is entry:  # purged (or unreadable): it is gone
                self._remove(ask_id, Decision("withdrawn", "no longer in the journal"))
            return
        if ask.pending or self._entries.get(ask_id) is not entry or ask_id in self._deciding:
            return
        if ask.state is AskState.ABANDONED:
            entry.ask, entry.abandoned = ask, True
            self._audience.publish({"type": "changed", "question": entry.to_dict()})
            return
        self._remove(ask_id, self._decision_of(ask, entry))

    def _add(self, item: InboxEntry) -> None:
        self._seq += 1
        entry = _Shown(item.ask, item.run, item.daemon, self._seq)
        self._entries[item.ask.id] = entry
        self._audience.publish({"type": "added", "question": entry.to_dict()})

    def _remove(self, ask_id: str, decision: Decision) -> None:
        self._entries.pop(ask_id, None)
        self._decided[ask_id] = decision
        while len(self._decided) > _RECENT:
            self._decided.popitem(last=False)
        self._audience.publish(
            {"type": "removed", "id": ask_id, "reason": decision.outcome, **decision.to_dict()}
        )

    # -- deciding -------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _decision(self, ask_id: str) -> AsyncIterator[None]:
        """One decision at a time per question in this process (a second tab's waits, then
        hears the first one's outcome with its client), and the feed leaves it alone."""
        lock = self._deciding.get(ask_id)
        if lock is None:
            lock = self._deciding[ask_id] = anyio.Lock()
        try:
            async with lock:
                yield
        finally:
            idle = not lock.locked() and not lock.statistics().tasks_waiting
            if idle and self._deciding.get(ask_id) is lock:
                del self._deciding[ask_id]

    async def _open(
        self, ask_id: str
    ) -> tuple[_Shown | None, AskUserQuestionRequest, DaemonRecord]:
        """The question to decide, its request and its daemon; refused when it is not open.

        A question not (yet) in the mirror is read from the journal: an id the asking
        daemon's own inbox shows can be answered here before the feed brings it.
        """
        recent = self._decided.get(ask_id)
        if recent is not None:
            raise _refusal(recent)
        entry = self._entries.get(ask_id)
        if entry is not None:
            if entry.abandoned:
                raise InboxError(
                    409,
                    "NOT_PENDING",
                    "the question is no longer pending: its run was abandoned, nobody will "
                    "read an answer (clear it)",
                    {"note": "abandoned"},
                )
            return entry, entry.ask.request, entry.daemon
        ask = await self._ask(ask_id, None)
        if not ask.pending:
            raise self._lost(ask, None)
        run = await self._call(self.journal.get_run(ask.run_id))
        daemon = await self._call(self.journal.get_daemon(run.daemon_id))
        return None, ask.request, daemon

    async def _ask(self, ask_id: str, entry: _Shown | None) -> AskRecord:
        try:
            return await self.journal.get_ask(ask_id)
        except JournalError as error:
            if error.code == JournalErrorCode.ASK_UNKNOWN:
                raise InboxError(
                    404, "UNKNOWN_QUESTION", f"no question with id {ask_id!r}"
                ) from None
            raise _unavailable(error) from None

    async def _call(self, call: Awaitable[T]) -> T:
        """A journal call for a decision; its refusals as the API's errors."""
        try:
            return await call
        except JournalError as error:
            if error.code == JournalErrorCode.ASK_UNKNOWN:
                raise InboxError(404, "UNKNOWN_QUESTION", str(error)) from None
            if error.code == JournalErrorCode.RUN_FINISHED:
                raise InboxError(
                    409,
                    "NOT_PENDING",
                    f"the question is no longer pending: {error}",
                    {"note": "its run ended"},
                ) from None
            raise _unavailable(error) from None

    def _lost(self, ask: AskRecord, entry: _Shown | None) -> InboxError:
        """The 409 of a decision that came second; the pages are told the first one."""
        if ask.state is AskState.ABANDONED:
            if entry is not None and self._entries.get(ask.id) is entry and not entry.abandoned:
                entry.ask, entry.abandoned = ask, True
                self._audience.publish({"type": "changed", "question": entry.to_dict()})
            return InboxError(
                409,
                "NOT_PENDING",
                "the question is no longer pending: its run was abandoned, nobody will read "
                "an answer",
                {"note": "abandoned"},
            )
        decision = self._decision_of(ask, entry)
        if ask.id in self._entries:
            self._remove(ask.id, decision)
        return _refusal(decision)

    def _decision_of(self, ask: AskRecord, entry: _Shown | None) -> Decision:
        """How a question settled elsewhere ended, as pages are told."""
        by = None if ask.settled_by == self.by else ask.settled_by
        if ask.state is AskState.ANSWERED:
            held = None
            if entry is not None and not entry.daemon.alive:
                held = entry.daemon.name
            note = "answered" if held is None else f"answered; held for {held}'s resume"
            shown = None if ask.answer is None else shown_answer(ask.answer, ask.request)
            return Decision("answered", note, None, shown, by=by, held_for=held)
        if ask.state is AskState.FAILED and ask.code == ASK_CANCELLED:
            return Decision("dismissed", "dismissed", None, by=by)
        if ask.state is AskState.FAILED and ask.code == ASK_TIMEOUT:
            return Decision("timed_out", "timed out", by=by)
        if ask.state is AskState.FAILED:
            return Decision("failed", f"it failed ({ask.code})", by=by)
        return Decision(
            "withdrawn",
            "withdrawn by its agent (its signal or time limit, or its run ended)",
            by=by,
        )


def _refusal(decision: Decision) -> InboxError:
    by = f" (by {decision.by})" if decision.by else ""
    if decision.outcome == "answered":
        shown = "" if decision.answer is None else f": {answer_label(decision.answer)}"
        return InboxError(
            409,
            "ALREADY_ANSWERED",
            f"the question was already answered{shown}{by}",
            decision.to_dict(),
        )
    return InboxError(
        409,
        "NOT_PENDING",
        f"the question is no longer pending: {decision.note}{by}",
        decision.to_dict(),
    )


def _not_abandoned(ask_id: str) -> InboxError:
    return InboxError(
        409,
        "NOT_ABANDONED",
        f"question {ask_id!r} is waiting for its answer (its run was not abandoned): answer "
        "or dismiss it",
    )


def _unavailable(error: JournalError) -> InboxError:
    return InboxError(
        503, "JOURNAL_UNAVAILABLE", f"the journal cannot be used right now ({error}): retry"
    )
