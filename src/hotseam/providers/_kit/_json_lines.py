"""One bounded reader of JSON lines from a peer that may be hostile or broken.

ACP and MCP over stdio and the control socket all read one JSON value a line from a peer
hotseam does not trust, and each must survive whatever arrives: a line of gigabytes, JSON
nested deep enough to crash a recursive copy or renderer, bytes that are not UTF-8, a line
that arrives in pieces. :class:`JsonLines` reads them from any anyio byte stream (an
``asyncio.StreamReader`` through :class:`StreamReaderStream`) and says, for each line,
either what it holds (:class:`Decoded`) or why it is refused (:class:`Refusal`): its
JSON-RPC code, a reason that never quotes the line (it may hold what the human typed),
and its :class:`Envelope`, so that the error can carry the id of the request it answers.
What a refusal becomes on the wire, and what is logged, is each surface's: the reader holds
no protocol beyond that.

Bounds: a line longer than ``max_line_bytes`` is discarded as it arrives (only its first
:data:`PREFIX_BYTES` are kept, for its id), never held whole; objects and arrays may nest
``max_depth`` levels (the message is level 1), checked iteratively after the standard
library's decoder, whose own recursion failure is a refusal too.

The envelope: a JSON-RPC error must carry the id of the request it answers, or the client's
call waits for ever (the TypeScript SDK's ``prompt()`` does). A line refused undecoded
usually starts with it, since clients write ``{"jsonrpc": "2.0", "id": 7, "method": ...,
"params": ...}``, the bulk last: :func:`scan_envelope` reads the top-level members of the
line's first :data:`PREFIX_BYTES`, one at a time with the standard decoder, and stops at the
first it cannot read (never a full decode, never a nested member taken for the envelope's).
A request then gets an error response with its id; a response (``result`` or ``error``, no
``method``) fails the agent's own request it answers (as the TypeScript SDK does); anything
else gets ``"id": null``, as JSON-RPC 2.0 requires when the id cannot be told.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias, TypeGuard

import anyio
import anyio.abc

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_LINE_BYTES",
    "INVALID_REQUEST",
    "PARSE_ERROR",
    "PREFIX_BYTES",
    "Decoded",
    "Envelope",
    "JsonLines",
    "Line",
    "Refusal",
    "RequestId",
    "StreamReaderStream",
    "decode_bytes",
    "decode_line",
    "envelope_of",
    "is_request_id",
    "nested_deeper_than",
    "scan_envelope",
]

DEFAULT_MAX_DEPTH: Final = 128
"""The deepest nesting of objects and arrays accepted (serde_json's default, which the Rust
ACP SDK parses with); protocol messages nest less than ten levels."""

DEFAULT_MAX_LINE_BYTES: Final = 16 * 1024 * 1024
"""16 MiB: an ACP prompt or an MCP tool's arguments can carry images inline, base64-encoded
(a third larger than the file), so a screenshot of several MiB must fit; a longer line is far
more likely a runaway or hostile peer than a message, and is not worth parsing."""

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600

_CHUNK: Final = 64 * 1024

RequestId: TypeAlias = int | str

PREFIX_BYTES: Final = 64 * 1024
"""How much of a line's start is kept and scanned for its envelope (the id comes first in
practice; a prompt's content, however large, comes after it)."""

_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_scan_string: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


def is_request_id(value: object) -> TypeGuard[RequestId]:
    """A JSON-RPC id a response can name: a number (an integer here) or a string."""
    return isinstance(value, int | str) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class Envelope:
    """The top-level members of a message that could be read, and what they make it."""

    request_id: RequestId | None = None
    """The message's id when it is one a response can name; ``None`` otherwise."""
    has_method: bool = False
    has_outcome: bool = False
    """A ``result`` or an ``error`` member was seen: the message is a response."""

    @property
    def is_response(self) -> bool:
        """It answers one of the agent's requests (an id, a result or error, no method)."""
        return self.request_id is not None and self.has_outcome and not self.has_method


def envelope_of(message: dict[str, object]) -> Envelope:
    """The envelope of a decoded message (or of the members read from a line's start)."""
    request_id = message.get("id")
    return Envelope(
        request_id if is_request_id(request_id) else None,
        "method" in message,
        "result" in message or "error" in message,
    )


def scan_envelope(line: bytes) -> Envelope:
    """The envelope of a line that cannot be decoded whole, read from its start only."""
    text = line[:PREFIX_BYTES].decode("utf-8", errors="replace")
    members: dict[str, object] = {}
    position = _skip_space(text, 0)
    if text.startswith("{", position):
        _read_members(text, position + 1, members, cut=len(line) > PREFIX_BYTES)
    return envelope_of(members)


_UNREAD = object()
"""A member whose key was read but not its value (cut off, or not JSON from there on)."""


def _read_members(text: str, position: int, members: dict[str, object], *, cut: bool) -> None:
    """Read ``"key": value`` pairs of the outermost object until one cannot be read.

    Only ``id`` values are kept (the others could be the bulk of the line); a key whose
    value cannot be read is still recorded, as present. When the text is a cut-off start
    (``cut``), a value that reaches its very end may be cut too (``12`` read as ``1``),
    so it counts as unread.
    """
    while True:
        position = _skip_space(text, position)
        if not text.startswith('"', position):
            return
        try:
            key, position = _scan_string(text, position + 1)
        except ValueError:
            return
        position = _skip_space(text, position)
        if not text.startswith(":", position):
            return
        position = _skip_space(text, position + 1)
        members[key] = _UNREAD
        try:
            value, position = _DECODER.raw_decode(text, position)
        except (ValueError, RecursionError):
            return
        if cut and position >= len(text):
            return
        members[key] = value if key == "id" else None
        position = _skip_space(text, position)
        if not text.startswith(",", position):
            return
        position += 1


def _skip_space(text: str, position: int) -> int:
    matched = _SPACE.match(text, position)
    return position if matched is None else matched.end()


class StreamReaderStream(anyio.abc.ByteReceiveStream):
    """An ``asyncio.StreamReader`` (what the SDKs' stdio transports hand over) as an anyio
    byte stream. Closing it leaves the reader to its owner."""

    def __init__(self, reader: Any) -> None:
        self._reader = reader

    async def receive(self, max_bytes: int = _CHUNK) -> bytes:
        data: bytes = await self._reader.read(max_bytes)
        if not data:
            raise anyio.EndOfStream
        return data

    async def aclose(self) -> None:
        pass


@dataclass(frozen=True, slots=True)
class Line:
    """One line as read: its bytes (without the newline) unless it was too long."""

    data: bytes
    """The line without its newline; empty when it was longer than ``limit``."""
    size: int
    """Its length in bytes (as much as was read of it, when reading stopped at the limit)."""
    head: bytes
    """Its first :data:`PREFIX_BYTES` bytes, kept whatever its length."""
    limit: int
    """The longest line the reader accepts."""
    ended: bool
    """A newline ended it (else the stream ended first, or reading stopped at the limit)."""

    @property
    def too_long(self) -> bool:
        return self.size > self.limit

    @property
    def blank(self) -> bool:
        return not self.too_long and not self.data.strip()


@dataclass(frozen=True, slots=True)
class Decoded:
    """A line that holds one JSON value, no deeper than the limit."""

    value: Any
    size: int


@dataclass(frozen=True, slots=True)
class Refusal:
    """A line that is refused, and why, without its content."""

    code: int
    """:data:`PARSE_ERROR` (not JSON, or too deep to parse) or :data:`INVALID_REQUEST`
    (too long, or parsed but nested deeper than the limit)."""
    kind: Literal["too_long", "not_json", "too_deep"]
    detail: str
    """One line naming what is wrong (a limit, a position), never quoting the line."""
    envelope: Envelope
    """What the line says about itself: its id, whether it answers a request."""
    size: int


class JsonLines:
    """JSON lines read from ``stream``, each bounded in size and depth.

    Args:
        stream: The peer's byte stream; this object reads it from now on.
        max_line_bytes: The longest line (the newline excluded). A longer one is discarded
            as it arrives.
        max_depth: The deepest nesting of objects and arrays accepted.
        discard_long: Read a too-long line to its end (for a stream of messages: the next
            line is the next message); when false, return it as soon as it passes the limit
            (for one request a connection: there is nothing after it worth waiting for).
    """

    def __init__(
        self,
        stream: anyio.abc.ByteReceiveStream,
        *,
        max_line_bytes: int,
        max_depth: int = DEFAULT_MAX_DEPTH,
        discard_long: bool = True,
    ) -> None:
        if max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be at least 1, got {max_line_bytes}")
        if max_depth < 1:
            raise ValueError(f"max_depth must be at least 1, got {max_depth}")
        self._stream = stream
        self._pending = b""
        self.max_line_bytes = max_line_bytes
        self.max_depth = max_depth
        self.discard_long = discard_long

    async def receive_line(self) -> Line | None:
        """The next line, without holding more than the limit of it; ``None`` once the
        stream has ended (a last line without a newline is a line)."""
        kept = bytearray()
        head = b""
        size = 0
        seen = False
        limit = self.max_line_bytes
        while True:
            if not self._pending:
                try:
                    self._pending = await self._stream.receive()
                except anyio.EndOfStream:
                    if not seen:
                        return None
                    return Line(b"" if size > limit else bytes(kept), size, head, limit, False)
            seen = True
            end = self._pending.find(b"\n")
            piece = self._pending if end < 0 else self._pending[:end]
            self._pending = b"" if end < 0 else self._pending[end + 1 :]
            if len(head) < PREFIX_BYTES:
                head += piece[: PREFIX_BYTES - len(head)]
            size += len(piece)
            if size > limit:
                kept.clear()  # from here on, only counted
            else:
                kept += piece
            if end >= 0:
                return Line(b"" if size > limit else bytes(kept), size, head, limit, True)
            if size > limit and not self.discard_long:
                return Line(b"", size, head, limit, False)

    async def receive(self) -> Decoded | Refusal | None:
        """The next line that is not blank, decoded or refused; ``None`` at the end."""
        while True:
            line = await self.receive_line()
            if line is None:
                return None
            if not line.blank:
                return decode_line(line, self.max_depth)


def decode_line(line: Line, max_depth: int = DEFAULT_MAX_DEPTH) -> Decoded | Refusal:
    """What ``line`` holds, or why it is refused (strict UTF-8 and JSON: no ``NaN``)."""
    if line.too_long:
        detail = f"the line is {line.size} bytes long, more than the limit of {line.limit} bytes"
        return Refusal(INVALID_REQUEST, "too_long", detail, scan_envelope(line.head), line.size)
    return decode_bytes(line.data, max_depth)


def decode_bytes(data: bytes, max_depth: int = DEFAULT_MAX_DEPTH) -> Decoded | Refusal:
    """What a line already within its size limit holds (see :func:`decode_line`)."""
    line = Line(data, len(data), data[:PREFIX_BYTES], len(data), True)
    try:
        text = line.data.decode("utf-8")
    except UnicodeDecodeError as error:
        detail = f"not UTF-8 (byte {error.start + 1})"
        return Refusal(PARSE_ERROR, "not_json", detail, scan_envelope(line.head), line.size)
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        detail = "nested too deeply to parse"
        return Refusal(PARSE_ERROR, "too_deep", detail, scan_envelope(line.head), line.size)
    except ValueError as error:
        envelope = scan_envelope(line.head)
        if _brackets_deeper_than(line.head, max_depth):
            detail = f"nested more than {max_depth} levels deep"
            return Refusal(PARSE_ERROR, "too_deep", detail, envelope, line.size)
        detail = str(error)
        if isinstance(error, json.JSONDecodeError):
            what = _SAID.get(error.msg, error.msg)
            detail = f"{what} (column {error.colno})"
        return Refusal(PARSE_ERROR, "not_json", detail, envelope, line.size)
    if nested_deeper_than(value, max_depth):
        envelope = envelope_of(value) if isinstance(value, dict) else Envelope()
        detail = f"nested more than {max_depth} levels deep"
        return Refusal(INVALID_REQUEST, "too_deep", detail, envelope, line.size)
    return Decoded(value, line.size)


_SAID: Final = {"Extra data": "trailing characters after the value"}
"""The standard decoder's messages that say less than they could."""


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def nested_deeper_than(value: object, limit: int) -> bool:
    """Whether objects and arrays nest more than ``limit`` levels (``value`` is level 1).

    Iterative, and stops at the first level too deep: what reads a message next (an SDK's
    copying and validation, a log renderer) may recurse, and would fail with
    ``RecursionError`` far below the decoder's own limit.
    """
    if not isinstance(value, dict | list):
        return False
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        assert isinstance(children, Iterable)
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _brackets_deeper_than(data: bytes, limit: int) -> bool:
    """Whether the brackets of a line that is not JSON (its start) open more than ``limit``
    levels outside strings: such a line is refused for its depth, not its syntax."""
    depth = 0
    in_string = escaped = False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return False
