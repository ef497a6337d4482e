"""A real pseudo-terminal (pexpect), the screen rendered by pyte as the human sees it."""

from __future__ import annotations

import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tests._timing import scaled

from .conftest import PtyChild

CHILD = str(Path(__file__).with_name("pty_child.py"))

Spawn = Callable[..., PtyChild]


def _run(spawn: Spawn, scenario: str, *, cpr: bool = False) -> PtyChild:
    return spawn(sys.executable, "-W", "error", CHILD, scenario, cpr=cpr)


def _last_result(child: PtyChild, count: int) -> str:
    """Wait for the ``count``-th ``RESULT`` line and return it."""
    child.wait_for(lambda c: len(re.findall(r"RESULT ([^\r\n]*)\r\n", c.raw)) >= count)
    results: list[str] = re.findall(r"RESULT ([^\r\n]*)\r\n", child.raw)
    return results[count - 1]


def test_typed_answers_keys_and_the_scrollback(spawn: Spawn) -> None:
    """Number, label, Enter, custom text, an invalid reply then an option, Ctrl-C, Ctrl-D."""
    child = _run(spawn, "answers")
    steps = [
        ("Postgres", "2\r", "answer=SQLite option=SQLite"),
        ("Postgres", "duckDB\r", "answer=DuckDB option=DuckDB"),
        ("Postgres", "\r", "answer=pg option=Postgres"),
        ("", "blue\r", "answer=blue option=None"),
        ("", "7\r", None),
        ("", "1\r", "answer=Yes option=Yes"),
        ("Postgres", "\x03", "error=ASK_CANCELLED"),
        ("", "\x04", "error=ASK_CANCELLED"),
    ]
    results = 0
    for shown, keys, expected in steps:
        child.wait_prompt(shown)
        child.send(keys)
        if expected is None:  # asked again: wait for the reason before the next reply
            child.wait_for(lambda c: "There is no option 7" in c.text)
            continue
        results += 1
        assert _last_result(child, results) == expected
    assert child.exit_status() == 0
    text = child.text
    assert "> 7\n  There is no option 7: choose a number from 1 to 2.\n> 1\n-> Yes" in text
    assert "(dismissed with Ctrl-C)\nRESULT error=ASK_CANCELLED" in text
    assert "(dismissed with Ctrl-D)\nRESULT error=ASK_CANCELLED" in text
    assert "> blue\n-> blue (your own answer)\nRESULT answer=blue option=None" in text


@pytest.mark.parametrize("cpr", [False, True], ids=["no-cpr", "cpr-never-answered"])
def test_agent_side_cancellation_restores_the_terminal_within_100_ms(
    spawn: Spawn, cpr: bool
) -> None:
    """The child's own termios (ECHO, ICANON) after the prompt is withdrawn, the time it
    took, the marker, the cursor, and a plain input() afterwards that echoes and reads.

    With cursor-position requests on and never answered, prompt_toolkit would wait up to
    a second for the answers; the cancellation cuts that wait short too.
    """
    child = _run(spawn, "withdraw", cpr=cpr)
    child.wait_prompt()
    child.send("half")
    child.wait_prompt("half")
    child.child.kill(signal.SIGUSR1)
    child.wait_text("RESULT withdrawn")
    child.wait_text("stderr=")
    line = child.raw.split("RESULT withdrawn ")[1].split("\r\n")[0]
    facts = dict(part.split("=") for part in line.split())
    assert float(facts["ms"]) < scaled(100)
    assert facts == facts | {
        "echo": "True",
        "icanon": "True",
        "same": "True",
        "stdout": "True",
        "stderr": "True",
    }
    assert not child.cursor_hidden
    assert "> half\n(question withdrawn)\nRESULT withdrawn" in child.text
    child.wait_for(lambda c: c.lines[-1:] == ["after>"])
    child.send("hello\r")
    child.wait_text("RESULT read='hello'")
    assert "after> hello\nRESULT read='hello'" in child.text  # echoed by the terminal
    assert child.exit_status() == 0


def test_a_reload_shows_the_question_again_on_the_new_provider(spawn: Spawn) -> None:
    """The old prompt is withdrawn; the new instance asks on the same terminal; answered."""
    child = _run(spawn, "reload")
    child.wait_prompt("Postgres")
    assert "generation 1" in child.text
    child.send("dUck")
    child.wait_prompt("dUck")
    child.child.kill(signal.SIGUSR1)
    child.wait_for(lambda c: "generation 2" in c.text)
    child.wait_prompt("Postgres")
    text = child.text
    assert text.index("generation 1") < text.index("> dUck\n(question withdrawn)")
    assert text.index("(question withdrawn)") < text.index("generation 2")
    assert text.count("Which database?") == 2
    child.send("2\r")
    child.wait_text("RESULT answer=SQLite same=True")
    assert child.exit_status() == 0


def test_log_lines_print_above_the_open_prompt(spawn: Spawn) -> None:
    """print(), stderr and structlog (configured as the CLI does) go above the question;
    the prompt and what was typed stay intact."""
    child = _run(spawn, "logs")
    child.wait_prompt()
    child.send("gre")
    child.wait_prompt("gre")
    child.child.kill(signal.SIGUSR1)
    child.wait_for(lambda c: "agent.structlog_line" in c.text)
    child.wait_prompt("gre")
    lines = child.lines
    assert lines[0] == "agent: printed line"
    assert lines[1] == "agent: stderr line"
    assert "agent.structlog_line" in lines[2]
    assert lines[3:] == [
        "RESULT logged",
        "",
        "[Theme]",
        "What colour?",
        "Type your answer.",
        "Ctrl-C or Ctrl-D dismisses the question.",
        "> gre",
    ]
    child.send("en\r")
    child.wait_text("RESULT answer=green option=None")
    assert child.exit_status() == 0
