"""One bounded reader of JSON lines from a peer that may be hostile or broken.

ACP and MCP over stdio and the control socket read one JSON value a line from a peer
hotseam does not trust, and must survive a line of gigabytes, JSON nested deep enough to
crash a recursive copy, bytes that are not UTF-8, a line in pieces. :class:`JsonLines`
says for each line what it holds (:class:`Decoded`) or why it is refused
(:class:`Refusal`: a JSON-RPC code, a reason never quoting the line, and its
:class:`Envelope`); what a refusal becomes on the wire is each surface's.

A line longer than ``max_line_bytes`` is discarded as it arrives, never held whole; depth
is checked iteratively after the standard decoder. The envelope matters because an error
without the id of the request it answers leaves the client's call waiting for ever (the
TypeScript SDK's ``prompt()`` does): clients write the id first and the bulk last, so
:func:`scan_envelope` reads the top-level members of a refused line's first
:data:`PREFIX_BYTES`, one at a time, stopping at the first it cannot read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias, TypeGuard

import anyio
import anyio.abc

DEFAULT_MAX_DEPTH: Final = 128
"""The deepest nesting accepted (serde_json's default, as the Rust ACP SDK parses)."""

DEFAULT_MAX_LINE_BYTES: Final = 16 * 1024 * 1024
"""16 MiB: a prompt or a tool's arguments may carry a screenshot inline, base64-encoded; a
longer line is far more likely a runaway or hostile peer than a message."""

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600

_CHUNK: Final = 64 * 1024

RequestId: TypeAlias = int | str

PREFIX_BYTES: Final = 64 * 1024
"""How much of a line's start is kept and scanned for its envelope."""

_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_scan_string: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


def is_request_id(value: object) -> TypeGuard[RequestId]:
    """A JSON-RPC id a response can name: an integer or a string."""
    return isinstance(value, int | str) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class Envelope:
    """The top-level members of a message that could be read, and what they make it."""

    request_id: RequestId | None = None
    has_method: bool = False
    has_outcome: bool = False  # a result or an error member

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

    Only ``id`` values are kept; a key whose value cannot be read is still present. In a
    cut-off start (``cut``) a value reaching its very end may be cut (``12`` read as ``1``).
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
    """An ``asyncio.StreamReader`` (the SDKs' stdio transports') as an anyio byte stream;
    closing it leaves the reader to its owner."""

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
    """One line as read: ``data`` without the newline (empty when longer than ``limit``),
    its ``size`` (as much as was read), its first :data:`PREFIX_BYTES` (``head``), and
    whether a newline ``ended`` it."""

    data: bytes
    size: int
    head: bytes
    limit: int
    ended: bool

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

    code: int  # PARSE_ERROR (not JSON, too deep to parse), or INVALID_REQUEST
    kind: Literal["too_long", "not_json", "too_deep"]
    detail: str  # a limit, a position: never the line
    envelope: Envelope
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
        """The next line, holding no more than the limit of it; ``None`` at the end."""
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
    """Whether objects and arrays nest more than ``limit`` levels (``value`` is level 1),
    iteratively: what reads a message next (an SDK's copy, a log renderer) may recurse."""
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
    """Whether a non-JSON line's brackets open more than ``limit`` levels outside strings
    (refused for its depth, not its syntax)."""
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
