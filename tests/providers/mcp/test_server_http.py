"""``--http``: Streamable HTTP on loopback behind the web inbox's rules, reached by the
``mcp`` SDK's own client (both revisions, both anyio backends) and by raw requests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import mcp
import mcp_types as types
import pytest
from tests._timing import scaled

from hotseam import AbortController, Context, Scope, Tool, ToolCall, tool
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ask,
)
from hotseam.providers._mcp._http import HttpEndpoint, serve_http
from hotseam.providers.mcp import McpProvider, McpServer

from .conftest import ERAS, Watched, accept
from .test_elicit import pick_database
from .test_elicit_withdrawal import Nothing
from .test_server_tools import describe, greet

TOKEN = "t0k3n-for-the-tests-only"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
ACCEPTS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


# The SDK's HTTP client (httpx2) leaves its SSE generators to the garbage collector on trio:
# the client's defect, not the server's (the asyncio runs see none).
sse_generators_left_to_gc = pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <async_generator object:pytest.PytestUnraisableExceptionWarning"
)


class _Watching(McpServer):
    """A server whose connections' read streams call ``on_read`` on each message as it is
    read, before the tap and the SDK see it (the in-process ``serving(on_read=)``, here for
    the HTTP sessions the SDK's session manager runs)."""

    def __init__(self, context: Context, on_read: Callable[[Any], None]) -> None:
        super().__init__(context)
        self.on_read = on_read

    def tap(self, read_stream: Any, write_stream: Any) -> Any:
        return super().tap(Watched(read_stream, self.on_read), write_stream)


@asynccontextmanager
async def http_served(
    served: list[tuple[McpServer, Scope]] | None = None,
    tools: Sequence[Tool[Any]] = (greet, pick_database),
    on_read: Callable[[Any], None] | None = None,
) -> AsyncIterator[HttpEndpoint]:
    base = Context("mcp")
    child = base.child("mcp.tools")
    async with Scope("test.mcp", context=base) as scope, Scope("t", context=child) as own:
        scope.provide(USER_INTERACTION, McpProvider())
        for item in tools:
            own.register_tool(item)
        server = McpServer(child) if on_read is None else _Watching(child, on_read)
        if served is not None:
            served.append((server, own))
        async with server.running(), serve_http(server, port=0, token=TOKEN) as endpoint:
            yield endpoint


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
@sse_generators_left_to_gc
async def test_the_sdk_client_over_http(mode: str) -> None:
    """List, call, and a form answered through the client's callback, over HTTP."""
    answer = accept(answer="SQLite")

    async def on_elicit(context: Any, params: Any) -> Any:
        return await answer(params)

    async with http_served() as endpoint:
        client = mcp.Client(endpoint.url_with_token, mode=mode, elicitation_callback=on_elicit)  # type: ignore[arg-type]
        async with client:
            assert [t.name for t in (await client.list_tools()).tools] == [
                "greet",
                "pick_database",
            ]
            greeted = await client.call_tool("greet", {"name": "Ada"})
            assert greeted.content[0].text == "hello Ada"  # type: ignore[union-attr]
            picked = await client.call_tool("pick_database", {})
            assert picked.structured_content["answer"] == "SQLite"  # type: ignore[index]


withdrawing = AbortController()


@tool()
async def pick(input: Nothing, call: ToolCall) -> str:
    """Ask, abortable by the test's controller."""
    request = AskUserQuestionRequest(
        "Which database?",
        options=[AskUserQuestionOption("Postgres"), AskUserQuestionOption("SQLite")],
        signal=withdrawing.signal,
    )
    return (await ask(request)).answer


@pytest.mark.anyio
@sse_generators_left_to_gc
async def test_an_answer_read_over_http_in_the_turn_of_its_withdrawal_stands() -> None:
    """2025-11-25 over Streamable HTTP: the caller's signal fires in the very turn the
    session reads the client's POSTed answer; the tool gets the answer, not ASK_ABORTED
    (each session's streams are tapped, as stdio's are)."""
    global withdrawing
    withdrawing = AbortController()
    aborted: list[bool] = []

    def on_read(item: Any) -> None:
        message = getattr(item, "message", None)
        if isinstance(message, types.JSONRPCResponse) and "action" in message.result:
            withdrawing.abort("withdrawn as the answer arrives")  # the same turn
            aborted.append(True)

    answer = accept(answer="SQLite")

    async def on_elicit(context: Any, params: Any) -> Any:
        return await answer(params)

    async with http_served(tools=[pick], on_read=on_read) as endpoint:
        client = mcp.Client(endpoint.url_with_token, mode="legacy", elicitation_callback=on_elicit)
        async with client:
            with anyio.fail_after(scaled(10)):
                result = await client.call_tool("pick", {})
    assert aborted == [True]
    assert not result.is_error, result
    assert result.content[0].text == "SQLite"  # type: ignore[union-attr]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the SDK's HTTP client, see above
async def test_list_changed_reaches_an_http_session(anyio_backend: str) -> None:
    """2025-11-25 over HTTP: tools/list_changed comes on the session's standalone stream."""
    servers: list[tuple[McpServer, Scope]] = []
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with http_served(servers) as endpoint:
        client = mcp.Client(endpoint.url_with_token, mode="legacy", message_handler=on_message)
        async with client:
            await client.list_tools()
            server, scope = servers[0]
            scope.register_tool(describe)
            assert await server.tools_changed()
            with anyio.fail_after(scaled(5)):
                await changed.wait()
            names = [t.name for t in (await client.list_tools(cache_mode="bypass")).tools]
            assert names == ["describe", "greet", "pick_database"]


@pytest.mark.anyio
async def test_the_inbox_rules_refuse_what_they_refuse() -> None:
    """No token: 401; a Host that is not this server: 421 (DNS rebinding); a foreign
    Origin: 403; another path: 404; each a JSON-RPC error body on a closed connection. The
    token as a Bearer header (what hosts configure) is let in."""
    async with http_served() as endpoint, httpx.AsyncClient() as http:
        url = endpoint.url
        refused = await http.post(url, json=INITIALIZE, headers=ACCEPTS)
        assert refused.status_code == 401
        assert "Authorization: Bearer TOKEN" in refused.json()["error"]["message"]
        assert refused.headers["connection"] == "close"
        bearer = {**ACCEPTS, "authorization": f"Bearer {TOKEN}"}
        wrong_token = {**ACCEPTS, "authorization": "Bearer not-the-token-at-all"}
        assert (await http.post(url, json=INITIALIZE, headers=wrong_token)).status_code == 401
        rebinding = {**bearer, "host": f"evil.example:{endpoint.listener.port}"}
        assert (await http.post(url, json=INITIALIZE, headers=rebinding)).status_code == 421
        foreign = {**bearer, "origin": "http://evil.example"}
        assert (await http.post(url, json=INITIALIZE, headers=foreign)).status_code == 403
        other = url.replace("/mcp", "/other")
        assert (await http.post(other, json=INITIALIZE, headers=bearer)).status_code == 404
        served = await http.post(url, json=INITIALIZE, headers=bearer)
        assert served.status_code == 200, served.text
        assert "hotseam" in served.text


@pytest.mark.anyio
async def test_only_loopback_is_served() -> None:
    server = McpServer(Context("mcp"))
    with pytest.raises(ValueError, match="not a loopback address"):
        async with serve_http(server, host="0.0.0.0", token=TOKEN):
            pass
