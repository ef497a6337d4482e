"""``hotseam run`` serving the inbox, as a daemon: a flood of idle connections from anyone
does not kill it, and a stop signal with pages open is a clean stop (real processes)."""

from __future__ import annotations

import json
import os
import queue
import resource
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from tests._timing import scaled

from cli._support import ASKING_AGENT, Process, hotseam, write  # the shared subprocess reader

TOKEN = "daemon-test-token-0123456789"
MARKER = """
from pathlib import Path


def setup(scope):
    scope.defer(lambda: Path("marker.disposed").touch())
"""
WEB_MODULE = """
from pathlib import Path

from hotseam.interaction import USER_INTERACTION
from hotseam.providers.web import WebProvider


def setup(scope):
    scope.defer(lambda: Path("web_ui.disposed").touch())
    web = WebProvider.serve(scope, port=0)
    scope.provide(USER_INTERACTION, web)
"""
DESCRIPTORS = 256  # the child's RLIMIT_NOFILE (soft and hard): a flood needs few connections


class Daemon(Process):
    """``python -m hotseam ARGS`` with a low limit on open files (set in the child)."""

    def __init__(self, *args: str, cwd: Path, descriptors: int | None = None) -> None:
        def limit_files() -> None:
            if descriptors is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (descriptors, descriptors))

        runtime = cwd / "rt"
        self.runtime = runtime
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "NO_COLOR": "1",
            "HOTSEAM_RUNTIME_DIR": str(runtime),
            "HOTSEAM_WEB_TOKEN": TOKEN,
        }
        popen = subprocess.Popen(
            [sys.executable, "-m", "hotseam", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=limit_files,  # before exec: the child runs no threads yet
        )
        self.popen = popen  # read as Process reads it
        self.lines = {"stdout": [], "stderr": []}
        self._queues = {}
        for name in ("stdout", "stderr"):
            self._queues[name] = queue.Queue()
            stream = getattr(popen, name)
            threading.Thread(target=self._pump, args=(name, stream), daemon=True).start()

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(timeout=scaled(20))


def logged(lines: list[str], event: str) -> list[dict[str, object]]:
    """The JSON log lines of ``event`` on a ``hotseam run`` stderr."""
    found = []
    for line in lines:
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("event") == event:
                found.append(record)
    return found


def assert_clean(stderr: list[str]) -> None:
    """No traceback and no error on stderr."""
    assert not [line for line in stderr if "Traceback" in line], "\n".join(stderr)
    errors = [line for line in stderr if line.startswith("{") and '"level": "error"' in line]
    assert not errors, "\n".join(errors)


@pytest.fixture(name="project")
def _project(tmp_path: Path) -> Path:
    write(tmp_path / "agent.py", ASKING_AGENT)
    write(tmp_path / "providers" / "marker.py", MARKER)
    return tmp_path


@pytest.fixture(name="daemons")
def _daemons() -> Iterator[list[Daemon]]:
    started: list[Daemon] = []
    yield started
    for daemon in started:
        daemon.stop()


def test_a_flood_of_idle_connections_leaves_the_daemon_serving(
    project: Path, daemons: list[Daemon]
) -> None:
    """More idle connections than the daemon has file descriptors, from a client without
    the token: it keeps serving, says so once, and answers (control socket, inbox) after."""
    daemon = Daemon(
        "run", "providers", "--agent", "agent.py", "--web", "--web-port", "0",
        cwd=project, descriptors=DESCRIPTORS,
    )  # fmt: skip
    daemons.append(daemon)
    pid_found, port_found = daemon.expect_each(
        r"hotseam status (\d+)", r"web inbox: http://127\.0\.0\.1:(\d+)/"
    )
    pid, port = pid_found.group(1), int(port_found.group(1))
    with ExitStack() as flood:
        for _ in range(DESCRIPTORS + 44):
            connection = flood.enter_context(socket.create_connection(("127.0.0.1", port), 10))
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\0" * 8)
        status = hotseam("status", pid, cwd=project, runtime=daemon.runtime)
        assert status.returncode == 0, status.stderr
        assert "hotseam run" in status.stdout
        daemon.expect(r'"event": "accept\.saturated"')
    daemon.expect(r'"event": "accept\.unsaturated"')  # the flood ended: served again
    with httpx.Client(
        base_url=f"http://127.0.0.1:{port}", headers={"x-hotseam-token": TOKEN}, timeout=scaled(10)
    ) as client:
        (question,) = client.get("/api/questions").json()["questions"]
        reply = client.post(f"/api/questions/{question['id']}/answer", json={"text": "teal"})
        assert reply.status_code == 200, reply.text
    daemon.expect(r"answer: teal", stream="stdout")
    assert daemon.popen.poll() is None
    assert daemon.finish(signal.SIGTERM) == 0
    (saturated,) = logged(daemon.lines["stderr"], "accept.saturated")  # once
    assert saturated["level"] == "warning" and saturated["limit"] == DESCRIPTORS // 4
    assert_clean(daemon.lines["stderr"])


@pytest.mark.parametrize(
    ("mode", "signum"),
    [("--web", signal.SIGTERM), ("--web", signal.SIGINT), ("module", signal.SIGTERM)],
    ids=["web-SIGTERM", "web-SIGINT", "module-SIGTERM"],
)
def test_a_stop_with_a_page_open_is_clean_and_the_page_hears_it(
    project: Path, daemons: list[Daemon], mode: str, signum: signal.Signals
) -> None:
    """An event stream and a kept-alive connection open: exit 0, nothing on stderr but
    info, every disposer ran, and the page got the closing note before its stream ended."""
    if mode == "module":
        write(project / "providers" / "web_ui.py", WEB_MODULE)
        daemon = Daemon("run", "providers", "--agent", "agent.py", cwd=project)
        daemons.append(daemon)
        port = int(daemon.expect(r'"address": "127\.0\.0\.1:(\d+)".*"event": "web\.serving"')[1])
    else:
        daemon = Daemon(
            "run", "providers", "--agent", "agent.py", "--web", "--web-port", "0", cwd=project
        )
        daemons.append(daemon)
        port = int(daemon.expect(r"web inbox: http://127\.0\.0\.1:(\d+)/").group(1))
    base = f"http://127.0.0.1:{port}"
    events: list[dict[str, object]] = []
    with (
        httpx.Client(base_url=base, headers={"x-hotseam-token": TOKEN}, timeout=scaled(10)) as kept,
        httpx.Client(base_url=base, timeout=scaled(10)) as page,
        page.stream("GET", f"/api/events?token={TOKEN}") as stream,
    ):
        assert stream.status_code == 200
        lines = stream.iter_lines()
        while not (events and (events[0]["questions"] or len(events) > 1)):  # asked, shown
            line = next(lines)
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
        assert events[0]["type"] == "snapshot"
        assert kept.get("/api/questions").status_code == 200  # a kept-alive connection
        daemon.popen.send_signal(signum)
        events.extend(json.loads(line[6:]) for line in lines if line.startswith("data: "))
    assert daemon.finish() == 0, "\n".join(daemon.lines["stderr"])
    assert events[-1]["type"] == "closing", events
    # The page hears that hotseam itself stops (not that a provider was reloaded).
    assert events[-1]["note"] == "hotseam is shutting down", events[-1]
    stderr = daemon.lines["stderr"]
    assert_clean(stderr)
    assert (project / "marker.disposed").exists()  # every disposer ran
    assert logged(stderr, "web.stopped")
    assert (project / "web_ui.disposed").exists() == (mode == "module")
