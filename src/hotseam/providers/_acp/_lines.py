"""Reading JSON-RPC lines from an untrusted client, so that no line can stop the agent.

The SDK's stdio transport (``acp._transport.NdjsonTransport``, 0.12.1) hands every line
that parses to the connection: a line that is JSON but not an object (``[...]``, ``5``,
``"x"``) crashes the receive loop (the process exits 1), ``null`` reads as the end of the
stream (the session ends silently), invalid JSON is dropped without an answer, and a line
without a newline is buffered whole, however long. :class:`GuardedLines` wraps that
transport: it reads the lines itself and answers each message that cannot be served with
the JSON-RPC error the spec names, then keeps reading.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, Final

from ..._log import get_logger
from ._form import type_name

if TYPE_CHECKING:
    from acp._transport import Transport

__all__ = ["DEFAULT_MAX_LINE_BYTES", "INVALID_REQUEST", "PARSE_ERROR", "GuardedLines"]

DEFAULT_MAX_LINE_BYTES: Final = 16 * 1024 * 1024
"""16 MiB: an ACP prompt can carry images and resources inline, base64-encoded (a third
larger than the file), so a screenshot of several MiB must fit; a line longer than this is
far more likely a runaway or hostile client than a prompt, and is not worth parsing."""

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600

_log = get_logger("hotseam.providers.acp")


class _Oversized:
    """A line longer than the cap, already discarded; only its size is kept."""

    def __init__(self, size: int) -> None:
        self.size = size


class GuardedLines:
    """The SDK's stdio transport, with a receive that answers bad lines instead of dying.

    Invalid JSON gets ``-32700`` (Parse error); JSON that is not an object (a batch, a
    number, a string, ``null``), an ``id`` that is not a number, string or null, a
    ``method`` that is not a string, and a line longer than ``max_line_bytes`` get
    ``-32600`` (Invalid Request). Each answer has ``"id": null`` (the id, when it is a valid
    one, for a bad ``method``) and is logged as ``acp.invalid_message`` without the line's
    content, which may hold what the human typed. A response whose ``error`` is not an
    object, which the SDK would crash on, is passed on as a well-formed -32603 error.

    Args:
        reader: The byte stream the client writes to; this object reads it from now on.
        inner: The SDK's transport over the same streams; messages are sent through it.
        max_line_bytes: The longest line read (the newline excluded). A longer one is
            discarded as it arrives, never held whole in memory.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        inner: Transport,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        if max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be at least 1, got {max_line_bytes}")
        self._reader = reader
        self._inner = inner
        self.max_line_bytes = max_line_bytes

    async def send(self, message: dict[str, Any]) -> None:
        await self._inner.send(message)

    async def close(self) -> None:
        await self._inner.close()

    async def receive(self) -> dict[str, Any] | None:
        """The next message that is a JSON object; ``None`` at the end of the stream."""
        while True:
            line = await self._read_line()
            if line is None:
                return None
            if isinstance(line, _Oversized):
                await self._reject(
                    INVALID_REQUEST,
                    "Invalid Request",
                    f"the message line is {line.size} bytes long, more than the limit of "
                    f"{self.max_line_bytes} bytes; it was discarded",
                    size=line.size,
                )
                continue
            line = line.strip()
            if line:
                message = await self._decode(line)
                if message is not None:
                    return message

    async def _decode(self, line: bytes) -> dict[str, Any] | None:
        try:
            message = json.loads(line)
        except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
            if isinstance(error, RecursionError):
                why = "the message is nested too deeply to parse"
            else:
                why = (
                    "the message line is not JSON (JSON-RPC 2.0 over stdio: one JSON object "
                    "per line, UTF-8)"
                )
            await self._reject(PARSE_ERROR, "Parse error", why, size=len(line))
            return None
        if not isinstance(message, dict):
            if isinstance(message, list):
                why = "a batch (a JSON array); batches are not supported, send one object per line"
            else:
                why = f"a JSON {type_name(message)}; a message must be a JSON object"
            await self._reject(
                INVALID_REQUEST, "Invalid Request", f"the message is {why}", size=len(line)
            )
            return None
        request_id = message.get("id")
        if not _is_id_or_null(request_id):
            await self._reject(
                INVALID_REQUEST,
                "Invalid Request",
                f"id must be a number, a string or null, got {type_name(request_id)}",
            )
            return None
        method = message.get("method")
        if method is None and "id" not in message:
            await self._reject(
                INVALID_REQUEST, "Invalid Request", "the message has neither a method nor an id"
            )
            return None
        if method is not None and not isinstance(method, str):
            if "id" not in message:
                why = f"a notification's method must be a string, got {type_name(method)}"
                await self._reject(INVALID_REQUEST, "Invalid Request", why)
                return None
            await self._reject(
                INVALID_REQUEST,
                "Invalid Request",
                f"method must be a string, got {type_name(method)}",
                request_id=request_id,
            )
            return None
        if method is None and "error" in message and not isinstance(message["error"], dict):
            _log.warning(
                "acp.invalid_message",
                request_id=request_id,
                reason=f"a response's error must be an object, got {type_name(message['error'])}",
            )
            message = {
                **message,
                "error": {"code": -32603, "message": "malformed error response from the client"},
            }
        return message

    async def _read_line(self) -> bytes | _Oversized | None:
        """One line without buffering more than the cap; ``None`` at the end of the stream."""
        kept: list[bytes] = []
        size = 0
        while True:
            ended = True
            try:
                chunk = await self._reader.readuntil(b"\n")
            except asyncio.LimitOverrunError as overrun:  # longer than the reader's buffer
                chunk = await self._reader.readexactly(overrun.consumed)
                ended = False
            except asyncio.IncompleteReadError as eof:
                chunk = eof.partial
                if not chunk and not size:
                    return None
            content = len(chunk) - (1 if chunk.endswith(b"\n") and ended else 0)
            size += content
            if size > self.max_line_bytes:
                kept.clear()  # from here on, only counted
            else:
                kept.append(chunk)
            if ended:
                return _Oversized(size) if size > self.max_line_bytes else b"".join(kept)

    async def _reject(
        self,
        code: int,
        message: str,
        details: str,
        *,
        request_id: int | str | None = None,
        size: int | None = None,
    ) -> None:
        """Answer a message that cannot be served; log it without its content."""
        fields = {} if size is None else {"size": size}
        _log.warning("acp.invalid_message", code=code, reason=details, **fields)
        response = {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": code, "message": message, "data": {"details": details}},
        }
        try:
            await self._inner.send(response)
        except Exception as error:  # the client stopped reading; its next read ends us
            _log.info("acp.error_not_sent", code=code, error=f"{type(error).__name__}: {error}")


def _is_id_or_null(value: object) -> bool:
    return value is None or (isinstance(value, int | str) and not isinstance(value, bool))
