"""Asking again after an answer that does not do: one loop, and one limit, for every surface.

An empty or incomplete form (a client that ignores ``required``), a reply that names none
of the options, a result that cannot be read: none is the human's final word. The question
is asked again with a one-line note (what fitted pre-filled), at most twice, then the ask
fails with ``ASK_CANCELLED`` (empty answers) or ``INVALID_ANSWER``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol, TypeAlias, TypeVar, cast

from ...interaction import ErrorCode, UserInteractionError
from ._forms import EmptyAnswerError, IncompleteAnswerError

__all__ = ["ASKED_AGAIN_AT_MOST", "EMPTY_ANSWER_NOTE", "AskedAgain", "Unfit", "ask_until_answered"]

ASKED_AGAIN_AT_MOST = 2
"""How many times a question is asked again after answers that do not do."""
EMPTY_ANSWER_NOTE = "That answer was empty: please choose an option or type an answer."
"""The one line put before a question asked again after an empty answer."""

T = TypeVar("T")
AskedAgain: TypeAlias = Literal["empty", "incomplete", "unfit"]


class Unfit(Protocol):
    """An answer a surface cannot take: ``note`` goes before the question asked again,
    ``describe(times)`` is the error once it is asked no more."""

    note: str

    def describe(self, times: int) -> str: ...


async def ask_until_answered(
    attempt: Callable[[str | None, dict[str, Any] | None], Awaitable[T]],
    *,
    peer: str,
    unfit: tuple[type[Exception], ...] = (),
    asked_again: Callable[[AskedAgain, int], None] = lambda why, attempt: None,
) -> T:
    """Run ``attempt(note, given)`` until it returns, asking again after an
    ``EmptyAnswerError``, an ``IncompleteAnswerError`` or an ``unfit`` one (an
    :class:`Unfit`); ``peer`` names the client in the final error, ``asked_again(why, n)``
    hears of the n-th time (for the surface's log)."""
    note: str | None = None
    given: dict[str, Any] | None = None
    times = 0
    why: AskedAgain
    while True:
        last = times >= ASKED_AGAIN_AT_MOST
        try:
            return await attempt(note, given)
        except EmptyAnswerError:
            if last:
                raise UserInteractionError(
                    f"the {peer} sent an empty answer {times + 1} times (nothing chosen or "
                    "typed); the question is taken as dismissed",
                    ErrorCode.ASK_CANCELLED,
                ) from None
            note, given, why = EMPTY_ANSWER_NOTE, None, "empty"
        except IncompleteAnswerError as incomplete:
            if last:
                raise UserInteractionError(
                    f"the {peer}'s answer left questions unanswered or out of bounds "
                    f"{times + 1} times: {'; '.join(incomplete.problems)}",
                    ErrorCode.INVALID_ANSWER,
                ) from None
            note, given, why = incomplete.note, incomplete.given, "incomplete"
        except unfit as error:
            reason = cast(Unfit, error)
            if last:
                raise UserInteractionError(
                    reason.describe(times + 1), ErrorCode.INVALID_ANSWER
                ) from None
            note, given, why = reason.note, None, "unfit"
        times += 1
        asked_again(why, times)
