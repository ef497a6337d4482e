"""Hostile input gets a clear answer and nothing else.

Text from the model is shown, never obeyed by the terminal (both paths); replies are read in
chunks with a line limit, and an over-long one is discarded with a one-line reason.
"""

from __future__ import annotations

import fcntl
import io
import random
import string
import struct
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from prompt_toolkit.input import PipeInput, create_pipe_input
from tests._timing import scaled

from hotseam import Agent
from hotseam.interaction import (
    AskUserQuestionOption,
    AskUserQuestionRequest,
    UserInteractionError,
)
from hotseam.providers._terminal._protocol import visible
from hotseam.providers._terminal._reader import LINE_LIMIT
from hotseam.providers.terminal import TerminalProvider

from .conftest import FREE, Pipe, Screen, until

pytestmark = pytest.mark.anyio

CLEAR = "\x1b[2J"
OSC52 = "\x1b]52;c;cm0gLXJmIH4=\x07"  # "write 'rm -rf ~' to the clipboard"
HOSTILE = AskUserQuestionRequest(
    f"Clear{CLEAR} this?\rOverwritten\x08 \u202egnp.exe\u202c \x9b2J",
    header=f"Hdr\x07{OSC52}",
    options=(
        AskUserQuestionOption(
            f"Yes{OSC52}", description="desc\x1b[8mhidden\r\nline 2 \u2066iso\u2069\tend"
        ),
        AskUserQuestionOption("No\x08\x08Maybe\nreally", recommended=True),
    ),
    allow_custom=False,
    agent=Agent("evil", "Evil\x1b[5m"),
)
BANNER = "gen\x1b[?1049h 2"
# What the model wrote that a terminal would act on; none of it may reach the output.
OBEYED = ("\x1b[2J", "\x1b]52", "\x1b[8m", "\x1b[5m", "\x1b[?1049h", "\x07", "\x08", "\x9b")
BIDI = ("\u202e", "\u202c", "\u2066", "\u2069")
# How it is shown instead.
SHOWN = (
    "[Hdr^G^[]52;c;cm0gLXJmIH4=^G] Evil^[[5m asks:",
    "Clear^[[2J this?^MOverwritten^H <U+202E>gnp.exe<U+202C> <9b>2J",
    "  1. Yes^[]52;c;cm0gLXJmIH4=^G",
    "     desc^[[8mhidden",
    "     line 2 <U+2066>iso<U+2069> end",
    "  2. No^H^HMaybe really (recommended)",
)


def test_visible_shows_what_a_terminal_would_obey() -> None:
    """Caret notation for C0 and DEL, <xx> for C1, <U+XXXX> for bidi controls; tabs and
    (outside multi-line text) line breaks are spaces; a second pass changes nothing."""
    assert visible("a\x1b[2J\x07\x08\r\x7f\x9b\u202e\tb") == "a^[[2J^G^H^M^?<9b><U+202E> b"
    assert visible("one\r\ntwo\nthree") == "one two three"
    assert visible("one\r\ntwo\nthree\r", lines=True) == "one\ntwo\nthree^M"
    assert visible("plain text, é ✓") == "plain text, é ✓"
    once = visible(OSC52 + "\u2066")
    assert visible(once) == once


async def test_line_mode_shows_model_text_without_obeying_it(pipe: Pipe) -> None:
    """Question, header, agent, labels, descriptions, banner, the hint, the reasons and
    the outcome line: every escape sequence, BEL, CR, BS and bidi control is made visible."""
    out = io.StringIO()
    provider = TerminalProvider(mode="lines", input=pipe.fd, output=out, banner=BANNER)
    pipe.write("nope\n1\n")
    with anyio.fail_after(scaled(5)):
        answer = await provider.ask(HOSTILE)
    assert answer.option is HOSTILE.choices[0]  # the model still gets its own value back
    text = out.getvalue()
    for raw in (*OBEYED, *BIDI, "\r"):
        assert raw not in text, (raw, text)
    lines = text.splitlines()
    assert "gen^[[?1049h 2" in lines
    for line in SHOWN:
        assert line in lines, (line, lines)
    assert "Enter alone picks No^H^HMaybe really." in text
    assert "or a label (Yes^[]52;c;cm0gLXJmIH4=^G, No^H^HMaybe really)." in text
    assert lines[-1] == "-> Yes^[]52;c;cm0gLXJmIH4=^G"


async def test_line_mode_echoes_a_hostile_reply_visibly(pipe: Pipe) -> None:
    """The echoed reply from a pipe is shown, not obeyed; the model gets it as typed."""
    out = io.StringIO()
    pipe.write(f"blue{CLEAR}\x08\u202e\n")
    with anyio.fail_after(scaled(5)):
        answer = await TerminalProvider(mode="lines", input=pipe.fd, output=out).ask(FREE)
    assert answer.answer == f"blue{CLEAR}\x08\u202e"
    assert out.getvalue().endswith(
        "> blue^[[2J^H<U+202E>\n-> blue^[[2J^H<U+202E> (your own answer)\n"
    )


@pytest.fixture
def keys() -> Iterator[PipeInput]:
    """The keyboard of the prompt."""
    with create_pipe_input() as pipe_input:
        yield pipe_input


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_prompt_shows_model_text_without_obeying_it(keys: PipeInput) -> None:
    """The same on the prompt_toolkit path: the screen shows the visible forms, and what
    was written to the terminal holds none of the model's sequences."""
    screen = Screen(columns=120)
    provider = TerminalProvider(input=keys, output=screen.output, banner=BANNER)
    async with anyio.create_task_group() as tg:
        tg.start_soon(provider.ask, HOSTILE)
        await until(lambda: screen.lines[-1:] == ["> No^H^HMaybe really"])
        keys.send_text("1\r")
    written = screen.stream.getvalue()
    for raw in (*OBEYED, *BIDI):
        assert raw not in written, raw
    lines = screen.lines
    assert "gen^[[?1049h 2" in lines
    for line in SHOWN:
        assert line in lines, (line, lines)
    assert lines[-2:] == ["> 1", "-> Yes^[]52;c;cm0gLXJmIH4=^G"]
    assert not screen.cursor_hidden


# -- long replies ---------------------------------------------------------------------------


def _feed(pipe: Pipe, data: bytes) -> threading.Thread:
    """Write ``data`` into the pipe from a thread (it blocks while the pipe is full)."""
    thread = threading.Thread(target=pipe.write_bytes, args=(data,), daemon=True)
    thread.start()
    return thread


async def test_a_4_mb_line_is_discarded_with_one_line_and_the_loop_keeps_ticking(
    pipe: Pipe,
) -> None:
    """Read in chunks: the event loop never stalls (a 10 ms ticker sees no gap over 100 ms),
    the line is not kept, one reason line asks again, and the next line answers."""
    out = io.StringIO()
    gaps: list[float] = []

    async def tick() -> None:
        last = time.perf_counter()
        while True:
            await anyio.sleep(0.01)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    with anyio.fail_after(scaled(10)):
        async with anyio.create_task_group() as tg:
            tg.start_soon(tick)
            await anyio.sleep(0.05)  # the ticker's baseline: a few ticks before the flood
            writer = _feed(pipe, b"y" * (4 * 1024 * 1024) + b"\nblue\n")
            started = time.perf_counter()
            answer = await TerminalProvider(mode="lines", input=pipe.fd, output=out).ask(FREE)
            elapsed = time.perf_counter() - started
            tg.cancel_scope.cancel()
    writer.join()
    assert answer.answer == "blue"
    assert max(gaps) < scaled(0.1), max(gaps)
    assert elapsed < scaled(3), elapsed
    assert out.getvalue().endswith(
        f"> [a reply of more than {LINE_LIMIT} bytes]\n"
        f"  That reply is longer than {LINE_LIMIT} bytes, so it was discarded: "
        "type a shorter one.\n"
        "> blue\n-> blue (your own answer)\n"
    )


async def test_a_5000_character_reply_is_taken_and_shown_once(pipe: Pipe) -> None:
    """Under the limit: accepted whole, echoed once (the outcome line abbreviates it), and
    the lines after it still answer the next questions."""
    out = io.StringIO()
    long = "".join(random.Random(5000).choices(string.ascii_letters, k=5000))
    pipe.write(f"{long}\nred\ngreen\n")
    provider = TerminalProvider(mode="lines", input=pipe.fd, output=out)
    with anyio.fail_after(scaled(5)):
        answers = [(await provider.ask(FREE)).answer for _ in range(3)]
    assert answers == [long, "red", "green"]
    text = out.getvalue()
    assert text.count(long) == 1
    assert f"> {long}\n-> {long[:57]}... (your own answer, 5000 characters)\n" in text


async def test_a_line_at_the_limit_is_taken_and_one_byte_more_is_not(pipe: Pipe) -> None:
    """The limit is exact, for a line ended by a newline and for the last line."""
    out = io.StringIO()
    provider = TerminalProvider(mode="lines", input=pipe.fd, output=out)
    over = b"b" * (LINE_LIMIT + 1)
    writer = _feed(pipe, b"a" * LINE_LIMIT + b"\n" + over + b"\nok\n" + over)
    with anyio.fail_after(scaled(5)):
        assert (await provider.ask(FREE)).answer == "a" * LINE_LIMIT
        assert (await provider.ask(FREE)).answer == "ok"
        assert out.getvalue().count("discarded") == 1
        await anyio.to_thread.run_sync(writer.join)
        pipe.close_writer()
        with pytest.raises(UserInteractionError, match="input ended"):
            await provider.ask(FREE)
    assert out.getvalue().count("discarded") == 2


async def test_a_withdrawal_in_the_middle_of_a_long_line_still_discards_it(
    pipe: Pipe,
) -> None:
    """A question withdrawn while an over-long line is being discarded leaves that state
    to the next reader of the descriptor (a new instance, as after a hot reload)."""
    out = io.StringIO()
    with anyio.fail_after(scaled(5)):
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(TerminalProvider(mode="lines", input=pipe.fd, output=out).ask, FREE)
                await until(lambda: out.getvalue().endswith("> "))
                writer = _feed(pipe, b"z" * (LINE_LIMIT * 3))
                await anyio.to_thread.run_sync(writer.join)
                await until(lambda: _pending(pipe) == 0)
                scope.cancel()
        pipe.write("zzz\nblue\n")
        out = io.StringIO()
        answer = await TerminalProvider(mode="lines", input=pipe.fd, output=out).ask(FREE)
    assert answer.answer == "blue"
    assert "discarded" in out.getvalue()


def _pending(pipe: Pipe) -> int:
    (count,) = struct.unpack("i", fcntl.ioctl(pipe.fd, termios.FIONREAD, b"\0\0\0\0"))
    return int(count)


async def test_long_lines_in_files_and_streams(tmp_path: Path) -> None:
    """A regular file (put back after each line: nothing read ahead) and an in-memory
    stream have the same limit."""
    path = tmp_path / "replies.txt"
    path.write_bytes(b"x" * (LINE_LIMIT + 5) + b"\nred\nrest\n")
    with path.open("rb") as file, anyio.fail_after(scaled(5)):
        out = io.StringIO()
        assert (await TerminalProvider(mode="lines", input=file, output=out).ask(FREE)).answer == (
            "red"
        )
        assert "discarded" in out.getvalue()
        assert file.tell() == path.stat().st_size - len("rest\n")
    stream = io.StringIO("x" * (LINE_LIMIT + 5) + "\nred\n")
    out = io.StringIO()
    with anyio.fail_after(scaled(5)):
        answer = await TerminalProvider(mode="lines", input=stream, output=out).ask(FREE)
    assert answer.answer == "red"
    assert "discarded" in out.getvalue()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_prompt_shows_a_5000_character_reply_once(keys: PipeInput) -> None:
    """On the prompt the typed reply is the only copy (the outcome line abbreviates)."""
    screen = Screen(columns=200, rows=60)
    long = "".join(random.Random(5000).choices(string.ascii_letters, k=5000))
    keys.send_text(long + "\r")
    with anyio.fail_after(scaled(10)):
        answer = await TerminalProvider(input=keys, output=screen.output).ask(FREE)
    assert answer.answer == long
    shown = "".join(screen.lines)
    assert shown.count(long[:200]) == 1
    assert screen.lines[-1] == f"-> {long[:57]}... (your own answer, 5000 characters)"


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_prompt_refuses_a_pasted_reply_over_the_limit_and_takes_the_next(
    keys: PipeInput,
) -> None:
    """The prompt takes the replies the line reader takes: one over its limit (pasted, as a
    reply that long arrives) is refused with the reader's reason, and the question stays."""
    screen = Screen(columns=200, rows=60)
    pasted = "\x1b[200~" + "x" * (LINE_LIMIT + 1) + "\x1b[201~\r" + "short\r"
    answers = []
    with anyio.fail_after(scaled(20)):
        async with anyio.create_task_group() as group:

            async def ask() -> None:
                provider = TerminalProvider(input=keys, output=screen.output)
                answers.append(await provider.ask(FREE))

            group.start_soon(ask)
            # more than a pipe holds: written from a thread while the prompt reads it
            await anyio.to_thread.run_sync(keys.send_text, pasted)
    assert [answer.answer for answer in answers] == ["short"]
    shown = "".join(screen.lines)
    assert f"That reply is longer than {LINE_LIMIT} bytes, so it was discarded" in shown
