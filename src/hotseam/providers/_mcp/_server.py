"""McpServer: the tools of a hotseam context behind the Model Context Protocol.

Built on the SDK's low-level ``Server`` (no JSON-RPC of hotseam's own). ``tools/list``
lists the context's tools sorted by name; ``tools/call`` runs the tool
through ``ctx.tools.execute`` — the seam's path, so a call that arrives while a reload
swaps the tool's module waits for the swap and runs the new code, never "unknown tool" —
with the context current (``ask()`` finds the context's provider) and the call at hand
for :class:`~._provider.McpProvider`.

On the older revisions a call runs in its request's task: cancelling the request
(``notifications/cancelled``) cancels the tool. On 2026-07-28 it runs as a continuation
(:mod:`._input`) so that its questions can travel in results.

:meth:`McpServer.tools_changed` announces a change of the tool list: on the older revisions
``notifications/tools/list_changed`` to every client connection (the capability
``tools.listChanged`` is advertised), on 2026-07-28 a ``ToolsListChanged`` event to the
``subscriptions/listen`` streams. Only a change clients can see (a name, a description, an
input schema) is announced; an edited tool body just serves the next call.

A tool's failure keeps the seam's ``{name, code, message}`` as ``structuredContent`` of an
``isError`` result, so a model reads what went wrong as it would from ``ctx.tools.execute``;
only a tool that does not exist (after waiting for a swap that might bring it back) is a
protocol error, ``-32602``, as the specification asks.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..._core import Context, Tool, ToolRegistry, ToolResult, get_logger, use_context
from ._input import DEFAULT_INPUT_TTL, Continuation, Continuations
from ._provider import McpCall, in_call
from ._tap import ResponseTap, current_tap

__all__ = ["McpServer"]

_log = get_logger("hotseam.providers.mcp")
_INVALID_PARAMS = -32602
_MAX_PEERS = 1024
_TOOL_CHANGES = frozenset({"committed", "unloaded"})
_ANNOUNCE_WAIT = 2.0
"""Seconds one connection may take to take ``list_changed`` (a peer that stops reading)."""


# -- the tools as MCP sees them (pure functions of a registry and a result) --

TOOL_NOT_FOUND = "TOOL_NOT_FOUND"


class Definitions:
    """The MCP definitions of a registry's tools, each built once per :class:`Tool` object.

    A definition's input schema is pydantic's ``model_json_schema``, milliseconds per tool:
    rebuilt for every tool after every commit, a hundred tool modules would hold the event
    loop (and the host's next call) for tens of milliseconds. A tool object never changes;
    a reload makes a new one, so only the committed module's tools are built again.
    """

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry
        self._built: dict[int, tuple[Tool[Any], dict[str, Any]]] = {}

    def current(self) -> list[dict[str, Any]]:
        """The visible tools' definitions, sorted by name (a deterministic order, as
        2026-07-28 asks)."""
        tools = sorted(self.registry, key=lambda tool: tool.name)
        built: dict[int, tuple[Tool[Any], dict[str, Any]]] = {}
        for tool in tools:
            known = self._built.get(id(tool))
            if known is None or known[0] is not tool:
                known = (tool, tool.definition("mcp"))
            built[id(tool)] = known
        self._built = built  # the tools gone are forgotten (their ids may be reused)
        return [built[id(tool)][1] for tool in tools]

    def listed(self) -> list[types.Tool]:
        """The ``tools/list`` entries."""
        return [
            types.Tool(
                name=definition["name"],
                description=definition["description"] or None,
                input_schema=definition["inputSchema"],
            )
            for definition in self.current()
        ]

    def signature(self) -> str:
        """What a client sees of the tools (names, descriptions, input schemas), as one
        string: a change of it is what ``tools/list_changed`` announces."""
        return json.dumps(self.current(), sort_keys=True, default=str)


def call_result(result: ToolResult) -> types.CallToolResult:
    """The ``tools/call`` result of a tool's :class:`ToolResult`.

    Success: the output as text (a string as is, anything else as JSON), and as
    ``structuredContent`` when it is an object (the older revisions allow only objects
    there). Failure: ``isError`` with the error's text and its ``{name, code, message}``.
    """
    if result.error is not None:
        error = result.error
        text = f"{error.get('name')} {error.get('code')}: {error.get('message', '')}"
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=dict(error),
            is_error=True,
        )
    output: Any = result.output
    text = output if isinstance(output, str) else json.dumps(output, default=str)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=output if isinstance(output, dict) else None,
        is_error=False,
    )


class _Server(Server[Any]):
    """The SDK's low-level server, advertising ``tools.listChanged`` however it is run (the
    SDK's Streamable HTTP session manager builds ``initialize``'s answer from defaults)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


class McpServer:
    """Serves the tools of ``context`` (its own and inherited ones) to MCP clients.

    Use it as ``async with server.running():``, then :meth:`serve` each connection's
    streams inside (stdio: one; ``--http``: the SDK's session manager serves many).

    Args:
        context: Where the tools are found and run (the reloader's context).
        name: The server's name in ``initialize``.
        version: Its version.
        input_ttl: Seconds a question of a 2026-07-28 call waits for the client's retry.
    """

    def __init__(
        self,
        context: Context,
        *,
        name: str = "hotseam",
        version: str = "",
        input_ttl: float = DEFAULT_INPUT_TTL,
    ) -> None:
        self.context = context
        self.continuations = Continuations(input_ttl)
        self.bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self.bus)
        self.lowlevel: Server[Any] = _Server(
            name,
            version=version,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self._listen,
        )
        self.lowlevel.middleware.append(self._track_peer)
        self._peers: dict[int, tuple[object, ServerSession]] = {}
        self._definitions = Definitions(context.tools)
        self._signature = self._definitions.signature()
        self._group: anyio.abc.TaskGroup | None = None

    def __repr__(self) -> str:
        return f"<McpServer {self.context.name!r} peers={len(self._peers)}>"

    @property
    def initialization_options(self) -> InitializationOptions:
        """What ``initialize`` answers: ``tools.listChanged`` advertised."""
        return self.lowlevel.create_initialization_options(NotificationOptions(tools_changed=True))

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[McpServer]:
        """Own the tasks of 2026-07-28 calls for the block; cancelled when it ends."""
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                yield self
            finally:
                self._listen.close()
                group.cancel_scope.cancel()
                self._group = None

    async def serve(
        self,
        read_stream: ReadStream[SessionMessage | Exception],
        write_stream: WriteStream[SessionMessage],
    ) -> None:
        """Serve one connection until its read stream ends (either revision: the client's
        first request decides)."""
        tapped_read, tapped_write = self.tap(read_stream, write_stream)
        await self.lowlevel.run(tapped_read, tapped_write, self.initialization_options)

    def tap(
        self,
        read_stream: ReadStream[SessionMessage | Exception],
        write_stream: WriteStream[SessionMessage],
    ) -> tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]:
        """One connection's streams, its form responses filed as they are read
        (:mod:`._tap`): :meth:`serve` and each Streamable HTTP session use them."""
        return ResponseTap().wrap(read_stream, write_stream)

    async def tools_changed(self) -> bool:
        """Announce the tool list if what clients see of it changed; return whether it did."""
        signature = self._definitions.signature()
        if signature == self._signature:
            return False
        self._signature = signature
        async with anyio.create_task_group() as group:  # a slow peer delays no other
            for _, session in list(self._peers.values()):
                group.start_soon(_announce, session)
        await self.bus.publish(ToolsListChanged())
        _log.info(
            "mcp.tools_list_changed", tools=self.context.tools.names(), connections=len(self._peers)
        )
        return True

    async def follow(self, events: AsyncIterator[object]) -> None:
        """Announce the tool list after each reload that committed or unloaded a module
        (``events``: a reloader's ``events()`` stream, read by the events' ``kind``: a
        provider knows nothing of the reloader), until the stream ends."""
        async for event in events:
            if getattr(event, "kind", None) in _TOOL_CHANGES:
                await self.tools_changed()

    # -- handlers ------------------------------------------------------------------------------

    async def _track_peer(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Remember each older-revision connection (its session sends ``list_changed``)."""
        result = await call_next(ctx)
        session = ctx.session
        params = session.client_params
        if params is not None and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            key = id(params)
            if key not in self._peers:
                if len(self._peers) >= _MAX_PEERS:
                    self._peers.pop(next(iter(self._peers)))
                self._peers[key] = (params, session)  # params kept: the id stays its own
        return result

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self._definitions.listed())

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return await self._call_modern(ctx, params)
        call = McpCall(
            ctx.session, ctx.request_id, ctx.protocol_version, params.name, tap=current_tap.get()
        )
        return await self._run(call, params)

    async def _run(
        self, call: McpCall, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        with use_context(self.context), in_call(call):
            result = await self.context.tools.execute(params.name, params.arguments or {})
        if result.error is not None and result.error.get("code") == TOOL_NOT_FOUND:
            raise MCPError(_INVALID_PARAMS, result.error.get("message", ""), data=result.error)
        return call_result(result)

    async def _call_modern(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        continuation: Continuation | None
        if params.request_state is not None:
            continuation = self.continuations.get(params.request_state)
            if continuation is None:
                raise MCPError(
                    _INVALID_PARAMS,
                    "requestState is unknown or expired (the call ended, or this server "
                    "restarted): call the tool again without it",
                )
            continuation.deliver(
                {
                    key: response.model_dump(mode="json", by_alias=True, exclude_none=True)
                    for key, response in (params.input_responses or {}).items()
                }
            )
        else:
            group = self._group
            if group is None:
                raise RuntimeError("McpServer.serve() needs 'async with server.running():'")

            async def work(continuation: Continuation) -> types.CallToolResult:
                call = McpCall(
                    ctx.session, ctx.request_id, ctx.protocol_version, params.name, continuation
                )
                return await self._run(call, params)

            continuation = self.continuations.start(group, params.name, work)
        try:
            return await continuation.next_step()
        except anyio.get_cancelled_exc_class():
            continuation.cancel()  # the client abandoned the call
            raise


async def _announce(session: ServerSession) -> None:
    """``notifications/tools/list_changed`` to one connection: best effort, bounded (a peer
    gone or not reading is no failure of the reload)."""
    with anyio.move_on_after(_ANNOUNCE_WAIT), contextlib.suppress(Exception):
        await session.send_tool_list_changed()
