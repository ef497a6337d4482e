"""The reload and ask guarantees under real timing, one class per guarantee.

1. A closing generation serves no one, from the first instant of its close.
2. An answer that exists is never thrown away; each question is answered exactly once.
3. Questions waiting on a provider keep their arrival order across a swap.
4. Abort reasons are any value.
5. ``tools.execute()`` never raises for any input value.
7. A pending ask whose provider goes away with no replacement is ``ASK_ABORTED``.

(6, failed modules are retried, is a reloader behaviour: ``tests/reload/test_retry.py``.)
Races are built so that both orders of the racing steps happen, and repeated.
"""

from __future__ import annotations

import random
from contextlib import AsyncExitStack
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from tests._timing import scaled

from hotseam import (
    AbortController,
    AbortError,
    AbortSignal,
    Context,
    HarnessError,
    RegistrationState,
    Scope,
    ScopeClosedError,
    Seam,
    ToolCall,
    tool,
)
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ErrorCode,
    UserInteractionError,
    ask,
    ask_user_question_tool,
)
from hotseam.providers.scripted import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio

QUESTION = AskUserQuestionRequest("Which database?")


class GatedProvider:
    """Answers each question once its gate opens; records what it returned or lost."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.gate = anyio.Event()
        self.asked: list[str] = []
        self.returned: list[str] = []
        self.cancelled: list[str] = []

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        self.asked.append(request.question)
        try:
            await self.gate.wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled.append(request.question)
            raise
        answer = f"{request.question}@{self.name}"
        self.returned.append(answer)
        return AskUserQuestionAnswer(answer)


class Notes(BaseModel):
    text: str


@tool(description="Echo the notes.")
async def echo(notes: Notes, call: ToolCall) -> str:
    return notes.text


async def _ask_into(context: Context, request: AskUserQuestionRequest, results: list[Any]) -> None:
    try:
        results.append(await ask(request, context=context))
    except UserInteractionError as error:
        results.append(error)


class TestAClosingGenerationServesNoOne:
    async def test_nothing_is_served_while_a_later_disposer_runs(self) -> None:
        """provide, then defer(async close): during the close, no lookup reaches it."""
        context = Context("closing")
        seen: dict[str, Any] = {}
        inside = anyio.Event()
        release = anyio.Event()
        provider = ScriptedProvider(["pg"])
        order: list[str] = []

        async def async_close() -> None:
            order.append("async_close")
            seen["lookup"] = context.lookup(USER_INTERACTION)
            with pytest.raises(HarnessError) as missing:
                context.get(USER_INTERACTION)
            seen["get"] = missing.value.code
            with pytest.raises(HarnessError) as waited:
                await context.wait_for(USER_INTERACTION, timeout=0.5)
            seen["wait_for"] = waited.value.code
            result = await context.tools.execute("echo", {"text": "hi"})
            seen["tool"] = result.error["code"] if result.error else "served"
            seen["state"] = registration.state
            inside.set()
            await release.wait()

        scope = Scope("generation", context=context)
        registration = scope.provide(USER_INTERACTION, provider)
        scope.register_tool(echo)
        scope.defer(async_close)
        scope.defer(lambda: order.append("sync_close"))
        async with anyio.create_task_group() as tg:
            tg.start_soon(scope.aclose)
            await inside.wait()
            failures: list[Any] = []
            await _ask_into(context, QUESTION, failures)
            release.set()
        assert seen == {
            "lookup": None,
            "get": ErrorCode.NO_PROVIDER,
            "wait_for": ErrorCode.NO_PROVIDER,
            "tool": "TOOL_NOT_FOUND",
            "state": RegistrationState.WITHDRAWN,
        }
        assert [type(f) for f in failures] == [UserInteractionError]
        assert failures[0].code == ErrorCode.NO_PROVIDER
        assert provider.requests == []
        assert order == ["sync_close", "async_close"]  # LIFO is unchanged
        assert registration.state is RegistrationState.REMOVED

    async def test_child_scope_registrations_are_withdrawn_with_the_parent(self) -> None:
        """A child's provider stops being served when the parent starts closing."""
        context = Context("tree")
        seam: Seam[object] = Seam("child-seam")
        parent = Scope("parent", context=context)
        child = parent.child("child")
        child.provide(seam, object())
        looked: list[object] = []

        async def parent_close() -> None:
            looked.append(context.lookup(seam))
            with pytest.raises(ScopeClosedError):
                child.defer(lambda: None)
            await anyio.lowlevel.checkpoint()

        # The parent's own disposer runs after the child closed; a child disposer runs
        # before: the child's registration must be gone for both.
        parent.defer(parent_close)
        child.defer(parent_close)
        await parent.aclose()
        assert looked == [None, None]

    async def test_an_ask_in_flight_migrates_at_close_start(self) -> None:
        """The old provider's ask is cancelled before the old generation's disposers end."""
        context = Context("migrate")
        old = GatedProvider("old")
        new = GatedProvider("new")
        new.gate.set()
        old_scope = Scope("old", context=context)
        old_scope.provide(USER_INTERACTION, old)
        migrated = anyio.Event()

        async def slow_close() -> None:
            # Only finishes once the ask left the old provider: deadlocks if revocation
            # waits for the registration's own (later) undo.
            while not old.cancelled:
                await anyio.lowlevel.checkpoint()
            migrated.set()

        old_scope.defer(slow_close)
        results: list[Any] = []
        with anyio.fail_after(scaled(5)):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_ask_into, context, QUESTION, results)
                await wait_all_tasks_blocked()
                assert old.asked == ["Which database?"]
                async with context.swap(USER_INTERACTION):
                    await old_scope.aclose()
                    assert migrated.is_set()
                    new_scope = Scope("new", context=context)
                    new_scope.provide(USER_INTERACTION, new)
        assert [r.answer for r in results] == ["Which database?@new"]
        assert old.returned == []
        await new_scope.aclose()

    async def test_callers_arriving_during_a_swap_wait_for_it(self) -> None:
        """lookup() is empty inside the swap, but ask() and tools wait and get the new one."""
        context = Context("arrivals")
        old_scope = Scope("old", context=context)
        old_scope.provide(USER_INTERACTION, ScriptedProvider(["old"]))
        old_scope.register_tool(echo)
        results: list[Any] = []
        tool_results: list[Any] = []

        async def use_tool() -> None:
            tool_results.append(await context.tools.execute("echo", {"text": "hi"}))

        with anyio.fail_after(scaled(5)):
            async with (
                anyio.create_task_group() as tg,
                context.swap(USER_INTERACTION, tools=["echo"]),
            ):
                await old_scope.aclose()
                tg.start_soon(_ask_into, context, QUESTION, results)
                tg.start_soon(use_tool)
                await wait_all_tasks_blocked()
                assert results == tool_results == []
                new_scope = Scope("new", context=context)
                new_scope.provide(USER_INTERACTION, ScriptedProvider(["new"]))
                new_scope.register_tool(echo)
        assert [r.answer for r in results] == ["new"]
        assert [r.output for r in tool_results] == ["hi"]
        await new_scope.aclose()

    async def test_a_new_provider_may_take_over_while_the_old_one_closes(self) -> None:
        """The withdrawn registration does not block a replacement, and does not remove it."""
        context = Context("takeover")
        release = anyio.Event()
        old_scope = Scope("old", context=context)
        old_scope.provide(USER_INTERACTION, ScriptedProvider(["old"]))
        old_scope.defer(release.wait)
        async with anyio.create_task_group() as tg:
            tg.start_soon(old_scope.aclose)
            await wait_all_tasks_blocked()
            new = context.provide(USER_INTERACTION, ScriptedProvider(["new"]))
            release.set()
        assert context.registration(USER_INTERACTION) is new
        assert (await ask(QUESTION, context=context)).answer == "new"
        await new.dispose()

    async def test_on_inactive_fires_once_at_close_start(self) -> None:
        """Waiters for a seam or tool name learn at close start, once; late ones at once."""
        context = Context("inactive")
        release = anyio.Event()
        scope = Scope("generation", context=context)
        registration = scope.provide(USER_INTERACTION, ScriptedProvider(["x"]))
        tool_registration = scope.register_tool(echo)
        scope.defer(release.wait)
        heard: list[str] = []
        registration.on_inactive(lambda: heard.append("provider"))
        tool_registration.on_inactive(lambda: heard.append("tool"))
        unsubscribe = registration.on_inactive(lambda: heard.append("unsubscribed"))
        unsubscribe()
        async with anyio.create_task_group() as tg:
            tg.start_soon(scope.aclose)
            await wait_all_tasks_blocked()
            assert sorted(heard) == ["provider", "tool"]  # while the disposer still runs
            release.set()
        assert sorted(heard) == ["provider", "tool"]
        registration.on_inactive(lambda: heard.append("late"))
        tool_registration.on_inactive(lambda: heard.append("late tool"))
        assert heard[-2:] == ["late", "late tool"]


class TestAnAnswerThatExistsStands:
    @pytest.mark.parametrize("swap", [False, True], ids=["disposal", "reload"])
    async def test_answer_returned_in_the_revocation_turn_stands(self, swap: bool) -> None:
        """The provider's answer reaches the caller; the question is not asked again."""
        for attempt in range(20):
            context = Context(f"same-turn-{attempt}")
            old, new = GatedProvider("old"), GatedProvider("new")
            new.gate.set()
            old_scope = Scope("old", context=context)
            old_scope.provide(USER_INTERACTION, old)
            results: list[Any] = []
            with anyio.fail_after(scaled(5)):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_ask_into, context, QUESTION, results)
                    await wait_all_tasks_blocked()
                    async with AsyncExitStack() as stack:
                        if swap:
                            await stack.enter_async_context(context.swap(USER_INTERACTION))
                        # Same turn: the close starts, then the answer arrives (or the
                        # other way round): both orders are tried.
                        closed = anyio.Event()

                        async def close_old(scope: Scope = old_scope, done: Any = closed) -> None:
                            await scope.aclose()
                            done.set()

                        if attempt % 2:
                            tg.start_soon(close_old)
                            old.gate.set()
                        else:
                            old.gate.set()
                            tg.start_soon(close_old)
                        await closed.wait()
                        if swap:
                            context.provide(USER_INTERACTION, new)
            (result,) = results
            assert isinstance(result, AskUserQuestionAnswer), result
            if old.returned:
                assert result.answer == "Which database?@old"
                assert new.asked == []
            else:
                assert result.answer == "Which database?@new"
            registration = context.registration(USER_INTERACTION)
            if registration is not None:
                await registration.dispose()

    async def test_answer_and_signal_abort_in_the_same_turn(self) -> None:
        """An answer returned as the caller's signal fires is the result, not ASK_ABORTED."""
        for attempt in range(20):
            context = Context("abort-turn")
            provider = GatedProvider("p")
            registration = context.provide(USER_INTERACTION, provider)
            controller = AbortController()
            request = AskUserQuestionRequest("Colour?", signal=controller.signal)
            results: list[Any] = []
            async with anyio.create_task_group() as tg:
                tg.start_soon(_ask_into, context, request, results)
                await wait_all_tasks_blocked()
                if attempt % 2:
                    controller.abort("too late")
                    provider.gate.set()
                else:
                    provider.gate.set()
                    controller.abort("too late")
            (result,) = results
            if provider.returned:
                assert isinstance(result, AskUserQuestionAnswer), result
            else:
                assert isinstance(result, UserInteractionError)
                assert result.code == ErrorCode.ASK_ABORTED
            await registration.dispose()

    async def test_scripted_answers_are_given_once_across_many_swaps(self) -> None:
        """Many concurrent asks, swaps at random moments: every reply is used exactly once."""
        context = Context("scripted-swaps")
        rng = random.Random(7)
        given_answers: list[str] = []
        counter = iter(range(10_000))

        def reply(request: AskUserQuestionRequest) -> str:
            answer = f"{request.question}#{next(counter)}"
            given_answers.append(answer)
            return answer

        def make_provider() -> ScriptedProvider:
            return ScriptedProvider(reply)

        class Slow:
            def __init__(self) -> None:
                self.inner = make_provider()

            async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
                await anyio.sleep(rng.random() * 0.004)
                return await self.inner.ask(request)

        registration = context.provide(USER_INTERACTION, Slow())
        received: list[str] = []

        async def asker(index: int) -> None:
            for n in range(40):
                answer = await ask(AskUserQuestionRequest(f"q{index}.{n}"), context=context)
                received.append(answer.answer)

        with anyio.fail_after(scaled(30)):
            async with anyio.create_task_group() as tg:
                for index in range(4):
                    tg.start_soon(asker, index)
                for _ in range(60):
                    await anyio.sleep(rng.random() * 0.003)
                    async with context.swap(USER_INTERACTION):
                        await registration.dispose()
                        registration = context.provide(USER_INTERACTION, Slow())
        assert sorted(received) == sorted(given_answers)
        assert len(received) == 160
        await registration.dispose()


class TestQueuedQuestionsKeepTheirOrder:
    async def test_rejoining_asks_reach_the_replacement_in_arrival_order(self) -> None:
        """Five waiting questions come back to the new provider first-come first-served."""
        for attempt in range(10):
            context = Context(f"order-{attempt}")
            old = GatedProvider("old")
            new = GatedProvider("new")
            old_scope = Scope("old", context=context)
            old_scope.provide(USER_INTERACTION, old)
            results: list[Any] = []
            questions = [f"q{n}" for n in range(5)]
            with anyio.fail_after(scaled(5)):
                async with anyio.create_task_group() as tg:
                    for question in questions:
                        tg.start_soon(_ask_into, context, AskUserQuestionRequest(question), results)
                        await wait_all_tasks_blocked()
                    async with context.swap(USER_INTERACTION):
                        await old_scope.aclose()
                        # A caller arriving during the swap comes after the earlier ones.
                        tg.start_soon(_ask_into, context, AskUserQuestionRequest("late"), results)
                        await wait_all_tasks_blocked()
                        new_scope = Scope("new", context=context)
                        new_scope.provide(USER_INTERACTION, new)
                    await wait_all_tasks_blocked()
                    assert new.asked == [*questions, "late"]
                    new.gate.set()
            assert sorted(r.answer for r in results) == sorted(
                f"{q}@new" for q in [*questions, "late"]
            )
            await new_scope.aclose()

    async def test_a_rejoining_caller_that_gives_up_does_not_block_the_line(self) -> None:
        """A caller cancelled while it waits to rejoin leaves the line; the others go on."""
        context = Context("give-up")
        old, new = GatedProvider("old"), GatedProvider("new")
        new.gate.set()
        old_scope = Scope("old", context=context)
        old_scope.provide(USER_INTERACTION, old)
        results: list[Any] = []

        async def cancellable(task_status: Any) -> None:
            with anyio.CancelScope() as scope:
                task_status.started(scope)
                await ask(AskUserQuestionRequest("zeroth"), context=context)

        with anyio.fail_after(scaled(5)):
            async with anyio.create_task_group() as tg:
                zeroth = await tg.start(cancellable)
                await wait_all_tasks_blocked()
                for question in ("first", "second"):
                    tg.start_soon(_ask_into, context, AskUserQuestionRequest(question), results)
                    await wait_all_tasks_blocked()
                async with context.swap(USER_INTERACTION):
                    await old_scope.aclose()
                    zeroth.cancel()
                    await wait_all_tasks_blocked()
                    new_scope = Scope("new", context=context)
                    new_scope.provide(USER_INTERACTION, new)
        assert new.asked == ["first", "second"]
        assert [r.answer for r in results] == ["first@new", "second@new"]
        await new_scope.aclose()


REASONS: list[object] = ["user closed the tab", 0, False, 3.5, {"why": "gone"}, ("a", 1)]


class TestAbortReasonsAreAnyValue:
    @pytest.mark.parametrize("reason", REASONS, ids=repr)
    async def test_ask_fails_with_ask_aborted_carrying_the_reason(self, reason: object) -> None:
        context = Context("reasons")
        registration = context.provide(USER_INTERACTION, ScriptedProvider([Reply.never()]))
        controller = AbortController()
        request = AskUserQuestionRequest("Colour?", signal=controller.signal)
        results: list[Any] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(_ask_into, context, request, results)
            await wait_all_tasks_blocked()
            controller.abort(reason)
        (error,) = results
        assert isinstance(error, UserInteractionError)
        assert error.code == ErrorCode.ASK_ABORTED
        assert error.reason == reason
        assert type(error.reason) is type(reason)
        assert isinstance(error.__cause__, AbortError)
        assert error.__cause__.reason == reason
        assert controller.signal.reason == reason
        with pytest.raises(AbortError) as raised:
            controller.signal.raise_if_aborted()
        assert raised.value.reason == reason
        assert raised.value.code == "ABORTED"
        await registration.dispose()

    @pytest.mark.parametrize("reason", REASONS, ids=repr)
    async def test_an_already_aborted_signal_and_the_tool(self, reason: object) -> None:
        """ask_user_question reports ASK_ABORTED, never INTERNAL."""
        context = Context("tool-reasons")
        registration = context.provide(USER_INTERACTION, ScriptedProvider(["x"]))
        tool_registration = context.tools.register(ask_user_question_tool())
        result = await context.tools.execute(
            "ask_user_question",
            {"question": "Colour?"},
            signal=AbortSignal.abort(reason),
        )
        assert result.error is not None
        assert result.error["code"] == ErrorCode.ASK_ABORTED
        await tool_registration.dispose()
        await registration.dispose()

    async def test_none_and_no_reason_use_the_default_abort_error(self) -> None:
        for signal in (AbortSignal.abort(), AbortSignal.abort(None)):
            assert isinstance(signal.reason, AbortError)
            with pytest.raises(AbortError):
                signal.raise_if_aborted()
        controller = AbortController()
        controller.abort(None)
        assert controller.signal.aborted
        assert isinstance(controller.signal.reason, AbortError)

    async def test_any_wait_and_cancel_scope_carry_any_value(self) -> None:
        controller = AbortController()
        combined = AbortSignal.any([controller.signal, AbortSignal.timeout(60)])
        seen: list[object] = []
        combined.add_callback(seen.append)
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: _wait_into(combined, seen))
            await wait_all_tasks_blocked()
            controller.abort(0)
        assert seen == [0, 0]
        assert combined.reason == 0
        with pytest.raises(AbortError) as raised, combined.cancel_scope():
            await anyio.sleep_forever()
        assert raised.value.reason == 0


async def _wait_into(signal: AbortSignal, seen: list[object]) -> None:
    seen.append(await signal.wait())


JUNK = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | st.text(max_size=20)
    | st.binary(max_size=10),
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=8) | st.integers(), children, max_size=4)
    ),
    max_leaves=12,
)


class TestToolsExecuteNeverRaises:
    @pytest.mark.parametrize(
        "value",
        [[1, 2], [("text", "smuggled")], 5, 2.5, b"bytes", object(), {"text": [None, {}]}, "[1]"],
        ids=["list", "pairs", "int", "float", "bytes", "object", "nested", "json-list"],
    )
    async def test_invalid_input_values(self, value: object) -> None:
        """Each is INVALID_INPUT naming the problem; a list of pairs is not a mapping."""
        context = Context("junk")
        registration = context.tools.register(echo)
        result = await context.tools.execute("echo", value)  # type: ignore[arg-type]
        assert result.error is not None, result
        assert result.error["code"] == "INVALID_INPUT"
        assert "echo" in result.error["message"]
        await registration.dispose()

    @pytest.mark.parametrize("name", [None, 3, ["echo"], {"x": 1}], ids=repr)
    async def test_invalid_tool_names(self, name: object) -> None:
        context = Context("names")
        result = await context.tools.execute(name)  # type: ignore[arg-type]
        assert result.error is not None
        assert result.error["code"] == "TOOL_NOT_FOUND"

    @settings(
        max_examples=150,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(value=JUNK)
    async def test_any_value_is_a_result(self, value: object) -> None:
        """Whatever a model sends, the result is a value: ok or a documented error code."""
        context = Context("fuzz")
        registrations = [
            context.tools.register(echo),
            context.tools.register(ask_user_question_tool()),
            context.provide(USER_INTERACTION, ScriptedProvider([], default=Reply.recommended())),
        ]
        try:
            for name in ("echo", "ask_user_question"):
                result = await context.tools.execute(name, value)  # type: ignore[arg-type]
                if result.error is not None:
                    assert result.error["code"] in {
                        "INVALID_INPUT",
                        "INVALID_REQUEST",
                        "PROVIDER_FAILED",
                    }, result.error
        finally:
            for registration in registrations:
                await registration.dispose()

    @settings(max_examples=150, deadline=None)
    @given(value=JUNK)
    def test_from_dict_of_anything_is_a_user_interaction_error(self, value: object) -> None:
        for build, code in (
            (AskUserQuestionRequest.from_dict, ErrorCode.INVALID_REQUEST),
            (AskUserQuestionOption.from_dict, ErrorCode.INVALID_REQUEST),
            (AskUserQuestionAnswer.from_dict, ErrorCode.INVALID_ANSWER),
        ):
            try:
                build(value)  # type: ignore[arg-type]
            except UserInteractionError as error:
                assert error.code == code
