"""Whatever the agent raises is the agent's failure, ``BaseException`` included, and a
provider's crash is logged where it happened.

``hotseam dev`` on a terminal reports ``sys.exit(3)``, a ``KeyboardInterrupt``, a
``GeneratorExit`` or a ``CancelledError`` raised by the agent (SIGINT is routed to a signal
receiver: a KeyboardInterrupt there is the agent's, not the user's Ctrl-C) and keeps
watching; ``sys.exit()`` is the agent finishing. In ``hotseam run`` the agent's end ends the
command: ``sys.exit(0)`` exits 0, anything else raised exits 1 with the reason logged as one
JSON line. A crash in a provider's ``ask()`` is an ``ask.provider_failed`` error event with
its ``file:line`` and traceback, never the question's text.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pexpect
from tests._timing import scaled

from ._support import DEADLINE, hotseam_env, write

RAISING_AGENT = """
import asyncio
import sys

MODE = "exit3"


async def main(context):
    print(f"mode {MODE}", flush=True)
    if MODE == "exit3":
        sys.exit(3)
    if MODE == "interrupt":
        raise KeyboardInterrupt
    if MODE == "generator":
        raise GeneratorExit
    if MODE == "cancelled":
        raise asyncio.CancelledError
    if MODE == "exit":
        sys.exit()
"""

CRASHING_UI = """
from hotseam.interaction import USER_INTERACTION


class BrokenUI:
    async def ask(self, request):
        raise ValueError("the dial is broken")  # RAISES


def setup(scope):
    scope.provide(USER_INTERACTION, BrokenUI())
"""

ASKS_THEN_EXITS = """
import sys


async def main(context):
    result = await context.tools.execute(
        "ask_user_question", {"question": "Secret plan?", "header": "Plan"}
    )
    print("code:", result.error["code"], flush=True)
    sys.exit(0)
"""


def test_dev_on_a_terminal_reports_what_the_agent_raised_and_keeps_watching(
    tmp_path: Path,
) -> None:
    agent = write(tmp_path / "agent.py", RAISING_AGENT)
    (tmp_path / "providers").mkdir()
    child = pexpect.spawn(
        sys.executable,
        ["-m", "hotseam", "dev", "providers", "--agent", "agent.py"],
        cwd=str(tmp_path),
        env=hotseam_env(tmp_path / "rt"),
        encoding="utf-8",
        timeout=scaled(DEADLINE),
        dimensions=(50, 160),
    )
    watching = "keeps watching; save agent.py or press Enter to run it again"
    try:
        child.expect_exact("the agent failed: SystemExit: 3")
        child.expect_exact(watching)
        for mode, reported in [
            ("interrupt", "the agent failed: KeyboardInterrupt"),
            ("generator", "the agent failed: GeneratorExit"),
            ("cancelled", "the agent failed: CancelledError"),
            ("exit", "the agent finished (it called sys.exit())"),
        ]:
            write(agent, RAISING_AGENT.replace('MODE = "exit3"', f'MODE = "{mode}"'))
            child.expect_exact("agent.py changed: running the agent again")
            child.expect_exact(f"mode {mode}")
            child.expect_exact(reported)
            child.expect_exact(watching)
        child.send("\x03")  # Ctrl-C with no question open: the user's, so it stops
        child.expect_exact("SIGINT: shutting down")
        child.expect_exact("every generation was disposed")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0


def test_run_ends_with_the_agent_sys_exit_0_is_a_finish_and_a_provider_crash_is_logged(
    tmp_path: Path,
) -> None:
    """Three daemons at once: ``sys.exit(0)`` after a provider crashed (exit 0, the crash
    logged), ``sys.exit(3)`` (exit 1) and ``raise KeyboardInterrupt`` (exit 1)."""
    agents = {
        "finishes": ASKS_THEN_EXITS,
        "exits3": RAISING_AGENT,
        "interrupts": RAISING_AGENT.replace('MODE = "exit3"', 'MODE = "interrupt"'),
    }
    processes = {}
    for name, source in agents.items():
        project = tmp_path / name
        write(project / "agent.py", source)
        write(project / "providers" / "broken_ui.py", CRASHING_UI)
        processes[name] = subprocess.Popen(
            [sys.executable, "-m", "hotseam", "run", "providers", "--agent", "agent.py"],
            cwd=project,
            env=hotseam_env(project / "rt"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    outputs = {}
    try:
        for name, process in processes.items():
            out, err = process.communicate(timeout=scaled(DEADLINE))
            outputs[name] = (
                process.returncode,
                out,
                [json.loads(line) for line in err.splitlines()],
            )
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.communicate()

    code, out, events = outputs["finishes"]
    assert (code, out) == (0, "code: PROVIDER_FAILED\n"), events
    _disposed_last(events)
    assert "the agent finished (it called sys.exit(0))" in [event["event"] for event in events]
    (crash,) = [event for event in events if event["event"] == "ask.provider_failed"]
    ui = tmp_path / "finishes" / "providers" / "broken_ui.py"
    line = (
        CRASHING_UI.lstrip("\n")
        .splitlines()
        .index('        raise ValueError("the dial is broken")  # RAISES')
    )
    assert crash["level"] == "error"
    assert crash["location"] == f"{ui}:{line + 1}"
    assert crash["provider"] == "broken_ui.BrokenUI"
    assert crash["summary"] == (
        "the user-interaction provider broken_ui.BrokenUI failed: ValueError: the dial is "
        f"broken at {ui}:{line + 1}; the ask fails with PROVIDER_FAILED"
    )
    assert f'File "{ui}", line {line + 1}, in ask\n' in crash["traceback"]
    assert crash["traceback"].endswith("\nValueError: the dial is broken\n")
    assert not [event for event in events if "Secret plan" in json.dumps(event)]

    for name, reported in [
        ("exits3", "the agent failed: SystemExit: 3"),
        ("interrupts", "the agent failed: KeyboardInterrupt"),
    ]:
        code, out, events = outputs[name]
        assert code == 1, events
        (failed,) = [event for event in events if event["event"] == reported]
        assert failed["level"] == "error"
        assert 'File "' in failed["exception"]  # where the agent raised it
        _disposed_last(events)


def _disposed_last(events: list[dict[str, object]]) -> None:
    """Every generation was disposed at the end: only the journal's own closing lines (info)
    come after it."""
    names = [event["event"] for event in events]
    assert "every generation was disposed" in names, names
    after = events[names.index("every generation was disposed") + 1 :]
    assert all(event["level"] == "info" for event in after), after
    assert all(str(event.get("logger", "")).startswith("hotseam.") for event in after), after
