"""The event-loop watchdog: a blocked loop is named once per stall (module, function, line);
a second stop signal while it is blocked exits at once; a free loop hears nothing of it."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests._timing import scaled

from cli._support import Process
from hotseam.cli._watchdog import LoopWatchdog

from .conftest import write
from .test_cli import _provider

SLOW_SETUP = """
import time

from hotseam.interaction import USER_INTERACTION
from hotseam.providers.scripted import Reply, ScriptedProvider


def setup(scope):
    time.sleep({seconds})
    scope.provide(USER_INTERACTION, ScriptedProvider(lambda request: Reply.never()))
"""

BUSY_ASK = """
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.scripted import ScriptedProvider


def answer(request):
    while True:
        pass


def setup(scope):
    scope.provide(USER_INTERACTION, ScriptedProvider(answer))
"""

ASKING_AGENT = """
import anyio

async def main(context):
    await context.tools.execute("ask_user_question", {"question": "Colour?"})
    await anyio.sleep_forever()
"""


def _line(path: Path, text: str) -> int:
    """The number of the first line of ``path`` that contains ``text``."""
    lines = path.read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


@pytest.fixture(name="project")
def _project(tmp_path: Path) -> Path:
    write(tmp_path / "agent.py", ASKING_AGENT)
    (tmp_path / "providers").mkdir()
    return tmp_path


def test_a_blocking_sync_setup_is_named_once_and_the_loop_recovers(project: Path) -> None:
    """``time.sleep(2)`` in a synchronous setup, threshold 0.5 s (both scaled: a busy
    machine stalls a loop for a moment by itself): one warning naming the file, ``setup``
    and the sleep line, with the stack; then the loop runs and SIGTERM exits 0."""
    source = SLOW_SETUP.format(seconds=round(scaled(2), 2))
    line = _line(write(project / "providers" / "slow.py", source), "time.sleep")
    threshold = str(round(scaled(0.5), 2))
    process = Process(
        "dev", "providers", "--agent", "agent.py:main", "--stall-warning", threshold, cwd=project
    )
    try:
        process.expect(
            r"\[warning *\] the event loop has been blocked for [\d.]+ s "
            rf"by setup\(\) at providers/slow\.py:{line}$"
        )
        process.expect(r"^    time\.sleep\([\d.]+\)$")
        process.expect(r"the event loop runs again after being blocked for about [\d.]+ s")
    finally:
        code = process.finish(signal.SIGTERM)
    assert code == 0, process.lines
    stderr = process.lines["stderr"]
    assert sum("has been blocked" in line for line in stderr) == 1, stderr
    assert any("every generation was disposed" in line for line in stderr)


@pytest.mark.parametrize(
    ("command", "signum", "expected"),
    [("dev", signal.SIGINT, 130), ("run", signal.SIGTERM, 143)],
    ids=["dev-SIGINT", "run-SIGTERM"],
)
def test_a_second_stop_signal_ends_a_loop_blocked_by_a_busy_ask(
    project: Path, command: str, signum: int, expected: int
) -> None:
    """``while True: pass`` in an ask: the first signal cannot be handled (the process says
    so and keeps running); the second exits at once with 128 + signal, naming the ask."""
    line = _line(write(project / "providers" / "busy.py", BUSY_ASK), "while True")
    process = Process(
        command, "providers", "--agent", "agent.py:main", "--stall-warning", "0.5", cwd=project
    )
    try:
        process.expect(r"loop\.blocked|the event loop has been blocked")
        process.popen.send_signal(signum)
        process.expect(r"send it again to exit now")
        time.sleep(0.3)
        assert process.popen.poll() is None, "the first signal must not end the process"
        started = time.monotonic()
    finally:
        code = process.finish(signum)
    assert code == expected, process.lines
    assert time.monotonic() - started < scaled(3)
    stderr = "\n".join(process.lines["stderr"])
    assert "every generation was disposed" not in stderr
    if command == "run":
        events = [json.loads(line) for line in process.lines["stderr"]]
        forced = next(event for event in events if event["event"] == "loop.forced_exit")
        assert forced["function"] == "answer"
        assert forced["module"] == "busy"
        assert forced["line"] == line
        assert forced["exit_code"] == expected
        assert "while True:" in forced["traceback"]
    else:
        assert "exiting with 130 without disposing" in stderr
        assert f"by answer() at providers/busy.py:{line}" in stderr


def test_a_free_loop_logs_nothing_and_one_sigterm_disposes(project: Path) -> None:
    """A normal run with a tight threshold (0.3 s, scaled: a busy machine may not run the
    loop for that long): no loop event; SIGTERM runs every disposer."""
    marker = project / "disposed.txt"
    write(project / "providers" / "my_ui.py", _provider(1, marker))
    threshold = str(round(scaled(0.3), 2))
    process = Process(
        "run", "providers", "--agent", "agent.py:main", "--stall-warning", threshold, cwd=project
    )
    try:
        process.expect(r"watching")
        time.sleep(1.5)
    finally:
        code = process.finish(signal.SIGTERM)
    assert code == 0, process.lines
    assert marker.read_text().splitlines() == ["dispose 1 shutdown"]
    assert not [line for line in process.lines["stderr"] if '"event": "loop.' in line]


class _Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))

    info = exception = warning


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_watchdog_works_on_both_backends(backend: str) -> None:
    """In process: a blocking call is named and recovered from; two SIGINTs to a blocked loop
    (routed to the backend's signal receiver) call ``exit(130)``. The threshold, the block
    and the pause after it are scaled alike: a busy machine stalls a loop by itself."""
    log, exits = _Log(), []
    threshold = scaled(0.3)

    def blocking_call() -> None:
        time.sleep(threshold * 8 / 3)

    async def main() -> None:
        watchdog = LoopWatchdog(threshold, log, exits.append)
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async with watchdog.watching():
                blocking_call()
                await anyio.sleep(threshold * 4 / 3)
                os.kill(os.getpid(), signal.SIGINT)
                os.kill(os.getpid(), signal.SIGINT)
                deadline = time.monotonic() + scaled(3)
                while not exits and time.monotonic() < deadline:
                    time.sleep(0.05)  # noqa: ASYNC251 - blocks the loop: the receiver cannot run
            with anyio.move_on_after(0.5):  # trio redelivers signals left in its receiver
                async for _ in signals:
                    pass

    anyio.run(main, backend=backend)
    names = [event for event, _ in log.events]
    assert names[:2] == ["loop.blocked", "loop.unblocked"], log.events
    blocked = log.events[0][1]
    assert blocked["function"] == "blocking_call"
    assert blocked["file"] == __file__
    assert "time.sleep(threshold * 8 / 3)" in blocked["traceback"]
    assert exits[:1] == [130]
    assert "loop.forced_exit" in names
