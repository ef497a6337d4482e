"""Asking again after an empty, incomplete or unfit answer: at most twice, then an error
the agent can act on; the note and what fitted go to the next attempt."""

from __future__ import annotations

from typing import Any

import pytest

from hotseam.interaction import ErrorCode, UserInteractionError
from hotseam.providers._kit import (
    EMPTY_ANSWER_NOTE,
    EmptyAnswerError,
    IncompleteAnswerError,
    ask_until_answered,
)
from hotseam.providers._kit._forms import ASKED_AGAIN_AT_MOST

pytestmark = pytest.mark.anyio


class _NoneOfTheOptionsError(Exception):
    note = "That is none of the options."

    def describe(self, times: int) -> str:
        return f"the reply was none of the options {times} times"


class Attempts:
    """Answers with each of ``outcomes`` in turn (an exception is raised), recording what
    each attempt was given."""

    def __init__(self, *outcomes: Any) -> None:
        self.outcomes = list(outcomes)
        self.given: list[tuple[str | None, dict[str, Any] | None]] = []

    async def __call__(self, note: str | None, given: dict[str, Any] | None) -> Any:
        self.given.append((note, given))
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


async def _ask(attempts: Attempts, told: list[tuple[str, int]] | None = None) -> Any:
    def asked_again(why: str, attempt: int) -> None:
        if told is not None:
            told.append((why, attempt))

    return await ask_until_answered(
        attempts, peer="ACP client", unfit=(_NoneOfTheOptionsError,), asked_again=asked_again
    )


async def test_the_first_attempt_has_no_note() -> None:
    """An answer at once: asked once, with nothing to pre-fill."""
    attempts = Attempts("pg")
    assert await _ask(attempts) == "pg"
    assert attempts.given == [(None, None)]


async def test_an_empty_answer_is_asked_again_at_most_twice_then_cancelled() -> None:
    """Three empty answers: ASK_CANCELLED, counting them; each re-ask has the note."""
    attempts = Attempts(*(EmptyAnswerError() for _ in range(ASKED_AGAIN_AT_MOST + 1)))
    told: list[tuple[str, int]] = []
    with pytest.raises(UserInteractionError) as caught:
        await _ask(attempts, told)
    assert caught.value.code == ErrorCode.ASK_CANCELLED
    assert caught.value.message.startswith("the ACP client sent an empty answer 3 times")
    assert attempts.given == [(None, None), (EMPTY_ANSWER_NOTE, None), (EMPTY_ANSWER_NOTE, None)]
    assert told == [("empty", 1), ("empty", 2)]
    assert ASKED_AGAIN_AT_MOST == 2


async def test_an_incomplete_answer_is_asked_again_with_what_fitted() -> None:
    """The note and the answers given go to the next attempt; a full answer ends it."""
    incomplete = IncompleteAnswerError("Please answer every question.", {"q1": "pg"}, ["q2"])
    attempts = Attempts(incomplete, "done")
    assert await _ask(attempts) == "done"
    assert attempts.given[1] == ("Please answer every question.", {"q1": "pg"})


async def test_incomplete_answers_end_as_invalid_naming_each_question() -> None:
    """Three incomplete answers: INVALID_ANSWER with the last one's problems."""
    attempts = Attempts(*(IncompleteAnswerError("n", {}, ["questions[1] (B?)"]) for _ in range(3)))
    with pytest.raises(UserInteractionError) as caught:
        await _ask(attempts)
    assert caught.value.code == ErrorCode.INVALID_ANSWER
    assert caught.value.message == (
        "the ACP client's answer left questions unanswered or out of bounds 3 times: "
        "questions[1] (B?)"
    )


async def test_an_unfit_answer_says_what_it_is_when_it_ends() -> None:
    """The surface's own kind of answer that does not do: its note, then its description."""
    attempts = Attempts(*(_NoneOfTheOptionsError() for _ in range(3)))
    told: list[tuple[str, int]] = []
    with pytest.raises(UserInteractionError) as caught:
        await _ask(attempts, told)
    assert caught.value.code == ErrorCode.INVALID_ANSWER
    assert caught.value.message == "the reply was none of the options 3 times"
    assert attempts.given[1] == (_NoneOfTheOptionsError.note, None)
    assert told == [("unfit", 1), ("unfit", 2)]


async def test_the_limit_counts_every_kind_of_answer_together() -> None:
    """An empty answer, then an incomplete one, then an unfit one: the third ends it."""
    attempts = Attempts(
        EmptyAnswerError(), IncompleteAnswerError("n", {}, []), _NoneOfTheOptionsError()
    )
    with pytest.raises(UserInteractionError) as caught:
        await _ask(attempts)
    assert caught.value.message == "the reply was none of the options 3 times"


async def test_other_errors_are_not_asked_again() -> None:
    """A decline (or any other error) ends the ask at once."""
    declined = UserInteractionError("declined", "ASK_DECLINED")
    attempts = Attempts(declined, "never")
    with pytest.raises(UserInteractionError) as caught:
        await _ask(attempts)
    assert caught.value is declined
    assert len(attempts.given) == 1
