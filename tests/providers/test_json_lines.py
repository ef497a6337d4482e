"""The surface kit's bounded JSON-lines reader, the one ACP, MCP stdio and the control
socket read their peers with: its contract, on a real socket pair, on asyncio and trio.

A huge line is discarded as it arrives (never held whole) and refused with the id its start
tells; JSON nested deeper than the limit is refused whether it parses or not; bytes that are
not UTF-8 are a parse error; a line split across reads (down to one byte a read) is one
line; the stream's last line needs no newline.
"""

from __future__ import annotations

import asyncio
import json
import socket
import tracemalloc
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import anyio
import anyio.abc
import pytest
from tests._timing import scaled

from hotseam.providers._kit import (
    INVALID_REQUEST,
    PARSE_ERROR,
    PREFIX_BYTES,
    Decoded,
    JsonLines,
    Refusal,
    StreamReaderStream,
)

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def peer(
    pieces: Sequence[bytes], *, close: bool = True, **options: int | bool
) -> AsyncIterator[JsonLines]:
    """A reader over one end of a socket pair whose other end sends ``pieces``, one send
    each (and then shuts its side, unless ``close`` is false)."""
    left, right = socket.socketpair()
    receiving = await anyio.abc.SocketStream.from_socket(left)
    sending = await anyio.abc.SocketStream.from_socket(right)
    async with receiving, sending, anyio.create_task_group() as group:

        async def send() -> None:
            for piece in pieces:
                await sending.send(piece)
                await anyio.sleep(0)  # let the reader see each piece on its own
            if close:
                await sending.send_eof()

        group.start_soon(send)
        options.setdefault("max_line_bytes", 1024)
        yield JsonLines(receiving, **options)  # type: ignore[arg-type]
        group.cancel_scope.cancel()


async def read_all(lines: JsonLines) -> list[Decoded | Refusal]:
    found: list[Decoded | Refusal] = []
    with anyio.fail_after(scaled(10)):
        while (item := await lines.receive()) is not None:
            found.append(item)
    return found


async def test_a_huge_line_is_refused_with_its_id_and_the_next_one_is_read() -> None:
    """32 MiB on one line past a 1 KiB limit: refused as too long (-32600) with the id of
    its start and its full size, the reader's memory stays far below the line's size, and
    the next line is read."""
    start = b'{"jsonrpc": "2.0", "id": 7, "method": "x", "params": "'
    bulk = b"s" * (1024 * 1024)
    pieces = [start, *([bulk] * 32), b'"}\n', b'{"id": 8}\n']
    tracemalloc.start()
    try:
        async with peer(pieces) as lines:
            found = await read_all(lines)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    refused, after = found
    assert isinstance(refused, Refusal)
    assert (refused.code, refused.kind) == (INVALID_REQUEST, "too_long")
    assert refused.envelope.request_id == 7
    assert refused.size == len(start) + 32 * len(bulk) + 2
    assert "more than the limit of 1024 bytes" in refused.detail
    assert after == Decoded({"id": 8}, 9)
    assert peak < 8 * 1024 * 1024, f"the reader held {peak} bytes of a 32 MiB line"


async def test_a_long_line_ends_the_read_at_the_limit_when_told() -> None:
    """``discard_long=False`` (one request a connection): the line is refused as soon as it
    passes the limit, without waiting for a newline that never comes."""
    async with peer([b'{"op": "', b"x" * 4000], close=False, discard_long=False) as lines:
        with anyio.fail_after(scaled(10)):
            line = await lines.receive_line()
    assert line is not None
    assert (line.too_long, line.ended, line.data) == (True, False, b"")
    assert len(line.head) <= PREFIX_BYTES


@pytest.mark.parametrize(
    ("line", "code", "kind", "request_id"),
    [
        pytest.param(b'{"id": 1, "x": ' + b"[" * 127 + b"]" * 127 + b"}", None, None, 1, id="128"),
        pytest.param(
            b'{"id": 2, "x": ' + b"[" * 128 + b"]" * 128 + b"}",
            INVALID_REQUEST,
            "too_deep",
            2,
            id="129-parsed",
        ),
        pytest.param(b'{"id": 3, "x": ' + b"[" * 100_000, PARSE_ERROR, "too_deep", 3, id="parser"),
        pytest.param(b'{"id": 4, "x": ' + b'{"a":' * 250, PARSE_ERROR, "too_deep", 4, id="cut"),
        pytest.param(b'{"id": 5, "x": "[[[[' + b"[" * 500 + b'"}', None, None, 5, id="in-a-string"),
    ],
)
async def test_nesting_is_bounded_whether_the_line_parses_or_not(
    line: bytes, code: int | None, kind: str | None, request_id: int
) -> None:
    """128 levels are read (the message is level 1); 129 are refused; a line too deep for
    the parser, or cut off deep inside, is refused for its depth; brackets in a string are
    text."""
    async with peer([line + b"\n"], max_line_bytes=1024 * 1024) as lines:
        (found,) = await read_all(lines)
    if code is None:
        assert isinstance(found, Decoded)
        assert found.value["id"] == request_id
    else:
        assert isinstance(found, Refusal)
        assert (found.code, found.kind, found.envelope.request_id) == (code, kind, request_id)
        assert "deep" in found.detail


@pytest.mark.parametrize(
    ("line", "detail"),
    [
        (b'{"id": 6, "text": "caf\xe9"}', "not UTF-8 (byte 23)"),
        (b'{"id": 6, "x": NaN}', "NaN is not JSON"),
        (b'{"id": 6, "x": }', "Expecting value (column 16)"),
    ],
    ids=["latin-1", "nan", "syntax"],
)
async def test_what_is_not_json_is_a_parse_error_with_its_id(line: bytes, detail: str) -> None:
    """Bytes that are not UTF-8, ``NaN`` and a syntax error are -32700; the id is read from
    the line's start; the detail never quotes the line."""
    async with peer([line + b"\n"]) as lines:
        (found,) = await read_all(lines)
    assert isinstance(found, Refusal)
    assert (found.code, found.kind, found.envelope.request_id) == (PARSE_ERROR, "not_json", 6)
    assert found.detail == detail


async def test_a_malformed_response_is_told_from_a_request() -> None:
    """A refused line that answers one of our requests (an id and a result, no method) says
    so: its request fails instead of the peer getting an error for a response."""
    async with peer([b'{"jsonrpc": "2.0", "id": "q-1", "result": {"x": \n']) as lines:
        (found,) = await read_all(lines)
    assert isinstance(found, Refusal)
    assert found.envelope.request_id == "q-1"
    assert found.envelope.is_response


async def test_a_line_split_across_reads_is_one_line() -> None:
    """Messages cut anywhere, one byte a read at worst, and a newline at the start of a
    read, read as whole lines; blank lines are skipped; the last needs no newline."""
    text = b'{"a": "\xc3\xa9"}\n\n{"b": [1, 2]}\r\n{"c": 3}'
    async with peer([text[:3], text[3:7], *[bytes([b]) for b in text[7:20]], text[20:]]) as lines:
        found = await read_all(lines)
    assert [item.value for item in found if isinstance(item, Decoded)] == [
        {"a": "é"},
        {"b": [1, 2]},
        {"c": 3},
    ]
    assert len(found) == 3


async def test_an_empty_stream_has_no_line() -> None:
    async with peer([]) as lines:
        with anyio.fail_after(scaled(10)):
            assert await lines.receive_line() is None


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_asyncio_stream_reader_is_read_the_same_way() -> None:
    """The stdio transports' ``asyncio.StreamReader``, through :class:`StreamReaderStream`."""
    reader = asyncio.StreamReader()
    reader.feed_data(b'{"id": 1}\n{"id": 2, "x": ' + b"[" * 200 + b"]" * 200 + b"}\n")
    reader.feed_data(json.dumps({"id": 3}).encode())
    reader.feed_eof()
    found = await read_all(JsonLines(StreamReaderStream(reader), max_line_bytes=4096))
    assert isinstance(found[0], Decoded) and isinstance(found[2], Decoded)
    assert isinstance(found[1], Refusal) and found[1].envelope.request_id == 2
    assert [found[0].value, found[2].value] == [{"id": 1}, {"id": 3}]
