"""Running out of file descriptors does not end ``hotseam run``: accepting on the control
socket backs off and retries (one warning per episode, one line at recovery), a module that
cannot be read is reported, and everything works again once descriptors are free. The
child runs under a low RLIMIT_NOFILE (soft and hard), so a few dozen connections do it."""

from __future__ import annotations

import json
import resource
import signal
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from tests._timing import scaled

from hotseam.cli._agent_loop import FILE_POLL

from ._support import ASKING_AGENT, Process, hotseam, write

DESCRIPTORS = 48
"""The child's limit: it idles with about a dozen open."""


def limited(descriptors: int) -> Callable[[], None]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (descriptors, descriptors))

    return limit


@pytest.fixture(name="clients")
def _clients() -> Iterator[ExitStack]:
    with ExitStack() as stack:
        yield stack


def connect(path: Path, clients: ExitStack) -> socket.socket:
    client = clients.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
    client.settimeout(10.0)
    client.connect(str(path))
    return client


def events(process: Process, name: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in process.lines["stderr"] if f'"event": "{name}"' in line]


def test_idle_connections_past_the_descriptor_limit_do_not_end_the_daemon(
    tmp_path: Path, clients: ExitStack
) -> None:
    """More idle connections than free descriptors: accept fails with EMFILE, which is
    logged once; the idle ones are closed after 2 s, accepting resumes (logged), status
    answers, and SIGTERM still exits 0."""
    write(tmp_path / "agent.py", ASKING_AGENT)
    (tmp_path / "providers").mkdir()
    runtime = tmp_path / "rt"
    process = Process(
        "run",
        "providers",
        "--agent",
        "agent",
        cwd=tmp_path,
        runtime=runtime,
        preexec_fn=limited(DESCRIPTORS),
    )
    try:
        path = Path(process.expect(r'"control socket: (\S+) ').group(1))
        idle = [connect(path, clients) for _ in range(DESCRIPTORS + 12)]
        process.expect(r'"event": "accept.starved"')
        process.expect(r'"event": "accept.recovered"')
        status = hotseam("status", "--json", cwd=tmp_path, runtime=runtime)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["pid"] == process.popen.pid
        # The first idle connection was told why it was closed.
        reply = json.loads(idle[0].recv(65536))
        assert reply["error"] == "bad request: no complete request line within 2 s"
    finally:
        code = process.finish(signal.SIGTERM)
    assert code == 0, process.lines
    (starved,) = events(process, "accept.starved")
    assert (starved["level"], starved["listener"], starved["errno"]) == (
        "warning",
        "control socket",
        "EMFILE",
    )
    assert "out of file descriptors (soft limit RLIMIT_NOFILE" in str(starved["summary"])
    assert len(events(process, "accept.recovered")) == 1
    assert not [line for line in process.lines["stderr"] if '"level": "error"' in line]


HOG = """
import os
from pathlib import Path

import anyio
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.scripted import Reply, ScriptedProvider


def setup(scope):
    scope.provide(USER_INTERACTION, ScriptedProvider(lambda request: Reply.never()))
    held = []
    try:
        while True:
            held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError as error:
        print(f"hog holds every descriptor: {error.strerror}", flush=True)

    def release():
        while held:
            os.close(held.pop())

    async def until_released():
        while not Path("release").exists():  # a stat: needs no descriptor
            await anyio.sleep(0.02)
        release()
        print("hog released", flush=True)

    scope.defer(release)
    scope.spawn(until_released)
"""


def test_a_provider_holding_every_descriptor_is_survived(
    tmp_path: Path, clients: ExitStack
) -> None:
    """Provider code takes every descriptor: a saved module cannot be read (deferred, naming
    the file), a status request waits in the backlog (warned once), and both work once the
    descriptors are free again (the module is read again on its own)."""
    write(tmp_path / "agent.py", ASKING_AGENT)
    write(tmp_path / "providers" / "hog.py", HOG)
    runtime = tmp_path / "rt"
    process = Process(
        "run",
        "providers",
        "--agent",
        "agent",
        cwd=tmp_path,
        runtime=runtime,
        preexec_fn=limited(DESCRIPTORS),
    )
    try:
        path = Path(process.expect(r'"control socket: (\S+) ').group(1))
        process.expect(r"^hog holds every descriptor: Too many open files$", stream="stdout")
        process.expect(r'"ask.started"')
        waiting = connect(path, clients)
        waiting.sendall(b'{"op": "status"}\n')
        process.expect(r'"event": "accept.starved"')

        write(tmp_path / "providers" / "late.py", "def setup(scope):\n    pass\n")
        unread = json.loads(process.expect(r'"event": "reload.deferred"').string)
        assert unread["paths"] == [str(tmp_path / "providers" / "late.py")]
        assert unread["error"] == "Too many open files"

        (tmp_path / "release").touch()
        process.expect(r"^hog released$", stream="stdout")
        # In whichever order they come (a busy machine may read the module first): the
        # accept retried, and the module read again on its own.
        process.expect_each(
            r'"event": "accept.recovered"', r'late\.py.*"event": "reload.committed"'
        )
        reply = json.loads(waiting.recv(1 << 20))
        assert (reply["ok"], reply["pid"]) == (True, process.popen.pid)

        again = hotseam("reload", "providers/late.py", cwd=tmp_path, runtime=runtime)
        assert again.returncode == 0, again.stderr
        assert again.stdout == "reloaded providers/late.py (generation 2)\n"
        # What must not happen has no line to wait for: give the agent's watcher a few
        # looks at its module, which it could read again since the release.
        time.sleep(scaled(4 * FILE_POLL))
    finally:
        code = process.finish(signal.SIGTERM)
    assert code == 0, process.lines
    assert len(events(process, "accept.starved")) == 1
    # The agent's module could not be read when its run started (every descriptor was
    # taken): reading it later is no save, and the agent's question was never withdrawn.
    assert not [line for line in process.lines["stderr"] if "agent.py changed" in line]
