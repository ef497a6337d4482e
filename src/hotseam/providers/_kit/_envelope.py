"""What a message that cannot be served says about itself: its id, and whether it answers.

A JSON-RPC error must carry the id of the request it answers, or the client's call waits
for ever (the TypeScript SDK's ``prompt()`` does). A line that is too long, too deeply
nested or not quite JSON is not decoded whole, but its start usually holds the envelope:
clients write ``{"jsonrpc": "2.0", "id": 7, "method": "session/prompt", "params": ...}``
in that order, the bulk last. :func:`scan_envelope` reads the top-level members of a
line's first :data:`PREFIX_BYTES` bytes, one at a time, each with the standard library's
own JSON decoder, and stops at the first one it cannot read: never a full decode of a huge
line, never a member of a nested object taken for the envelope's.

:class:`Envelope` then says what to do with the rejection: a request gets an error response
with its id; a response (``result`` or ``error``, no ``method``) answers one of the
agent's own requests, which fails with the error instead (as the TypeScript SDK does with
a malformed response); anything else gets ``"id": null``, as JSON-RPC 2.0 requires when
the id cannot be determined.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeAlias

__all__ = ["PREFIX_BYTES", "Envelope", "RequestId", "envelope_of", "is_request_id", "scan_envelope"]

RequestId: TypeAlias = int | str

PREFIX_BYTES: Final = 64 * 1024
"""How much of a line's start is kept and scanned for its envelope (the id comes first in
practice; a prompt's content, however large, comes after it)."""

_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_scan_string: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


def is_request_id(value: object) -> bool:
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
    """The envelope of a decoded message."""
    request_id = message.get("id")
    return Envelope(
        request_id if is_request_id(request_id) else None,  # type: ignore[arg-type]
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
    request_id = members.get("id")
    return Envelope(
        request_id if is_request_id(request_id) else None,  # type: ignore[arg-type]
        "method" in members,
        "result" in members or "error" in members,
    )


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
