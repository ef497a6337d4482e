"""serve(): run a hotseam agent function as an ACP agent until the client disconnects."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, cast

import anyio
from acp.agent.connection import AgentSideConnection
from acp.stdio import stdio_streams

from ..._core import Context, Scope
from ...interaction import USER_INTERACTION, ask_user_question_tool
from ._agent import AcpAgent, AgentFunction
from ._provider import AcpProvider
from ._sessions import DEFAULT_IDLE_TIMEOUT
from ._wire import DEFAULT_MAX_LINE_BYTES, close_connection, guard_lines, guard_sender

if TYPE_CHECKING:
    from acp._transport import Transport
    from acp.connection import StreamObserver
    from acp.interfaces import Agent as SdkAgent

__all__ = ["serve"]

_ASK_TOOL = "ask_user_question"


async def serve(
    agent: AgentFunction,
    context: Context,
    *,
    provider: AcpProvider | None = None,
    transport: Transport | None = None,
    reader: asyncio.StreamReader | None = None,
    writer: asyncio.StreamWriter | None = None,
    observers: list[StreamObserver] | None = None,
    name: str = "hotseam",
    max_line_bytes: int | None = None,
    session_idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
) -> None:
    """Serve ``agent`` over ACP (stdio by default) and return when the client disconnects.

    Needs the asyncio backend (the ``agent-client-protocol`` SDK is asyncio-based).

    Args:
        agent: ``async def agent(context) -> object``, called once per prompt turn with a
            child of ``context`` (see :class:`~hotseam.providers.acp.AcpAgent`).
        context: Where the agent runs. The ``ask_user_question`` tool is registered in it
            for the duration unless a tool of that name is already visible.
        provider: The provider to attach to the connection. When it is given, the caller
            has installed it (in ``context`` or a parent of it); when it is not, a new one
            is provided in ``context`` for the duration.
        transport: A message transport (``acp._transport.memory_transport_pair()`` in
            tests), instead of byte streams.
        reader: The byte stream the client writes to (with ``writer``), instead of stdio.
        writer: The byte stream the client reads from.
        observers: Called with every raw JSON-RPC message (the SDK's ``StreamEvent``).
        name: The agent's name in ``initialize``'s ``agentInfo``.
        max_line_bytes: On byte streams (stdio), the longest message line read (``None``:
            16 MiB); a longer one is discarded and answered with -32600. Lines that are
            not JSON (-32700) or not a JSON object (-32600) are answered too, and the agent
            keeps serving (see ``hotseam.providers._acp._wire``).
        session_idle_timeout: Seconds after its last prompt at which a session the client
            never closed is released (``None``: never); see ``AcpAgent``.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError(
            "hotseam.providers.acp.serve() needs the asyncio backend: the "
            "agent-client-protocol SDK is asyncio-based (anyio.run(..., backend='asyncio'))"
        ) from None
    owned = provider is None
    acp_provider = provider if provider is not None else AcpProvider()
    acp_agent = AcpAgent(
        agent,
        context,
        provider=acp_provider,
        name=name,
        session_idle_timeout=session_idle_timeout,
    )
    async with Scope("acp.serve", context=context) as scope:
        if owned:
            scope.provide(USER_INTERACTION, acp_provider)
        if _ASK_TOOL not in context.tools:
            scope.register_tool(ask_user_question_tool())
        sdk_agent = cast("SdkAgent", acp_agent)
        watchers = list(observers or [])
        if transport is not None:
            connection = AgentSideConnection(
                sdk_agent, transport, listening=False, observers=watchers
            )
        else:
            if reader is None or writer is None:
                reader, writer = await stdio_streams()
            connection = AgentSideConnection(
                sdk_agent, writer, reader, listening=False, observers=watchers
            )
            limit = DEFAULT_MAX_LINE_BYTES if max_line_bytes is None else max_line_bytes
            guard_lines(connection, reader, max_line_bytes=limit)
            guard_sender(connection)
        try:
            async with acp_agent.running():
                await connection.listen()
        finally:
            with anyio.CancelScope(shield=True):
                await close_connection(connection)
