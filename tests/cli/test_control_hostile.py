"""Nothing a client sends on the control socket ends ``hotseam run``: every bad request is a
reply naming what is wrong, and a client that is slow, sends too much, hangs up or never
reads costs its own connection only. Real processes, real Unix sockets."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests._timing import scaled

from hotseam.cli._control import MAX_PATHS, MAX_REQUEST, Claim, answer, serving
from hotseam.cli._control_client import MAX_CONNECTIONS, ControlError, Endpoint, request

from ._support import ASKING_AGENT, HELD_PROVIDER, Process, hotseam, write

BOUND = (
    5.0  # seconds on an idle machine, scaled where used (the factor of the test, not of the import)
)
"""Every reply comes within this (one takes a millisecond or two)."""


class Daemon:
    """A ``hotseam run`` shared by the tests of this module, and its control socket."""

    def __init__(self, project: Path) -> None:
        self.project = project
        self.runtime = project / "rt"
        self.process = Process(
            "run", "providers", "--agent", "agent", cwd=project, runtime=self.runtime
        )
        found = self.process.expect(r'"control socket: (\S+) \(hotseam status (\d+)\)"')
        self.socket = Path(found.group(1))
        self.pid = int(found.group(2))
        self.process.expect(r'"ask.started"')

    def exchange(self, data: bytes, *, shut: bool = True) -> bytes:
        """Send ``data`` (then shut our side) and return all the daemon sent back."""
        return exchange(self.socket, data, shut=shut)

    def assert_alive(self) -> None:
        """The daemon still runs and still answers ``status``."""
        assert self.process.popen.poll() is None, self.process.lines
        reply = one_reply(self.exchange(b'{"op": "status"}\n'))
        assert reply["ok"] is True
        assert reply["pid"] == self.pid


def exchange(path: Path, data: bytes, *, shut: bool = True) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(scaled(BOUND))
        client.connect(str(path))
        client.sendall(data)
        if shut:
            client.shutdown(socket.SHUT_WR)
        received = bytearray()
        while chunk := client.recv(65536):
            received += chunk
    return bytes(received)


def one_reply(raw: bytes) -> dict[str, Any]:
    """``raw`` is exactly one JSON object on one line."""
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1, raw[:200]
    reply = json.loads(raw)
    assert isinstance(reply, dict)
    assert isinstance(reply["ok"], bool)
    return reply


@pytest.fixture(name="daemon", scope="module")
def _daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    project = tmp_path_factory.mktemp("hostile")
    write(project / "agent.py", ASKING_AGENT)
    write(project / "providers" / "ui.py", HELD_PROVIDER)
    daemon = Daemon(project)
    yield daemon
    code = daemon.process.finish(signal.SIGTERM)
    assert code == 0, daemon.process.lines
    # Bad requests are replies, not failures: nothing was logged as an error.
    assert not [line for line in daemon.process.lines["stderr"] if '"level": "error"' in line]


def request_line(message: object) -> bytes:
    return json.dumps(message).encode() + b"\n"


HOSTILE = [
    pytest.param(b"[" * 3000 + b"\n", "not valid JSON: recursion limit exceeded", id="nesting"),
    pytest.param(
        b'{"op": "status", "x": ' + b"[" * 3000 + b"]" * 3000 + b"}\n",
        "not valid JSON: recursion limit exceeded",
        id="deep-value-in-a-valid-request",
    ),
    pytest.param(
        b'{"op": "reload", "paths": [' + b'{"a":' * 250 + b"\n",
        "not valid JSON: recursion limit exceeded",
        id="deep-paths",
    ),
    pytest.param(b'{"op": "st\xff\xfeus"}\n', "not valid JSON", id="invalid-utf-8"),
    pytest.param(b'{"op":\x00"status"}\n', "not valid JSON", id="nul-byte"),
    pytest.param(
        request_line({"op": "reload", "paths": ["providers/\0ui.py"]}),
        "paths.0: Value error, a path cannot contain a NUL character",
        id="nul-in-a-path",
    ),
    pytest.param(
        request_line({"op": "reload", "paths": [1, None, {"a": []}]}),
        "paths.0: Input should be a valid string; paths.1: Input should be a valid string; "
        "paths.2: Input should be a valid string",
        id="paths-not-strings",
    ),
    pytest.param(
        request_line({"op": "reload", "paths": "providers"}),
        "paths: Input should be a valid array",
        id="paths-not-a-list",
    ),
    pytest.param(
        request_line({"op": "reload", "paths": ["p"] * (MAX_PATHS + 1)}),
        f"paths: List should have at most {MAX_PATHS} items",
        id="too-many-paths",
    ),
    pytest.param(
        request_line({"op": "shutdown"}),
        "op: Input should be 'status' or 'reload'",
        id="unknown-op",
    ),
    pytest.param(request_line({}), "op: Field required", id="no-op"),
    pytest.param(b"[1, 2]\n", "expected a JSON object", id="an-array"),
    pytest.param(b'"status"\n', "expected a JSON object", id="a-string"),
    pytest.param(b'{"op": "status"} {"op": "status"}\n', "trailing characters", id="two"),
    pytest.param(b"\n", "empty request", id="empty-line"),
    pytest.param(b"", "empty request", id="nothing-then-hang-up"),
    pytest.param(
        b"x" * (MAX_REQUEST + 10),
        f"the request line is longer than {MAX_REQUEST} bytes",
        id="64-KB-without-a-newline",
    ),
]


@pytest.mark.parametrize(("payload", "error"), HOSTILE)
def test_a_hostile_request_is_answered_with_what_is_wrong(
    daemon: Daemon, payload: bytes, error: str
) -> None:
    reply = one_reply(daemon.exchange(payload))
    assert reply["ok"] is False
    assert reply["code"] == "BAD_REQUEST"
    assert reply["error"].startswith("bad request: ")
    assert error in reply["error"]
    assert len(reply["error"]) < 400  # the input is never echoed
    daemon.assert_alive()


def test_a_line_over_64_kb_is_answered_without_waiting_for_more(daemon: Daemon) -> None:
    """The client keeps its side open: the reply comes once the limit is passed."""
    started = time.monotonic()
    reply = one_reply(daemon.exchange(b"x" * (MAX_REQUEST + 10), shut=False))
    assert time.monotonic() - started < 1.5
    assert reply["error"] == f"bad request: the request line is longer than {MAX_REQUEST} bytes"
    daemon.assert_alive()


def test_a_request_is_answered_after_the_client_shuts_its_side(daemon: Daemon) -> None:
    """A client that sends its request without a newline and half-closes gets its reply."""
    reply = one_reply(daemon.exchange(b'{"op": "status"}', shut=True))
    assert (reply["ok"], reply["pid"]) == (True, daemon.pid)


def test_a_silent_connection_is_closed_within_the_request_bound(daemon: Daemon) -> None:
    """A client that connects and sends nothing is told so and closed after 2 s (was 10 s),
    and other clients are served meanwhile."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.settimeout(scaled(BOUND))
        silent.connect(str(daemon.socket))
        started = time.monotonic()
        daemon.assert_alive()
        raw = silent.recv(65536)
        waited = time.monotonic() - started
        assert silent.recv(65536) == b""  # closed after the reply
    assert 1.5 < waited < 2 + scaled(1.5)
    reply = one_reply(raw)
    assert reply["error"] == "bad request: no complete request line within 2 s"


def test_past_64_connections_a_new_one_is_closed_at_once(daemon: Daemon) -> None:
    """64 connections that send nothing: the 65th is closed unserved at once (not queued
    behind them), saturation is logged; once they go, the daemon serves again."""
    with ExitStack() as held:
        for _ in range(MAX_CONNECTIONS):
            client = held.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
            client.connect(str(daemon.socket))
        started = time.monotonic()
        try:
            unserved = exchange(daemon.socket, b'{"op": "status"}\n', shut=False)
        except ConnectionResetError:  # closed with our request unread
            unserved = b""
        assert unserved == b""
        assert time.monotonic() - started < 1.0
        daemon.process.expect(r'"event": "accept.saturated"')
    daemon.process.expect(r'"event": "accept.unsaturated"')
    daemon.assert_alive()


def test_a_path_named_a_thousand_times_is_reloaded_once(daemon: Daemon) -> None:
    reply = one_reply(
        daemon.exchange(request_line({"op": "reload", "paths": ["providers"] * 1000}))
    )
    assert reply["ok"] is True, reply
    assert [item["path"] for item in reply["committed"]] == ["providers/ui.py"]
    daemon.assert_alive()


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _nest(depth: int, opener: bytes, inner: bytes) -> bytes:
    return opener * depth + inner


LINES = st.one_of(
    st.binary(max_size=600),
    st.builds(
        lambda message: json.dumps(message).encode(),
        st.fixed_dictionaries(
            {"op": st.sampled_from(["status", "reload", "Status", ""]) | JSON_VALUES},
            optional={"paths": st.lists(JSON_VALUES, max_size=5) | JSON_VALUES, "x": JSON_VALUES},
        ),
    ),
    st.builds(
        _nest,
        st.integers(min_value=150, max_value=5000),
        st.sampled_from([b"[", b"{", b'{"a":', b'[{"op":']),
        st.binary(max_size=20),
    ),
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(line=LINES, newline=st.booleans())
def test_random_bytes_always_get_one_reply(daemon: Daemon, line: bytes, newline: bool) -> None:
    """Whatever the bytes, the reply is one JSON object line, and the daemon lives on."""
    reply = one_reply(daemon.exchange(line + (b"\n" if newline else b"")))
    if not reply["ok"]:
        assert isinstance(reply["error"], str)
        assert reply["code"] in ("BAD_REQUEST", "INVALID_RELOAD_PATH"), reply
    assert daemon.process.popen.poll() is None, daemon.process.lines


@pytest.mark.anyio
async def test_a_client_that_never_reads_its_reply_is_dropped(tmp_path: Path) -> None:
    """A reply larger than the socket buffers, to a client that never reads: the connection
    is given up at the reply bound, and the handler returns (its task does not pile up)."""
    big = {"ok": True, "blob": "x" * (8 * 2**20)}

    async def handler(message: dict[str, Any]) -> dict[str, Any]:
        return big

    path = tmp_path / "c.sock"
    finished = anyio.Event()
    async with await anyio.create_unix_listener(path) as listener:

        async def serve_one() -> None:
            stream = await listener.accept()
            async with stream:
                await answer(stream, handler, log=None, reply_timeout=0.3)
            finished.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(serve_one)
            client = await anyio.connect_unix(path)
            async with client:
                await client.send(b'{"op": "status"}\n')
                with anyio.fail_after(scaled(BOUND)):
                    await finished.wait()


class Recorder:
    """A logger keeping each line, as structlog's bound logger is called."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.lines.append(("info", event))

    def warning(self, event: str, **fields: Any) -> None:
        self.lines.append(("warning", event))

    def error(self, event: str, **fields: Any) -> None:
        self.lines.append(("error", event))


@pytest.mark.anyio
async def test_serving_answers_and_cleans_up_on_both_backends(tmp_path: Path) -> None:
    """In-process, on asyncio and trio: the socket is the owner's alone, a good request and
    a hostile one are both answered, a name link points at it, and both go at the end."""

    async def handler(message: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "echo": message}

    path, link = tmp_path / "1.sock", tmp_path / "name.sock"
    log = Recorder()
    async with serving(Claim(path, link, notes=("a note",)), handler, log):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert os.readlink(link) == "1.sock"
        good, deep = await anyio.to_thread.run_sync(
            lambda: (
                exchange(path, b'{"op": "reload", "paths": ["a", "a"], "x": 1}\n'),
                exchange(path, b"[" * 3000 + b"\n"),
            )
        )
    assert one_reply(good) == {"ok": True, "echo": {"op": "reload", "paths": ["a"]}}
    assert "recursion limit exceeded" in one_reply(deep)["error"]
    assert not path.exists() and not link.is_symlink()
    assert log.lines == [
        ("info", "a note"),
        ("info", f"control socket: {path} (hotseam status {os.getpid()})"),
    ]


def _stop_serving(server: socket.socket, thread: threading.Thread) -> None:
    """Close a listening socket and join the thread blocked in its ``accept()``.

    Closing alone does not wake that thread on Linux (it would wait forever): shutting the
    socket down first makes ``accept()`` fail with EINVAL.
    """
    with contextlib.suppress(OSError):  # the thread may have ended it already
        server.shutdown(socket.SHUT_RDWR)
    server.close()
    thread.join(scaled(BOUND))
    assert not thread.is_alive(), "the test server's thread did not end"


class HostileServer:
    """A Unix socket that replies ``payload`` to every connection (probes included)."""

    def __init__(self, path: Path, payload: bytes) -> None:
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen()
        self.payload = payload
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            with connection, contextlib.suppress(OSError):
                connection.settimeout(scaled(BOUND))
                if connection.recv(65536):  # a request (the liveness probe sends nothing)
                    connection.sendall(self.payload)

    def close(self) -> None:
        _stop_serving(self.server, self.thread)


class BusyServer:
    """A Unix socket that closes its first ``busy`` connections unread, then replies."""

    def __init__(self, path: Path, busy: int) -> None:
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen()
        self.busy = busy
        self.connections = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            with connection, contextlib.suppress(OSError):
                if self.connections > self.busy:
                    connection.recv(65536)
                    connection.sendall(b'{"ok": true}\n')

    def close(self) -> None:
        _stop_serving(self.server, self.thread)


def test_a_client_closed_unserved_tries_again(tmp_path: Path) -> None:
    """A process at its connection limit closes new ones unread: ``hotseam status`` and
    ``reload`` try again until their time bound, then say what happened."""
    busy = BusyServer(tmp_path / "busy.sock", busy=3)
    try:
        assert request(Endpoint(0, tmp_path / "busy.sock"), {"op": "status"}) == {"ok": True}
        assert busy.connections == 4
    finally:
        busy.close()
    never = BusyServer(tmp_path / "never.sock", busy=10**9)
    try:
        with pytest.raises(ControlError) as caught:
            request(Endpoint(0, tmp_path / "never.sock"), {"op": "status"}, timeout=0.5)
    finally:
        never.close()
    assert str(caught.value) == (
        f"{tmp_path / 'never.sock'} closed every connection without a reply for 0.5 s "
        f"(it serves at most {MAX_CONNECTIONS} at once)"
    )


@pytest.mark.parametrize(
    ("payload", "said"),
    [
        pytest.param(b"[" * 100_000, "recursion limit exceeded", id="nesting"),
        pytest.param(b"\xff\xfe\n", "not JSON", id="not-json"),
    ],
)
def test_a_hostile_reply_is_one_line_and_exit_1(tmp_path: Path, payload: bytes, said: str) -> None:
    """``hotseam status`` talking to something that is not hotseam: one line, exit 1."""
    path = tmp_path / "x.sock"
    server = HostileServer(path, payload)
    try:
        result = hotseam("status", str(path), cwd=tmp_path, runtime=tmp_path / "rt")
    finally:
        server.close()
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"hotseam status: {path} replied with something that is not JSON ("
    )
    assert said in result.stderr
    assert result.stderr.count("\n") == 1
