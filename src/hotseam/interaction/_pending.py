"""The questions being asked right now, and a caller's choice to wait for a provider.

``hotseam status`` lists each open question (who asks, since when, which provider shows
it; never an answer), and a development loop wants a question asked while no provider is
loaded (none saved yet, or its file being replaced) to wait for one instead of failing.
Both are process-wide facts about :func:`~hotseam.interaction.ask` calls, kept here.

The wait is opted into with :func:`waiting_for_provider` (a context variable, inherited by
tasks), and woken by the provider's installation (:meth:`hotseam.Context.wait_provided`).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from ._model import AskUserQuestionAnswer


@dataclass(slots=True)
class PendingAsk:
    """One open question, as a status report shows it: no answer text, ever.

    Attributes:
        question_id: The id the ``ask.*`` log events carry.
        agent: The asking agent's id, if the request named one.
        header: The question's short header, if any.
        context: The name of the context asked in.
        started: ``time.monotonic()`` when the ask began.
        provider: The provider showing it now (``module.Class``), ``None`` while none does.
        attempts: How many providers it was put to (more than one after a reload).
        waiting_for_provider: True while it waits for a provider to appear.
        deadline: When it times out, in ``time.monotonic()`` seconds (``ask(...,
            timeout=)`` sets it, so a provider can show the time left); ``None``: never.
    """

    question_id: str
    agent: str | None
    header: str | None
    context: str
    started: float = field(default_factory=time.monotonic)
    provider: str | None = None
    attempts: int = 0
    waiting_for_provider: bool = False
    deadline: float | None = None

    @property
    def seconds(self) -> float:
        """How long it has been open."""
        return time.monotonic() - self.started

    @property
    def answered_elsewhere(self) -> AnsweredElsewhere | None:
        """The answer given in another process (a fleet inbox) it is withdrawn for, so that
        a provider can say who answered and what; read when the withdrawal comes."""
        return _elsewhere.get(self.question_id)


@dataclass(frozen=True, slots=True)
class AskEnded:
    """How an ask ended: ``code`` is ``None`` for an answer, else the error code."""

    ask: PendingAsk
    code: str | None
    message: str | None


@dataclass(frozen=True, slots=True)
class AnsweredElsewhere:
    """A question answered in another process (a fleet inbox): why a provider's prompt is
    withdrawn. ``by`` is who answered; ``answer`` what (for the UI that showed the question:
    personal data, never logged)."""

    by: str | None
    answer: AskUserQuestionAnswer = field(repr=False)


@dataclass(frozen=True, slots=True)
class ProviderWait:
    """An ask that finds no provider waits for one, at most ``timeout`` seconds;
    ``on_wait(seam_name)`` is called when the first one starts waiting (one line printed
    however many wait)."""

    timeout: float = math.inf
    on_wait: Callable[[str], object] | None = None


_pending: dict[str, PendingAsk] = {}
_listeners: dict[int, Callable[[AskEnded], object]] = {}
_waiting = 0
_wait: contextvars.ContextVar[ProviderWait | None] = contextvars.ContextVar(
    "hotseam_provider_wait", default=None
)
_asking: contextvars.ContextVar[str | None] = contextvars.ContextVar("hotseam_ask_id", default=None)
_asking_tokens: dict[str, contextvars.Token[str | None]] = {}
_elsewhere: dict[str, AnsweredElsewhere] = {}


def current_ask() -> PendingAsk | None:
    """The ask a provider is serving in this task, or ``None`` outside one (a copy).

    Its ``question_id`` stays the same for every provider it is put to (after a reload, a
    page or a script holding the id keeps it); ``deadline`` says the time left,
    ``answered_elsewhere`` why it is withdrawn: facts a provider reads together.
    """
    asked = _asking.get()
    ask = None if asked is None else _pending.get(asked)
    return None if ask is None else replace(ask)


@contextlib.contextmanager
def deadline_of(timeout: float | None) -> Iterator[None]:
    """Within the block, the ask served in this task times out ``timeout`` seconds from
    now (its ``deadline``)."""
    asked = _asking.get()
    ask = None if asked is None else _pending.get(asked)
    if timeout is None or ask is None:
        yield
        return
    before = ask.deadline
    ask.deadline = time.monotonic() + timeout
    try:
        yield
    finally:
        ask.deadline = before


def pending_asks() -> list[PendingAsk]:
    """The open questions, oldest first (copies: changing them changes nothing)."""
    return sorted((replace(ask) for ask in _pending.values()), key=lambda ask: ask.started)


def on_ask_ended(callback: Callable[[AskEnded], object]) -> Callable[[], None]:
    """Call ``callback`` after each ask ends; returns the function that stops it."""
    key = id(callback)
    _listeners[key] = callback

    def remove() -> None:
        _listeners.pop(key, None)

    return remove


@contextlib.contextmanager
def waiting_for_provider(
    timeout: float = math.inf, on_wait: Callable[[str], object] | None = None
) -> Iterator[ProviderWait]:
    """Within the block, an ask that finds no provider waits for one (see
    ``ProviderWait``) instead of failing with ``NO_PROVIDER`` at once."""
    if not timeout > 0:
        raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
    policy = ProviderWait(timeout, on_wait)
    token = _wait.set(policy)
    try:
        yield policy
    finally:
        _wait.reset(token)


def provider_wait() -> ProviderWait | None:
    """The wait chosen around the current code, if any."""
    return _wait.get()


# -- for ask() ---------------------------------------------------------------------------------


def opened(ask: PendingAsk) -> None:
    _pending[ask.question_id] = ask
    # ask() calls its providers in its own task: they see it through current_ask().
    _asking_tokens[ask.question_id] = _asking.set(ask.question_id)


def settled_elsewhere(question_id: str, outcome: AnsweredElsewhere) -> None:
    """Tell providers (``PendingAsk.answered_elsewhere``) before their ask is cancelled."""
    _elsewhere[question_id] = outcome


def closed(ask: PendingAsk, code: str | None, message: str | None) -> None:
    _elsewhere.pop(ask.question_id, None)
    token = _asking_tokens.pop(ask.question_id, None)
    if token is not None:
        with contextlib.suppress(ValueError):  # closed in another context than opened
            _asking.reset(token)
    if _pending.pop(ask.question_id, None) is None:
        return
    ended = AskEnded(replace(ask), code, message)
    for callback in list(_listeners.values()):
        with contextlib.suppress(Exception):  # a listener's bug must not fail an ask
            callback(ended)


@contextlib.contextmanager
def waiting(ask: PendingAsk, policy: ProviderWait, seam: str) -> Iterator[None]:
    """Mark ``ask`` as waiting for a provider; the first waiter announces it."""
    global _waiting
    ask.waiting_for_provider = True
    ask.provider = None
    _waiting += 1
    try:
        if _waiting == 1 and policy.on_wait is not None:
            with contextlib.suppress(Exception):
                policy.on_wait(seam)
        yield
    finally:
        _waiting -= 1
        ask.waiting_for_provider = False
