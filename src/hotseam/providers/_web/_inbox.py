"""The web inbox: the questions every page shows, first answer wins, events fanned out.

One component serves both inboxes: a process's own (``WebProvider``) decides its asks here,
in memory; the fleet inbox (:class:`~._journal_inbox.JournalInbox`) is this inbox over a
journal, whose transaction decides which answer came first. A process with no journal has
nothing to mirror, so its inbox decides in memory.

Deciding in memory has no await between the check and the decision, so two answers (or an
answer and a withdrawal) in one event-loop turn end in exactly one outcome. Each open page
gets a bounded buffer: one that does not read is dropped, never waited for, and reconnects
to a snapshot.

A question keeps its ``ask()``'s id (:func:`~hotseam.interaction.current_ask`), so a page or
script holding it still finds it after a reload or in another inbox. An answer records the
``client`` (a page's random id) that sent it, so a page tells its own answer from another
tab's.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from ...interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    ErrorCode,
    UserInteractionError,
    current_ask,
    pending_asks,
)
from ._answers import (
    InboxError,
    answer_label,
    parse_answer,
    question_dict,
    shown_answer,
)

Outcome = Literal["answered", "dismissed", "withdrawn", "timed_out", "failed", "cleared", "closed"]

_SUBSCRIBER_BUFFER = 256
_RECENT = 1024  # outcomes remembered, so a late second tab hears "already answered"


@dataclass(frozen=True, slots=True)
class Decision:
    """How a question ended, as pages and scripts are told (never logged: it holds the
    answer's text). ``by``: the other process that settled it (a journal's ``settled_by``);
    ``held_for``: the daemon that was down when it was answered (held for its resume)."""

    outcome: Outcome
    note: str
    client: str | None = None
    answer: dict[str, Any] | None = None
    by: str | None = None
    held_for: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The fields a ``removed`` event and a ``409`` carry beyond the outcome."""
        facts: dict[str, Any] = {"note": self.note}
        if self.outcome in ("answered", "dismissed"):
            facts["client"] = self.client
        if self.answer is not None:
            facts["answer"] = self.answer
        if self.by is not None:
            facts["by"] = self.by
        if self.held_for is not None:
            facts["heldFor"] = self.held_for
        return facts


def refusal(decision: Decision) -> InboxError:
    """The ``409`` of a decision that came second: what the first one was, and by whom."""
    by = f" (by {decision.by})" if decision.by else ""
    if decision.outcome == "answered":
        shown = "" if decision.answer is None else f": {answer_label(decision.answer)}"
        message = f"the question was already answered{shown}{by}"
        return InboxError(409, "ALREADY_ANSWERED", message, decision.to_dict())
    message = f"the question is no longer pending: {decision.note}{by}"
    return InboxError(409, "NOT_PENDING", message, decision.to_dict())


def unknown(question_id: str) -> InboxError:
    """The ``404`` of an id no inbox knows."""
    return InboxError(404, "UNKNOWN_QUESTION", f"no question with id {question_id!r}")


def not_abandoned(question_id: str) -> InboxError:
    """The ``409`` of clearing a question whose asker still waits for its answer."""
    return InboxError(
        409,
        "NOT_ABANDONED",
        f"question {question_id!r} is waiting for its answer (its run was not abandoned): "
        "answer or dismiss it",
    )


@dataclass(eq=False, slots=True)
class Entry:
    """One question shown and, once decided in memory, its outcome."""

    id: str
    seq: int
    request: AskUserQuestionRequest
    asked_at: float
    done: anyio.Event = field(default_factory=anyio.Event)
    outcome: Outcome | None = None
    answer: AskUserQuestionAnswer | None = None
    note: str = ""
    client: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The question as the API and the page see it (model-written text, never HTML)."""
        return question_dict(self.id, self.seq, self.asked_at, self.request)


_decided: OrderedDict[str, Decision] = OrderedDict()
"""How this process's latest asks ended, so a reload's next inbox still says "already
answered" for what its predecessor saw."""


class Subscription:
    """One open event stream: iterate it for events; it ends when dropped or closed."""

    __slots__ = ("_audience", "_receive", "_send", "dropped")

    def __init__(self, audience: set[Subscription]) -> None:
        streams = anyio.create_memory_object_stream[dict[str, Any]](_SUBSCRIBER_BUFFER)
        self._send, self._receive = streams
        self._audience = audience
        self.dropped = False

    def offer(self, event: dict[str, Any]) -> None:
        """Queue ``event`` without waiting; a full buffer drops the subscriber instead."""
        try:
            self._send.send_nowait(event)
        except anyio.WouldBlock:
            self.dropped = True
            self.close()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.close()

    def close(self) -> None:
        """End the stream (after the events already queued)."""
        self._audience.discard(self)
        self._send.close()

    async def receive(self) -> dict[str, Any] | None:
        """The next event, or ``None`` once the stream has ended."""
        try:
            return await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            return None

    def release(self) -> None:
        """Free both ends (the page went away)."""
        self.close()
        self._receive.close()


class Inbox:
    """The questions shown in arrival order, how the latest ended, and the pages listening.

    ``add``/``settle``/``answer``/``dismiss`` decide a process's asks in memory; the web
    app calls ``submit_*``, whose ``_open``/``_answer``/``_dismiss``/``_clear`` steps the
    journal's inbox overrides to decide in the journal.
    """

    def __init__(self, decided: OrderedDict[str, Decision] | None = None) -> None:
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self._decided = _decided if decided is None else decided
        self._deciding: dict[str, anyio.Lock] = {}
        self._subscribers: set[Subscription] = set()
        self._seq = 0
        self._closed = False

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(list(self._entries.values()))

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def snapshot(self) -> list[dict[str, Any]]:
        """Every question shown, oldest first."""
        return [entry.to_dict() for entry in self._entries.values()]

    # -- the asking side (a process's own asks) -------------------------------------------------

    def add(self, request: AskUserQuestionRequest) -> Entry:
        """Put a question in the inbox and tell every page; inside ``ask()`` it takes the
        ask's id (the same after a re-ask on the next generation's inbox)."""
        if self._closed:
            raise InboxError(503, "CLOSED", "the web inbox is closed")
        question_id = asked.question_id if (asked := current_ask()) else None
        if question_id is None or question_id in self._entries:
            question_id = secrets.token_hex(8)
        self._decided.pop(question_id, None)  # asked again: pending, not decided
        entry = Entry(question_id, self._next_seq(), request, time.time())
        self._show(entry)
        return entry

    def settle(
        self,
        entry: Entry,
        outcome: Outcome,
        note: str,
        *,
        client: str | None = None,
        by: str | None = None,
        held_for: str | None = None,
    ) -> bool:
        """Decide ``entry`` unless it is decided already; return whether this call did.

        ``client``, ``by`` and ``held_for`` as in :class:`Decision`. For ``answered``, set
        ``entry.answer`` first: pages are told what was answered.
        """
        if entry.outcome is not None:
            return False
        entry.outcome, entry.note, entry.client = outcome, note, client
        answer = entry.answer if outcome == "answered" else None
        shown = None if answer is None else shown_answer(answer, entry.request)
        self._remove(entry.id, Decision(outcome, note, client, shown, by, held_for))
        entry.done.set()
        return True

    def answer(
        self, question_id: str, body: object, *, client: str | None = None
    ) -> AskUserQuestionAnswer:
        """Answer a pending question from an API body, at once; the first answer wins.

        Raises:
            InboxError: as :meth:`submit_answer`.
        """
        entry = self._pending(question_id)
        entry.answer = parse_answer(entry.request, body)
        self.settle(entry, "answered", "answered", client=client)
        return entry.answer

    def dismiss(self, question_id: str, *, client: str | None = None) -> None:
        """Dismiss a pending question: the agent's ask fails with ``ASK_CANCELLED``."""
        self.settle(self._pending(question_id), "dismissed", "dismissed", client=client)

    # -- the answering side (what the web app calls) --------------------------------------------

    async def submit_answer(
        self, question_id: str, body: object, *, client: str | None
    ) -> dict[str, Any]:
        """Answer from an API body; return the extra fields of the ``200``.

        Raises:
            InboxError: 400 for a malformed body, 404 for an unknown question, 409 when it
                was settled first (``ALREADY_ANSWERED`` says with what, by which client or
                process), 422 for an answer the question does not take, 503 while it is
                open but not here (being asked again after a reload) or the journal cannot
                be reached. Nothing changes in any of these cases.
        """
        async with self._decision(question_id):
            entry = await self._open(question_id)
            return await self._answer(entry, parse_answer(entry.request, body), client)

    async def submit_dismissal(self, question_id: str, *, client: str | None) -> dict[str, Any]:
        """Dismiss: the ask fails with ``ASK_CANCELLED`` (refused as ``submit_answer``)."""
        async with self._decision(question_id):
            return await self._dismiss(await self._open(question_id), client)

    async def submit_clear(self, question_id: str, *, client: str | None) -> dict[str, Any]:
        """Take a question nobody will read an answer to (its run abandoned) off the pages."""
        async with self._decision(question_id):
            return await self._clear(question_id, client)

    @contextlib.asynccontextmanager
    async def _decision(self, question_id: str) -> AsyncIterator[None]:
        """One decision at a time per question (a second tab's waits, then hears the first's)."""
        lock = self._deciding.setdefault(question_id, anyio.Lock())
        try:
            async with lock:
                yield
        finally:
            idle = not lock.locked() and not lock.statistics().tasks_waiting
            if idle and self._deciding.get(question_id) is lock:
                del self._deciding[question_id]

    async def _open(self, question_id: str) -> Entry:
        return self._pending(question_id)

    async def _answer(
        self, entry: Entry, answer: AskUserQuestionAnswer, client: str | None
    ) -> dict[str, Any]:
        entry.answer = answer
        self.settle(entry, "answered", "answered", client=client)
        return {}

    async def _dismiss(self, entry: Entry, client: str | None) -> dict[str, Any]:
        self.settle(entry, "dismissed", "dismissed", client=client)
        return {}

    async def _clear(self, question_id: str, client: str | None) -> dict[str, Any]:
        """Refused: every question of a process's own inbox has its asker waiting."""
        self._pending(question_id)  # 404 or 409 for one that is gone
        raise not_abandoned(question_id)

    def _pending(self, question_id: str) -> Entry:
        entry: Entry | None = self._entries.get(question_id)
        if entry is not None:
            return entry
        recent = self._decided.get(question_id)
        if (recent is None or recent.outcome == "withdrawn") and any(
            ask.question_id == question_id for ask in pending_asks()
        ):  # withdrawn by a reload, not asked again yet (or shown by another provider)
            raise InboxError(
                503,
                "ASKED_ELSEWHERE",
                f"question {question_id!r} is still open but not in this inbox right now (it "
                "is being asked again after a reload, or another provider shows it): retry "
                "in a moment",
            )
        if recent is not None:
            raise refusal(recent)
        raise unknown(question_id)

    # -- what every page is told ----------------------------------------------------------------

    def subscribe(self) -> Subscription:
        """An event stream whose first event is the snapshot (it ends at once if closed)."""
        subscription = Subscription(self._subscribers)
        if self._closed:
            subscription.close()
            return subscription
        subscription.offer({"type": "snapshot", "questions": self.snapshot()})
        self._subscribers.add(subscription)
        return subscription

    def close(self, note: str) -> None:
        """Withdraw every pending question and end every stream with a ``closing`` event."""
        self._closed = True
        for entry in list(self._entries.values()):
            self.settle(entry, "withdrawn", note)
        self._end_streams(note)

    def _end_streams(self, note: str) -> None:
        self._closed = True
        self._publish({"type": "closing", "note": note})
        for subscription in list(self._subscribers):
            subscription.close()

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _show(self, entry: Entry) -> None:
        self._entries[entry.id] = entry
        self._publish({"type": "added", "question": entry.to_dict()})

    def _changed(self, entry: Entry) -> None:
        self._publish({"type": "changed", "question": entry.to_dict()})

    def _remove(self, question_id: str, decision: Decision) -> None:
        self._entries.pop(question_id, None)
        self._decided[question_id] = decision
        while len(self._decided) > _RECENT:
            self._decided.popitem(last=False)
        removed = {"type": "removed", "id": question_id, "reason": decision.outcome}
        self._publish({**removed, **decision.to_dict()})

    def _publish(self, event: dict[str, Any]) -> None:
        for subscription in list(self._subscribers):
            subscription.offer(event)


def cancelled_error() -> UserInteractionError:
    """The ``ASK_CANCELLED`` error of a question dismissed in the page."""
    return UserInteractionError(
        "the human dismissed the question in the web inbox", ErrorCode.ASK_CANCELLED
    )
