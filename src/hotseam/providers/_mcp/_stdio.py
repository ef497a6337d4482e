"""MCP over stdio, with bounds: one JSON-RPC message a line, parsed by the SDK.

The SDK's own ``stdio_server`` reads lines of any length (a runaway line is buffered
whole) and writes through a worker thread (a client that never reads stdout blocks that
thread for good, and the process cannot exit). This transport reads the pipes on the
event loop instead (asyncio), and:

* reads a line in pieces of ``chunk`` bytes; a line longer than ``max_line_bytes`` is
  discarded as it arrives and answered with error -32600 (``id: null``), naming the limit;
* answers a line that is not JSON (or nested too deeply for the parser) with -32700, and
  JSON that is no JSON-RPC message with -32600, each with one warning in the log;
* writes without ever blocking the loop: a client that stops reading holds only the
  messages of its own connection, with one warning after ``stall_warning`` seconds, and a
  stop signal still stops the process.

Messages are turned into the SDK's ``SessionMessage`` by its own validator
(``jsonrpc_message_adapter``) and written by its own serializer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from ..._core import get_logger

__all__ = ["DEFAULT_MAX_LINE_BYTES", "stdio_streams"]

DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024
"""The longest message line read (room for images in tool arguments)."""
_CHUNK = 1024 * 1024
_STALL_WARNING = 10.0
_FLUSH_WAIT = 2.0
_PARSE_ERROR = -32700
_INVALID_REQUEST = -32600
_log = get_logger("hotseam.providers.mcp")


@dataclass(frozen=True, slots=True)
class _Line:
    data: bytes
    size: int
    too_long: bool
    eof: bool


async def _read_line(reader: asyncio.StreamReader, max_bytes: int) -> _Line:
    parts: list[bytes] = []
    size = 0
    too_long = False
    while True:
        eof = False
        try:
            chunk = await reader.readuntil(b"\n")
            done = True
        except asyncio.IncompleteReadError as partial:
            chunk, done, eof = partial.partial, True, True
        except asyncio.LimitOverrunError as overrun:
            chunk, done = await reader.readexactly(overrun.consumed), False
        size += len(chunk)
        if size > max_bytes:
            too_long = True
            parts.clear()  # discarded as it arrives
        elif not too_long:
            parts.append(chunk)
        if done:
            return _Line(b"".join(parts), size, too_long, eof)


@contextlib.asynccontextmanager
async def stdio_streams(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    stall_warning: float = _STALL_WARNING,
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """The SDK's stream pair over ``reader`` (stdin) and ``writer`` (stdout); the read
    stream ends at end of input."""
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](16)

    async def refuse(code: int, message: str) -> None:
        error = types.JSONRPCError(
            jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=message)
        )
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await write_send.send(SessionMessage(error))

    async def read_loop() -> None:
        async with read_send:
            while True:
                line = await _read_line(reader, max_line_bytes)
                if line.too_long:
                    _log.warning("mcp.line_too_long", size=line.size, limit=max_line_bytes)
                    await refuse(
                        _INVALID_REQUEST,
                        f"message discarded: a line of {line.size} bytes is longer than the "
                        f"limit of {max_line_bytes} bytes (--max-line-bytes)",
                    )
                elif line.data.strip():
                    message = _parse(line.data)
                    if isinstance(message, tuple):
                        code, text = message
                        _log.warning("mcp.message_refused", rpc_code=code, reason=text)
                        await refuse(code, text)
                    else:
                        await read_send.send(SessionMessage(message))
                if line.eof:
                    return

    written = anyio.Event()

    async def write_loop() -> None:
        async with write_receive:
            async for item in write_receive:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                writer.write(data.encode("utf-8"))
                with anyio.move_on_after(stall_warning) as waited:
                    await writer.drain()
                if waited.cancelled_caught:
                    _log.warning(
                        "mcp.stdout_not_read",
                        seconds=stall_warning,
                        reason="the client has not read stdout for a while: replies wait; "
                        "a stop signal still stops the server",
                    )
                    await writer.drain()
        written.set()

    async with anyio.create_task_group() as group:
        group.start_soon(read_loop)
        group.start_soon(write_loop)
        try:
            yield read_receive, write_send
        finally:
            write_send.close()  # what is queued is still written, for a bounded time
            with anyio.move_on_after(_FLUSH_WAIT, shield=True):
                await written.wait()
            group.cancel_scope.cancel()


def _parse(data: bytes) -> types.JSONRPCMessage | tuple[int, str]:
    """The message of a line, or the error code and text it is refused with."""
    try:
        return types.jsonrpc_message_adapter.validate_json(data, by_name=False)
    except ValidationError as invalid:
        errors = invalid.errors(include_url=False, include_input=False)
        if errors and errors[0]["type"] == "json_invalid":
            return _PARSE_ERROR, f"parse error: not valid JSON ({errors[0]['msg']})"
        return _INVALID_REQUEST, "invalid request: the line is JSON but not a JSON-RPC 2.0 message"
