"""``hotseam demo``: piped answers, a headless run, trio, and a real terminal."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tests._timing import scaled

from .conftest import PtyChild

ANSWERS = ["Storage: sqlite", "Errors: Exceptions", "Theme: blue", "Deploy: Yes"]
HEADERS = {"Storage", "Errors", "Theme", "Deploy"}


def _answers(lines: list[str]) -> list[str]:
    """The lines the demo agent prints for its answers."""
    return [line for line in lines if line.split(":")[0] in HEADERS]


def _demo(stdin: bytes, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "error", "-m", "hotseam", "demo", *args],
        input=stdin.decode(),
        capture_output=True,
        text=True,
        timeout=scaled(30),
        check=False,
    )


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_piped_answers_print_the_answers(backend: str) -> None:
    """``printf '2\\n\\nblue\\n1\\n' | hotseam demo``: four answers, exit 0, nothing on stderr."""
    done = _demo(b"2\n\nblue\n1\n", "--backend", backend)
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert _answers(lines) == ANSWERS
    assert "[Storage] Demo agent asks:" in lines
    assert "> 2" in lines  # the piped reply is echoed: the transcript reads like the session
    assert lines[-2:] == ["-> Yes", "Deploy: Yes"]


def test_an_invalid_piped_reply_is_asked_again() -> None:
    """The Deploy question accepts no custom answer: 'maybe' gets a reason, then '1'."""
    done = _demo(b"2\n\nblue\nmaybe\n1\n")
    assert done.returncode == 0
    assert (
        "> maybe\n  'maybe' is not an option: type a number from 1 to 2 or a label (Yes, No).\n"
        "> 1\n-> Yes\nDeploy: Yes\n"
    ) in done.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_demo_exits_as_the_readme_says() -> None:
    """``printf '3\\n' | make demo``: the demo's exit 1 comes out of make as make's own 2,
    with make's line naming the demo's code; the README says so (it said 1). The venv's
    stamp is taken as made (``-o``): the test never installs anything."""
    root = Path(__file__).parents[3]
    done = subprocess.run(
        ["make", "--no-print-directory", "-o", ".venv/.hotseam-installed", "demo"],
        input="3\n",
        capture_output=True,
        text=True,
        timeout=scaled(60),
        check=False,
        cwd=root,
    )
    assert done.returncode == 2, done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith("make")]
    assert line.endswith("demo] Error 1")
    readme = " ".join((root / "README.md").read_text(encoding="utf-8").split())
    said = "`make demo` reports as make reports any failed command (`make: *** [...demo] Error 1`)"
    assert f"{said} and exits 2" in readme


def test_input_that_ends_early_dismisses_the_rest_and_exits_1() -> None:
    """A headless run never hangs and never invents answers: ASK_CANCELLED, exit 1."""
    done = _demo(b"3\n")
    assert done.returncode == 1
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert "Storage: duckdb" in lines
    reason = (
        "no answer (ASK_CANCELLED: the input ended before an answer was given (end of file), "
        "so the question was dismissed)"
    )
    assert [line for line in lines if "no answer" in line] == [
        f"{header}: {reason}" for header in ("Errors", "Theme", "Deploy")
    ]
    assert lines.count("(dismissed: input ended)") == 3


def test_typing_the_same_answers_in_a_terminal_prints_the_same(
    spawn: Callable[..., PtyChild],
) -> None:
    """Interactive: the prompt on a real terminal, the same replies, the same answers."""
    child = spawn(sys.executable, "-W", "error", "-m", "hotseam", "demo")
    for placeholder, keys in (
        ("Postgres", "2\r"),
        ("Exceptions", "\r"),
        ("", "blue\r"),
        ("", "1\r"),
    ):
        child.wait_prompt(placeholder)
        child.send(keys)
    assert child.exit_status() == 0
    lines = child.lines
    assert _answers(lines) == ANSWERS
    assert lines[-3:] == ["> 1", "-> Yes", "Deploy: Yes"]


def test_replies_typed_ahead_are_kept_for_the_next_questions(
    spawn: Callable[..., PtyChild],
) -> None:
    """A fast typist: all four replies typed at the first prompt answer the four questions."""
    child = spawn(sys.executable, "-W", "error", "-m", "hotseam", "demo")
    child.wait_prompt("Postgres")
    child.send("2\r\rblue\r1\r")
    assert child.exit_status() == 0
    lines = child.lines
    assert _answers(lines) == ANSWERS


def test_under_trio_a_terminal_gets_plain_lines(spawn: Callable[..., PtyChild]) -> None:
    """prompt_toolkit needs asyncio: under trio the demo asks in plain lines, which the
    terminal echoes, with the same protocol and the same answers."""
    child = spawn(sys.executable, "-W", "error", "-m", "hotseam", "demo", "--backend", "trio")
    for question, reply in (
        ("Which database", "2\r"),
        ("How should", "\r"),
        ("What colour", "blue\r"),
        ("Deploy the", "1\r"),
    ):
        child.wait_for(lambda c: question in c.text)  # noqa: B023 - used at once
        child.wait_prompt()
        child.send(reply)
    assert child.exit_status() == 0
    lines = child.lines
    assert _answers(lines) == ANSWERS
    assert "Tab completes" not in child.text  # no prompt_toolkit
    assert lines[-3:] == ["> 1", "-> Yes", "Deploy: Yes"]
