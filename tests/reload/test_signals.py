"""Real signals to ``hotseam dev`` and ``hotseam run``: they stop it even with a stuck setup,
nothing is committed during shutdown, every disposer runs; SIGHUP reloads a daemon and stops
the developer loop."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from tests._timing import scaled

from cli._support import Process

from .conftest import write
from .test_cli import _provider

STUCK = """
import time

import anyio


async def setup(scope):
    print("setup stuck", flush=True)
    await anyio.to_thread.run_sync(time.sleep, 60)
"""

NEEDS_FLAG = """
from pathlib import Path

from hotseam.interaction import USER_INTERACTION
from hotseam.providers.scripted import Reply, ScriptedProvider


def _note(exit):
    with open({marker!r}, "a") as marker:
        marker.write(f"dispose {{exit.reason.value}}\\n")


def setup(scope):
    if not Path({flag!r}).exists():
        raise RuntimeError("the flag file is missing")
    scope.provide(USER_INTERACTION, ScriptedProvider(lambda request: Reply.never()))
    scope.defer_exit(_note)
"""


@pytest.fixture(name="project")
def _project(tmp_path: Path) -> Path:
    write(
        tmp_path / "agent.py",
        "import anyio\n\nasync def main(context):\n    await anyio.sleep_forever()\n",
    )
    (tmp_path / "providers").mkdir()
    return tmp_path


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("command", ["dev", "run"])
def test_a_stop_signal_ends_a_stuck_reload_at_once_and_commits_nothing(
    project: Path, command: str, signum: int
) -> None:
    """A setup stuck in a worker thread for 60 s: exit 0 within seconds; generation 1 is
    disposed for the shutdown; generation 2 never committed."""
    marker = project / "disposed.txt"
    ui = write(project / "providers" / "my_ui.py", _provider(1, marker))
    process = Process(command, "providers", "--agent", "agent.py:main", cwd=project)
    try:
        process.expect(r"watching")
        write(ui, STUCK)
        process.expect(r"^setup stuck$", stream="stdout")
    finally:
        started = time.monotonic()
        code = process.finish(signum)
    elapsed = time.monotonic() - started
    assert code == 0, process.lines
    assert elapsed < scaled(5), elapsed
    assert marker.read_text().splitlines() == ["dispose 1 shutdown"]
    stderr = "\n".join(process.lines["stderr"])
    assert "generation 2" not in stderr
    assert "setup of providers/my_ui.py" in stderr  # named as still running at the exit


def test_sighup_to_run_reloads_every_module_retrying_failed_ones(project: Path) -> None:
    """The daemon convention: a module that failed (a missing flag file) loads on SIGHUP."""
    marker, flag = project / "disposed.txt", project / "flag"
    write(
        project / "providers" / "my_ui.py",
        NEEDS_FLAG.format(marker=str(marker), flag=str(flag)),
    )
    process = Process("run", "providers", "--agent", "agent.py:main", cwd=project)
    try:
        process.expect(r'"event": "reload.aborted"')
        process.expect(r"watching")
        flag.write_text("")
        process.popen.send_signal(signal.SIGHUP)
        process.expect(r'"event": "reload.committed"')
        process.expect(r"SIGHUP: 1 module\(s\) reloaded, 0 failed")
    finally:
        code = process.finish(signal.SIGTERM)
    assert code == 0, process.lines
    assert marker.read_text().splitlines() == ["dispose shutdown"]


def test_sighup_to_dev_shuts_down_running_every_disposer(project: Path) -> None:
    """The terminal went away: every generation is disposed, exit 0."""
    marker = project / "disposed.txt"
    write(project / "providers" / "my_ui.py", _provider(1, marker))
    process = Process("dev", "providers", "--agent", "agent.py:main", cwd=project)
    try:
        process.expect(r"watching")
    finally:
        code = process.finish(signal.SIGHUP)
    assert code == 0, process.lines
    assert marker.read_text().splitlines() == ["dispose 1 shutdown"]
    assert any("SIGHUP: shutting down" in line for line in process.lines["stderr"])
