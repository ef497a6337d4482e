"""MCP over stdio, with bounds: one JSON-RPC message a line, parsed by the SDK.

The SDK's ``stdio_server`` buffers a runaway line whole and writes through a worker thread
(a client that never reads stdout blocks it for good, and the process cannot exit). This
transport reads on the event loop with the kit's bounded reader: a line too long,
not JSON (-32700), too deep or no JSON-RPC message, or a request whose id is no string or
integer (MCP forbids ``null``), is answered with its error (with the id when the line's
start tells it) and one warning. It writes without blocking the loop (one warning after
``stall_warning`` seconds), and at the end of input answers what was asked before it.
Messages are the SDK's, by its own validator and serializer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from ..._core import get_logger
from .._kit import (
    DEFAULT_MAX_LINE_BYTES,
    INVALID_REQUEST,
    PARSE_ERROR,
    Envelope,
    JsonLines,
    Refusal,
    StreamReaderStream,
    decode_line,
)

_STALL_WARNING = 10.0
_FLUSH_WAIT = 2.0
_log = get_logger("hotseam.providers.mcp")


_Key = tuple[bool, int | str]
"""A request id as it is told apart (``1`` and ``"1"`` are two)."""
_STREAMS = frozenset({"subscriptions/listen"})
"""Requests answered by a stream as long as the connection: owed nothing at its end."""


def _key(request_id: int | str) -> _Key:
    return (isinstance(request_id, str), request_id)


class _Book:
    """What is owed across the end of input: the host's requests not yet answered, and the
    server's requests the host has not answered (it never will once its input ends)."""

    def __init__(self) -> None:
        self.owed: set[_Key] = set()
        self.asked: dict[_Key, int | str] = {}
        self.ended = False
        self.host_gone = False
        self.settled = anyio.Event()

    def read(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCRequest):
            if message.method not in _STREAMS:
                self.owed.add(_key(message.id))
        elif isinstance(message, types.JSONRPCNotification):
            if message.method == "notifications/cancelled":  # answered by nobody now
                cancelled = (message.params or {}).get("requestId")
                if isinstance(cancelled, int | str):
                    self.answered(cancelled)
        elif message.id is not None:  # the host's answer to one of the server's requests
            self.asked.pop(_key(message.id), None)

    def answered(self, request_id: int | str) -> None:
        self.owed.discard(_key(request_id))
        if self.ended and not self.owed:
            self.settled.set()

    def end(self) -> list[int | str]:
        """The input ended: the server's requests still waiting, which get no answer."""
        self.ended = True
        if not self.owed:
            self.settled.set()
        waiting = list(self.asked.values())
        self.asked.clear()
        return waiting


def _no_answer(request_id: int | str) -> SessionMessage:
    """The host's answer to a request of the server's, once its input ended."""
    return SessionMessage(
        types.JSONRPCError(
            jsonrpc="2.0",
            id=request_id,
            error=types.ErrorData(
                code=types.CONNECTION_CLOSED,
                message="the host closed the server's stdin: no answer can come",
            ),
        )
    )


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
    """The SDK's stream pair over ``reader`` (stdin) and ``writer`` (stdout).

    The read stream ends once the input ended and what it asked is answered (the SDK
    cancels what is in flight then); the server's requests still waiting fail at once. A
    host that closes stdout first is a normal end (replies dropped, logged once). At the
    block's end what is queued is written, for a bounded time.
    """
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](16)
    book = _Book()
    lines = JsonLines(StreamReaderStream(reader), max_line_bytes=max_line_bytes)

    async def refuse(code: int, message: str, envelope: Envelope | None = None) -> None:
        # the line's id, unless it is a response (an error to a response answers nothing)
        known = envelope is not None and not envelope.is_response
        request_id = envelope.request_id if known and envelope is not None else None
        error = types.JSONRPCError(
            jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message)
        )
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await write_send.send(SessionMessage(error))

    async def unanswerable(request_id: int | str) -> None:
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await read_send.send(_no_answer(request_id))

    async def read_loop() -> None:
        async with read_send:
            while (line := await lines.receive_line()) is not None:
                if line.blank:
                    continue
                decoded = decode_line(line, lines.max_depth)
                if isinstance(decoded, Refusal) and decoded.kind == "too_long":
                    _log.warning("mcp.line_too_long", size=line.size, limit=max_line_bytes)
                    await refuse(
                        INVALID_REQUEST,
                        f"message discarded: a line of {line.size} bytes is longer than the "
                        f"limit of {max_line_bytes} bytes (--max-line-bytes)",
                        decoded.envelope,
                    )
                    continue
                message = _refused(decoded) if isinstance(decoded, Refusal) else _parse(line.data)
                if isinstance(message, tuple):
                    code, text = message
                    _log.warning("mcp.message_refused", rpc_code=code, reason=text)
                    envelope = decoded.envelope if isinstance(decoded, Refusal) else None
                    await refuse(code, text, envelope)
                else:
                    book.read(message)
                    await read_send.send(SessionMessage(message))
            waiting = book.end()
            if book.owed or waiting:
                _log.info(
                    "mcp.input_ended",
                    unanswered=len(book.owed),
                    reason="the host closed stdin: what it asked before is answered, then "
                    "the server stops",
                )
            for request_id in waiting:
                await unanswerable(request_id)
            await book.settled.wait()

    async def write_loop() -> None:
        async for item in write_receive:
            message = item.message
            if isinstance(message, types.JSONRPCRequest):
                if book.ended:
                    await unanswerable(message.id)
                    continue
                book.asked[_key(message.id)] = message.id
            if not book.host_gone:
                writer.write(_encoded(item))
                try:
                    await _drain(writer, stall_warning)
                except ConnectionError as error:  # the host closed stdout (or left)
                    book.host_gone = True
                    _log.info(
                        "mcp.stdout_closed",
                        error=f"{type(error).__name__}: {error}",
                        reason="the host closed the server's stdout: replies are dropped",
                    )
            if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and (
                message.id is not None
            ):
                book.answered(message.id)

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(read_loop)
            group.start_soon(write_loop)
            try:
                yield read_receive, write_send
            finally:
                group.cancel_scope.cancel()
    finally:
        write_send.close()
        await _flush(write_receive, writer, skip=book.host_gone)


async def _drain(writer: asyncio.StreamWriter, stall_warning: float) -> None:
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


async def _flush(
    queue: MemoryObjectReceiveStream[SessionMessage], writer: asyncio.StreamWriter, *, skip: bool
) -> None:
    """Write what is still queued, giving the pipe a bounded time; nothing queued, return."""
    with queue:
        while not skip:
            try:
                writer.write(_encoded(queue.receive_nowait()))
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                break
    transport = writer.transport
    if skip or transport.is_closing() or not transport.get_write_buffer_size():
        return
    _log.debug("mcp.flushing", queued_bytes=transport.get_write_buffer_size())
    with anyio.move_on_after(_FLUSH_WAIT, shield=True), contextlib.suppress(ConnectionError):
        await writer.drain()


def _encoded(item: SessionMessage) -> bytes:
    return (item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode()


def _refused(refusal: Refusal) -> tuple[int, str]:

    if refusal.kind == "too_deep":
        if refusal.code == PARSE_ERROR:
            return PARSE_ERROR, f"parse error: {refusal.detail} (recursion limit exceeded)"
        return INVALID_REQUEST, f"invalid request: the message is {refusal.detail}"
    return PARSE_ERROR, f"parse error: not valid JSON ({refusal.detail})"


def _parse(data: bytes) -> types.JSONRPCMessage | tuple[int, str]:
    """The message of a line, or the error code and text it is refused with."""
    try:
        message = types.jsonrpc_message_adapter.validate_json(data, by_name=False)
    except ValidationError as invalid:
        errors = invalid.errors(include_url=False, include_input=False)
        if errors and errors[0]["type"] == "json_invalid":
            return PARSE_ERROR, f"parse error: not valid JSON ({errors[0]['msg']})"
        return INVALID_REQUEST, "invalid request: the line is JSON but not a JSON-RPC 2.0 message"
    if isinstance(message, types.JSONRPCNotification) and b'"id"' in data:
        # the validator reads a request with an id of no allowed type as a notification
        raw = json.loads(data)
        if isinstance(raw, dict) and "id" in raw:
            return (
                INVALID_REQUEST,
                f"invalid request: id must be a string or an integer, got {_type_name(raw['id'])}",
            )
    return message


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float):
        return "a number with a fraction"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__
