"""The MCP server in process, reached by the ``mcp`` SDK's own client over memory streams.

:func:`serving` builds what ``hotseam mcp`` builds — an :class:`McpProvider` in a base
context, the tools in a child context, an :class:`McpServer` over that child — and
connects ``mcp.Client`` to it on the revision asked for: ``"legacy"`` (the ``initialize``
handshake, 2025-11-25) or ``"2026-07-28"``. Both go through the server's real stream loop
(the SDK's dual-era loop), as stdio does.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp
import mcp_types as types
import pytest
from mcp.shared.memory import create_client_server_memory_streams
from tests._timing import scaled

from hotseam import Context, Scope, Tool
from hotseam.interaction import USER_INTERACTION, UserInteractionProvider
from hotseam.providers.mcp import McpProvider, McpServer
from hotseam.reload import Reloader

ERAS = [pytest.param("legacy", id="2025-11-25"), pytest.param("2026-07-28", id="2026-07-28")]
WAIT = 5.0

Elicit = Callable[[types.ElicitRequestFormParams], Awaitable[types.ElicitResult]]


@dataclass
class Served:
    """A connected client, the server, and where the tools live."""

    client: mcp.Client
    server: McpServer
    tools: Context
    scope: Scope
    reloader: Reloader | None = None
    elicited: list[types.ElicitRequestFormParams] = field(default_factory=list)
    notifications: list[Any] = field(default_factory=list)
    notified: anyio.Event = field(default_factory=anyio.Event)


class Watched:
    """The server's read stream, with ``on_read`` called on each message as it is read (the
    sender's context, when the stream carries one, handed on)."""

    def __init__(self, inner: Any, on_read: Callable[[Any], None]) -> None:
        self._inner = inner
        self._on_read = on_read

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        item = await self._inner.receive()
        self._on_read(item)
        return item

    def __aiter__(self) -> Watched:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Watched:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class _Filtered:
    """The server's write stream, dropping what ``drop`` says the client never gets."""

    def __init__(self, inner: Any, drop: Callable[[Any], bool]) -> None:
        self._inner = inner
        self._drop = drop

    async def send(self, item: Any) -> None:
        if not self._drop(item):
            await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Filtered:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


@asynccontextmanager
async def _memory_transport(
    server: McpServer,
    on_read: Callable[[Any], None] | None = None,
    drop: Callable[[Any], bool] | None = None,
) -> AsyncIterator[Any]:
    async with (
        create_client_server_memory_streams() as (client_streams, server_streams),
        anyio.create_task_group() as group,
    ):
        read, write = server_streams
        group.start_soon(
            server.serve,
            Watched(read, on_read) if on_read else read,
            _Filtered(write, drop) if drop else write,
        )
        try:
            yield client_streams
        finally:
            await client_streams[1].aclose()
            with anyio.move_on_after(scaled(WAIT)):
                await server_streams[1].aclose()
            group.cancel_scope.cancel()


@asynccontextmanager
async def serving(
    tools: Sequence[Tool[Any]] = (),
    *,
    mode: str = "legacy",
    elicit: Elicit | None = None,
    fallback: UserInteractionProvider | None = None,
    provide: bool = True,
    input_ttl: float = 600.0,
    folder: Path | None = None,
    on_read: Callable[[Any], None] | None = None,
    drop: Callable[[Any], bool] | None = None,
) -> AsyncIterator[Served]:
    """A client connected to a server of ``tools``; ``elicit`` answers its forms (none:
    the client advertises no elicitation). With ``folder``, the modules in it are loaded
    by a reloader (``served.reloader``, reloading only when told) whose events the server
    follows, as ``hotseam mcp`` does. ``on_read`` sees each message the server reads, as
    it is read; what ``drop`` returns true for never reaches the client."""
    base = Context("mcp")
    child = base.child("mcp.tools")
    served: Served

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult | types.ErrorData:
        served.elicited.append(params)
        assert elicit is not None
        return await elicit(params)

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification | types.ToolListChangedNotification):
            served.notifications.append(message)
            served.notified.set()

    async with Scope("test.mcp", context=base) as scope:
        if provide:
            scope.provide(USER_INTERACTION, McpProvider(fallback=fallback))
        async with Scope("test.tools", context=child) as tool_scope:
            for item in tools:
                tool_scope.register_tool(item)
            server = McpServer(child, input_ttl=input_ttl)
            reloader = Reloader(child, folder, watch=False) if folder is not None else None
            async with (
                server.running(),
                reloader or contextlib.nullcontext(),
                anyio.create_task_group() as follower,
            ):
                events = reloader.events() if reloader is not None else None
                if events is not None:
                    await server.tools_changed()
                    follower.start_soon(server.follow, events)
                client = mcp.Client(
                    _memory_transport(server, on_read, drop),
                    mode=mode,  # type: ignore[arg-type]
                    elicitation_callback=on_elicit if elicit is not None else None,
                    message_handler=on_message,
                )
                async with client:
                    served = Served(client, server, child, tool_scope, reloader)
                    yield served
                follower.cancel_scope.cancel()
                if events is not None:
                    await events.aclose()


def accept(**content: Any) -> Elicit:
    """An elicitation callback that accepts with ``content``."""

    async def answer(params: types.ElicitRequestFormParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content=content)

    return answer


def action(name: str) -> Elicit:
    """An elicitation callback that answers ``decline`` or ``cancel``."""

    async def answer(params: types.ElicitRequestFormParams) -> types.ElicitResult:
        return types.ElicitResult(action=name)  # type: ignore[arg-type]

    return answer
