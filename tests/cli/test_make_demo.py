"""``make demo`` says it sets up .venv; dismissing the demo's last question ends it with 0."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest
from tests._timing import scaled

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_says_it_is_setting_up_the_venv_on_the_first_run(tmp_path: Path) -> None:
    """The first line of a first run says what the silent half minute is for (the rest of
    the set-up is cut short here: PYTHON=true creates nothing)."""
    venv = tmp_path / "venv"
    done = subprocess.run(
        [
            "make",
            "-s",
            "-C",
            str(ROOT),
            f"{venv}/.hotseam-installed",
            f"VENV={venv}",
            "PYTHON=true",
        ],
        capture_output=True,
        text=True,
        timeout=scaled(30),
        check=False,
    )
    assert done.stdout.splitlines()[0] == "setting up .venv (about half a minute, first run only)"


def test_dismissing_the_demo_s_last_question_is_a_normal_end(tmp_path: Path) -> None:
    """Ctrl-C at the last question: reported as no answer, exit 0 (no make error)."""
    child = pexpect.spawn(
        sys.executable,
        ["-m", "hotseam", "demo"],
        env={**_env(), "PROMPT_TOOLKIT_NO_CPR": "1"},
        encoding="utf-8",
        timeout=scaled(20),
        dimensions=(50, 140),
    )
    try:
        for question, reply in (
            ("Which database", "2\r"),
            ("How should", "\r"),
            ("What colour", "blue\r"),
            ("Deploy the", "\x03"),
        ):
            child.expect_exact(question)
            child.expect_exact(">")  # the prompt, drawn once the terminal is in raw mode
            child.send(reply)
        child.expect_exact("Deploy: no answer (ASK_CANCELLED")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0


def _env() -> dict[str, str]:
    import os

    return {key: value for key, value in os.environ.items() if key != "PROMPT_TOOLKIT_NO_CPR"}
