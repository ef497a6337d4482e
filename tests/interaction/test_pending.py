"""The open questions (for status reports) and waiting for a provider instead of failing."""

from __future__ import annotations

import functools
import time

import anyio
import pytest
from tests._timing import scaled

from hotseam import Agent, Context, Scope
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    ErrorCode,
    UserInteractionError,
    ask,
    current_ask,
)
from hotseam.interaction._pending import (
    AskEnded,
    PendingAsk,
    on_ask_ended,
    pending_asks,
    waiting_for_provider,
)
from hotseam.providers.scripted import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio

SECRET = "the-answer-text-never-shown"
QUESTION = AskUserQuestionRequest("Colour?", header="Theme", agent=Agent("planner"))


async def _until(predicate: object, timeout: float = 5.0) -> None:
    """Wait for a state that has nothing to await (a poll by design); ``timeout``: seconds on
    an idle machine, scaled here."""
    with anyio.fail_after(scaled(timeout)):
        while not predicate():  # type: ignore[operator]  # noqa: ASYNC110
            await anyio.sleep(0.005)


class TestPendingAsks:
    async def test_an_open_question_is_listed_without_its_answer_and_gone_once_answered(
        self,
    ) -> None:
        """Who asks, which header, which provider, for how long; the answer never."""
        gate = anyio.Event()

        class Gated:
            async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
                await gate.wait()
                return AskUserQuestionAnswer(SECRET)

        context = Context("pending")
        context.provide(USER_INTERACTION, Gated())
        ended: list[AskEnded] = []
        stop = on_ask_ended(ended.append)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(functools.partial(ask, QUESTION, context=context))
                await _until(lambda: any(a.provider for a in pending_asks()))
                (pending,) = pending_asks()
                assert pending.agent == "planner"
                assert pending.header == "Theme"
                assert pending.context == "pending"
                assert pending.provider is not None
                assert pending.provider.endswith("Gated")
                assert pending.attempts == 1
                assert pending.seconds >= 0
                assert SECRET not in repr(pending)
                gate.set()
        finally:
            stop()
        assert pending_asks() == []
        (end,) = ended
        assert end.code is None
        assert SECRET not in repr(end)

    async def test_a_failed_ask_reports_its_code(self) -> None:
        """A dismissal is reported with ASK_CANCELLED and its message."""
        context = Context("pending")
        context.provide(
            USER_INTERACTION,
            ScriptedProvider([Reply.fail(ErrorCode.ASK_CANCELLED, "dismissed (Ctrl-C)")]),
        )
        ended: list[AskEnded] = []
        stop = on_ask_ended(ended.append)
        try:
            with pytest.raises(UserInteractionError):
                await ask(QUESTION, context=context)
        finally:
            stop()
        assert [end.code for end in ended] == [ErrorCode.ASK_CANCELLED]


class TestCurrentAsk:
    async def test_outside_an_ask_there_is_none(self) -> None:
        assert current_ask() is None

    async def test_a_provider_sees_the_ask_it_serves_its_id_and_its_deadline(self) -> None:
        """The id is the one the log events carry; the deadline is ``ask(timeout=)`` from
        its start, in ``time.monotonic()`` seconds; no answer given elsewhere."""
        seen: list[object] = []

        class Looking:
            async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
                seen.append(current_ask())
                return AskUserQuestionAnswer("red")

        context = Context("current")
        context.provide(USER_INTERACTION, Looking())
        before = time.monotonic()
        await ask(QUESTION, context=context, timeout=60)
        await ask(QUESTION, context=context)
        timed, untimed = seen
        assert isinstance(timed, PendingAsk) and isinstance(untimed, PendingAsk)
        assert timed.question_id != untimed.question_id
        assert timed.agent == "planner" and timed.header == "Theme"
        assert timed.deadline is not None
        assert before + 60 <= timed.deadline <= time.monotonic() + 60
        assert untimed.deadline is None
        assert timed.answered_elsewhere is None
        assert current_ask() is None and pending_asks() == []

    async def test_the_same_ask_keeps_its_id_on_the_next_provider(self) -> None:
        """Re-asked after its provider is replaced, the question is the same ask."""
        context = Context("current-swap")
        ids: list[str] = []
        first_shown = anyio.Event()

        class First:
            async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
                asked = current_ask()
                assert asked is not None
                ids.append(asked.question_id)
                first_shown.set()
                await anyio.sleep_forever()
                raise AssertionError

        class Second:
            async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
                asked = current_ask()
                assert asked is not None
                ids.append(asked.question_id)
                return AskUserQuestionAnswer("blue")

        answers: list[str] = []

        async def asker() -> None:
            with waiting_for_provider():
                answers.append((await ask(QUESTION, context=context)).answer)

        async with anyio.create_task_group() as tg:
            old = Scope("old-ui", context=context)
            old.provide(USER_INTERACTION, First())
            tg.start_soon(asker)
            with anyio.fail_after(scaled(5)):
                await first_shown.wait()
            await old.aclose()
            async with Scope("new-ui", context=context) as new:
                new.provide(USER_INTERACTION, Second())
                await _until(lambda: bool(answers))
        assert answers == ["blue"]
        assert len(ids) == 2 and ids[0] == ids[1]


class TestWaitingForProvider:
    async def test_without_the_wait_no_provider_fails_at_once(self) -> None:
        with pytest.raises(UserInteractionError) as caught:
            await ask(QUESTION, context=Context("empty"))
        assert caught.value.code == ErrorCode.NO_PROVIDER

    async def test_an_ask_waits_for_a_provider_and_announces_it_once(self) -> None:
        """Two questions wait; the announcement is made once; a provider answers both."""
        context = Context("waiting")
        announced: list[str] = []
        answers: list[str] = []

        async def one() -> None:
            with waiting_for_provider(on_wait=announced.append):
                answers.append((await ask(QUESTION, context=context)).answer)

        async with Scope("ui", context=context) as scope, anyio.create_task_group() as tg:
            tg.start_soon(one)
            tg.start_soon(one)
            await _until(lambda: sum(a.waiting_for_provider for a in pending_asks()) == 2)
            assert announced == ["user-interaction"]
            scope.provide(USER_INTERACTION, ScriptedProvider(["red", "blue"]))
        assert sorted(answers) == ["blue", "red"]

    async def test_the_wait_is_bounded(self) -> None:
        """Past its bound the ask fails with NO_PROVIDER, saying how long it waited."""
        with waiting_for_provider(timeout=0.1), pytest.raises(UserInteractionError) as caught:
            await ask(QUESTION, context=Context("empty"))
        assert caught.value.code == ErrorCode.NO_PROVIDER
        assert "within 0.1 s" in str(caught.value)

    async def test_a_provider_that_goes_with_nothing_in_its_place_is_waited_for(self) -> None:
        """The provider's scope closes mid-question (its file deleted): the question waits,
        and the next provider asks it again."""
        context = Context("gone")
        first = ScriptedProvider([Reply.never()])
        answer: list[str] = []

        async def asker() -> None:
            with waiting_for_provider():
                answer.append((await ask(QUESTION, context=context)).answer)

        async with anyio.create_task_group() as tg:
            scope = Scope("old-ui", context=context)
            scope.provide(USER_INTERACTION, first)
            tg.start_soon(asker)
            await _until(lambda: any(a.provider for a in pending_asks()))
            await scope.aclose()
            await _until(lambda: any(a.waiting_for_provider for a in pending_asks()))
            async with Scope("new-ui", context=context) as new:
                new.provide(USER_INTERACTION, ScriptedProvider(["green"]))
                await _until(lambda: bool(answer))
        assert answer == ["green"]

    def test_the_bound_must_be_positive(self) -> None:
        with pytest.raises(ValueError, match="> 0"), waiting_for_provider(timeout=0):
            pass
