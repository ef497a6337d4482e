"""Reading JSON-RPC lines from an untrusted client, so that no line can stop the agent.

The SDK's stdio transport (``acp._transport.NdjsonTransport``, 0.12.1) hands every line
that parses to the connection: a line that is JSON but not an object (``[...]``, ``5``,
``"x"``) crashes the receive loop (the process exits 1), ``null`` reads as the end of the
stream (the session ends silently), invalid JSON is dropped without an answer, and a line
without a newline is buffered whole, however long, a message that is not JSON-RPC 2.0 is
served all the same, and one nested a few hundred levels deep crashes it (its observers
deep-copy each message). :class:`GuardedLines` wraps that transport: it reads the lines
itself and answers each message that cannot be served with the JSON-RPC error the spec
names, with the message's id whenever it can be told, then keeps reading.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, Final

from ..._core import get_logger
from .._kit import (
    DEFAULT_MAX_DEPTH,
    INVALID_REQUEST,
    PARSE_ERROR,
    Envelope,
    JsonLines,
    Refusal,
    StreamReaderStream,
    envelope_of,
    is_request_id,
    type_name,
)

if TYPE_CHECKING:
    from acp._transport import Transport

__all__ = [
    "ANSWER_REFUSED",
    "DEFAULT_MAX_LINE_BYTES",
    "INVALID_REQUEST",
    "MAX_DEPTH",
    "PARSE_ERROR",
    "GuardedLines",
]

DEFAULT_MAX_LINE_BYTES: Final = 16 * 1024 * 1024
"""16 MiB: an ACP prompt can carry images and resources inline, base64-encoded (a third
larger than the file), so a screenshot of several MiB must fit; a line longer than this is
far more likely a runaway or hostile client than a prompt, and is not worth parsing."""

ANSWER_REFUSED: Final = "hotseam.answerRefused"
"""Set in the ``data`` of the error that stands for a client's response refused here (the
request it answered fails with it; never sent on the wire)."""

MAX_DEPTH: Final = DEFAULT_MAX_DEPTH
"""The deepest nesting of objects and arrays accepted in a message (serde_json's default,
which the Rust ACP SDK parses with); ACP's own messages nest less than ten levels."""

_log = get_logger("hotseam.providers.acp")


class GuardedLines:
    """The SDK's stdio transport, with a receive that answers bad lines instead of dying.

    Invalid JSON gets ``-32700`` (Parse error); JSON that is not an object (a batch, a
    number, a string, ``null``), an ``id`` that is not a number, string or null, a
    ``jsonrpc`` that is not ``"2.0"`` (or none), a ``method`` that is not a string, a
    message nested more than :data:`MAX_DEPTH` levels deep, and a line longer than
    ``max_line_bytes`` get ``-32600`` (Invalid Request). Each answer carries the message's
    id when it can be told (read from the line's start when the line is not decoded
    whole, by the surface kit's reader), else ``"id": null``. A bad message that is a *response*
    (to one of the agent's own requests) is not answered: that request fails with the
    error instead, as the TypeScript SDK does. Each is logged as ``acp.invalid_message``
    without the line's content, which may hold what the human typed. A response whose
    ``error`` is not an object, which the SDK would crash on, is passed on as a well-formed
    -32603 error.

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
        self._lines = JsonLines(StreamReaderStream(reader), max_line_bytes=max_line_bytes)
        self._inner = inner
        self.max_line_bytes = max_line_bytes

    async def send(self, message: dict[str, Any]) -> None:
        await self._inner.send(message)

    async def close(self) -> None:
        await self._inner.close()

    async def receive(self) -> dict[str, Any] | None:
        """The next message that is a JSON object; ``None`` at the end of the stream."""
        while True:
            line = await self._lines.receive()
            if line is None:
                return None
            if isinstance(line, Refusal):
                message = await self._refuse(
                    line.envelope, line.code, self._detail(line), size=line.size
                )
            else:
                message = await self._check(line.value, line.size)
            if message is not None:
                return message

    def _detail(self, refused: Refusal) -> str:
        """What is wrong with a line the reader refused, in ACP's words."""
        if refused.kind == "too_long":
            return (
                f"the message line is {refused.size} bytes long, more than the limit of "
                f"{self.max_line_bytes} bytes; it was discarded"
            )
        if refused.kind == "not_json":
            return _NOT_JSON
        if refused.code == PARSE_ERROR:
            return "the message is nested too deeply to parse"
        return f"the message is nested more than {MAX_DEPTH} levels deep"

    async def _check(self, message: object, size: int) -> dict[str, Any] | None:
        """The message decoded, or what stands for it once refused (see :meth:`_refuse`)."""
        if not isinstance(message, dict):
            if isinstance(message, list):
                why = "a batch (a JSON array); batches are not supported, send one object per line"
            else:
                why = f"a JSON {type_name(message)}; a message must be a JSON object"
            why = f"the message is {why}"
            return await self._refuse(Envelope(), INVALID_REQUEST, why, size=size)
        request_id = message.get("id")
        if not _is_id_or_null(request_id):
            return await self._refuse(
                Envelope(),
                INVALID_REQUEST,
                f"id must be a number, a string or null, got {type_name(request_id)}",
            )
        envelope = envelope_of(message)
        version = message.get("jsonrpc", _MISSING)
        if version != "2.0":
            why = f'jsonrpc must be "2.0" (JSON-RPC 2.0), {_described(version)}'
            return await self._refuse(envelope, INVALID_REQUEST, why)
        method = message.get("method")
        if method is None and "id" not in message:
            return await self._refuse(
                envelope, INVALID_REQUEST, "the message has neither a method nor an id"
            )
        if method is not None and not isinstance(method, str):
            if "id" not in message:
                why = f"a notification's method must be a string, got {type_name(method)}"
            else:
                why = f"method must be a string, got {type_name(method)}"
            return await self._refuse(envelope, INVALID_REQUEST, why)
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

    async def _refuse(
        self,
        envelope: Envelope,
        code: int,
        details: str,
        *,
        size: int | None = None,
    ) -> dict[str, Any] | None:
        """Refuse a message that cannot be served; log it without its content.

        A request (or a message whose kind cannot be told) gets an error response, with its
        id when known. A response to one of the agent's requests is not answered: the error
        response returned stands for it, and fails that request. Returns ``None`` otherwise.
        """
        fields: dict[str, Any] = {} if size is None else {"size": size}
        if envelope.request_id is not None:
            fields["request_id"] = envelope.request_id
        error = {"code": code, "message": _MESSAGES[code], "data": {"details": details}}
        if envelope.is_response:
            _log.warning(
                "acp.invalid_message",
                code=code,
                reason=details,
                outcome="the agent's request it answers fails with this error",
                **fields,
            )
            refused = {**error, "data": {"details": details, ANSWER_REFUSED: True}}
            return {"jsonrpc": "2.0", "id": envelope.request_id, "error": refused}
        _log.warning("acp.invalid_message", code=code, reason=details, **fields)
        response = {"jsonrpc": "2.0", "id": envelope.request_id, "error": error}
        try:
            await self._inner.send(response)
        except Exception as failure:  # the client stopped reading; its next read ends us
            _log.info("acp.error_not_sent", code=code, error=f"{type(failure).__name__}: {failure}")
        return None


_MESSAGES: Final = {PARSE_ERROR: "Parse error", INVALID_REQUEST: "Invalid Request"}
_NOT_JSON: Final = (
    "the message line is not JSON (JSON-RPC 2.0 over stdio: one JSON object per line, UTF-8)"
)
_MISSING: Final = object()


def _is_id_or_null(value: object) -> bool:
    return value is None or is_request_id(value)


def _described(version: object) -> str:
    """What the ``jsonrpc`` member is, quoting it only when it is short and printable."""
    if version is _MISSING:
        return "and it is missing"
    if isinstance(version, str) and len(version) <= 16 and version.isprintable():
        return f"got {json.dumps(version)}"
    return f"got a {type_name(version)}"
