"""``hotseam mcp`` fed exact bytes on stdin, then the end of its input: a stdin at
``/dev/null`` ends it like a closed pipe; every request read before the end is answered
(a tool still running, a question no host can answer any more); ids of a wrong type get
-32600; a host that closes both pipes first is a normal end; an elicitation answer whose
``content`` is not an object is asked again, then ``INVALID_ANSWER``. Real subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from tests._timing import scaled

from .test_cli_stdio import log_lines, write_tools

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]

WAIT = 20.0

SLOW = '''
import anyio
from pydantic import BaseModel
from hotseam import tool

class Nothing(BaseModel):
    pass

@tool()
async def slow(input: Nothing, call) -> str:
    """Takes half a second."""
    await anyio.sleep(0.5)
    return "slow done"

def setup(scope):
    scope.register_tool(slow)
'''


def _tools(folder: Path) -> Path:
    write_tools(folder)
    (folder / "slow.py").write_text(textwrap.dedent(SLOW))
    return folder


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _initialize(*, elicitation: bool = False) -> bytes:
    capabilities: dict[str, Any] = {"elicitation": {"form": {}}} if elicitation else {}
    return _line(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities,
                "clientInfo": {"name": "bytes", "version": "1"},
            },
        }
    ) + _line({"jsonrpc": "2.0", "method": "notifications/initialized"})


def _call(id_: int, name: str) -> bytes:
    return _line(
        {
            "jsonrpc": "2.0",
            "id": id_,
            "method": "tools/call",
            "params": {"name": name, "arguments": {}},
        }
    )


class Host:
    """The pipes of a ``hotseam mcp`` process, read a line at a time."""

    def __init__(self, process: anyio.abc.Process, stderr: Path) -> None:
        self.process = process
        self.stderr = stderr
        self._buffer = b""

    async def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(data)

    async def receive(self) -> dict[str, Any] | None:
        """The next message on stdout; ``None`` at its end."""
        assert self.process.stdout is not None
        with anyio.fail_after(scaled(WAIT)):
            while b"\n" not in self._buffer:
                try:
                    self._buffer += await self.process.stdout.receive()
                except anyio.EndOfStream:
                    assert not self._buffer.strip(), self._buffer
                    return None
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)  # type: ignore[no-any-return]

    async def everything(self) -> list[dict[str, Any]]:
        """Every message until stdout ends."""
        messages = []
        while (message := await self.receive()) is not None:
            messages.append(message)
        return messages

    async def exited(self) -> int:
        try:
            with anyio.fail_after(scaled(WAIT)):
                return await self.process.wait()
        except TimeoutError:
            raise AssertionError(
                "still running; its stderr ends with:\n" + self.stderr.read_text()[-3000:]
            ) from None

    def events(self) -> list[dict[str, Any]]:
        return log_lines(self.stderr)


@asynccontextmanager
async def hosted(tmp_path: Path, *, stdin: int = subprocess.PIPE) -> AsyncIterator[Host]:
    folder = _tools(tmp_path / "tools")
    stderr = tmp_path / "stderr.log"
    with stderr.open("wb") as errlog:
        process = await anyio.open_process(
            [sys.executable, "-m", "hotseam", "mcp", str(folder)],
            stdin=stdin,
            stderr=errlog,
            cwd=tmp_path,
        )
        try:
            yield Host(process, stderr)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            await process.aclose()


def _no_errors(events: list[dict[str, Any]]) -> None:
    assert not [event for event in events if event.get("level") == "error"], events


async def test_a_stdin_at_dev_null_ends_the_server_like_a_closed_pipe(tmp_path: Path) -> None:
    """/dev/null cannot be polled (epoll refuses it): its end is seen all the same."""
    async with hosted(tmp_path, stdin=subprocess.DEVNULL) as host:
        assert await host.everything() == []
        assert await host.exited() == 0
    events = [event["event"] for event in host.events()]
    assert "mcp.stopped" in events
    _no_errors(host.events())


async def test_what_was_read_before_the_end_of_input_is_answered(tmp_path: Path) -> None:
    """initialize, a call of a tool that takes half a second, tools/list, a request of a
    method nobody serves, then EOF at once: four answers, in whatever order, then exit 0."""
    async with hosted(tmp_path) as host:
        await host.send(
            _initialize()
            + _call(2, "slow")
            + _line({"jsonrpc": "2.0", "id": "three", "method": "tools/list"})
            + _line({"jsonrpc": "2.0", "id": 4, "method": "tasks/get", "params": {"taskId": "x"}})
        )
        assert host.process.stdin is not None
        await host.process.stdin.aclose()
        answers = {message["id"]: message for message in await host.everything()}
        assert await host.exited() == 0
    assert sorted(answers, key=str) == [1, 2, 4, "three"]
    assert answers[2]["result"]["content"][0]["text"] == "slow done"
    assert [tool["name"] for tool in answers["three"]["result"]["tools"]] == [
        "checks",
        "greet",
        "pick",
        "slow",
    ]
    assert answers[4]["error"]["code"] == -32601
    _no_errors(host.events())


async def test_a_question_waiting_for_a_host_whose_input_ended_fails_and_is_answered(
    tmp_path: Path,
) -> None:
    """A tool's question is out to the host (elicitation/create) when stdin closes: no
    answer can come, so the question fails at once and the call gets its answer."""
    async with hosted(tmp_path) as host:
        await host.send(_initialize(elicitation=True) + _call(2, "pick"))
        assert (await host.receive() or {})["id"] == 1
        elicitation = await host.receive()
        assert elicitation is not None
        assert elicitation["method"] == "elicitation/create"
        assert host.process.stdin is not None
        await host.process.stdin.aclose()
        (answer,) = await host.everything()
        assert await host.exited() == 0
    assert answer["id"] == 2
    assert answer["result"]["isError"] is True
    assert answer["result"]["structuredContent"]["code"] == "PROVIDER_FAILED"
    assert "closed" in answer["result"]["structuredContent"]["message"]


WRONG_IDS = ["{}", "[1]", "true", "1.5", "null"]


async def test_a_request_id_of_a_wrong_type_is_refused_with_32600(tmp_path: Path) -> None:
    """MCP ids are strings or integers (never null): any other is -32600 with id null and
    a warning, and the next request is served. One server takes every wrong type in turn
    (a process each cost the suite 2 s of CPU apiece), each followed by a good request."""
    async with hosted(tmp_path) as host:
        await host.send(_initialize())
        assert (await host.receive() or {})["id"] == 1
        for good_id, wrong in enumerate(WRONG_IDS, start=7):
            await host.send(
                b'{"jsonrpc": "2.0", "id": ' + wrong.encode() + b', "method": "ping"}\n'
            )
            refused = await host.receive()
            assert refused is not None, wrong
            assert (refused["id"], refused["error"]["code"]) == (None, -32600), wrong
            assert "id must be a string or an integer" in refused["error"]["message"], wrong
            await host.send(_line({"jsonrpc": "2.0", "id": good_id, "method": "ping"}))
            served = await host.receive() or {}
            assert served == {"jsonrpc": "2.0", "id": good_id, "result": {}}, wrong
        assert host.process.stdin is not None
        await host.process.stdin.aclose()
        assert await host.exited() == 0
    refusals = [event for event in host.events() if event["event"] == "mcp.message_refused"]
    assert [(event["level"], event["rpc_code"]) for event in refusals] == [
        ("warning", -32600)
    ] * len(WRONG_IDS)


async def test_a_host_that_closes_both_pipes_first_is_a_normal_end(tmp_path: Path) -> None:
    """A call runs when the host closes stdout and stdin: its reply cannot be written,
    which is logged at info, and the server stops with exit 0 (no mcp.failed, no
    traceback)."""
    async with hosted(tmp_path) as host:
        await host.send(_initialize() + _call(2, "slow"))
        assert (await host.receive() or {})["id"] == 1
        assert host.process.stdout is not None and host.process.stdin is not None
        await host.process.stdout.aclose()
        await host.process.stdin.aclose()
        assert await host.exited() == 0
    events = host.events()
    names = [event["event"] for event in events]
    assert "mcp.failed" not in names
    assert "mcp.stopped" in names
    _no_errors(events)
    assert "Traceback" not in host.stderr.read_text()


async def test_an_answer_whose_content_is_not_an_object_is_asked_again(tmp_path: Path) -> None:
    """``content`` a string, an array, a number: each a malformed answer (a warning, the
    question asked again with a note), the third time INVALID_ANSWER; no error-level log,
    no traceback."""
    async with hosted(tmp_path) as host:
        await host.send(_initialize(elicitation=True) + _call(2, "pick"))
        assert (await host.receive() or {})["id"] == 1
        messages = []
        for content in ("Postgres", ["Postgres"], 5):
            form = await host.receive()
            assert form is not None
            assert form["method"] == "elicitation/create"
            messages.append(form["params"]["message"])
            await host.send(
                _line(
                    {
                        "jsonrpc": "2.0",
                        "id": form["id"],
                        "result": {"action": "accept", "content": content},
                    }
                )
            )
        answer = await host.receive()
        assert host.process.stdin is not None
        await host.process.stdin.aclose()
        assert await host.exited() == 0
    assert answer is not None
    assert answer["id"] == 2
    assert answer["result"]["isError"] is True
    assert answer["result"]["structuredContent"]["code"] == "INVALID_ANSWER"
    assert "malformed 3 times" in answer["result"]["structuredContent"]["message"]
    assert "could not be read" in messages[1]
    events = host.events()
    assert [event["level"] for event in events if event["event"] == "mcp.answer_malformed"] == [
        "warning"
    ] * 3
    _no_errors(events)
    assert "Traceback" not in host.stderr.read_text()
