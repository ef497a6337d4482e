"""Issue 13, the exclusive resource: a provider that listens on a fixed TCP port reloads.

Without the handover every reload fails with ``Address already in use`` (the new generation
is set up while the old one holds the port). Carried, the listening socket passes from
generation to generation: 100 reloads in a row, and a client connecting between reloads (and
one connecting all the time, during the swaps too) is never refused.
"""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import pytest

from hotseam import Context
from hotseam.reload import Reloader

from ._support import Probe
from .conftest import write

pytestmark = pytest.mark.anyio

SOURCE = """
import socket

import anyio

PORT = {port}
VERSION = {version}


def listen():
    sock = socket.create_server(("127.0.0.1", PORT), backlog=64)
    sock.setblocking(False)
    return sock


async def serve(sock):
    while True:
        await anyio.wait_readable(sock)
        try:
            client, _ = sock.accept()
        except BlockingIOError:
            continue
        with client:
            client.setblocking(True)
            client.sendall(b"v%d\\n" % VERSION)


async def setup(scope):
    sock = scope.carry("listener", listen)
    scope.spawn(serve, sock)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def fetch(port: int) -> bytes:
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        data = b""
        while not data.endswith(b"\n"):
            data += await stream.receive()
        return data


async def collect(port: int, answers: list[bytes]) -> None:
    answers.append(await fetch(port))


async def test_a_listening_socket_is_carried_through_100_reloads(
    context: Context, folder: Path, probe: Probe
) -> None:
    port = free_port()
    path = folder / "server.py"
    answers: list[bytes] = []
    async with Reloader(context, [folder], watch=False) as reloader:
        write(path, SOURCE.format(port=port, version=0))
        (await reloader.reload(path)).raise_for_errors()
        for version in range(1, 101):
            write(path, SOURCE.format(port=port, version=version))
            async with anyio.create_task_group() as group:
                # A client that connects while the reload runs: the backlog holds it until
                # a generation's task accepts it (either one may answer).
                group.start_soon(collect, port, answers)
                result = await reloader.reload(path)
            assert not result.aborted, result.aborted[0].error
            assert await fetch(port) == b"v%d\n" % version
        assert reloader.status_of(path).generation == 101
    assert len(answers) == 100
    assert all(answer.startswith(b"v") for answer in answers)
    # The reloader closed: the port is released (a new server can bind it at once).
    with socket.create_server(("127.0.0.1", port)):
        pass
    with pytest.raises(OSError):
        await fetch(port)
