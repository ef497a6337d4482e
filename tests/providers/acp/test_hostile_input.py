"""``hotseam acp`` keeps serving whatever a client writes on its stdin.

Raw lines, not the SDK's client: the SDK's client cannot write a line that is not a JSON
object. Each hostile line is sent between valid requests; its answer is asserted exactly,
and the requests after it must still be served by the same process.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

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
    ("not json", b'{"jsonrpc": "2.0", "id": 3,', NOT_JSON),
    ("not utf-8", b'{"jsonrpc":"2.0","method":"\xff\xfe"}', NOT_JSON),
    (
        "too deep",
        b"[" * 100_000 + b"]" * 100_000,
        _error(-32700, "Parse error", "the message is nested too deeply to parse"),
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
        _invalid(
            f"the message line is {len(OVERSIZED)} bytes long, more than the limit of "
            f"{CAP} bytes; it was discarded"
        ),
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
        with anyio.fail_after(timeout):
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
        await process.stdin.aclose()  # type: ignore[union-attr]
        with anyio.fail_after(WAIT):
            assert await process.wait() == 0
    logs = _logs(stderr)
    invalid = [entry for entry in logs if entry["event"] == "acp.invalid_message"]
    assert [(e["level"], e["code"]) for e in invalid] == [
        ("warning", expected["error"]["code"]) for _, _, expected in HOSTILE
    ]
    assert not [entry for entry in logs if entry["level"] == "error"]
    text = stderr.read_text()
    for name, line, _ in HOSTILE:
        if len(line) > 20:
            assert line[8:28].decode(errors="replace") not in text, name


async def test_a_malformed_error_response_fails_the_question_not_the_agent(
    tmp_path: Path,
) -> None:
    """``"error": "boom"`` in answer to elicitation/create (which crashed the SDK's receive
    loop) ends that question as PROVIDER_FAILED; the next prompt is served."""
    stderr = tmp_path / "stderr.log"
    process = await _spawn(stderr, CAP)
    async with process:
        client = RawClient(process)
        await client.initialize(STARTUP)  # the first answer waits for Python to start
        session_id = await client.new_session()
        await client.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "session/prompt",
                "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]},
            }
        )
        while (message := await client.receive()).get("method") != "elicitation/create":
            pass
        await client.send({"jsonrpc": "2.0", "id": message["id"], "error": "boom"})
        said = []
        while "id" not in (message := await client.receive()) or "method" in message:
            if message.get("method") == "session/update":
                said.append(message["params"]["update"].get("content", {}).get("text", ""))
        assert message == {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}}
        assert (
            "Approach: no answer (PROVIDER_FAILED: the ACP client answered elicitation/create "
            "with JSON-RPC error -32603: malformed error response from the client)"
        ) in "".join(said)
        await client.prompt(session_id)
        await process.stdin.aclose()  # type: ignore[union-attr]
        with anyio.fail_after(WAIT):
            assert await process.wait() == 0
