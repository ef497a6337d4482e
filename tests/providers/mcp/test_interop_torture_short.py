"""The MCP reload torture, short: real host sessions, real files, the real watcher.

``bench/mcp_torture.py --edits 1000`` runs in ``make stress``; this runs 30 edits with
one caller per protocol era (2025-11-25 and 2026-07-28), each a ``hotseam mcp``
subprocess, so the unit suite catches a broken guarantee in seconds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tests._timing import scaled

TORTURE = Path(__file__).resolve().parents[3] / "bench" / "mcp_torture.py"


@pytest.mark.stress  # two host sessions through 30 edits: `make test-stress` (and CI)
def test_thirty_edits_lose_no_answer_answer_none_twice_and_know_every_tool() -> None:
    """Exit 0 and the report's must-be-0 table all zeros, with calls answered on both eras."""
    done = subprocess.run(
        [sys.executable, str(TORTURE), "--edits", "30", "--callers", "2", "--settle", "10"],
        capture_output=True,
        text=True,
        timeout=scaled(120),
        check=False,
    )
    report = done.stdout
    assert done.returncode == 0, report + done.stderr
    for counter in (
        "lost answers",
        "answered twice",
        "wrong answers",
        "unknown tool",
        "shown twice on 2026-07-28",
    ):
        assert f"| {counter} | 0 |" in report, report
    for era in ("legacy", "2026-07-28"):
        assert f"| {era}: ask answered |" in report, report
        assert f"| {era}: echo answered |" in report, report
    assert "OK: every guarantee held" in report
