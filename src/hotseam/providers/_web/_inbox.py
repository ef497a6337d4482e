"""The inbox: every pending question of one provider, first answer wins, events fanned out.

Everything that decides an outcome runs synchronously (no await between the check and the
decision), so two answers arriving at once, or an answer and a withdrawal in the same
event-loop turn, always end in exactly one outcome. Subscribers (open pages) each get a
bounded buffer: one that does not read is dropped, never waited for, so a stuck browser
can neither block the loop nor grow memory; a dropped page reconnects and gets a snapshot.

A question keeps the id of its ``ask()`` (:func:`~hotseam.interaction._pending.ask_id`),
so when a reload puts it to the next generation's inbox, a page or a script holding the
id still finds it. An answer or a dismissal records the ``client`` that sent it (a page
sends its own random id), so every page can tell its own answer from another tab's.
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream

from ...interaction import (
    ASK_CANCELLED,
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    UserInteractionError,
    ask_id,
    pending_asks,
)
from ._answers import MAX_ANSWER_CHARS, AnswerError, answer_label, question_dict, shown_answer
from ._answers import parse_answer as read_answer

__all__ = [
    "MAX_ANSWER_CHARS",
    "Audience",
    "Decision",
    "Entry",
    "Inbox",
    "InboxError",
    "ServedInbox",
    "Subscription",
    "answer_label",
    "cancelled_error",
    "parse_answer",
    "question_dict",
    "shown_answer",
]

Outcome = Literal["answered", "dismissed", "withdrawn", "timed_out", "failed", "cleared", "closed"]

_SUBSCRIBER_BUFFER = 256
_RECENT = 1024  # outcomes remembered, so a late second tab hears "already answered"


class InboxError(Exception):
    """A request the inbox refuses; ``status`` and ``code`` go into the HTTP response."""

    def __init__(
        self, status: int, code: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}

    def to_dict(self) -> dict[str, Any]:
        """``{"error": {"code": ..., "message": ..., **details}}``, the API's error body."""
        return {"error": {"code": self.code, "message": self.message, **self.details}}


class ServedInbox(Protocol):
    """What the web app (``build_app``) needs of an inbox: the in-memory :class:`Inbox` of
    one process, or the journal-backed inbox of many daemons (``_journal_inbox``).

    ``submit_*`` decide a question or refuse with an :class:`InboxError` (nothing changes
    then); each returns the extra fields of its ``200`` body.
    """

    @property
    def subscribers(self) -> int:
        """How many event streams are open."""
        ...

    def snapshot(self) -> list[dict[str, Any]]:
        """Every question shown, oldest first."""
        ...

    async def submit_answer(
        self, question_id: str, body: object, *, client: str | None
    ) -> dict[str, Any]:
        """Answer from an API body; the first answer wins."""
        ...

    async def submit_dismissal(self, question_id: str, *, client: str | None) -> dict[str, Any]:
        """Dismiss: the ask fails with ``ASK_CANCELLED``."""
        ...

    async def submit_clear(self, question_id: str, *, client: str | None) -> dict[str, Any]:
        """Take a question nobody owns any more (its run abandoned) off the pages."""
        ...

    def subscribe(self) -> Subscription:
        """An event stream whose first event is the snapshot."""
        ...

    def close(self, note: str) -> None:
        """End every stream with a ``closing`` event saying ``note``."""
        ...


@dataclass(frozen=True, slots=True)
class Decision:
    """How a question ended, as pages and scripts are told (never logged: it holds the
    answer's text).

    ``by`` is who settled it when that was another process (a journal's ``settled_by``:
    another inbox, a daemon's own page); ``held_for`` names the daemon that was down when
    it was answered (the answer waits for its resume).
    """

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


@dataclass(eq=False, slots=True)
class Entry:
    """One pending question and, once decided, its outcome."""

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
"""How the latest questions ended, process-wide: ids are the asks' own, so the inbox of a
reload's next generation still answers "already answered" for what its predecessor saw."""


class Subscription:
    """One open event stream: iterate it for events; it ends when dropped or closed."""

    __slots__ = ("_audience", "_receive", "_send", "dropped")

    def __init__(self, audience: set[Subscription]) -> None:
        send: ObjectSendStream[dict[str, Any]]
        receive: ObjectReceiveStream[dict[str, Any]]
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](_SUBSCRIBER_BUFFER)
        self._audience = audience
        self._send = send
        self._receive = receive
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
        """End the stream (the reader sees its end after the events already queued)."""
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


class Audience:
    """The open event streams of an inbox: each is handed every event, none waited for."""

    __slots__ = ("_subscribers", "closed")

    def __init__(self) -> None:
        self._subscribers: set[Subscription] = set()
        self.closed = False

    def __len__(self) -> int:
        return len(self._subscribers)

    def subscribe(self, snapshot: list[dict[str, Any]]) -> Subscription:
        """A stream whose first event is ``snapshot`` (one that ends at once when closed)."""
        subscription = Subscription(self._subscribers)
        if self.closed:
            subscription.close()
            return subscription
        subscription.offer({"type": "snapshot", "questions": snapshot})
        self._subscribers.add(subscription)
        return subscription

    def publish(self, event: dict[str, Any]) -> None:
        """Queue ``event`` on every stream (a stream that does not read is dropped)."""
        for subscription in list(self._subscribers):
            subscription.offer(event)

    def close(self, note: str) -> None:
        """Tell every stream ``closing`` with ``note``, then end them; no stream opens again."""
        self.closed = True
        self.publish({"type": "closing", "note": note})
        for subscription in list(self._subscribers):
            subscription.close()


class Inbox:
    """Pending questions in arrival order, and the pages listening to them."""

    __slots__ = ("_audience", "_closed", "_entries", "_seq")

    def __init__(self) -> None:
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self._audience = Audience()
        self._seq = itertools.count(1)
        self._closed = False

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(list(self._entries.values()))

    @property
    def subscribers(self) -> int:
        """How many event streams are open."""
        return len(self._audience)

    def snapshot(self) -> list[dict[str, Any]]:
        """Every pending question, oldest first."""
        return [entry.to_dict() for entry in self._entries.values()]

    # -- the asking side ------------------------------------------------------------------------

    def add(self, request: AskUserQuestionRequest) -> Entry:
        """Put a question in the inbox and tell every page.

        Inside ``ask()`` the question takes the ask's id, the same after a re-ask on the
        next generation's inbox; otherwise (or should that id be pending here) a new one.
        """
        if self._closed:
            raise InboxError(503, "CLOSED", "the web inbox is closed")
        question_id = ask_id()
        if question_id is None or question_id in self._entries:
            question_id = secrets.token_hex(8)
        _decided.pop(question_id, None)  # asked again: pending, not decided
        entry = Entry(question_id, next(self._seq), request, time.time())
        self._entries[entry.id] = entry
        self._publish({"type": "added", "question": entry.to_dict()})
        return entry

    def settle(
        self,
        entry: Entry,
        outcome: Outcome,
        note: str,
        *,
        client: str | None = None,
        by: str | None = None,
    ) -> bool:
        """Decide ``entry`` unless it is decided already; return whether this call did.

        ``client`` is who answered or dismissed it (a page's id), told to every page;
        ``by`` who did when that was another process (a journal's ``settled_by``: the
        pages say "answered elsewhere (by ...)"). For ``answered``, set ``entry.answer``
        first: pages are told what was answered.
        """
        if entry.outcome is not None:
            return False
        entry.outcome = outcome
        entry.note = note
        entry.client = client
        self._entries.pop(entry.id, None)
        answer = entry.answer if outcome == "answered" else None
        shown = None if answer is None else shown_answer(answer, entry.request)
        decision = Decision(outcome, note, client, shown, by=by)
        _decided[entry.id] = decision
        while len(_decided) > _RECENT:
            _decided.popitem(last=False)
        entry.done.set()
        self._publish({"type": "removed", "id": entry.id, "reason": outcome, **decision.to_dict()})
        return True

    # -- the answering side ---------------------------------------------------------------------

    def answer(
        self, question_id: str, body: object, *, client: str | None = None
    ) -> AskUserQuestionAnswer:
        """Answer a pending question from an API body; the first answer wins.

        Raises:
            InboxError: 400 for a malformed body, 404 for an unknown question, 409 when it
                was already answered (saying with what, and by which client), dismissed or
                withdrawn, 422 for an answer the question does not accept, 503 while the
                question is open but shown elsewhere (being asked again after a reload).
                Nothing changes in any of these cases.
        """
        entry = self._pending(question_id)
        answer = parse_answer(entry.request, body)
        entry.answer = answer
        self.settle(entry, "answered", "answered", client=client)
        return answer

    def dismiss(self, question_id: str, *, client: str | None = None) -> None:
        """Dismiss a pending question: the agent's ask fails with ``ASK_CANCELLED``."""
        entry = self._pending(question_id)
        self.settle(entry, "dismissed", "dismissed", client=client)

    # What the web app calls (ServedInbox): each decides in one event-loop step.

    async def submit_answer(
        self, question_id: str, body: object, *, client: str | None
    ) -> dict[str, Any]:
        """:meth:`answer`, for the web app."""
        self.answer(question_id, body, client=client)
        return {}

    async def submit_dismissal(self, question_id: str, *, client: str | None) -> dict[str, Any]:
        """:meth:`dismiss`, for the web app."""
        self.dismiss(question_id, client=client)
        return {}

    async def submit_clear(self, question_id: str, *, client: str | None) -> dict[str, Any]:
        """Refused: every question of a process's own inbox has its asker waiting."""
        self._pending(question_id)  # 404 or 409 for one that is gone
        raise InboxError(
            409,
            "NOT_ABANDONED",
            f"question {question_id!r} is waiting for its answer: answer or dismiss it",
        )

    def _pending(self, question_id: str) -> Entry:
        entry = self._entries.get(question_id)
        if entry is not None:
            return entry
        recent = _decided.get(question_id)
        if recent is not None and recent.outcome == "answered":
            shown = "" if recent.answer is None else f": {answer_label(recent.answer)}"
            message = f"the question was already answered{shown}"
            raise InboxError(409, "ALREADY_ANSWERED", message, recent.to_dict())
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
            message = f"the question is no longer pending: {recent.note}"
            raise InboxError(409, "NOT_PENDING", message, recent.to_dict())
        raise InboxError(404, "UNKNOWN_QUESTION", f"no question with id {question_id!r}")

    # -- pages ------------------------------------------------------------------------------------

    def subscribe(self) -> Subscription:
        """Open an event stream whose first event is the snapshot of pending questions."""
        return self._audience.subscribe(self.snapshot())

    def close(self, note: str) -> None:
        """Withdraw every pending question and end every stream with a ``closing`` event."""
        self._closed = True
        for entry in list(self._entries.values()):
            self.settle(entry, "withdrawn", note)
        self._audience.close(note)

    def _publish(self, event: dict[str, Any]) -> None:
        self._audience.publish(event)


def cancelled_error() -> UserInteractionError:
    """The ``ASK_CANCELLED`` error of a question dismissed in the page."""
    return UserInteractionError("the human dismissed the question in the web inbox", ASK_CANCELLED)


def parse_answer(request: AskUserQuestionRequest, body: object) -> AskUserQuestionAnswer:
    """An API body → the seam's answer to the whole ask (see :mod:`._answers`), or the
    :class:`InboxError` (400, or 422 ``INVALID_ANSWER``) naming the question."""
    try:
        return read_answer(request, body)
    except AnswerError as refused:
        raise InboxError(refused.status, refused.code, refused.message) from None
