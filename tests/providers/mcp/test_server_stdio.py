"""The bounded stdio transport of ``hotseam mcp`` on real pipes, in process: a peer that
stops reading stdout is warned about after ``stall_warning`` seconds, its replies wait, and
they all arrive once it reads again."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import MutableMapping
from typing import Any

import anyio
import mcp_types as types
import pytest
import structlog
from mcp.shared.message import SessionMessage
from tests._timing import scaled

from hotseam.providers.mcp import stdio_streams

STALL = 0.2
REPLIES = 96
"""4 KiB each: far more than a pipe (64 KiB) and the transport's buffer (64 KiB) hold."""


def _reply(number: int) -> SessionMessage:
    return SessionMessage(
        types.JSONRPCNotification(
            jsonrpc="2.0", method="notifications/message", params={"n": number, "x": "x" * 4096}
        )
    )


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the transport is asyncio's pipes
async def test_a_peer_that_stops_reading_is_warned_about_and_gets_every_reply_later() -> None:
    loop = asyncio.get_running_loop()
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(stdin_read, "rb", 0)
    )
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(stdout_write, "wb", 0)
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    peer = asyncio.StreamReader(limit=1 << 20)  # the peer's end of stdout, read later
    peer_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(peer), os.fdopen(stdout_read, "rb", 0)
    )
    peer_transport.pause_reading()  # the peer does not read
    received: list[int] = []

    async def read_every_reply() -> None:
        peer_transport.resume_reading()
        while len(received) < REPLIES:
            received.append(json.loads(await peer.readline())["params"]["n"])

    stalled = anyio.Event()
    logs: list[dict[str, Any]] = []

    def record(logger: Any, method: str, event: MutableMapping[str, Any]) -> dict[str, Any]:
        logs.append({**event, "log_level": method})
        if event["event"] == "mcp.stdout_not_read":
            stalled.set()
        raise structlog.DropEvent

    structlog.configure(processors=[record])  # undone after the test (tests/conftest.py)
    async with (
        stdio_streams(reader, writer, stall_warning=STALL) as (read_stream, write_stream),
        read_stream,
    ):
        async with anyio.create_task_group() as group:

            async def reply_all() -> None:
                for number in range(REPLIES):
                    await write_stream.send(_reply(number))

            started = anyio.current_time()
            group.start_soon(reply_all)
            with anyio.fail_after(STALL * 5):
                await stalled.wait()
            waited = anyio.current_time() - started
            assert STALL <= waited < STALL * 5
            assert received == []  # nobody has read yet
            with anyio.fail_after(scaled(5)):
                await read_every_reply()  # the peer reads again
        os.close(stdin_write)  # end of input: the transport ends
    writer.close()
    peer_transport.close()
    assert received == list(range(REPLIES))  # every reply, in order
    warning = _stalled(logs)[0]  # one per stall (a loaded machine may see another later)
    assert warning["log_level"] == "warning"
    assert warning["seconds"] == STALL
    assert "a stop signal still stops the server" in warning["reason"]


def _stalled(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in logs if line["event"] == "mcp.stdout_not_read"]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the transport is asyncio's pipes
async def test_a_stop_waits_for_the_flush_only_when_something_is_queued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stop (the block cancelled, as a signal does) with nothing queued ends at once: the
    flush wait is made an hour long, so a wait that ran would fail the deadline. A reply
    queued when the stop comes is still written."""
    from hotseam.providers._mcp import _stdio

    monkeypatch.setattr(_stdio, "_FLUSH_WAIT", 3600.0)
    loop = asyncio.get_running_loop()
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    reader = asyncio.StreamReader()
    reader_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(stdin_read, "rb", 0)
    )
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(stdout_write, "wb", 0)
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    peer = asyncio.StreamReader(limit=1 << 20)
    peer_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(peer), os.fdopen(stdout_read, "rb", 0)
    )
    try:
        with anyio.fail_after(scaled(10)):
            with anyio.CancelScope() as stop:
                async with stdio_streams(reader, writer) as (read_stream, _), read_stream:
                    stop.cancel()  # nothing queued
                    await anyio.sleep_forever()
            with anyio.CancelScope() as stop:
                async with (
                    stdio_streams(reader, writer) as (read_stream, write_stream),
                    read_stream,
                ):
                    write_stream.send_nowait(_reply(7))  # queued, not yet written
                    stop.cancel()
                    await anyio.sleep_forever()
            assert json.loads(await peer.readline())["params"]["n"] == 7
    finally:
        os.close(stdin_write)
        writer.close()
        reader_transport.close()
        peer_transport.close()
