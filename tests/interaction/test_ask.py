"""ask(): providers, signals, cancellation, swaps, and the model-facing tool."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
import structlog
from tests._timing import scaled

from hotseam import AbortController, AbortSignal, Agent, Context, HarnessError, Scope
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

DB = AskUserQuestionRequest(
    "Which database?",
    header="Storage",
    options=(
        AskUserQuestionOption("Postgres", "pg", "Server database", recommended=True),
        AskUserQuestionOption("SQLite", description="A file"),
    ),
    agent=Agent("planner", "Planner"),
)


async def _ask_keeping_error(
    request: AskUserQuestionRequest, context: Context, errors: list[UserInteractionError]
) -> None:
    """Ask, and keep the UserInteractionError it ends with (for tasks that must not crash)."""
    try:
        await ask(request, context=context)
    except UserInteractionError as error:
        errors.append(error)


def _context_with(provider: object) -> Context:
    context = Context("ask")
    context.provide(USER_INTERACTION, provider)
    return context


class TestAnswers:
    async def test_the_active_provider_answers(self) -> None:
        """ask() returns the provider's answer, with the option filled in."""
        provider = ScriptedProvider(["SQLite"])
        answer = await ask(DB, context=_context_with(provider))
        assert answer.answer == "SQLite"
        assert answer.option == DB.choices[1]
        assert provider.requests == [DB]

    async def test_the_current_context_is_used_by_default(self) -> None:
        """Without context=, ask() finds the context set by use_context."""
        from hotseam import use_context

        with use_context(_context_with(ScriptedProvider(["pg"]))):
            assert (await ask(DB)).answer == "pg"

    async def test_a_hundred_concurrent_asks(self) -> None:
        """Each caller gets its own answer."""
        provider = ScriptedProvider(lambda request: request.question.upper())
        context = _context_with(provider)
        results: dict[int, str] = {}

        async def one(index: int) -> None:
            answer = await ask(AskUserQuestionRequest(f"question {index}?"), context=context)
            results[index] = answer.answer

        async with anyio.create_task_group() as tg:
            for index in range(100):
                tg.start_soon(one, index)
        assert results == {index: f"QUESTION {index}?" for index in range(100)}
        assert len(provider.requests) == 100


class TestFailures:
    async def test_no_provider_fails_at_once(self) -> None:
        """NO_PROVIDER, immediately, when nothing provides the seam and no swap runs."""
        with anyio.fail_after(scaled(1)), pytest.raises(UserInteractionError) as caught:
            await ask(DB, context=Context("empty"))
        assert caught.value.code == ErrorCode.NO_PROVIDER
        assert "user-interaction" in str(caught.value)

    async def test_an_invalid_request_never_reaches_the_provider(self) -> None:
        """INVALID_REQUEST; the provider records nothing."""
        provider = ScriptedProvider(["x"])
        with pytest.raises(UserInteractionError) as caught:
            await ask(AskUserQuestionRequest(" "), context=_context_with(provider))
        assert caught.value.code == ErrorCode.INVALID_REQUEST
        assert provider.requests == []

    async def test_an_answer_outside_the_options_is_invalid(self) -> None:
        """A provider breaking the no-custom rule yields INVALID_ANSWER."""
        request = AskUserQuestionRequest("Pick", options=DB.options, allow_custom=False)
        provider = ScriptedProvider([Reply.exactly("MySQL")])
        with pytest.raises(UserInteractionError) as caught:
            await ask(request, context=_context_with(provider))
        assert caught.value.code == ErrorCode.INVALID_ANSWER

    async def test_an_unexpected_provider_error_is_provider_failed_with_cause(self) -> None:
        """Anything that is not a HarnessError becomes PROVIDER_FAILED, original as cause."""

        class Broken:
            async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
                raise OSError("terminal went away")

        with pytest.raises(UserInteractionError) as caught:
            await ask(DB, context=_context_with(Broken()))
        assert caught.value.code == ErrorCode.PROVIDER_FAILED
        assert isinstance(caught.value.__cause__, OSError)
        assert "terminal went away" in str(caught.value)

    async def test_ui_outcomes_pass_through(self) -> None:
        """ASK_DECLINED (and ASK_CANCELLED) from the UI reach the caller unchanged."""
        provider = ScriptedProvider([Reply.fail(ErrorCode.ASK_DECLINED, "no thanks")])
        with pytest.raises(UserInteractionError) as caught:
            await ask(DB, context=_context_with(provider))
        assert caught.value.code == ErrorCode.ASK_DECLINED
        assert str(caught.value) == "no thanks"

    async def test_a_time_limit_ends_with_ask_timeout_and_picks_nothing(self) -> None:
        """ASK_TIMEOUT; the provider saw cancellation; no option was chosen for the human."""
        provider = ScriptedProvider([Reply.never()])
        with anyio.fail_after(scaled(2)), pytest.raises(UserInteractionError) as caught:
            await ask(DB, context=_context_with(provider), timeout=0.02)
        assert caught.value.code == ErrorCode.ASK_TIMEOUT
        assert provider.cancelled == [DB]
        assert provider.answers == []


class TestAbort:
    async def test_the_signal_stops_the_provider_mid_question(self) -> None:
        """ASK_ABORTED, promptly, and the provider observed cancellation."""
        provider = ScriptedProvider([Reply.never()])
        controller = AbortController()
        request = DB.with_signal(controller.signal)
        context = _context_with(provider)
        errors: list[UserInteractionError] = []

        with anyio.fail_after(scaled(2)):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_ask_keeping_error, request, context, errors)
                await provider.wait_for_requests(1)
                controller.abort(KeyError("user pressed stop"))
        (error,) = errors
        assert error.code == ErrorCode.ASK_ABORTED
        assert isinstance(error.__cause__, KeyError)
        assert provider.cancelled == [request]

    async def test_an_already_aborted_signal_asks_nobody(self) -> None:
        """ASK_ABORTED before the provider is contacted."""
        provider = ScriptedProvider(["pg"])
        request = DB.with_signal(AbortSignal.abort())
        with pytest.raises(UserInteractionError) as caught:
            await ask(request, context=_context_with(provider))
        assert caught.value.code == ErrorCode.ASK_ABORTED
        assert provider.requests == []

    async def test_a_signal_timeout_is_an_abort(self) -> None:
        """AbortSignal.timeout works as the caller's signal."""
        provider = ScriptedProvider([Reply.never()])
        request = DB.with_signal(AbortSignal.timeout(0.02))
        with anyio.fail_after(scaled(2)), pytest.raises(UserInteractionError) as caught:
            await ask(request, context=_context_with(provider))
        assert caught.value.code == ErrorCode.ASK_ABORTED

    async def test_cancelling_the_caller_propagates_as_cancellation(self) -> None:
        """Plain cancellation is not turned into an error; the provider saw it."""
        provider = ScriptedProvider([Reply.never()])
        context = _context_with(provider)
        outcomes: list[str] = []
        with anyio.fail_after(scaled(2)):
            async with anyio.create_task_group() as tg:

                async def asker() -> None:
                    try:
                        await ask(DB, context=context)
                    except anyio.get_cancelled_exc_class():
                        outcomes.append("cancelled")
                        raise

                tg.start_soon(asker)
                await provider.wait_for_requests(1)
                tg.cancel_scope.cancel()
        assert outcomes == ["cancelled"]
        assert provider.cancelled == [DB]


class TestSwaps:
    async def test_a_question_migrates_to_the_replacement_provider(self) -> None:
        """Old provider sees cancellation, new one gets the same request, caller its answer."""
        context = Context("swap")
        old = ScriptedProvider([Reply.never()], name="old")
        new = ScriptedProvider(["SQLite"], name="new")
        old_scope = Scope("generation-1", context=context)
        old_scope.provide(USER_INTERACTION, old)
        answers: list[AskUserQuestionAnswer] = []

        async def asker() -> None:
            answers.append(await ask(DB, context=context))

        with anyio.fail_after(scaled(2)):
            async with anyio.create_task_group() as tg:
                tg.start_soon(asker)
                await old.wait_for_requests(1)
                async with context.swap(USER_INTERACTION):
                    await old_scope.aclose()
                    assert old.cancelled == [DB]  # withdrawn before the new one is live
                    new_scope = Scope("generation-2", context=context)
                    new_scope.provide(USER_INTERACTION, new)
        assert old.cancelled == [DB]
        assert new.requests == [DB]
        assert [a.answer for a in answers] == ["SQLite"]
        await new_scope.aclose()

    async def test_asks_arriving_during_a_swap_wait_for_it(self) -> None:
        """No NO_PROVIDER in the gap: the ask waits and the new provider answers."""
        context = Context("swap")
        registration = context.provide(USER_INTERACTION, ScriptedProvider(["unused"]))
        answers: list[str] = []
        with anyio.fail_after(scaled(2)):
            async with anyio.create_task_group() as tg, context.swap(USER_INTERACTION):
                await registration.dispose()

                async def asker() -> None:
                    answers.append((await ask(DB, context=context)).answer)

                tg.start_soon(asker)
                await anyio.sleep(0.01)
                assert answers == []
                context.provide(USER_INTERACTION, ScriptedProvider(["pg"]))
        assert answers == ["pg"]

    async def test_a_pending_ask_whose_swap_ends_without_a_provider_is_aborted(self) -> None:
        """ASK_ABORTED (the provider went away): NO_PROVIDER, then the swap's error, as causes."""
        context = Context("swap")
        registration = context.provide(USER_INTERACTION, ScriptedProvider([Reply.never()]))
        errors: list[UserInteractionError] = []

        with anyio.fail_after(scaled(2)):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_ask_keeping_error, DB, context, errors)
                await registration.provider.wait_for_requests(1)  # type: ignore[attr-defined]
                with pytest.raises(SyntaxError):
                    async with context.swap(USER_INTERACTION):
                        await registration.dispose()
                        raise SyntaxError("the new provider module does not compile")
        (error,) = errors
        assert error.code == ErrorCode.ASK_ABORTED
        assert "ended without a provider" in error.message
        missing = error.__cause__
        assert isinstance(missing, UserInteractionError)
        assert missing.code == ErrorCode.NO_PROVIDER
        assert isinstance(missing.__cause__, SyntaxError)

    async def test_a_provider_disposed_without_replacement_aborts_the_ask(self) -> None:
        """ASK_ABORTED saying the provider was disposed."""
        context = Context("gone")
        provider = ScriptedProvider([Reply.never()])
        registration = context.provide(USER_INTERACTION, provider)
        errors: list[UserInteractionError] = []

        with anyio.fail_after(scaled(2)):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_ask_keeping_error, DB, context, errors)
                await provider.wait_for_requests(1)
                await registration.dispose()
        (error,) = errors
        assert error.code == ErrorCode.ASK_ABORTED
        assert "was disposed" in str(error)
        assert provider.cancelled == [DB]

    async def test_a_provider_that_raises_when_withdrawn_still_migrates(self) -> None:
        """A UI that turns cancellation into its own error is still treated as withdrawn."""

        class Stubborn:
            def __init__(self) -> None:
                self.started = anyio.Event()

            async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
                self.started.set()
                try:
                    await anyio.sleep_forever()
                finally:
                    raise UserInteractionError("UI closed", "ASK_CANCELLED")

        context = Context("stubborn")
        stubborn = Stubborn()
        registration = context.provide(USER_INTERACTION, stubborn)
        answers: list[str] = []

        async def asker() -> None:
            answers.append((await ask(DB, context=context)).answer)

        with anyio.fail_after(scaled(2)):
            async with anyio.create_task_group() as tg:
                tg.start_soon(asker)
                await stubborn.started.wait()
                async with context.swap(USER_INTERACTION):
                    await registration.dispose()
                    context.provide(USER_INTERACTION, ScriptedProvider(["pg"]))
        assert answers == ["pg"]


class TestTool:
    async def test_the_tool_answers_with_answer_and_option(self) -> None:
        """Output is {"answer", "option"}; agent and signal come from execute()."""
        provider = ScriptedProvider(["SQLite"])
        context = _context_with(provider)
        context.tools.register(ask_user_question_tool())
        signal = AbortController().signal
        result = await context.tools.execute(
            "ask_user_question",
            {
                "question": "Which database?",
                "options": [{"label": "Postgres", "recommended": True}, {"label": "SQLite"}],
                "allowCustom": False,
            },
            agent=Agent("planner", "Planner"),
            signal=signal,
        )
        assert result.output == {"answer": "SQLite", "option": {"label": "SQLite"}}
        (request,) = provider.requests
        assert request.agent == Agent("planner", "Planner")
        assert request.signal is signal
        assert request.allow_custom is False

    @pytest.mark.parametrize(
        ("script", "tool_input", "code"),
        [
            (None, {"question": "Q?"}, ErrorCode.NO_PROVIDER),
            ([Reply.fail(ErrorCode.ASK_DECLINED)], {"question": "Q?"}, ErrorCode.ASK_DECLINED),
            (["x"], {"question": "  "}, ErrorCode.INVALID_REQUEST),
            (
                [Reply.exactly("c")],
                {
                    "question": "Q?",
                    "options": [{"label": "a"}, {"label": "b"}],
                    "allow_custom": False,
                },
                ErrorCode.INVALID_ANSWER,
            ),
        ],
        ids=["no-provider", "declined", "invalid-request", "invalid-answer"],
    )
    async def test_failures_keep_name_and_code(
        self, script: list[Reply | str] | None, tool_input: dict[str, object], code: str
    ) -> None:
        """Through ctx.tools.execute, the model reads {"name": "UserInteractionError", code}."""
        context = Context("tool") if script is None else _context_with(ScriptedProvider(script))
        context.tools.register(ask_user_question_tool())
        result = await context.tools.execute("ask_user_question", tool_input)
        assert result.error is not None
        assert result.error["name"] == "UserInteractionError"
        assert result.error["code"] == code

    async def test_tool_input_of_the_wrong_type_is_invalid_input(self) -> None:
        """Type errors are caught by the tool layer and name the field."""
        context = _context_with(ScriptedProvider(["x"]))
        context.tools.register(ask_user_question_tool())
        result = await context.tools.execute("ask_user_question", {"question": "Q?", "options": 3})
        assert result.error is not None
        assert result.error["code"] == "INVALID_INPUT"
        assert "options" in result.error["message"]

    async def test_the_tool_definition_describes_its_use(self) -> None:
        """The description tells a model when to use it and how options behave."""
        context = Context("tool")
        context.tools.register(ask_user_question_tool())
        (definition,) = context.tools.definitions("anthropic")
        assert definition["name"] == "ask_user_question"
        for phrase in ("recommended", "allow_custom", "options", "ASK_DECLINED"):
            assert phrase in definition["description"]
        properties = definition["input_schema"]["properties"]
        assert set(properties) == {"question", "header", "options", "allowCustom", "questions"}


class TestLogging:
    async def test_ask_events_and_answer_text_only_at_debug(self) -> None:
        """ask.started/answered carry ids and durations; the answer text is a debug event."""
        with structlog.testing.capture_logs() as events:
            await ask(DB, context=_context_with(ScriptedProvider(["secret answer"])))
            with pytest.raises(HarnessError):
                await ask(DB, context=Context("empty"))
        by_name: dict[str, dict[str, object]] = {}
        for event in events:
            by_name.setdefault(event["event"], event)
        started, answered = by_name["ask.started"], by_name["ask.answered"]
        assert started["agent"] == "planner"
        assert answered["question_id"] == started["question_id"]
        assert "duration_ms" in answered
        assert "ScriptedProvider" in str(answered["provider"])
        assert by_name["ask.failed"]["code"] == ErrorCode.NO_PROVIDER
        leaking = [e for e in events if "secret answer" in str(e) and e["log_level"] != "debug"]
        assert leaking == []
        assert by_name["ask.answer_text"]["log_level"] == "debug"

    async def test_a_provider_crash_is_logged_at_error_with_where_it_raised(self) -> None:
        """ask.provider_failed: error level, the provider's own line (not the library frame
        below it), its traceback without ask()'s frames or locals; no question, no answer."""
        provider = _CrashingSecondTime()
        context = _context_with(provider)
        with structlog.testing.capture_logs() as events:
            assert (await ask(DB, context=context)).answer == "secret answer"
            with pytest.raises(UserInteractionError) as caught:
                await ask(DB, context=context)
        assert caught.value.code == ErrorCode.PROVIDER_FAILED
        (crash,) = [event for event in events if event["event"] == "ask.provider_failed"]
        (_, second) = [event for event in events if event["event"] == "ask.started"]
        assert crash["log_level"] == "error"
        assert crash["question_id"] == second["question_id"]
        assert crash["agent"] == "planner"
        assert crash["provider"] == f"{__name__}._CrashingSecondTime"
        assert crash["error_type"] == "JSONDecodeError"
        assert crash["location"] == f"{__file__}:{_line_of(CRASH_LINE)}"
        assert crash["withdrawn"] is False
        text = str(crash["traceback"])
        assert CRASH_LINE in text
        assert "    settings = _settings()" in text
        assert "json.decoder.JSONDecodeError: Expecting value" in text
        assert "_ask_until_answered" not in text  # the frames of ask() are left out
        assert "the ask fails with PROVIDER_FAILED" in str(crash["summary"])
        leaking = [
            event
            for event in events
            if event["log_level"] != "debug"
            and any(secret in str(event) for secret in ("secret answer", "Which database"))
        ]
        assert leaking == []

    async def test_a_crash_of_a_provider_being_replaced_is_a_warning(self) -> None:
        """A UI that raises its own error while withdrawn: logged at warning, the question
        is asked again on the new provider."""

        class Crashing:
            def __init__(self) -> None:
                self.started = anyio.Event()

            async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
                self.started.set()
                try:
                    await anyio.sleep_forever()
                finally:
                    raise RuntimeError("the widget was already gone")

        context = Context("crashing")
        crashing = Crashing()
        registration = context.provide(USER_INTERACTION, crashing)
        answers: list[str] = []

        async def asker() -> None:
            answers.append((await ask(DB, context=context)).answer)

        with structlog.testing.capture_logs() as events, anyio.fail_after(scaled(2)):
            async with anyio.create_task_group() as tg:
                tg.start_soon(asker)
                await crashing.started.wait()
                async with context.swap(USER_INTERACTION):
                    await registration.dispose()
                    context.provide(USER_INTERACTION, ScriptedProvider(["pg"]))
        assert answers == ["pg"]
        (crash,) = [event for event in events if event["event"] == "ask.provider_failed"]
        assert crash["log_level"] == "warning"
        assert crash["withdrawn"] is True
        assert "RuntimeError: the widget was already gone" in str(crash["traceback"])
        assert "the question is asked again" in str(crash["summary"])


SETTINGS = "not json"
CRASH_LINE = "    return json.loads(SETTINGS)  # CRASH-LINE"


def _settings() -> object:
    return json.loads(SETTINGS)  # CRASH-LINE


class _CrashingSecondTime:
    """Answers once, then crashes inside a library call (json) made by its own code."""

    def __init__(self) -> None:
        self.calls = 0

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        self.calls += 1
        if self.calls == 1:
            return AskUserQuestionAnswer("secret answer")
        settings = _settings()
        return AskUserQuestionAnswer(str(settings))


def _line_of(text: str) -> int:
    """The number of the line of this file that is ``text``."""
    return Path(__file__).read_text(encoding="utf-8").splitlines().index(text) + 1
