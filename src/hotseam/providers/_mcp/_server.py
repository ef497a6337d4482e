"""McpServer: the tools of a hotseam context behind the Model Context Protocol.

On the SDK's low-level ``Server``. ``tools/call`` runs through ``ctx.tools.execute``, the
seam's path (a call during a reload's swap waits for it and runs the new code, never
"unknown tool"), in its request's task (``notifications/cancelled`` cancels it) or, on
2026-07-28, as a continuation (:mod:`._input`). A failure keeps the seam's ``{name, code,
message}`` as ``structuredContent`` of an ``isError`` result; only a tool that does not
exist is a protocol error (-32602), as the specification asks.

:meth:`McpServer.tools_changed` announces what clients see of the tool list (names,
descriptions, input schemas): ``notifications/tools/list_changed`` on the older
revisions, a ``ToolsListChanged`` event to ``subscriptions/listen`` streams on 2026-07-28.
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

_log = get_logger("hotseam.providers.mcp")
_INVALID_PARAMS = -32602
_MAX_PEERS = 1024
_TOOL_CHANGES = frozenset({"committed", "unloaded"})
_ANNOUNCE_WAIT = 2.0
"""Seconds one connection may take to take ``list_changed`` (a peer that stops reading)."""


# -- the tools as MCP sees them (pure functions of a registry and a result) --

TOOL_NOT_FOUND = "TOOL_NOT_FOUND"


class Definitions:
    """The MCP definitions of a registry's tools, each built once per :class:`Tool` object
    (``model_json_schema`` takes milliseconds a tool: rebuilding all after each commit
    would hold the loop; a reload makes new objects only for the committed module)."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry
        self._built: dict[int, tuple[Tool[Any], dict[str, Any]]] = {}

    def current(self) -> list[dict[str, Any]]:
        """The visible tools' definitions, sorted by name (2026-07-28 asks a stable order)."""
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
        return [
            types.Tool(
                name=definition["name"],
                description=definition["description"] or None,
                input_schema=definition["inputSchema"],
            )
            for definition in self.current()
        ]

    def signature(self) -> str:
        """What a client sees of the tools, as one string: what ``list_changed`` announces."""
        return json.dumps(self.current(), sort_keys=True, default=str)


def call_result(result: ToolResult) -> types.CallToolResult:
    """The ``tools/call`` result of a :class:`ToolResult`: the output as text, and as
    ``structuredContent`` when an object (the older revisions allow only objects there)."""
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
    """The SDK's server, advertising ``tools.listChanged`` however run (the Streamable HTTP
    session manager builds ``initialize``'s answer from defaults)."""

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
        """Serve one connection until its read stream ends (in the revision the client picks)."""
        tapped_read, tapped_write = self.tap(read_stream, write_stream)
        await self.lowlevel.run(tapped_read, tapped_write, self.initialization_options)

    def tap(
        self,
        read_stream: ReadStream[SessionMessage | Exception],
        write_stream: WriteStream[SessionMessage],
    ) -> tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]:
        """One connection's streams, its form responses filed as they are read (:mod:`._tap`)."""
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
        """Announce the tool list after each reload that committed or unloaded a module, from
        a reloader's ``events()`` (read by ``kind``: a provider knows nothing of the reloader)."""
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
    """``list_changed`` to one connection, best effort and bounded (a peer gone or not
    reading is no failure of the reload)."""
    with anyio.move_on_after(_ANNOUNCE_WAIT), contextlib.suppress(Exception):
        await session.send_tool_list_changed()
