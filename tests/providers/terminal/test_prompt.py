"""The prompt_toolkit path, on prompt_toolkit's pipe input (asyncio only, by nature).

``create_pipe_input()`` stands in for the keyboard; ``DummyOutput`` discards the drawing, or
a :class:`~.conftest.Screen` renders it in a pyte screen to check what the human sees.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator

import anyio
import pytest
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput
from tests._timing import scaled

from hotseam import Context, Scope
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ErrorCode,
    UserInteractionError,
    ask,
)
from hotseam.providers.terminal import TerminalProvider

from .conftest import DB, FREE, STRICT, Screen, until

pytestmark = pytest.mark.anyio

POSTGRES, SQLITE, DUCKDB = DB.choices
YES, NO = STRICT.choices


@pytest.fixture
def anyio_backend() -> str:
    """prompt_toolkit runs on asyncio only."""
    return "asyncio"


@pytest.fixture
def keys() -> Iterator[PipeInput]:
    """The keyboard: ``keys.send_text("2\\r")``."""
    with create_pipe_input() as pipe_input:
        yield pipe_input


async def _ask(
    provider: TerminalProvider, request: AskUserQuestionRequest
) -> AskUserQuestionAnswer:
    with anyio.fail_after(scaled(5)):
        return await provider.ask(request)


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("2\r", AskUserQuestionAnswer("SQLite", SQLITE)),
        ("sQLite\r", AskUserQuestionAnswer("SQLite", SQLITE)),
        ("\r", AskUserQuestionAnswer("pg", POSTGRES)),
        ("MySQL 8\r", AskUserQuestionAnswer("MySQL 8")),
        ("7\r3\r", AskUserQuestionAnswer("DuckDB", DUCKDB)),
    ],
    ids=["number", "label", "empty-recommended", "custom", "invalid-then-number"],
)
async def test_typed_replies_answer(
    keys: PipeInput, typed: str, expected: AskUserQuestionAnswer
) -> None:
    """Number, label (any case), Enter for the recommended option, custom text, and an
    out-of-range number followed by a valid one (the prompt asks again)."""
    keys.send_text(typed)
    provider = TerminalProvider(input=keys, output=DummyOutput())
    assert await _ask(provider, DB) == expected


async def test_tab_completes_a_label(keys: PipeInput) -> None:
    """Tab completes what was typed of a label (case-insensitive)."""
    screen = Screen()
    provider = TerminalProvider(input=keys, output=screen.output)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_ask, provider, DB)
        await until(lambda: "> Postgres" in screen.lines)
        keys.send_text("du\t")
        await until(lambda: "> DuckDB" in screen.lines)
        keys.send_text("\r")
    assert screen.lines[-2:] == ["> DuckDB", "-> DuckDB"]


async def test_an_invalid_reply_is_followed_by_its_reason_and_a_new_prompt(
    keys: PipeInput,
) -> None:
    """Without custom answers, other text re-prompts; the attempts stay on screen."""
    screen = Screen()
    keys.send_text("maybe\r7\ryes\r")
    provider = TerminalProvider(input=keys, output=screen.output)
    assert await _ask(provider, STRICT) == AskUserQuestionAnswer("Yes", YES)
    assert screen.lines[-6:] == [
        "> maybe",
        "  'maybe' is not an option: type a number from 1 to 2 or a label (Yes, No).",
        "> 7",
        "  There is no option 7: choose a number from 1 to 2.",
        "> yes",
        "-> Yes",
    ]
    assert screen.text.count("Deploy now?") == 1


@pytest.mark.parametrize(("key", "name"), [("\x03", "Ctrl-C"), ("\x04", "Ctrl-D")])
async def test_ctrl_c_and_ctrl_d_dismiss_the_question(keys: PipeInput, key: str, name: str) -> None:
    """ASK_CANCELLED (not a crash, not a kill), and a marker under the question."""
    screen = Screen()
    keys.send_text(key)
    with pytest.raises(UserInteractionError) as caught:
        await _ask(TerminalProvider(input=keys, output=screen.output), DB)
    assert caught.value.code == ErrorCode.ASK_CANCELLED
    assert name in caught.value.message
    assert screen.lines[-2:] == [">", f"(dismissed with {name})"]
    assert not screen.cursor_hidden


async def test_the_screen_shows_who_asks_the_options_and_the_outcome(keys: PipeInput) -> None:
    """Banner, agent, header, question, numbered options, descriptions, hints; then the
    reply and the answer stay in the scrollback."""
    screen = Screen()
    provider = TerminalProvider(input=keys, output=screen.output, banner="generation 3")
    async with anyio.create_task_group() as tg:
        tg.start_soon(_ask, provider, DB)
        await until(lambda: "> Postgres" in screen.text)  # the placeholder: Enter picks it
        assert screen.lines == [
            "",
            "generation 3",
            "[Storage] Planner asks:",
            "Which database?",
            "  1. Postgres (recommended)",
            "     Server database",
            "  2. SQLite",
            "     One file, zero setup",
            "  3. DuckDB",
            "Type a number or a label, or your own answer; Enter alone picks Postgres.",
            "Tab completes a label; Ctrl-C or Ctrl-D dismisses the question.",
            "> Postgres",
        ]
        keys.send_text("3\r")
    assert screen.lines[-2:] == ["> 3", "-> DuckDB"]


async def test_a_narrow_terminal_wraps_the_question_instead_of_cutting_it(
    keys: PipeInput,
) -> None:
    """Every word of a long question and description stays visible, descriptions aligned."""
    screen = Screen(columns=32)
    request = AskUserQuestionRequest(
        "Which of these storage engines should the new billing service use in production?",
        options=(
            AskUserQuestionOption(
                "Postgres", description="A server database, the safe default for a team"
            ),
            AskUserQuestionOption("SQLite"),
        ),
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(_ask, TerminalProvider(input=keys, output=screen.output), request)
        await until(lambda: screen.lines[-1:] == [">"])
        assert screen.lines[1:9] == [
            "Which of these storage engines",
            "should the new billing service",
            "use in production?",
            "  1. Postgres",
            "     A server database, the safe",
            "     default for a team",
            "  2. SQLite",
            "Type a number or a label, or",
        ]
        keys.send_text("1\r")


async def test_agent_side_cancellation_withdraws_the_prompt_at_once(keys: PipeInput) -> None:
    """The prompt is torn down within 100 ms, a marker says so, the cancellation propagates,
    stdout is unpatched, and the next prompt on the same input works.

    100 ms on an idle machine: prompt_toolkit's default stdout-proxy batch (0.2 s) would
    block the close past it. The bound is scaled when it is checked: the teardown hands off
    between threads, and at load 20 on 2 cores each hand-off waits for a turn of the CPU."""
    screen = Screen()
    provider = TerminalProvider(input=keys, output=screen.output)
    stdout, stderr = sys.stdout, sys.stderr
    with anyio.fail_after(scaled(5)):
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(provider.ask, FREE)
                await until(lambda: screen.lines[-1:] == [">"])
                assert sys.stdout is not stdout  # log lines go above the open prompt
                keys.send_text("half-typed")
                await until(lambda: screen.lines[-1:] == ["> half-typed"])
                started = time.perf_counter()
                scope.cancel()
        elapsed = time.perf_counter() - started
    assert scope.cancelled_caught
    assert elapsed < scaled(0.1), elapsed
    assert screen.lines[-2:] == ["> half-typed", "(question withdrawn)"]
    assert not screen.cursor_hidden
    assert (sys.stdout, sys.stderr) == (stdout, stderr)
    assert provider.showing is None
    keys.send_text("\r")
    assert (await _ask(provider, DB)).answer == "pg"


async def test_the_time_limit_ends_with_ask_timeout_and_picks_nothing(keys: PipeInput) -> None:
    """ASK_TIMEOUT after the limit, even with a recommended option, and a marker."""
    screen = Screen()
    provider = TerminalProvider(input=keys, output=screen.output, timeout=0.05)
    with pytest.raises(UserInteractionError) as caught:
        await _ask(provider, DB)
    assert caught.value.code == ErrorCode.ASK_TIMEOUT
    assert screen.lines[-1] == "(no answer within 0.05 s; nothing was chosen)"


async def test_output_printed_while_the_prompt_is_open_goes_above_it(keys: PipeInput) -> None:
    """print(), sys.stderr and logging write above the question; the prompt stays intact."""
    screen = Screen()
    provider = TerminalProvider(input=keys, output=screen.output)
    handler = logging.StreamHandler()  # resolves sys.stderr now: the patched one
    async with anyio.create_task_group() as tg:
        tg.start_soon(_ask, provider, FREE)
        await until(lambda: screen.lines[-1:] == [">"])
        keys.send_text("gre")
        await until(lambda: screen.lines[-1:] == ["> gre"])
        print("agent: log line 1")
        print("agent: log line 2", file=sys.stderr)
        handler.setStream(sys.stderr)
        logger = logging.getLogger("test.terminal.above")
        logger.addHandler(handler)
        try:
            logger.warning("agent: a warning")
        finally:
            logger.removeHandler(handler)
        await until(lambda: "agent: a warning" in screen.text)
        await until(lambda: screen.lines[-1:] == ["> gre"])
        assert screen.lines[:4] == [
            "agent: log line 1",
            "agent: log line 2",
            "agent: a warning",
            "",
        ]
        assert screen.lines[4:] == [
            "[Theme]",
            "What colour?",
            "Type your answer.",
            "Ctrl-C or Ctrl-D dismisses the question.",
            "> gre",
        ]
        keys.send_text("en\r")
    assert screen.lines[-2:] == ["> green", "-> green (your own answer)"]


async def test_patching_stdout_can_be_turned_off(keys: PipeInput) -> None:
    """patch_stdout=False leaves sys.stdout alone while the prompt is open."""
    stdout = sys.stdout
    provider = TerminalProvider(input=keys, output=DummyOutput(), patch_stdout=False)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_ask, provider, FREE)
        await until(lambda: provider.showing is not None)
        await until(lambda: sys.stdout is stdout)
        keys.send_text("x\r")


async def test_concurrent_asks_queue_and_the_prompt_counts_them(keys: PipeInput) -> None:
    """One question on screen; the prompt says how many wait, live; arrival order kept."""
    screen = Screen()
    provider = TerminalProvider(input=keys, output=screen.output)
    questions = [AskUserQuestionRequest(f"Question {n}?") for n in (1, 2, 3)]
    answers: list[str] = []

    async def ask_one(request: AskUserQuestionRequest) -> None:
        answers.append((await provider.ask(request)).answer)

    with anyio.fail_after(scaled(5)):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask_one, questions[0])
            await until(lambda: screen.lines[-1:] == [">"])
            tg.start_soon(ask_one, questions[1])
            await until(lambda: "(1 more question waiting)" in screen.lines)
            tg.start_soon(ask_one, questions[2])
            await until(lambda: "(2 more questions waiting)" in screen.lines)
            assert "Question 2?" not in screen.text
            keys.send_text("one\r")
            await until(lambda: provider.showing is questions[1])
            await until(lambda: "(1 more question waiting)" in screen.lines)
            keys.send_text("two\r")
            await until(lambda: provider.showing is questions[2])
            keys.send_text("three\r")
    assert answers == ["one", "two", "three"]
    assert not any("waiting" in line for line in screen.lines)  # left out of the scrollback


async def test_a_reload_withdraws_the_prompt_and_the_new_instance_shows_it_again(
    keys: PipeInput,
) -> None:
    """Disposing the provider mid-question cancels its prompt; ask() re-asks on the new one."""
    screen = Screen()
    context = Context("reload")
    old = TerminalProvider(input=keys, output=screen.output, banner="generation 1")
    new = TerminalProvider(input=keys, output=screen.output, banner="generation 2")
    stdout = sys.stdout
    result: list[AskUserQuestionAnswer] = []

    async def agent() -> None:
        result.append(await ask(DB, context=context))

    with anyio.fail_after(scaled(5)):
        async with anyio.create_task_group() as tg:
            first = Scope("generation 1", context=context)
            first.provide(USER_INTERACTION, old)
            tg.start_soon(agent)
            await until(lambda: screen.lines[-1:] == ["> Postgres"])
            async with context.swap(USER_INTERACTION):
                await first.aclose()
                assert sys.stdout is stdout  # nothing of the old prompt is left
                second = Scope("generation 2", context=context)
                second.provide(USER_INTERACTION, new)
            await until(
                lambda: screen.text.count("> Postgres") == 1 and "generation 2" in screen.text
            )
            keys.send_text("2\r")
        await second.aclose()
    assert result == [AskUserQuestionAnswer("SQLite", SQLITE)]
    text = screen.text
    assert "generation 1" in text
    assert text.index("(question withdrawn)") < text.index("generation 2")
    assert screen.lines[-2:] == ["> 2", "-> SQLite"]
