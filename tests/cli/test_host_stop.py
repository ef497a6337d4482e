"""How hosts stop the commands they launch: ``hotseam mcp``, ``hotseam acp``, ``hotseam run``.

Claude Code stops an MCP server with SIGINT, then SIGTERM 100 ms later. The second signal
must not kill the stop in progress: each command exits 0 with every disposer run and a
running tool's (or agent's) ``finally`` run, whether the second signal comes 100 ms later
or right after the first. A third signal ends the process at once with 128 + its number
(docs/cli.md). Real subprocesses, real signals; the tool or agent says it is running over a
Unix socket the test listens on, so nothing is polled.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from tests._timing import scaled

from ._support import hotseam_env, write

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]

WAIT = 20.0

# What the tool, the agent and the provider module share: say "running" (then
# "disposing") on the socket, write the markers. The disposer waits HOLD_SECONDS (0 unless
# a test holds the stop open).
RUNNING = """
import os
import socket

import anyio


def say(word):
    with socket.socket(socket.AF_UNIX) as peer:
        peer.connect(os.environ["STOP_TEST_SOCKET"])
        peer.sendall(word)


async def run_until_stopped():
    say(b"running")
    try:
        await anyio.sleep(3600)
    finally:
        with open(os.environ["STOP_TEST_MARKS"] + "/finally", "w") as mark:
            mark.write("ran")
"""

DISPOSING = """
import os

import anyio

from stop_helpers import say


def setup(scope):
    async def dispose():
        say(b"disposing")
        await anyio.sleep(float(os.environ.get("HOLD_SECONDS", "0")))
        with open(os.environ["STOP_TEST_MARKS"] + "/disposed", "w") as mark:
            mark.write("ran")

    scope.defer(dispose)
"""

TOOL = """
from pydantic import BaseModel

from hotseam import tool
from stop_helpers import run_until_stopped


class Nothing(BaseModel):
    pass


@tool()
async def wait(input: Nothing, call) -> str:
    \"\"\"Runs until the server stops.\"\"\"
    await run_until_stopped()
    return "done"


def setup(scope):
    scope.register_tool(wait)
"""

AGENT = """
from stop_helpers import run_until_stopped


async def main(context):
    await run_until_stopped()
"""

ACP_AGENT = """
from stop_helpers import run_until_stopped


async def agent(context):
    await run_until_stopped()
"""


@dataclass
class Started:
    process: anyio.abc.Process
    marks: Path
    listener: anyio.abc.Listener[anyio.abc.SocketStream]
    stderr: bytearray
    grew: anyio.Event

    async def said(self, word: bytes) -> None:
        """Wait until the child says ``word`` on the socket."""
        with anyio.fail_after(scaled(WAIT)):
            async with await self.listener.accept() as peer:
                assert await peer.receive() == word

    def count(self, text: str) -> int:
        return self.stderr.decode(errors="replace").count(text)

    async def logged(self, text: str, count: int) -> None:
        """Wait until ``text`` is in the child's stderr ``count`` times."""
        with anyio.fail_after(scaled(WAIT)):
            while self.count(text) < count:
                self.grew = anyio.Event()
                await self.grew.wait()

    def events(self) -> list[dict[str, Any]]:
        lines = self.stderr.decode(errors="replace").splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def tail(self) -> str:
        return self.stderr.decode(errors="replace")[-3000:]

    async def exited(self) -> int:
        """The exit code; what the child logged if it does not exit in time."""
        try:
            with anyio.fail_after(scaled(WAIT)):
                return await self.process.wait()
        except TimeoutError:
            raise AssertionError(f"still running; its stderr ends with:\n{self.tail()}") from None


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


async def _drive(command: str, process: anyio.abc.Process) -> None:
    """Start the work that runs until the stop: a tool call (mcp), a prompt (acp)."""
    assert process.stdin is not None
    if command == "mcp":
        await process.stdin.send(
            _line(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "stop-test", "version": "1"},
                    },
                }
            )
            + _line({"jsonrpc": "2.0", "method": "notifications/initialized"})
            + _line(
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "wait", "arguments": {}},
                }
            )
        )
    elif command == "acp":
        assert process.stdout is not None
        await process.stdin.send(
            _line(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"protocolVersion": 1},
                }
            )
            + _line(
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "session/new",
                    "params": {"cwd": "/", "mcpServers": []},
                }
            )
        )
        received = b""
        while b'"sessionId"' not in received:
            received += await process.stdout.receive()
        session = received.split(b'"sessionId":', 1)[1].split(b'"')[1].decode()
        await process.stdin.send(
            _line(
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "session/prompt",
                    "params": {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]},
                }
            )
        )


@asynccontextmanager
async def started(tmp_path: Path, command: str, *, hold: float = 0.0) -> AsyncIterator[Started]:
    """``hotseam COMMAND`` with a disposer and a tool or agent that runs until the stop,
    returned once that runs."""
    write(tmp_path / "lib" / "stop_helpers.py", RUNNING)
    write(tmp_path / "providers" / "disposing.py", DISPOSING)
    marks = tmp_path / "marks"
    marks.mkdir()
    if command == "mcp":
        write(tmp_path / "providers" / "wait.py", TOOL)
        args = ["mcp", "providers"]
    elif command == "acp":
        write(tmp_path / "lib" / "acp_agent.py", ACP_AGENT)
        args = ["acp", "--agent", "acp_agent:agent", "--watch", "providers"]
    else:
        write(tmp_path / "agent.py", AGENT)
        args = ["run", "providers", "--agent", "agent.py", "--no-journal", "--name", "stop-test"]
    socket_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"hs-stop-{os.getpid()}-{id(marks)}"
    env = {
        **hotseam_env(tmp_path / "rt"),
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "lib"), os.environ.get("PYTHONPATH", "")]),
        "STOP_TEST_SOCKET": str(socket_path),
        "STOP_TEST_MARKS": str(marks),
        "HOLD_SECONDS": str(hold),
    }
    listener = await anyio.create_unix_listener(socket_path)
    try:
        process = await anyio.open_process(
            # The import bound stretched too: the agent's module and the watched ones take
            # over its default 10 s on a busy machine, and the command then exits 2.
            [
                *(sys.executable, "-m", "hotseam", *args, "--dispose-timeout", "7200"),
                *("--import-timeout", f"{scaled(10.0):g}"),
            ],
            cwd=tmp_path,
            env=env,
        )
        run = Started(process, marks, listener, bytearray(), anyio.Event())

        async def read_stderr() -> None:
            assert process.stderr is not None
            async for chunk in process.stderr:
                run.stderr += chunk
                run.grew.set()

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(read_stderr)
                with anyio.fail_after(scaled(WAIT)):
                    await _drive(command, process)
                await run.said(b"running")
                yield run
                group.cancel_scope.cancel()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            await process.aclose()
    finally:
        await listener.aclose()
        socket_path.unlink(missing_ok=True)


@pytest.mark.parametrize("command", ["mcp", "acp", "run"])
@pytest.mark.parametrize("gap", [0.1, 0.0], ids=["100ms", "at-once"])
async def test_sigint_then_sigterm_is_one_clean_stop(
    tmp_path: Path, command: str, gap: float
) -> None:
    """SIGINT, then SIGTERM ``gap`` later (a host's wall-clock gap, so slept): exit 0, the
    disposer ran, the running tool's or agent's ``finally`` ran; nothing at error level."""
    async with started(tmp_path, command) as run:
        run.process.send_signal(signal.SIGINT)
        await anyio.sleep(gap)
        if run.process.returncode is None:
            run.process.send_signal(signal.SIGTERM)
        code = await run.exited()
        assert code == 0, run.tail()
        assert (run.marks / "disposed").read_text() == "ran"
        assert (run.marks / "finally").read_text() == "ran"
        events = run.events()
        assert not [event for event in events if event.get("level") == "error"], events


@pytest.mark.parametrize("command", ["mcp", "acp", "run"])
async def test_a_second_signal_lets_the_stop_finish_and_a_third_ends_it(
    tmp_path: Path, command: str
) -> None:
    """The second signal comes while a disposer runs: the stop goes on (its mark is
    written, exit 0). With a disposer held for an hour, a third signal (after the second
    was seen: two of one kind sent at once may arrive as one) exits at once with 143."""
    async with started(tmp_path, command, hold=0.5) as run:
        run.process.send_signal(signal.SIGINT)
        await run.said(b"disposing")
        run.process.send_signal(signal.SIGTERM)
        assert await run.exited() == 0, run.tail()
        assert (run.marks / "disposed").read_text() == "ran"
        assert (run.marks / "finally").read_text() == "ran"

    held = tmp_path / "held"
    held.mkdir()
    async with started(held, command, hold=3600.0) as run:
        run.process.send_signal(signal.SIGINT)
        await run.said(b"disposing")
        seen = run.count("SIGTERM")
        run.process.send_signal(signal.SIGTERM)
        await run.logged("SIGTERM", seen + 1)
        run.process.send_signal(signal.SIGTERM)
        assert await run.exited() == 128 + signal.SIGTERM, run.tail()
        assert not (run.marks / "disposed").exists()
        assert "forced_exit" in run.tail() or "exits at once" in run.tail()
