"""The stepper: an ask of several questions (or one multi-select or skippable question),
shown one question after the other, in plain lines (a real pipe, asyncio and trio) and on
the prompt (prompt_toolkit's pipe input); a reload in the middle keeps what was given.

The pseudo-terminal tests with real keystrokes are in ``test_stepper_pty.py``.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import anyio
import pytest
from prompt_toolkit.input import PipeInput, create_pipe_input
from tests._timing import scaled

from hotseam import Context, Scope
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ErrorCode,
    Question,
    QuestionAnswer,
    UserInteractionError,
    ask,
    validate_request,
)
from hotseam.providers._terminal._protocol import BACK, Reprompt, resolve_step
from hotseam.providers._terminal._stepper import Steps
from hotseam.providers.terminal import Draft, TerminalProvider

from .conftest import STACK, Pipe, Screen, ask_across_a_reload, until

pytestmark = pytest.mark.anyio

FEATURES = validate_request(STACK).questions[1]
NOTES = validate_request(STACK).questions[2]
AUTH, BILLING, SEARCH = FEATURES.choices
UP, DOWN, LEFT, PAGE_UP = "\x1b[A", "\x1b[B", "\x1b[D", "\x1b[5~"


def _entries(answer: AskUserQuestionAnswer) -> list[tuple[str, tuple[str, ...], str | None]]:
    return [(entry.id, entry.values, entry.skipped) for entry in answer.answers]


def _strict(**fields: object) -> Question:
    question = Question(
        "Which?",
        options=(AskUserQuestionOption("Tea, green"), AskUserQuestionOption("Coffee")),
        multi_select=True,
        allow_custom=False,
        id="drink",
        **fields,  # type: ignore[arg-type]
    )
    return validate_request(AskUserQuestionRequest.of([question])).questions[0]


@pytest.mark.parametrize(
    ("question", "reply", "ticked", "ticking", "expected"),
    [
        (FEATURES, "1,3", {0, 1}, False, ("Auth", "Search")),
        (FEATURES, " auth ,SEARCH ", set(), False, ("Auth", "Search")),
        (FEATURES, "", {0, 1}, False, ("Auth", "Billing")),
        (FEATURES, "3", {0}, True, ("Auth", "Search")),  # typed names add to the ticks
        (FEATURES, "1, rate limits, caching", set(), False, ("Auth", "rate limits, caching")),
        (FEATURES, "1,2,3", set(), False, "3 chosen, but this question takes at most 2."),
        (
            FEATURES,
            "",
            {0, 1, 2},
            True,
            "3 chosen, but this question takes at most 2: untick 1 with Space.",
        ),
        (
            FEATURES,
            "own",
            {0, 1},
            True,
            "3 chosen (your own answer counts as one), but this question takes at most 2: "
            "untick 1 with Space.",
        ),
        (FEATURES, "1, 7", set(), False, "There is no option 7: choose a number from 1 to 3."),
        (FEATURES, "/skip", set(), False, "This question cannot be skipped: it needs an answer."),
        (_strict(), "tea, GREEN", set(), False, ("Tea, green",)),  # a label with a comma
        (
            _strict(),
            "2, milk",
            set(),
            False,
            "'milk' is not an option: type numbers or labels separated by commas "
            "(Tea, green, Coffee).",
        ),
        (
            _strict(min_selections=2),
            "",
            set(),
            True,
            "0 chosen, but this question takes at least 2: tick more with Space.",
        ),
        (
            _strict(min_selections=2),
            "2",
            set(),
            False,
            "1 chosen, but this question takes at least 2: type numbers or labels separated "
            "by commas (1,3).",
        ),
        (_strict(min_selections=0), "", set(), False, ()),
    ],
)
def test_a_reply_to_a_multi_select_question(
    question: Question,
    reply: str,
    ticked: set[int],
    ticking: bool,
    expected: tuple[str, ...] | str,
) -> None:
    """Numbers, labels or values separated by commas; the rest is one own answer; an empty
    reply sends the ticks; the bounds are said with the count."""
    result = resolve_step(question, reply, ticked=frozenset(ticked), first=False, ticking=ticking)
    if isinstance(expected, str):
        assert result == Reprompt(expected)
    else:
        assert isinstance(result, QuestionAnswer)
        assert result.values == expected


def test_the_commands_of_a_stepper() -> None:
    """/back goes back (not from the first question); /skip skips a skippable question."""
    assert resolve_step(NOTES, " /BACK ", ticked=frozenset(), first=False, ticking=False) == BACK
    refused = resolve_step(NOTES, "/back", ticked=frozenset(), first=True, ticking=False)
    assert refused == Reprompt("This is the first question: there is none before it.")
    skipped = resolve_step(NOTES, "/skip", ticked=frozenset(), first=False, ticking=True)
    assert skipped == QuestionAnswer.skip(NOTES)


def test_the_provider_takes_several_questions_at_once() -> None:
    assert TerminalProvider.multiple_questions is True


# -- plain lines ------------------------------------------------------------------------------


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Plain lines run on both backends; the prompt tests below pin asyncio."""
    return str(request.param)


async def test_plain_lines_step_through_a_pipe(pipe: Pipe) -> None:
    """`1,3` picks two options; a refusal, /back, Enter for the recommended, /skip; then a
    second ask whose input ends at question 2 is dismissed whole."""
    out = io.StringIO()
    context = Context("lines")
    pipe.write("2\n1,2,3\n1, 3\n/back\n\n/skip\n")
    async with Scope("ui", context=context) as scope:
        scope.provide(USER_INTERACTION, TerminalProvider(mode="lines", input=pipe.fd, output=out))
        with anyio.fail_after(scaled(5)):
            answer = await ask(STACK, context=context)
        assert _entries(answer) == [
            ("q1", ("SQLite",), None),
            ("features", ("Auth", "Billing"), None),
            ("notes", (), "skipped"),
        ]
        transcript = out.getvalue()
        assert (
            "> 2\n-> SQLite\n"
            "\n"
            "[Features] Planner asks (2 of 3):\n"
            "Which features?\n"
            "  1. Auth (recommended)\n"
            "  2. Billing (recommended)\n"
            "  3. Search\n"
            "     Full-text search\n"
            "Pick 1 to 2: type numbers or labels separated by commas (1,3), or add your own "
            "answer; Enter alone picks Auth and Billing.\n"
            "Type /back for the previous question.\n"
            "> 1,2,3\n"
            "  3 chosen, but this question takes at most 2.\n"
            "> 1, 3\n"
            "-> Auth, Search\n"
            "\n"
            "[Notes] Planner asks (3 of 3):\n"
            "Anything else?\n"
            "Type your answer.\n"
            "Type /back for the previous question or /skip to skip this one.\n"
            "> /back\n"
            "(back to question 2 of 3)\n"
        ) in transcript
        assert transcript.endswith(
            "> \n-> Auth, Billing\n\n[Notes] Planner asks (3 of 3):\nAnything else?\n"
            "Type your answer.\nType /back for the previous question or /skip to skip this "
            "one.\n> /skip\n-> (skipped)\n(all 3 answers sent)\n"
        )
        pipe.write("\n")
        pipe.close_writer()
        with anyio.fail_after(scaled(5)), pytest.raises(UserInteractionError) as caught:
            await ask(STACK, context=context)
    assert caught.value.code == ErrorCode.ASK_CANCELLED
    assert caught.value.message.endswith("at question 2 of 3; the whole ask is dismissed")
    assert out.getvalue().endswith("> \n(dismissed: input ended)\n")


async def test_plain_lines_resume_after_a_reload_with_the_answers_given(pipe: Pipe) -> None:
    """The provider is replaced at question 2: the new one (same Draft) resumes there with
    question 1's answer kept, and is not asked question 1 again."""
    out = io.StringIO()
    draft = Draft()
    answer = await ask_across_a_reload(
        STACK,
        TerminalProvider(mode="lines", input=pipe.fd, output=out, draft=draft, banner="gen 1"),
        TerminalProvider(mode="lines", input=pipe.fd, output=out, draft=draft, banner="gen 2"),
        pipe=pipe,
        before="2\n",
        ready=lambda: "(2 of 3)" in out.getvalue() and out.getvalue().endswith("> "),
        after="1,3\nship it\n",
    )
    assert _entries(answer) == [  # type: ignore[arg-type]
        ("q1", ("SQLite",), None),
        ("features", ("Auth", "Search"), None),
        ("notes", ("ship it",), None),
    ]
    after = out.getvalue().split("(question withdrawn)\n")[1]
    assert after.startswith(
        "\ngen 2\n(resumed: 1 answer kept from before)\n[Features] Planner asks (2 of 3):\n"
    )
    assert "Which database?" not in after
    assert draft.take_steps(None, STACK) is None  # taken once, nothing left behind


async def test_a_time_limit_ends_the_stepper_and_keeps_no_draft(pipe: Pipe) -> None:
    """ASK_TIMEOUT for the whole ask; the answer to question 1 is not kept for later."""
    draft = Draft()
    provider = TerminalProvider(
        mode="lines", input=pipe.fd, output=io.StringIO(), draft=draft, timeout=0.2
    )
    pipe.write("2\n")
    with anyio.fail_after(scaled(5)), pytest.raises(UserInteractionError) as caught:
        await provider.ask(STACK)
    assert caught.value.code == ErrorCode.ASK_TIMEOUT
    assert draft.take_steps(None, validate_request(STACK)) is None


# -- the prompt -------------------------------------------------------------------------------


@pytest.fixture
def keys() -> Iterator[PipeInput]:
    with create_pipe_input() as pipe_input:
        yield pipe_input


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_prompt_resumes_with_ticks_place_and_typed_text(keys: PipeInput) -> None:
    """Question 1 answered, question 2's ticks changed and sent, "ship it" typed into
    question 3 with the cursor moved: the provider is replaced. The new one resumes at
    question 3 with the text and cursor; going back (PageUp) shows question 2's ticks."""
    screen = Screen(rows=80)
    context = Context("reload")
    draft = Draft()
    old = TerminalProvider(input=keys, output=screen.output, draft=draft, banner="gen 1")
    new = TerminalProvider(input=keys, output=screen.output, draft=draft, banner="gen 2")
    result: list[AskUserQuestionAnswer] = []

    async def agent() -> None:
        result.append(await ask(STACK, context=context))

    with anyio.fail_after(scaled(5)):
        async with anyio.create_task_group() as tg:
            first = Scope("generation 1", context=context)
            first.provide(USER_INTERACTION, old)
            tg.start_soon(agent)
            keys.send_text("2\r")
            await until(lambda: "[Features] Planner asks (2 of 3):" in screen.lines)
            keys.send_text(" \r")  # untick Auth: Billing alone
            await until(lambda: "[Notes] Planner asks (3 of 3):" in screen.lines)
            keys.send_text("ship it" + LEFT * 3 + "\x0c")  # Ctrl-L redraws once all is read
            await until(lambda: screen.lines[-1:] == ["> ship it"])
            async with context.swap(USER_INTERACTION):
                await first.aclose()
                second = Scope("generation 2", context=context)
                second.provide(USER_INTERACTION, new)
            await until(lambda: "gen 2" in screen.text and screen.lines[-1:] == ["> ship it"])
            assert "(resumed: 2 answers kept from before)" in screen.lines
            keys.send_text(PAGE_UP)
            await until(lambda: "(back to question 2 of 3)" in screen.lines)
            await until(lambda: screen.lines[-1:] == [">"])
            ticks = [row for row in screen.lines if "] " in row][-3:]
            assert ticks == [
                "> [ ] 1. Auth (recommended)",
                "  [x] 2. Billing (recommended)",
                "  [ ] 3. Search",
            ]
            keys.send_text("\r")
            await until(lambda: screen.lines[-1:] == ["> ship it"])
            keys.send_text("ped\r")
        await second.aclose()
    assert _entries(result[0]) == [
        ("q1", ("SQLite",), None),
        ("features", ("Billing",), None),
        ("notes", ("shipped it",), None),
    ]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_prompt_resumes_with_the_highlight_where_it_was(keys: PipeInput) -> None:
    """Question 2 (multi-select): Down twice, so the highlight is on Search, and Space
    ticks it; the provider is replaced. The new prompt shows the highlight on Search
    still (not back on option 1) with the ticks kept, and Space there unticks Search."""
    screen = Screen(rows=80)
    context = Context("reload")
    draft = Draft()
    old = TerminalProvider(input=keys, output=screen.output, draft=draft, banner="gen 1")
    new = TerminalProvider(input=keys, output=screen.output, draft=draft, banner="gen 2")
    result: list[AskUserQuestionAnswer] = []

    def options() -> list[str]:
        return [row for row in screen.lines if "] " in row][-3:]

    async def agent() -> None:
        result.append(await ask(STACK, context=context))

    with anyio.fail_after(scaled(5)):
        async with anyio.create_task_group() as tg:
            first = Scope("generation 1", context=context)
            first.provide(USER_INTERACTION, old)
            tg.start_soon(agent)
            keys.send_text("2\r")
            await until(lambda: "[Features] Planner asks (2 of 3):" in screen.lines)
            keys.send_text(DOWN + DOWN + " ")
            await until(lambda: options()[2:] == ["> [x] 3. Search"])
            async with context.swap(USER_INTERACTION):
                await first.aclose()
                second = Scope("generation 2", context=context)
                second.provide(USER_INTERACTION, new)
            await until(lambda: "gen 2" in screen.text and screen.lines[-1:] == [">"])
            assert "(resumed: 1 answer kept from before)" in screen.lines
            assert options() == [
                "  [x] 1. Auth (recommended)",
                "  [x] 2. Billing (recommended)",
                "> [x] 3. Search",
            ]
            keys.send_text(" ")  # where the highlight is: Search
            await until(lambda: options()[2:] == ["> [ ] 3. Search"])
            keys.send_text("\r")
            await until(lambda: "[Notes] Planner asks (3 of 3):" in screen.lines)
            keys.send_text("none\r")
        await second.aclose()
    assert _entries(result[0]) == [
        ("q1", ("SQLite",), None),
        ("features", ("Auth", "Billing"), None),
        ("notes", ("none",), None),
    ]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_one_multi_select_question_is_a_stepper_without_a_place(keys: PipeInput) -> None:
    """A one-question ask that is multi-select: ticks and Space, no "1 of 1", no summary."""
    screen = Screen()
    request = AskUserQuestionRequest.of([FEATURES])
    keys.send_text(DOWN + DOWN + " " + UP + " \r")  # tick Search, untick Billing
    context = Context("one")
    async with Scope("ui", context=context) as scope:
        scope.provide(USER_INTERACTION, TerminalProvider(input=keys, output=screen.output))
        with anyio.fail_after(scaled(5)):
            answer = await ask(request, context=context)
    assert answer.answer == "Auth, Search"
    assert _entries(answer) == [("features", ("Auth", "Search"), None)]
    assert screen.lines[:2] == ["", "[Features]"]
    assert screen.lines[-6:] == [
        "  [x] 3. Search",
        "         Full-text search",
        "Pick 1 to 2, or add your own answer: Space ticks, Enter sends what is ticked.",
        "Up/Down moves; Ctrl-C or Ctrl-D dismisses the question.",
        ">",
        "-> Auth, Search",
    ]


def test_a_draft_keeps_steps_per_ask() -> None:
    """By ask id and questions, once; nothing done is forgotten; at most 16 asks."""
    request = validate_request(STACK)
    draft = Draft()
    steps = Steps(position=1, answers=(QuestionAnswer.chosen(request.questions[0], ["pg"]),))
    draft.keep_steps("ask-1", request, steps)
    assert draft.take_steps("ask-2", request) is None
    assert (
        draft.take_steps("ask-1", validate_request(AskUserQuestionRequest.of([FEATURES]))) is None
    )
    assert draft.take_steps("ask-1", request) == steps
    assert draft.take_steps("ask-1", request) is None
    draft.keep_steps("ask-1", request, steps)
    draft.keep_steps("ask-1", request, Steps())
    assert draft.take_steps("ask-1", request) is None
    for number in range(20):
        draft.keep_steps(f"ask-{number}", request, steps)
    assert draft.take_steps("ask-3", request) is None
    assert draft.take_steps("ask-4", request) == steps
