"""``hotseam mcp`` as a subprocess against hostile and broken peers, on the raw wire: a
huge line, JSON nested too deep, lines that are no JSON-RPC, a host without elicitation, a
peer that never reads stdout. Each gets a clear error or a clean end: the process never
crashes and never wedges. (A host that leaves while a form is open, on both revisions:
``test_cli_stdio.py``, in the processes the SDK's client drives; a raw 2025-06-18 host's
form: ``test_elicit.py``, in process.)"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from tests._timing import scaled

from .test_cli_stdio import committed_at, log_lines, write_tools

WAIT = 10.0
LIMIT = 65536
"""64KiB: the project's max-line-bytes."""
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]


class RawPeer:
    """A peer that writes lines of its choosing and reads the server's replies."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self._buffer = b""

    async def send(self, message: dict[str, Any] | bytes) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        assert self.process.stdin is not None
        await self.process.stdin.send(data)

    async def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        with anyio.fail_after(scaled(WAIT)):
            while b"\n" not in self._buffer:
                self._buffer += await self.process.stdout.receive()
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)  # type: ignore[no-any-return]

    async def request(self, message: dict[str, Any]) -> dict[str, Any]:
        await self.send(message)
        return await self.receive()

    async def stopped(self, *, terminate: bool = False) -> int:
        if terminate:
            self.process.send_signal(signal.SIGTERM)
        elif self.process.stdin is not None:
            await self.process.stdin.aclose()
        with anyio.fail_after(scaled(WAIT)):
            return await self.process.wait()


@asynccontextmanager
async def raw(folder: Path, stderr: Path, *options: str) -> AsyncIterator[RawPeer]:
    command = [sys.executable, "-m", "hotseam", "mcp", str(folder), *options]
    with stderr.open("w") as errlog:
        process = await anyio.open_process(command, stderr=errlog, cwd=folder)
        try:
            yield RawPeer(process)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            await process.aclose()


def _call(id_: int, name: str, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": {"name": "Ada"} if name == "greet" else {}}
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params}


async def test_bad_lines_then_a_peer_that_stops_reading(tmp_path: Path) -> None:
    """One process. A line over max-line-bytes (64KiB, from [tool.hotseam]) is discarded as
    it arrives (-32600 naming the limit), JSON nested too deep is -32700, JSON that is no
    JSON-RPC is -32600; each with the id the line's start tells (9 for the long one, else
    null), and the next request is served. A host that
    advertised no elicitation (2026-07-28 here) gets its question back as an error the
    model reads. Then the peer stops reading while replies pile up far beyond what a pipe
    holds: the server still reads stdin, still reloads a saved module, and SIGTERM still
    stops it (exit 0)."""
    folder = tmp_path / "tools"
    write_tools(folder)
    stderr = tmp_path / "stderr.log"
    (tmp_path / "pyproject.toml").write_text('[tool.hotseam]\nmax-line-bytes = "64KiB"\n')
    async with raw(folder, stderr) as peer:
        huge = (
            b'{"jsonrpc": "2.0", "id": 9, "method": "ping", "params": {"x": "'
            + b"a" * (3 * LIMIT)
            + b'"}}\n'
        )
        await peer.send(huge)
        error = await peer.receive()
        assert error["id"] == 9  # read from the line's start: the host's request 9 is answered
        assert error["error"]["code"] == -32600
        assert f"limit of {LIMIT} bytes" in error["error"]["message"]

        await peer.send(b'{"a": ' + b"[" * 20_000 + b"]" * 20_000 + b"}\n")
        error = await peer.receive()
        assert (error["id"], error["error"]["code"]) == (None, -32700)
        assert "recursion limit" in error["error"]["message"]

        await peer.send(b'{"hello": "world"}\n')
        error = await peer.receive()
        assert (error["id"], error["error"]["code"]) == (None, -32600)

        listed = await peer.request(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN_META}}
        )
        assert [tool["name"] for tool in listed["result"]["tools"]] == ["checks", "greet", "pick"]
        answered = await peer.request(_call(2, "pick", MODERN_META))
        result = answered["result"]
        assert result["isError"] is True
        assert result["structuredContent"]["code"] == "NO_PROVIDER"

        for number in range(400):  # ~400 KiB of replies nobody reads
            await peer.send(
                {
                    "jsonrpc": "2.0",
                    "id": 100 + number,
                    "method": "tools/list",
                    "params": {"_meta": MODERN_META},
                }
            )
        greet = folder / "greet.py"
        greet.write_text(greet.read_text().replace("Greet.", "Greet again."))
        await committed_at(stderr, greet, after=1)
        assert await peer.stopped(terminate=True) == 0
    events = [line["event"] for line in log_lines(stderr)]
    assert events.count("mcp.message_refused") == 2
    assert "mcp.line_too_long" in events
    assert "mcp.stopped" in events
    assert "mcp.failed" not in events
