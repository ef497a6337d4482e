"""``hotseam acp`` keeps serving whatever a client writes on its stdin.

Raw lines, not the SDK's client: the SDK's client cannot write a line that is not a JSON
object. Each hostile line is sent between valid requests; its answer is asserted exactly,
and the requests after it must still be served by the same process.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from tests._timing import scaled

from ._harness import STARTUP, WAIT

pytestmark = pytest.mark.anyio

CAP = 300_000
"""``--max-line-bytes`` in these tests: room for the deeply nested line (which the parser,
not the cap, must reject), far below the oversized one."""


def _error(code: int, message: str, details: str, request_id: Any = None) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": code, "message": message, "data": {"details": details}},
    }


def _invalid(details: str, request_id: Any = None) -> dict[str, Any]:
    return _error(-32600, "Invalid Request", details, request_id)


NOT_JSON = _error(
    -32700,
    "Parse error",
    "the message line is not JSON (JSON-RPC 2.0 over stdio: one JSON object per line, UTF-8)",
)
BATCH = "the message is a batch (a JSON array); batches are not supported, send one object per line"

OVERSIZED = b'{"jsonrpc":"2.0","method":"x","params":"' + b"s" * (3 * 1024 * 1024) + b'"}'
OVERSIZED_PROMPT = (
    b'{"jsonrpc":"2.0","id":"big-1","method":"session/prompt","params":{"sessionId":"s",'
    b'"prompt":[{"type":"text","text":"' + b"s" * (2 * CAP) + b'"}]}}'
)
ID_AFTER_THE_BULK = b'{"jsonrpc":"2.0","params":"' + b"s" * (2 * CAP) + b'","id":12,"method":"x"}'


def _nested(depth: int) -> bytes:
    """A session/new request (id = ``depth``) whose ``_meta`` nests ``depth`` levels in all."""
    inner = b"[" * (depth - 3) + b"]" * (depth - 3)  # message, params, _meta: 3 levels
    return (
        b'{"jsonrpc":"2.0","id":%d,"method":"session/new",'
        b'"params":{"cwd":"/tmp","mcpServers":[],"_meta":{"x":%s}}}' % (depth, inner)
    )


def _too_long(size: int | str) -> str:
    return (
        f"the message line is {size} bytes long, more than the limit of {CAP} bytes; "
        "it was discarded"
    )


NOT_JSON_DETAILS = (
    "the message line is not JSON (JSON-RPC 2.0 over stdio: one JSON object per line, UTF-8)"
)
DEEP = "the message is nested more than 128 levels deep"

HOSTILE: list[tuple[str, bytes, dict[str, Any]]] = [
    (
        "batch",
        b'[{"jsonrpc":"2.0","id":99,"method":"initialize","params":{"protocolVersion":1}}]',
        _invalid(BATCH),
    ),
    ("empty batch", b"[]", _invalid(BATCH)),
    ("number", b"5", _invalid("the message is a JSON number; a message must be a JSON object")),
    ("string", b'"x"', _invalid("the message is a JSON string; a message must be a JSON object")),
    ("null", b"null", _invalid("the message is a JSON null; a message must be a JSON object")),
    ("true", b"true", _invalid("the message is a JSON boolean; a message must be a JSON object")),
    (
        "not json",
        b'{"jsonrpc": "2.0", "id": 3,',
        _error(-32700, "Parse error", NOT_JSON_DETAILS, 3),
    ),
    (
        "not json before the id",
        b'{"jsonrpc": "2.0", "params": {"x": }, "id": 4, "method": "x"}',
        NOT_JSON,
    ),
    ("not utf-8", b'{"jsonrpc":"2.0","method":"\xff\xfe"}', NOT_JSON),
    (
        "too deep",
        b"[" * 100_000 + b"]" * 100_000,
        _error(-32700, "Parse error", "the message is nested too deeply to parse"),
    ),
    (
        "3 KB of [",  # what killed 'hotseam run' on its control socket (issue 21, item 1)
        b"[" * 3000,
        _error(-32700, "Parse error", "the message is nested too deeply to parse"),
    ),
    (
        "too deep for the parser, after the id",
        b'{"jsonrpc":"2.0","id":9,"method":"session/new","params":' + b"[" * 5000,
        _error(-32700, "Parse error", "the message is nested too deeply to parse", 9),
    ),
    ("a deep value in a valid request", _nested(500), _invalid(DEEP, 500)),
    ("one level too deep", _nested(129), _invalid(DEEP, 129)),
    (
        "jsonrpc 1.0",
        b'{"jsonrpc":"1.0","id":10,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}',
        _invalid('jsonrpc must be "2.0" (JSON-RPC 2.0), got "1.0"', 10),
    ),
    (
        "no jsonrpc",
        b'{"id":11,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}',
        _invalid('jsonrpc must be "2.0" (JSON-RPC 2.0), and it is missing', 11),
    ),
    (
        "a notification without jsonrpc",
        b'{"method":"session/cancel","params":{"sessionId":"s"}}',
        _invalid('jsonrpc must be "2.0" (JSON-RPC 2.0), and it is missing'),
    ),
    (
        "jsonrpc a number",
        b'{"jsonrpc":2.0,"id":"n","method":"initialize","params":{"protocolVersion":1}}',
        _invalid('jsonrpc must be "2.0" (JSON-RPC 2.0), got a number', "n"),
    ),
    (
        "unhashable id",
        b'{"jsonrpc":"2.0","id":[1],"result":null}',
        _invalid("id must be a number, a string or null, got array"),
    ),
    (
        "no method, no id",
        b'{"jsonrpc":"2.0"}',
        _invalid("the message has neither a method nor an id"),
    ),
    (
        "method not a string",
        b'{"jsonrpc":"2.0","id":7,"method":5}',
        _invalid("method must be a string, got number", request_id=7),
    ),
    (
        "oversized",  # three times the reader's 1 MiB buffer: read and dropped in pieces
        OVERSIZED,
        _invalid(_too_long(len(OVERSIZED))),
    ),
    (  # the TypeScript SDK's prompt() waited for ever on an answer with "id": null
        "an oversized prompt: its id is read from the line's start",
        OVERSIZED_PROMPT,
        _invalid(_too_long(len(OVERSIZED_PROMPT)), "big-1"),
    ),
    (
        "oversized, the id after the bulk",
        ID_AFTER_THE_BULK,
        _invalid(_too_long(len(ID_AFTER_THE_BULK))),
    ),
]


class RawClient:
    """Writes lines to ``hotseam acp`` and reads its stdout a message at a time."""

    def __init__(self, process: anyio.abc.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._buffer = b""
        self._next_id = 100
        self.updates: list[dict[str, Any]] = []

    async def send_line(self, line: bytes) -> None:
        await self._stdin.send(line + b"\n")

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_line(json.dumps(message).encode())

    async def receive(self, timeout: float = WAIT) -> dict[str, Any]:
        """The next message on stdout; fails if the process closed it."""
        with anyio.fail_after(scaled(timeout)):
            while b"\n" not in self._buffer:
                try:
                    self._buffer += await self._stdout.receive()
                except anyio.EndOfStream:
                    raise AssertionError(
                        f"hotseam acp closed stdout (exit code {await self.process.wait()})"
                    ) from None
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    async def request(
        self, method: str, params: dict[str, Any], timeout: float = WAIT
    ) -> dict[str, Any]:
        """Send a request and return its response; the agent's questions are declined."""
        self._next_id += 1
        request_id = self._next_id
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            message = await self.receive(timeout)
            if message.get("method") == "elicitation/create":
                await self.send({"jsonrpc": "2.0", "id": message["id"], "result": DECLINE})
            elif message.get("method") is not None:
                self.updates.append(message)
            elif message.get("id") == request_id:
                return message
            else:
                raise AssertionError(f"unexpected message: {message}")

    async def initialize(self, timeout: float = WAIT) -> None:
        response = await self.request("initialize", INITIALIZE, timeout)
        assert response["result"]["protocolVersion"] == 1, response

    async def new_session(self) -> str:
        response = await self.request("session/new", {"cwd": "/tmp", "mcpServers": []})
        session_id: str = response["result"]["sessionId"]
        return session_id

    async def prompt(self, session_id: str) -> dict[str, Any]:
        response = await self.request(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]},
        )
        assert response["result"] == {"stopReason": "end_turn"}, response
        return response


INITIALIZE = {
    "protocolVersion": 1,
    "clientCapabilities": {"elicitation": {"form": {}}},
}
DECLINE = {"action": "decline"}


async def _spawn(stderr: Path, cap: int) -> anyio.abc.Process:
    with stderr.open("wb") as sink:
        return await anyio.open_process(
            [sys.executable, "-m", "hotseam", "acp", "--max-line-bytes", str(cap)], stderr=sink
        )


def _logs(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_hostile_lines_are_answered_and_the_agent_keeps_serving(tmp_path: Path) -> None:
    """Each hostile line gets its exact JSON-RPC error, and the request after it (initialize,
    session/new, session/prompt in turn) is served by the same process, which exits 0 when
    stdin closes; its logs never quote a line."""
    stderr = tmp_path / "stderr.log"
    process = await _spawn(stderr, CAP)
    async with process:
        client = RawClient(process)
        await client.initialize(STARTUP)  # the first answer waits for Python to start
        session_id = await client.new_session()
        for index, (name, line, expected) in enumerate(HOSTILE):
            await client.send_line(line)
            assert await client.receive() == expected, name
            if index % 3 == 0:
                await client.initialize()
            elif index % 3 == 1:
                session_id = await client.new_session()
            else:
                await client.prompt(session_id)
            assert process.returncode is None, name
        await client.prompt(session_id)
        await client.send_line(_nested(128))  # as deep as a message may be: served
        assert (await client.receive())["result"]["sessionId"].startswith("sess_")
        await process.stdin.aclose()  # type: ignore[union-attr]
        with anyio.fail_after(scaled(WAIT)):
            assert await process.wait() == 0
    logs = _logs(stderr)
    invalid = [entry for entry in logs if entry["event"] == "acp.invalid_message"]
    assert [(e["level"], e["code"], e.get("request_id")) for e in invalid] == [
        ("warning", expected["error"]["code"], expected["id"]) for _, _, expected in HOSTILE
    ]
    assert not [entry for entry in logs if entry["level"] == "error"]
    text = stderr.read_text()
    for name, line, _ in HOSTILE:
        if len(line) > 20:
            assert line[8:28].decode(errors="replace") not in text, name


async def test_an_unknown_session_is_resource_not_found_for_every_request(
    tmp_path: Path,
) -> None:
    """-32002 "Resource not found" with ``data.sessionId`` (the TypeScript SDK's
    ``RequestError.sessionNotFound``) for session/prompt as for session/close."""
    stderr = tmp_path / "stderr.log"
    process = await _spawn(stderr, CAP)
    async with process:
        client = RawClient(process)
        await client.initialize(STARTUP)
        closed = await client.new_session()
        assert (await client.request("session/close", {"sessionId": closed}))["result"] == {}
        prompt = [{"type": "text", "text": "go"}]
        for session_id in ("sess_never_opened", closed):
            responses = [
                await client.request("session/prompt", {"sessionId": session_id, "prompt": prompt}),
                await client.request("session/close", {"sessionId": session_id}),
            ]
            for response in responses:
                error = response["error"]
                assert (error["code"], error["message"]) == (-32002, "Resource not found")
                assert error["data"]["sessionId"] == session_id
                assert "unknown session" in error["data"]["details"]


def _answer(request_id: int, body: bytes) -> bytes:
    """A response line to the agent's request ``request_id``, its members after the id."""
    return b'{"jsonrpc":"2.0","id":%d,%s}' % (request_id, body)


REFUSED = (
    "the ACP client's answer to elicitation/create could not be read (JSON-RPC error -32600, "
    "Invalid Request: "
)
BAD_ANSWERS: list[tuple[str, Callable[[int], bytes], str]] = [
    (
        "an error that is not an object",  # crashed the SDK's receive loop
        lambda rid: _answer(rid, b'"error":"boom"'),
        "the ACP client answered elicitation/create with JSON-RPC error -32603: malformed error "
        "response from the client",
    ),
    (
        "jsonrpc 1.0",
        lambda rid: (
            b'{"jsonrpc":"1.0","id":%d,"result":{"action":"accept","content":{"answer":'
            b'"quick"}}}' % rid
        ),
        REFUSED + 'jsonrpc must be "2.0" (JSON-RPC 2.0), got "1.0")',
    ),
    (
        "oversized",
        lambda rid: _answer(
            rid, b'"result":{"action":"accept","content":{"answer":"' + b"q" * CAP + b'"}}'
        ),
        REFUSED + _too_long("{size}") + ")",
    ),
    (
        "too deep",
        lambda rid: _answer(
            rid, b'"result":{"action":"accept","content":{"x":' + b"[" * 200 + b"]" * 200 + b"}}"
        ),
        REFUSED + DEEP + ")",
    ),
]


async def test_a_malformed_answer_fails_the_question_not_the_agent(tmp_path: Path) -> None:
    """An answer to elicitation/create that cannot be read ends that question as
    PROVIDER_FAILED naming why, at once (the question never waits for ever); nothing is
    sent back for it (it is a response: answering it would name one of the client's own
    ids), and the next prompt is served."""
    stderr = tmp_path / "stderr.log"
    process = await _spawn(stderr, CAP)
    async with process:
        client = RawClient(process)
        await client.initialize(STARTUP)  # the first answer waits for Python to start
        session_id = await client.new_session()
        for prompt_id, (name, answer, why) in enumerate(BAD_ANSWERS, start=1):
            await client.send(
                {
                    "jsonrpc": "2.0",
                    "id": prompt_id,
                    "method": "session/prompt",
                    "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]},
                }
            )
            while (message := await client.receive()).get("method") != "elicitation/create":
                pass
            line = answer(message["id"])
            await client.send_line(line)
            said = []
            while "id" not in (message := await client.receive()) or "method" in message:
                if message.get("method") == "session/update":
                    said.append(message["params"]["update"].get("content", {}).get("text", ""))
            assert message == {
                "jsonrpc": "2.0",
                "id": prompt_id,
                "result": {"stopReason": "end_turn"},
            }, name
            why = why.replace("{size}", str(len(line)))
            assert f"Approach: no answer (PROVIDER_FAILED: {why})" in "".join(said), name
        await client.prompt(session_id)
        await process.stdin.aclose()  # type: ignore[union-attr]
        with anyio.fail_after(scaled(WAIT)):
            assert await process.wait() == 0
