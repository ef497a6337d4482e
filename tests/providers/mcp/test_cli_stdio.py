"""``hotseam mcp`` as a subprocess, driven over stdio by the ``mcp`` SDK's own client on
both revisions: tools, forms, a save while a form is open, list_changed, and the host
leaving while a form is open. (A host without elicitation: ``test_cli_config.py`` through
the SDK's client, ``test_cli_hostile.py`` on the raw wire.)

One process a revision: the SDK's interpreter start is most of what such a test costs."""

from __future__ import annotations

import contextlib
import json
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import mcp
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage
from tests._timing import scaled

from .conftest import ERAS

WAIT = 10.0

GREET = '''
from pydantic import BaseModel
from hotseam import tool

class Named(BaseModel):
    name: str

@tool()
async def greet(input: Named, call) -> str:
    """{description}"""
    print("printed by the tool")  # must reach stderr, never the protocol
    return "{greeting} " + input.name

def setup(scope):
    scope.register_tool(greet)
'''

ASKING = '''
from pydantic import BaseModel
from hotseam import tool
from hotseam.interaction import (
    AskUserQuestionOption, AskUserQuestionRequest, Question, ask)

class Nothing(BaseModel):
    pass

@tool()
async def pick(input: Nothing, call) -> str:
    """{description}"""
    request = AskUserQuestionRequest("Which database?", header="Storage", options=[
        AskUserQuestionOption("Postgres", recommended=True), AskUserQuestionOption("SQLite")])
    return (await ask(request)).answer

@tool()
async def checks(input: Nothing, call) -> list:
    """Which checks to run."""
    request = AskUserQuestionRequest.of([Question(
        "Which checks?", id="checks", multi_select=True, allow_custom=False,
        options=[AskUserQuestionOption("Lint"), AskUserQuestionOption("Types"),
                 AskUserQuestionOption("Tests")])])
    return list((await ask(request)).answers[0].values)

def setup(scope):
    scope.register_tool(pick)
    scope.register_tool(checks)
'''

Elicit = Callable[[types.ElicitRequestFormParams], Awaitable[types.ElicitResult]]


def write_tools(folder: Path, description: str = "Ask which database.") -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "greet.py").write_text(
        textwrap.dedent(GREET).format(description="Greet.", greeting="hello")
    )
    asking = folder / "asking.py"
    asking.write_text(textwrap.dedent(ASKING).format(description=description))
    return asking


@dataclass
class Spawned:
    """The SDK's client connected to a ``hotseam mcp`` process whose pipes the test holds."""

    client: mcp.Client
    process: anyio.abc.Process

    async def leave(self) -> int:
        """The host goes away: it closes the pipe it reads (the server's stdout), then the
        one it writes; the process's exit code."""
        assert self.process.stdout is not None and self.process.stdin is not None
        await self.process.stdout.aclose()
        await self.process.stdin.aclose()
        with anyio.fail_after(scaled(WAIT)):
            return await self.process.wait()


@asynccontextmanager
async def _over_pipes(process: anyio.abc.Process) -> AsyncIterator[Any]:
    """The SDK's stream pair over the process's stdin and stdout, one message a line (as
    its ``stdio_client``, but the test keeps the process)."""
    assert process.stdout is not None and process.stdin is not None
    stdout, stdin = process.stdout, process.stdin
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](16)
    gone = (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError)

    async def from_stdout() -> None:
        buffer = b""
        async with read_send:
            with contextlib.suppress(*gone):
                while True:
                    while b"\n" not in buffer:
                        buffer += await stdout.receive()
                    line, buffer = buffer.split(b"\n", 1)
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    await read_send.send(SessionMessage(message))

    async def to_stdin() -> None:
        async with write_receive:
            with contextlib.suppress(*gone):
                async for item in write_receive:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stdin.send(data.encode() + b"\n")

    async with anyio.create_task_group() as group:
        group.start_soon(from_stdout)
        group.start_soon(to_stdin)
        try:
            yield read_receive, write_send
        finally:
            group.cancel_scope.cancel()


@asynccontextmanager
async def spawned(
    folder: Path,
    stderr: Path,
    *,
    mode: str,
    elicit: Elicit | None = None,
    on_message: Callable[[Any], Awaitable[None]] | None = None,
) -> AsyncIterator[Spawned]:
    """``hotseam mcp FOLDER`` with the SDK's client connected to it over stdio."""
    command = [sys.executable, "-m", "hotseam", "mcp", str(folder)]

    async def on_elicit(context: Any, params: Any) -> Any:
        assert elicit is not None
        return await elicit(params)

    with stderr.open("w") as errlog:
        process = await anyio.open_process(command, stderr=errlog, cwd=folder)
        try:
            client = mcp.Client(
                _over_pipes(process),
                mode=mode,  # type: ignore[arg-type]
                elicitation_callback=on_elicit if elicit is not None else None,
                message_handler=on_message,
            )
            async with client:  # its task group cannot be entered under a deadline of ours
                yield Spawned(client, process)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            await process.aclose()


def log_lines(stderr: Path) -> list[dict[str, Any]]:
    """stderr: JSON log objects, one a line (what a tool printed among them)."""
    return [json.loads(line) for line in stderr.read_text().splitlines() if line.startswith("{")]


async def committed_at(stderr: Path, path: Path, after: int) -> float:
    """The time of the ``after``-th-and-later commit of ``path`` logged on stderr."""
    with anyio.fail_after(scaled(WAIT)):
        while True:
            commits = [
                line
                for line in log_lines(stderr)
                if line.get("event") == "reload.committed" and line.get("path") == str(path)
            ]
            if len(commits) > after:
                return datetime.fromisoformat(commits[after]["timestamp"]).timestamp()
            await anyio.sleep(0.02)  # the log line is written by the sink's thread


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("mode", ERAS)
async def test_tools_forms_a_save_while_a_form_is_open_and_the_host_leaving(
    tmp_path: Path, mode: str
) -> None:
    """One process: tools listed, a call (what the tool printed goes to stderr), a form
    accepted, a multi-select form, decline and cancel; then the tool's module saved while
    its form is open: list_changed arrives within 100 ms of the commit, the open question
    is answered exactly once by the call that showed it, and the next call runs the new
    code. Last, the host leaves (closes both pipes) while a form is open — an
    elicitation/create request out, or an input-required result not retried: the server
    ends cleanly, exit 0, nothing failed."""
    folder = tmp_path / "tools"
    asking = write_tools(folder)
    stderr = tmp_path / "stderr.log"
    replies: list[Any] = [
        {"answer": "SQLite"},
        {"answer": ["Lint", "Tests"]},
        "decline",
        "cancel",
    ]
    forms: list[types.ElicitRequestFormParams] = []
    hold = anyio.Event()
    release = anyio.Event()
    changed = anyio.Event()
    changed_at: list[float] = []

    left_open = anyio.Event()

    async def elicit(params: types.ElicitRequestFormParams) -> types.ElicitResult:
        forms.append(params)
        if len(forms) == 6:  # the form the host leaves open
            left_open.set()
            await anyio.sleep_forever()
        reply = replies.pop(0) if replies else {"answer": "Postgres"}
        if not replies and len(forms) == 5:
            hold.set()
            await release.wait()
        if isinstance(reply, str):
            return types.ElicitResult(action=reply)  # type: ignore[arg-type]
        return types.ElicitResult(action="accept", content=reply)

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification) or (
            isinstance(message, types.ServerNotification)
            and isinstance(message.root, types.ToolListChangedNotification)  # type: ignore[attr-defined]
        ):
            changed_at.append(time.time())
            changed.set()

    async with spawned(folder, stderr, mode=mode, elicit=elicit, on_message=on_message) as host:
        client = host.client
        tools = (await client.list_tools()).tools
        assert [t.name for t in tools] == ["checks", "greet", "pick"]
        greeted = await client.call_tool("greet", {"name": "Ada"})
        assert greeted.content[0].text == "hello Ada"  # type: ignore[union-attr]
        assert (await client.call_tool("pick", {})).content[0].text == "SQLite"  # type: ignore[union-attr]
        assert forms[0].requested_schema["properties"]["answer"]["default"] == "Postgres"
        picked = await client.call_tool("checks", {})
        assert not picked.is_error, picked
        assert json.loads(picked.content[0].text) == ["Lint", "Tests"]  # type: ignore[union-attr]
        assert forms[1].requested_schema["properties"]["answer"]["type"] == "array"
        for code in ("ASK_DECLINED", "ASK_CANCELLED"):
            failed = await client.call_tool("pick", {})
            assert failed.is_error
            assert failed.structured_content["code"] == code  # type: ignore[index]

        async with anyio.create_task_group() as group:
            results: list[types.CallToolResult] = []

            async def call() -> None:
                results.append(await client.call_tool("pick", {}))

            group.start_soon(call)
            with anyio.fail_after(scaled(WAIT)):
                await hold.wait()
            if mode != "legacy":
                listening = client.listen(tools_list_changed=True)
                subscription = await listening.__aenter__()

                async def follow() -> None:
                    async for _ in subscription:
                        changed_at.append(time.time())
                        changed.set()

                group.start_soon(follow)
            asking.write_text(
                textwrap.dedent(ASKING).format(description="Ask which database, again.")
            )
            with anyio.fail_after(scaled(WAIT)):
                await changed.wait()
            commit = await committed_at(stderr, asking, after=1)
            release.set()
            if mode != "legacy":
                await listening.__aexit__(None, None, None)
        assert changed_at[0] - commit < scaled(0.1), (changed_at[0], commit)
        (answered,) = results
        assert answered.content[0].text == "Postgres"  # type: ignore[union-attr]
        assert len(forms) == 5  # the open question was shown once, answered once
        tools = (await client.list_tools(cache_mode="bypass")).tools
        assert next(t for t in tools if t.name == "pick").description == (
            "Ask which database, again."
        )

        if mode == "legacy":

            async def call_and_be_left() -> None:
                with contextlib.suppress(Exception):  # the connection ends under it
                    await client.call_tool("pick", {})

            async with anyio.create_task_group() as group:
                group.start_soon(call_and_be_left)
                with anyio.fail_after(scaled(WAIT)):
                    await left_open.wait()
                assert await host.leave() == 0
        else:
            shown = await client.session.call_tool("pick", {}, allow_input_required=True)
            assert isinstance(shown, types.InputRequiredResult)
            assert shown.input_requests["q1"].method == "elicitation/create"  # type: ignore[index]
            assert await host.leave() == 0
    lines = stderr.read_text().splitlines()
    assert "printed by the tool" in lines
    events = [line["event"] for line in log_lines(stderr)]
    assert "mcp.stopped" in events
    assert "mcp.failed" not in events
