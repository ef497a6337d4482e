"""The shared accept loop: real sockets, on asyncio and trio; EMFILE for real in a child."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import pytest
from structlog.testing import capture_logs
from tests._timing import scaled

from hotseam.providers._accept import accept_connections


class Recorder:
    """A logger that keeps what was logged (the loop takes any object with these methods)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []
        self.logged = anyio.Event()

    def _add(self, level: str, event: str, fields: dict[str, Any]) -> None:
        self.lines.append((level, event, fields))
        self.logged.set()
        self.logged = anyio.Event()

    def info(self, event: str, **fields: Any) -> None:
        self._add("info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._add("warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._add("error", event, fields)

    def events(self, name: str) -> list[dict[str, Any]]:
        return [fields for _level, event, fields in self.lines if event == name]

    async def until(self, name: str) -> dict[str, Any]:
        with anyio.fail_after(scaled(10)):
            while not self.events(name):
                await self.logged.wait()
        return self.events(name)[-1]


def listening() -> socket.socket:
    sock = socket.create_server(("127.0.0.1", 0))
    sock.setblocking(False)
    return sock


def close_listener(sock: socket.socket) -> None:
    anyio.notify_closing(sock)
    sock.close()


async def connect(sock: socket.socket) -> anyio.abc.SocketStream:
    return await anyio.connect_tcp("127.0.0.1", sock.getsockname()[1])


async def ended(stream: anyio.abc.SocketStream) -> bool:
    """True when the server closed the connection (EOF or reset) without sending more."""
    with anyio.fail_after(scaled(10)):
        try:
            await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return True
    return False


@asynccontextmanager
async def accepting(
    sock: socket.socket, handle: Any, *, limit: int = 16, log: Recorder | None = None
) -> AsyncIterator[anyio.abc.TaskGroup]:
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: accept_connections(sock, handle, limit=limit, what="test listener", logger=log)
        )
        yield tg
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_each_connection_is_handled_in_its_own_task_and_closed_after() -> None:
    sock = listening()
    both_in = anyio.Event()
    inside = 0

    async def echo(connection: socket.socket) -> None:
        nonlocal inside
        inside += 1
        if inside == 2:
            both_in.set()
        async with await anyio.abc.SocketStream.from_socket(connection) as stream:
            data = await stream.receive()
            await both_in.wait()  # both are handled at once
            await stream.send(b"echo:" + data)

    with sock:
        async with accepting(sock, echo):
            first, second = await connect(sock), await connect(sock)
            async with first, second:
                await first.send(b"one")
                await second.send(b"two")
                with anyio.fail_after(scaled(10)):
                    assert await first.receive() == b"echo:one"
                    assert await second.receive() == b"echo:two"
                assert await ended(first) and await ended(second)  # closed by the loop


@pytest.mark.anyio
async def test_a_failing_handler_is_logged_and_the_loop_goes_on() -> None:
    sock = listening()
    calls = 0

    async def handle(connection: socket.socket) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ValueError("a handler bug")
        connection.send(b"fine")

    with sock, capture_logs() as logs:
        async with accepting(sock, handle):
            async with await connect(sock) as broken:
                assert await ended(broken)
            async with await connect(sock) as working:
                with anyio.fail_after(scaled(10)):
                    assert await working.receive() == b"fine"
    (failure,) = [log for log in logs if log["event"] == "accept.handler_failed"]
    assert failure["log_level"] == "error" and failure["exc_info"] is True
    assert failure["listener"] == "test listener"


@pytest.mark.anyio
async def test_past_the_limit_a_connection_is_closed_at_once_and_logged_once() -> None:
    sock = listening()
    release = anyio.Event()
    served = 0

    async def hold(connection: socket.socket) -> None:
        nonlocal served
        served += 1
        connection.send(b"served")
        await release.wait()

    log = Recorder()
    with sock:
        async with accepting(sock, hold, limit=2, log=log):
            held = [await connect(sock) for _ in range(2)]
            for stream in held:
                with anyio.fail_after(scaled(10)):
                    assert await stream.receive() == b"served"
            refused = [await connect(sock) for _ in range(3)]
            for stream in refused:
                assert await ended(stream)
                await stream.aclose()
            assert served == 2
            (warning,) = log.events("accept.saturated")
            assert warning["limit"] == 2 and warning["listener"] == "test listener"
            release.set()
            recovered = await log.until("accept.unsaturated")
            assert recovered["refused"] == 3
            for stream in held:
                assert await ended(stream)
                await stream.aclose()
            async with await connect(sock) as again:  # served again below the limit
                with anyio.fail_after(scaled(10)):
                    assert await again.receive() == b"served"
    assert len(log.events("accept.saturated")) == 1


@pytest.mark.anyio
async def test_cancelling_the_loop_cancels_the_handlers_and_closes_their_sockets() -> None:
    sock = listening()
    started = anyio.Event()
    cancelled = anyio.Event()

    async def forever(connection: socket.socket) -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    with sock:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: accept_connections(sock, forever, limit=4, what="test listener"))
            async with await connect(sock) as client:
                with anyio.fail_after(scaled(10)):
                    await started.wait()
                tg.cancel_scope.cancel()
                with anyio.fail_after(scaled(10)):
                    await cancelled.wait()
                assert await ended(client)


@pytest.mark.anyio
@pytest.mark.parametrize("notify", [True, False], ids=["notify_closing", "plain-close"])
async def test_closing_the_socket_ends_the_loop_once_its_handlers_finish(notify: bool) -> None:
    sock = listening()
    finish = anyio.Event()
    returned = anyio.Event()

    async def slow(connection: socket.socket) -> None:
        await finish.wait()
        connection.send(b"finished")

    async def loop() -> None:
        await accept_connections(sock, slow, limit=4, what="test listener")
        returned.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(loop)
        async with await connect(sock) as client:
            await anyio.wait_all_tasks_blocked()
            if notify:
                close_listener(sock)
            else:
                sock.close()
            await anyio.wait_all_tasks_blocked()
            assert not returned.is_set()  # a handler is still in flight
            finish.set()
            with anyio.fail_after(scaled(10)):
                assert await client.receive() == b"finished"
                await returned.wait()


# -- running out of file descriptors, for real, in a child process ----------------------------

CHILD = textwrap.dedent(
    """
    import errno, json, os, resource, socket, sys
    import anyio

    from hotseam.providers._accept import accept_connections

    class Log:
        def __init__(self):
            self.warned = anyio.Event()
        def _out(self, level, event, fields):
            fields.pop("exc_info", None)
            print(json.dumps({"level": level, "event": event, **fields}), flush=True)
            if event == "accept.starved":
                self.warned.set()
        def info(self, event, **fields): self._out("info", event, fields)
        def warning(self, event, **fields): self._out("warning", event, fields)
        def error(self, event, **fields): self._out("error", event, fields)

    async def reply(client):
        await anyio.wait_readable(client)
        return client.recv(64).decode()

    async def main():
        listener = socket.create_server(("127.0.0.1", 0))
        listener.setblocking(False)
        port = listener.getsockname()[1]

        async def handle(connection):
            await anyio.wait_readable(connection)
            connection.send(b"served:" + connection.recv(16))

        log = Log()
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: accept_connections(
                listener, handle, limit=8, what="test listener", logger=log))
            _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
            hog = []
            while True:
                try:
                    hog.append(os.open(os.devnull, os.O_RDONLY))
                except OSError as error:
                    assert error.errno == errno.EMFILE, error
                    break
            os.close(hog.pop())
            first = socket.create_connection(("127.0.0.1", port))  # the last descriptor
            first.setblocking(False)
            first.send(b"first")
            with anyio.fail_after(10):
                await log.warned.wait()
            await anyio.sleep(0.3)  # the episode lasts a while: several failed attempts
            for fd in hog:
                os.close(fd)
            with anyio.fail_after(10):
                print(json.dumps({"reply": await reply(first)}), flush=True)
            second = socket.create_connection(("127.0.0.1", port))
            second.setblocking(False)
            second.send(b"second")
            with anyio.fail_after(10):
                print(json.dumps({"reply": await reply(second)}), flush=True)
            anyio.notify_closing(listener)
            listener.close()
        print(json.dumps({"returned": True}), flush=True)

    anyio.run(main, backend=sys.argv[1])
    """
)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_out_of_file_descriptors_backs_off_logs_once_and_recovers(backend: str) -> None:
    child = subprocess.run(
        [sys.executable, "-c", CHILD, backend],
        capture_output=True,
        text=True,
        timeout=scaled(30),
        check=False,
    )
    assert child.returncode == 0, child.stderr
    lines = [json.loads(line) for line in child.stdout.splitlines()]
    starved = [line for line in lines if line.get("event") == "accept.starved"]
    recovered = [line for line in lines if line.get("event") == "accept.recovered"]
    assert len(starved) == 1, lines  # once per episode, however many attempts failed
    assert starved[0]["level"] == "warning" and starved[0]["errno"] == "EMFILE"
    assert starved[0]["descriptor_limit"] == 64 and "RLIMIT_NOFILE 64" in starved[0]["summary"]
    assert len(recovered) == 1 and recovered[0]["level"] == "info", lines
    assert recovered[0]["attempts"] >= 3, recovered  # backed off and retried meanwhile
    replies = [line["reply"] for line in lines if "reply" in line]
    assert replies == ["served:first", "served:second"]  # the waiting one was not lost
    assert lines[-1] == {"returned": True}
    assert "Traceback" not in child.stderr
