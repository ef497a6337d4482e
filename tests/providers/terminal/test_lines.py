"""Plain-line mode: pipes, files and in-memory streams, on asyncio and on trio."""

from __future__ import annotations

import fcntl
import io
import os
import struct
import sys
import termios
from pathlib import Path

import anyio
import pytest
from tests._timing import scaled

from hotseam import Context, Scope
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    ErrorCode,
    UserInteractionError,
    UserInteractionProvider,
    ask,
)
from hotseam.providers.terminal import TerminalProvider

from .conftest import DB, FREE, STRICT, Pipe, until

pytestmark = pytest.mark.anyio

POSTGRES, SQLITE, DUCKDB = DB.choices
YES, NO = STRICT.choices

DB_BLOCK = (
    "\n"
    "[Storage] Planner asks:\n"
    "Which database?\n"
    "  1. Postgres (recommended)\n"
    "     Server database\n"
    "  2. SQLite\n"
    "     One file, zero setup\n"
    "  3. DuckDB\n"
    "Type a number or a label, or your own answer; Enter alone picks Postgres.\n"
)


def _provider(source: object, out: io.StringIO, **options: object) -> TerminalProvider:
    return TerminalProvider(mode="lines", input=source, output=out, **options)  # type: ignore[arg-type]


async def _ask(
    provider: TerminalProvider, request: AskUserQuestionRequest
) -> AskUserQuestionAnswer:
    with anyio.fail_after(scaled(5)):
        return await provider.ask(request)


async def _pending(fd: int) -> int:
    """Bytes waiting in a pipe, unread."""
    await anyio.lowlevel.checkpoint()
    (count,) = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))
    return int(count)


def test_it_is_a_user_interaction_provider() -> None:
    """It satisfies the seam's protocol."""
    assert isinstance(TerminalProvider(), UserInteractionProvider)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("2", AskUserQuestionAnswer("SQLite", SQLITE)),
        ("duckdb", AskUserQuestionAnswer("DuckDB", DUCKDB)),
        ("", AskUserQuestionAnswer("pg", POSTGRES)),
        ("MySQL", AskUserQuestionAnswer("MySQL")),
    ],
    ids=["number", "label", "empty-recommended", "custom"],
)
async def test_a_reply_line_answers(
    pipe: Pipe, reply: str, expected: AskUserQuestionAnswer
) -> None:
    """Number, label, empty line (the recommended option) and custom text."""
    out = io.StringIO()
    pipe.write(reply + "\n")
    assert await _ask(_provider(pipe.fd, out), DB) == expected


async def test_the_transcript_reads_like_the_session(pipe: Pipe) -> None:
    """Question block, the echoed reply after the prompt, the reason, and the outcome."""
    out = io.StringIO()
    pipe.write("7\nsqlite\n")
    await _ask(_provider(pipe.fd, out), DB)
    assert out.getvalue() == DB_BLOCK + (
        "> 7\n  There is no option 7: choose a number from 1 to 3.\n> sqlite\n-> SQLite\n"
    )


async def test_without_custom_answers_other_text_asks_again(pipe: Pipe) -> None:
    """Unknown text and an empty line re-prompt with a reason, until an option is chosen."""
    out = io.StringIO()
    pipe.write("maybe\n\nNO\n")
    answer = await _ask(_provider(pipe.fd, out), STRICT)
    assert answer == AskUserQuestionAnswer("No", NO)
    assert out.getvalue().endswith(
        "> maybe\n"
        "  'maybe' is not an option: type a number from 1 to 2 or a label (Yes, No).\n"
        "> \n"
        "  Nothing chosen: type a number from 1 to 2 or a label.\n"
        "> NO\n"
        "-> No\n"
    )


async def test_lines_written_together_answer_one_question_each(pipe: Pipe) -> None:
    """The reader never takes more than its line, even from one chunk."""
    out = io.StringIO()
    provider = _provider(pipe.fd, out)
    pipe.write("2\n\nblue\n1\n")
    answers = [await _ask(provider, request) for request in (DB, DB, FREE, STRICT)]
    assert [a.answer for a in answers] == ["SQLite", "pg", "blue", "Yes"]
    assert await _pending(pipe.fd) == 0


async def test_end_of_input_dismisses_the_question(pipe: Pipe) -> None:
    """EOF → ASK_CANCELLED saying the input ended, and a marker in the transcript."""
    out = io.StringIO()
    pipe.close_writer()
    with pytest.raises(UserInteractionError) as caught:
        await _ask(_provider(pipe.fd, out), DB)
    assert caught.value.code == ErrorCode.ASK_CANCELLED
    assert "input ended" in caught.value.message
    assert out.getvalue().endswith("> \n(dismissed: input ended)\n")


async def test_a_last_line_without_newline_still_answers(pipe: Pipe) -> None:
    """``printf 2 |`` answers; the next question then sees the end of input."""
    out = io.StringIO()
    provider = _provider(pipe.fd, out)
    pipe.write("2")
    pipe.close_writer()
    assert (await _ask(provider, DB)).answer == "SQLite"
    with pytest.raises(UserInteractionError, match="input ended"):
        await _ask(provider, DB)


async def test_a_withdrawn_read_leaves_the_next_line_for_the_next_ask(pipe: Pipe) -> None:
    """Cancel a pending read, then write: the second ask receives that line."""
    out = io.StringIO()
    provider = _provider(pipe.fd, out)
    with anyio.fail_after(scaled(5)):
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(provider.ask, DB)
                await until(lambda: out.getvalue().endswith("> "))
                scope.cancel()
        assert scope.cancelled_caught
        assert out.getvalue().endswith("> \n(question withdrawn)\n")
        assert provider.showing is None
        pipe.write("first\n")
        assert await _pending(pipe.fd) == len("first\n")  # nobody is reading it
        pipe.write("second\n")
        assert (await provider.ask(FREE)).answer == "first"
        assert (await provider.ask(FREE)).answer == "second"


async def test_a_line_cut_by_a_withdrawal_is_continued_by_the_next_ask(pipe: Pipe) -> None:
    """Bytes of a half-written line read before the withdrawal are not lost."""
    out = io.StringIO()
    with anyio.fail_after(scaled(5)):
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_provider(pipe.fd, out).ask, FREE)
                await until(lambda: out.getvalue().endswith("> "))
                pipe.write("fir")
                while await _pending(pipe.fd):
                    pass
                scope.cancel()
        pipe.write("st\n")
        # A new instance on the same descriptor, as after a hot reload.
        assert (await _provider(pipe.fd, io.StringIO()).ask(FREE)).answer == "first"


async def test_a_regular_file_is_read_line_by_line(tmp_path: Path) -> None:
    """``< answers.txt``: files cannot be polled, and never block."""
    path = tmp_path / "answers.txt"
    path.write_text("2\n\nblue\n")
    out = io.StringIO()
    with path.open("rb") as file:
        provider = _provider(file, out)
        answers = [await _ask(provider, request) for request in (DB, DB, FREE)]
        assert [a.answer for a in answers] == ["SQLite", "pg", "blue"]
        assert file.tell() == path.stat().st_size  # no read-ahead
        with pytest.raises(UserInteractionError, match="input ended"):
            await _ask(provider, FREE)


async def test_dev_null_ends_at_once() -> None:
    """``< /dev/null`` (a headless run): ASK_CANCELLED, never a hang or an invented answer."""
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        with pytest.raises(UserInteractionError) as caught:
            await _ask(_provider(null, io.StringIO()), DB)
    finally:
        os.close(null)
    assert caught.value.code == ErrorCode.ASK_CANCELLED


async def test_an_in_memory_stream_is_read_with_readline() -> None:
    """Streams without a descriptor (``io.StringIO``) work too."""
    provider = _provider(io.StringIO("3\nred\n"), io.StringIO())
    assert (await _ask(provider, DB)).answer == "DuckDB"
    assert (await _ask(provider, FREE)).answer == "red"


async def test_a_terminal_in_line_mode_is_not_echoed_twice() -> None:
    """The terminal echoes what the human types; the transcript does not repeat it."""
    controller, terminal = os.openpty()
    try:
        out = io.StringIO()
        os.write(controller, b"2\n")
        assert (await _ask(_provider(terminal, out), DB)).answer == "SQLite"
        assert out.getvalue().endswith("\n> -> SQLite\n")
    finally:
        os.close(controller)
        os.close(terminal)


async def test_the_time_limit_ends_with_ask_timeout_and_picks_nothing(pipe: Pipe) -> None:
    """An optional limit: ASK_TIMEOUT, a marker, and the recommended option is not taken."""
    out = io.StringIO()
    # The limit also applies to the second ask, which must read its waiting line within it.
    limit = scaled(0.05)
    provider = _provider(pipe.fd, out, timeout=limit)
    with pytest.raises(UserInteractionError) as caught:
        await _ask(provider, DB)
    assert caught.value.code == ErrorCode.ASK_TIMEOUT
    assert "nothing was chosen" in caught.value.message
    assert out.getvalue().endswith(f"> \n(no answer within {limit:g} s; nothing was chosen)\n")
    pipe.write("2\n")  # the line is still there for the next question
    assert (await _ask(provider, DB)).answer == "SQLite"


async def test_concurrent_asks_take_turns_in_arrival_order(pipe: Pipe) -> None:
    """One question at a time; the next says how many still wait behind it."""
    out = io.StringIO()
    provider = _provider(pipe.fd, out)
    first = AskUserQuestionRequest("First?")
    second = AskUserQuestionRequest("Second?")
    third = AskUserQuestionRequest("Third?")
    answers: dict[str, str] = {}

    async def ask_one(request: AskUserQuestionRequest) -> None:
        answers[request.question] = (await provider.ask(request)).answer

    with anyio.fail_after(scaled(5)):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask_one, first)
            await until(lambda: provider.showing is first)
            tg.start_soon(ask_one, second)
            await until(lambda: provider.waiting == 1)
            tg.start_soon(ask_one, third)
            await until(lambda: provider.waiting == 2)
            assert "Second?" not in out.getvalue()  # only one question on screen
            pipe.write("a\nb\nc\n")
    assert answers == {"First?": "a", "Second?": "b", "Third?": "c"}
    transcript = out.getvalue()
    assert transcript.index("First?") < transcript.index("Second?") < transcript.index("Third?")
    assert "Second?\nType your answer.\n(1 more question waiting)\n> b\n" in transcript


async def test_a_reload_withdraws_the_question_and_the_new_instance_asks_it(pipe: Pipe) -> None:
    """ask() migrates to a new TerminalProvider on the same input, which shows it again."""
    out = io.StringIO()
    context = Context("reload")
    old = _provider(pipe.fd, out, banner="generation 1")
    new = _provider(pipe.fd, out, banner="generation 2")
    result: list[AskUserQuestionAnswer] = []

    async def agent() -> None:
        result.append(await ask(DB, context=context))

    with anyio.fail_after(scaled(5)):
        async with anyio.create_task_group() as tg:
            first = Scope("generation 1", context=context)
            first.provide(USER_INTERACTION, old)
            tg.start_soon(agent)
            await until(lambda: out.getvalue().endswith("> "))
            async with context.swap(USER_INTERACTION):
                await first.aclose()
                second = Scope("generation 2", context=context)
                second.provide(USER_INTERACTION, new)
            await until(lambda: new.showing is not None)
            pipe.write("2\n")
        await second.aclose()
    assert result == [AskUserQuestionAnswer("SQLite", SQLITE)]
    transcript = out.getvalue()
    assert transcript.startswith("\ngeneration 1\n[Storage] Planner asks:\n")
    assert "> \n(question withdrawn)\n\ngeneration 2\n[Storage] Planner asks:\n" in transcript
    assert transcript.endswith("> 2\n-> SQLite\n")


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_the_prompt_mode_refuses_trio_clearly() -> None:
    """mode='tty' needs asyncio; under trio it says so (auto and lines use plain lines)."""
    with pytest.raises(UserInteractionError) as caught:
        await TerminalProvider(mode="tty").ask(DB)
    assert caught.value.code == ErrorCode.PROVIDER_FAILED
    assert "needs asyncio" in caught.value.message
    assert "mode='lines'" in caught.value.message


async def test_auto_mode_uses_lines_on_pipes(pipe: Pipe, monkeypatch: pytest.MonkeyPatch) -> None:
    """With stdin a pipe, the default provider reads lines from it and writes to stdout."""
    out = io.StringIO()
    with os.fdopen(os.dup(pipe.fd), "r") as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        monkeypatch.setattr(sys, "stdout", out)
        pipe.write("2\n")
        assert (await _ask(TerminalProvider(), DB)).answer == "SQLite"
    assert out.getvalue() == DB_BLOCK + "> 2\n-> SQLite\n"


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_prompt_mode_never_reads_a_pipe(
    pipe: Pipe, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mode='tty' with stdin a pipe fails clearly instead of running prompt_toolkit on it."""
    with os.fdopen(os.dup(pipe.fd), "r") as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        with pytest.raises(UserInteractionError) as caught:
            await TerminalProvider(mode="tty").ask(DB)
    assert caught.value.code == ErrorCode.PROVIDER_FAILED
    assert "must never read a pipe" in caught.value.message


async def test_nothing_but_the_ui_reaches_stdout(
    pipe: Pipe, capsys: pytest.CaptureFixture[str]
) -> None:
    """With its own output stream, the provider writes nothing to stdout (or stderr)."""
    out = io.StringIO()
    pipe.write("2\n")
    await _ask(_provider(pipe.fd, out), DB)
    assert capsys.readouterr() == ("", "")
    assert out.getvalue()


def test_the_public_module() -> None:
    """A sorted ``__all__``; the class shows its public module in reprs and tracebacks."""
    from hotseam.providers import terminal

    assert terminal.__all__ == sorted(terminal.__all__)
    assert TerminalProvider.__module__ == "hotseam.providers.terminal"
    assert repr(TerminalProvider(mode="lines")) == "<TerminalProvider mode='lines' waiting=0>"


def test_the_constructor_checks_its_arguments() -> None:
    """Unknown modes, bad time limits, and prompt_toolkit objects in line mode."""
    from prompt_toolkit.output import DummyOutput

    with pytest.raises(ValueError, match="mode must be one of"):
        TerminalProvider(mode="gui")  # type: ignore[arg-type]
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="timeout must be a positive number"):
            TerminalProvider(timeout=bad)
    with pytest.raises(ValueError, match="plain text"):
        TerminalProvider(mode="lines", output=DummyOutput())
    assert TerminalProvider().timeout is None  # no timer by default
    provider = TerminalProvider(banner="b", timeout=2.5)
    assert (provider.banner, provider.timeout, provider.mode) == ("b", 2.5, "auto")
    assert (provider.showing, provider.waiting) == (None, 0)
