"""Claude Code's and VS Code's MCP handshakes, replayed byte for byte against `hotseam mcp`.

Each test starts ``hotseam mcp DIR`` as a subprocess, as the host does, writes the JSON
lines that host writes (the same keys, in the same order, the same values) and checks what
the host gets back: the protocol version, ``tools.listChanged``, the tool list, and a
question shaped the way that host's protocol era expects it (an ``elicitation/create``
request inside the call on 2025-11-25; an ``input_required`` result answered by a retry on
2026-07-28). Raw lines rather than the SDK's client: only they reproduce a host's bytes.

Where the bytes come from:

* **Claude Code 2.1.328** (npm ``@anthropic-ai/claude-code-linux-x64`` 2.1.328, built
  2026-11-18 from e96a84ee; read in the JavaScript bundled in its ``claude`` binary). Its
  client is the TypeScript SDK's ``Client({name: "claude-code", title: "Claude Code",
  version, description: "Anthropic's agentic coding tool", websiteUrl:
  "https://claude.com/claude-code"}, {capabilities, versionNegotiation, ...})``. For a
  stdio server the capabilities are ``{roots: {listChanged: true}, elicitation: {form: {},
  url: {}}}`` (``H()`` with the URL-elicitation flag ``tengu_mcp_url_elicitation``, on by
  default) and ``versionNegotiation`` is ``{mode: "auto"}`` (flag
  ``tengu_mcp_protocol_negotiation_stdio``, on by default; the environment variable
  ``MCP_PROTOCOL_NEGOTIATION=legacy`` turns it off). In auto mode it first sends
  ``server/discover`` at 2026-07-28 with the capabilities in ``_meta``
  (``io.modelcontextprotocol/protocolVersion``, ``…/clientInfo``,
  ``…/clientCapabilities``) and stays on that era when the server lists it; otherwise (or
  in legacy mode) it sends ``initialize`` at its newest handshake version, ``2025-11-25``
  (the SDK's ``LATEST_PROTOCOL_VERSION``), then ``notifications/initialized``, then
  ``tools/list``; on 2026-07-28 its SDK opens ``subscriptions/listen`` for
  ``toolsListChanged`` (id ``listen:N``) when the server offers ``tools.listChanged``.
  Its requests are serialized ``{...{method, params}, jsonrpc, id}`` (``Protocol.request``;
  the same order as a capture of 2.0.73 in cl-ai-project/cl-mcp issue 26), its probe
  ``{jsonrpc, id, method, params}``.
* **VS Code** (microsoft/vscode, src/vs/workbench/contrib/mcp/common/
  mcpServerRequestHandler.ts at c5308376, ``McpServerRequestHandler.create``): ``{jsonrpc,
  id, method: "initialize", params: {protocolVersion: MCP.LATEST_PROTOCOL_VERSION
  ("2025-11-25"), capabilities: {roots: {listChanged: true}, sampling: {}, elicitation:
  {form: {}, url: {}}, tasks: {list: {}, cancel: {}, requests: {sampling: {createMessage:
  {}}, elicitation: {create: {}}}}}, clientInfo: {name: productService.nameLong ("Visual
  Studio Code"), version: productService.version (1.107.0 here: any release)}}}``, ids
  counting from 1; then ``logging/setLevel`` when the server offers logging, then
  ``notifications/initialized``.
  It never sends ``server/discover``: VS Code stays on the handshake era.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from anyio.streams.text import TextReceiveStream
from tests._timing import scaled

pytestmark = pytest.mark.anyio

HOTSEAM = str(Path(sys.executable).with_name("hotseam"))
WAIT = 20.0  # seconds for any one message: a wedged server fails the test, never hangs it

CLAUDE_CODE_INFO = {
    "name": "claude-code",
    "title": "Claude Code",
    "version": "2.1.328",
    "description": "Anthropic's agentic coding tool",
    "websiteUrl": "https://claude.com/claude-code",
}
CLAUDE_CODE_CAPABILITIES = {"roots": {"listChanged": True}, "elicitation": {"form": {}, "url": {}}}
CLAUDE_CODE_DISCOVER = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "server/discover",
    "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": CLAUDE_CODE_INFO,
            "io.modelcontextprotocol/clientCapabilities": CLAUDE_CODE_CAPABILITIES,
        }
    },
}
CLAUDE_CODE_LISTEN = {
    "jsonrpc": "2.0",
    "id": "listen:0",
    "method": "subscriptions/listen",
    "params": {
        "_meta": CLAUDE_CODE_DISCOVER["params"]["_meta"],  # type: ignore[index]
        "notifications": {"toolsListChanged": True},
    },
}
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
CLAUDE_CODE_INITIALIZE = {
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": CLAUDE_CODE_CAPABILITIES,
        "clientInfo": CLAUDE_CODE_INFO,
    },
    "jsonrpc": "2.0",
    "id": 0,
}
VSCODE_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {
            "roots": {"listChanged": True},
            "sampling": {},
            "elicitation": {"form": {}, "url": {}},
            "tasks": {
                "list": {},
                "cancel": {},
                "requests": {"sampling": {"createMessage": {}}, "elicitation": {"create": {}}},
            },
        },
        "clientInfo": {"name": "Visual Studio Code", "version": "1.107.0"},
    },
}
ADDED = '''\
from pydantic import BaseModel

from hotseam import ToolCall, tool


class Nothing(BaseModel):
    pass


@tool()
async def added(input: Nothing, call: ToolCall) -> str:
    """A tool saved while the host runs."""
    return "added"


def setup(scope):
    scope.register_tool(added)
'''
ECHO_CALL = {"name": "echo", "arguments": {"text": "still serving"}}

TOOLS = '''\
from pydantic import BaseModel

from hotseam import ToolCall, tool
from hotseam.interaction import AskUserQuestionOption, AskUserQuestionRequest, ask


class Text(BaseModel):
    text: str


class Nothing(BaseModel):
    pass


@tool()
async def echo(input: Text, call: ToolCall) -> str:
    """Return the text."""
    return input.text


@tool()
async def pick_approach(input: Nothing, call: ToolCall) -> str:
    """Ask the human which approach to take."""
    question = AskUserQuestionRequest(
        "Which approach?",
        header="Approach",
        options=[
            AskUserQuestionOption("Quick", value="quick", description="small diff"),
            AskUserQuestionOption("Thorough", value="thorough", recommended=True),
        ],
        allow_custom=False,
    )
    return "approach: " + (await ask(question, context=call.context)).answer


def setup(scope):
    scope.register_tool(echo)
    scope.register_tool(pick_approach)
'''


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    """One backend: what runs here is the host's side of a pipe; the server under test is
    a subprocess with its own event loop."""
    return ("asyncio", {})


class Host:
    """The host's end of a stdio MCP connection: JSON lines written exactly as given, and
    each line the server writes, read in order."""

    def __init__(self, process: anyio.abc.Process, errors: Path) -> None:
        self.process = process
        self.errors = errors
        self.skipped: list[dict[str, Any]] = []
        self._lines = TextReceiveStream(process.stdout)  # type: ignore[arg-type]
        self._buffer = ""

    async def send(self, message: dict[str, Any]) -> None:
        """Write ``message`` as the TypeScript SDK does: ``JSON.stringify(m) + "\\n"``."""
        line = json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n"
        assert self.process.stdin is not None
        await self.process.stdin.send(line.encode())

    async def _read(self) -> dict[str, Any]:
        while "\n" not in self._buffer:
            try:
                self._buffer += await self._lines.receive()
            except anyio.EndOfStream:
                pytest.fail(f"the server closed stdout; its stderr:\n{self.stderr()}")
        line, self._buffer = self._buffer.split("\n", 1)
        message: dict[str, Any] = json.loads(line)  # stdout carries protocol messages only
        return message

    async def next(self, wanted: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        """The next message ``wanted`` accepts; others (log notifications...) are kept."""
        with anyio.move_on_after(scaled(WAIT)):
            while True:
                message = await self._read()
                if wanted(message):
                    return message
                self.skipped.append(message)
        pytest.fail(
            f"no {what} within {scaled(WAIT)} s; skipped {self.skipped}; stderr:\n{self.stderr()}"
        )

    async def reply_to(self, request_id: Any) -> dict[str, Any]:
        return await self.next(
            lambda m: m.get("id") == request_id and "method" not in m, f"reply to {request_id}"
        )

    async def request_from_server(self, method: str) -> dict[str, Any]:
        return await self.next(lambda m: m.get("method") == method and "id" in m, method)

    def stderr(self) -> str:
        return self.errors.read_text(errors="replace")[-4000:]


@asynccontextmanager
async def hotseam_mcp(tmp_path: Path) -> AsyncIterator[Host]:
    """``hotseam mcp DIR`` as a host starts it: a subprocess whose stdio is the connection."""
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "host_tools.py").write_text(TOOLS)
    errors = tmp_path / "stderr.log"
    with errors.open("wb") as stderr:
        process = await anyio.open_process(
            [HOTSEAM, "mcp", str(tools)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=tmp_path,
        )
        async with process:
            try:
                yield Host(process, errors)
            finally:
                assert process.stdin is not None
                await process.stdin.aclose()  # a host closes stdin to stop a stdio server
                with anyio.fail_after(scaled(WAIT)):
                    code = await process.wait()
                assert code == 0, f"hotseam mcp exited {code}; stderr:\n{errors.read_text()}"


def tool_names(result: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in result["tools"]]


def form_of(params: dict[str, Any]) -> dict[str, Any]:
    """The one property of a question's form, checked against the 2025-11-25 schema subset."""
    schema = params["requestedSchema"]
    assert schema["type"] == "object"
    assert params["message"] == "Which approach?"
    [(name, field)] = [(n, f) for n, f in schema["properties"].items() if "oneOf" in f]
    assert field["type"] == "string"
    assert [option["const"] for option in field["oneOf"]] == ["quick", "thorough"]
    assert all(set(option) <= {"const", "title"} for option in field["oneOf"])
    assert field.get("default") == "thorough"  # recommended
    assert name in schema.get("required", [])
    return {name: "quick"}


async def legacy_call(host: Host, request_id: Any, meta: dict[str, Any] | None = None) -> None:
    """A call whose tool asks: the server sends ``elicitation/create``; the host answers."""
    params: dict[str, Any] = {"name": "pick_approach", "arguments": {}}
    if meta is not None:
        params["_meta"] = meta
    await host.send({"method": "tools/call", "params": params, "jsonrpc": "2.0", "id": request_id})
    elicit = await host.request_from_server("elicitation/create")
    assert elicit["params"].get("mode", "form") == "form"
    content = form_of(elicit["params"])
    await host.send(
        {"result": {"action": "accept", "content": content}, "jsonrpc": "2.0", "id": elicit["id"]}
    )
    reply = await host.reply_to(request_id)
    assert reply["result"]["isError"] is False
    assert reply["result"]["content"] == [{"type": "text", "text": "approach: quick"}]


class TestClaudeCode:
    async def test_auto_mode_probes_discover_and_asks_with_input_required(
        self, tmp_path: Path
    ) -> None:
        """Claude Code's default for stdio: ``server/discover`` at 2026-07-28. hotseam lists
        that era, so the host stays on it: no ``initialize``, the capabilities ride every
        request's ``_meta``, and a question comes back as an ``input_required`` result that
        the host answers by calling again."""
        meta = CLAUDE_CODE_DISCOVER["params"]["_meta"]  # type: ignore[index]
        async with hotseam_mcp(tmp_path) as host:
            await host.send(CLAUDE_CODE_DISCOVER)
            discovered = (await host.reply_to(0))["result"]
            assert "2026-07-28" in discovered["supportedVersions"]
            assert discovered["capabilities"]["tools"]["listChanged"] is True
            # Its SDK then opens the list's subscription itself (Client.listen, id
            # "listen:N"), since the server offers tools.listChanged.
            await host.send(CLAUDE_CODE_LISTEN)
            ack = await host.next(
                lambda m: m.get("method") == "notifications/subscriptions/acknowledged",
                "the subscription's acknowledgement",
            )
            assert ack["params"]["notifications"] == {"toolsListChanged": True}

            await host.send(
                {"method": "tools/list", "params": {"_meta": meta}, "jsonrpc": "2.0", "id": 1}
            )
            listed = (await host.reply_to(1))["result"]
            assert tool_names(listed) == ["echo", "pick_approach"]

            call = {"name": "pick_approach", "arguments": {}, "_meta": meta}
            await host.send({"method": "tools/call", "params": call, "jsonrpc": "2.0", "id": 2})
            first = (await host.reply_to(2))["result"]
            assert first["resultType"] == "input_required"
            [(key, asked)] = first["inputRequests"].items()
            assert asked["method"] == "elicitation/create"
            assert asked["params"].get("mode", "form") == "form"
            content = form_of(asked["params"])

            retry = {
                **call,
                "inputResponses": {key: {"action": "accept", "content": content}},
                "requestState": first.get("requestState"),
            }
            await host.send({"method": "tools/call", "params": retry, "jsonrpc": "2.0", "id": 3})
            done = (await host.reply_to(3))["result"]
            assert done.get("resultType", "complete") == "complete"
            assert done["content"] == [{"type": "text", "text": "approach: quick"}]

            # A tool module saved while the host runs: announced on the subscription.
            (tmp_path / "tools" / "added_tools.py").write_text(ADDED)
            changed = await host.next(
                lambda m: m.get("method") == "notifications/tools/list_changed",
                "notifications/tools/list_changed on the subscription",
            )
            assert changed["params"]["_meta"][SUBSCRIPTION_ID] == "listen:0"
            await host.send(
                {"method": "tools/list", "params": {"_meta": meta}, "jsonrpc": "2.0", "id": 4}
            )
            relisted = tool_names((await host.reply_to(4))["result"])
            assert relisted == ["added", "echo", "pick_approach"]

    async def test_a_probe_that_timed_out_is_recovered_by_discovering_again(
        self, tmp_path: Path
    ) -> None:
        """Claude Code waits 3 s for the probe's answer on stdio (``Uh = 3000``), less than
        a cold ``hotseam mcp`` may take on a loaded machine: it then sends ``initialize``
        behind the unanswered probe. The server, now on 2026-07-28, refuses the handshake
        with -32022 naming its versions, and Claude Code (``_discoverAfterRejectedInitialize``)
        discovers again and stays on 2026-07-28."""
        async with hotseam_mcp(tmp_path) as host:
            await host.send(CLAUDE_CODE_DISCOVER)
            await host.send({**CLAUDE_CODE_INITIALIZE, "id": 1})  # the probe "timed out"
            assert "2026-07-28" in (await host.reply_to(0))["result"]["supportedVersions"]
            refused = (await host.reply_to(1))["error"]
            assert refused["code"] == -32022
            assert "2026-07-28" in refused["data"]["supported"]

            await host.send({**CLAUDE_CODE_DISCOVER, "id": 2})
            assert "2026-07-28" in (await host.reply_to(2))["result"]["supportedVersions"]
            meta = CLAUDE_CODE_DISCOVER["params"]["_meta"]  # type: ignore[index]
            await host.send(
                {"method": "tools/list", "params": {"_meta": meta}, "jsonrpc": "2.0", "id": 3}
            )
            assert tool_names((await host.reply_to(3))["result"]) == ["echo", "pick_approach"]

    async def test_legacy_mode_initializes_at_2025_11_25_and_gets_elicitation_create(
        self, tmp_path: Path
    ) -> None:
        """``MCP_PROTOCOL_NEGOTIATION=legacy`` (or a server that ignores the probe): the
        handshake, then a question as a server-sent ``elicitation/create`` in the call."""
        async with hotseam_mcp(tmp_path) as host:
            await host.send(CLAUDE_CODE_INITIALIZE)
            initialized = (await host.reply_to(0))["result"]
            assert initialized["protocolVersion"] == "2025-11-25"
            assert initialized["capabilities"]["tools"]["listChanged"] is True
            await host.send({"method": "notifications/initialized", "jsonrpc": "2.0"})

            await host.send({"method": "tools/list", "jsonrpc": "2.0", "id": 1})
            assert tool_names((await host.reply_to(1))["result"]) == ["echo", "pick_approach"]

            # Claude Code tags each call with its tool-use id and a progress token.
            await legacy_call(
                host, 2, meta={"claudecode/toolUseId": "toolu_01", "progressToken": 2}
            )

            # Esc while the question is open: the SDK aborts the call and sends
            # {requestId, reason: String(abortReason)}. The question is withdrawn on the
            # wire, the cancelled call gets no reply, and the server goes on serving.
            call = {"name": "pick_approach", "arguments": {}}
            await host.send({"method": "tools/call", "params": call, "jsonrpc": "2.0", "id": 3})
            elicit = await host.request_from_server("elicitation/create")
            await host.send(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": 3, "reason": "AbortError: This operation was aborted"},
                }
            )
            withdrawn = await host.next(
                lambda m: m.get("method") == "notifications/cancelled", "the question withdrawn"
            )
            assert withdrawn["params"]["requestId"] == elicit["id"]
            await host.send(
                {"method": "tools/call", "params": ECHO_CALL, "jsonrpc": "2.0", "id": 4}
            )
            assert (await host.reply_to(4))["result"]["content"][0]["text"] == "still serving"
            assert not [m for m in host.skipped if m.get("id") == 3], host.skipped


class TestVSCode:
    async def test_handshake_list_and_elicitation_create(self, tmp_path: Path) -> None:
        """VS Code: ``initialize`` at 2025-11-25 with sampling, both elicitation modes and
        tasks; ``logging/setLevel`` if offered; then the list and a question in a call."""
        async with hotseam_mcp(tmp_path) as host:
            await host.send(VSCODE_INITIALIZE)
            initialized = (await host.reply_to(1))["result"]
            assert initialized["protocolVersion"] == "2025-11-25"
            assert initialized["capabilities"]["tools"]["listChanged"] is True
            next_id = 2
            if "logging" in initialized["capabilities"]:
                await host.send(
                    {
                        "jsonrpc": "2.0",
                        "id": next_id,
                        "method": "logging/setLevel",
                        "params": {"level": "info"},
                    }
                )
                assert "result" in await host.reply_to(next_id)
                next_id += 1
            await host.send({"method": "notifications/initialized", "jsonrpc": "2.0"})

            await host.send({"jsonrpc": "2.0", "id": next_id, "method": "tools/list", "params": {}})
            listed = (await host.reply_to(next_id))["result"]
            assert tool_names(listed) == ["echo", "pick_approach"]
            echo = listed["tools"][0]
            assert echo["inputSchema"]["properties"]["text"]["type"] == "string"

            await legacy_call(host, next_id + 1)
