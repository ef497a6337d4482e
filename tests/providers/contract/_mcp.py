"""The MCP provider's surfaces: the ``mcp`` SDK's own client, in process, on 2025-11-25
(``mcp``) and on 2026-07-28 (``mcp-2026``: the form travels in the call's result, and the
answer with the client's retry).

As ``hotseam mcp`` builds it: an :class:`McpServer` over the tools' context, each
generation of the provider module an :class:`McpProvider` there. The agent is a tool the
client calls (``contract_ask``: it asks the request the test handed it, and keeps the
outcome); the question reaches the human as the client's elicitation callback. The host
is one that leaves a withdrawn form open (the server's ``notifications/cancelled`` is
recorded on its way to the client, and dropped there), so a late answer can be given.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp
import mcp_types as types
from mcp.shared.memory import create_client_server_memory_streams
from pydantic import BaseModel
from tests._feed import Feed
from tests._timing import scaled

from hotseam import Context, Scope, ToolCall, tool
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    UserInteractionError,
    ask,
)
from hotseam.providers.mcp import McpProvider, McpServer

from ..mcp.conftest import Watched
from ._forms import form_content, questions_of
from ._surface import WAIT, Reply, Shown, Surface, until


class Key(BaseModel):
    """Which of the asks the test handed over this call asks."""

    key: str


@dataclass(eq=False)
class _Form:
    params: types.ElicitRequestFormParams
    request_id: Any
    replied: anyio.Event = field(default_factory=anyio.Event)
    content: dict[str, Any] | None = None


class _Wire:
    """What the server sends and reads, as it does: the elicitation requests, the
    withdrawals (dropped before the client), the responses read."""

    def __init__(self) -> None:
        self.elicitations: list[Any] = []
        self.cancelled: set[Any] = set()
        self.responses: set[Any] = set()

    def sent(self, item: Any) -> bool:
        """Record a message the server sends; true to drop it (a withdrawal)."""
        message = item.message
        if isinstance(message, types.JSONRPCRequest) and message.method == "elicitation/create":
            self.elicitations.append(message.id)
        if (
            isinstance(message, types.JSONRPCNotification)
            and message.method == "notifications/cancelled"
        ):
            self.cancelled.add((message.params or {}).get("requestId"))
            return True
        return False

    def read(self, item: Any) -> None:
        message = getattr(item, "message", None)
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            self.responses.add(message.id)


class _Sending:
    def __init__(self, inner: Any, wire: _Wire) -> None:
        self._inner = inner
        self._wire = wire

    async def send(self, item: Any) -> None:
        if not self._wire.sent(item):
            await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Sending:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class McpSurface:
    """See the module."""

    def __init__(self, context: Context, wire: _Wire, modern: bool) -> None:
        self.context = context
        self.modern = modern
        self.generation = 0
        self.client: mcp.Client | None = None
        self._wire = wire
        self._forms = Feed()
        self._shown = 0
        self._keys = itertools.count()
        self._staged: dict[str, AskUserQuestionRequest] = {}
        self._outcomes: dict[str, AskUserQuestionAnswer | UserInteractionError] = {}
        self._ended: dict[str, anyio.Event] = {}

    def install(self, scope: Scope) -> None:
        self.generation += 1
        scope.provide(USER_INTERACTION, McpProvider(name=f"mcp {self.generation}"))

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        key = str(next(self._keys))
        self._staged[key] = request
        ended = self._ended[key] = anyio.Event()
        client = self.client
        assert client is not None
        if self.modern:
            # The tool's outcome is the agent's: a client whose form is still open when the
            # tool ended (withdrawn) learns of it from its retry, which may never come.
            async with anyio.create_task_group() as call:
                call.start_soon(client.call_tool, "contract_ask", {"key": key})
                await ended.wait()
                call.cancel_scope.cancel()
            result: object = None
        else:
            result = await client.call_tool("contract_ask", {"key": key})
        outcome = self._outcomes.pop(key, None)
        assert outcome is not None, result
        if isinstance(outcome, UserInteractionError):
            raise outcome
        return outcome

    async def asked(self, key: str) -> None:
        """The tool's body: ask what the test handed over, keep the outcome."""
        try:
            self._outcomes[key] = await ask(self._staged.pop(key))
        except UserInteractionError as error:
            self._outcomes[key] = error
        finally:
            self._ended.pop(key).set()

    async def elicit(self, context: Any, params: Any) -> types.ElicitResult:
        """The client's elicitation callback: the human sees the form, and answers."""
        form = _Form(params, None)
        self._forms.put(form)
        await form.replied.wait()
        return types.ElicitResult(action="accept", content=form.content)

    async def next_shown(self) -> Shown:
        form: _Form = await self._forms.get()
        if not self.modern:  # 2026-07-28 has no requests from server to client
            form.request_id = self._wire.elicitations[self._shown]
            self._shown += 1
        return Shown(form, self.generation, questions_of(form.params.requested_schema))

    async def answer(self, shown: Shown, replies: Sequence[Reply]) -> None:
        form: _Form = shown.ref
        form.content = form_content(form.params.requested_schema, replies)
        form.replied.set()

    async def withdrawn(self, shown: Shown) -> None:
        form: _Form = shown.ref
        await until(lambda: form.request_id in self._wire.cancelled)

    async def answer_late(self, shown: Shown, replies: Sequence[Reply]) -> None:
        form: _Form = shown.ref
        await self.answer(shown, replies)
        await until(lambda: form.request_id in self._wire.responses)


_asking: list[McpSurface] = []


@tool()
async def contract_ask(input: Key, call: ToolCall) -> str:
    """Ask what the contract case handed over (see ``McpSurface.ask``)."""
    await _asking[-1].asked(input.key)
    return "asked"


@asynccontextmanager
async def mcp_legacy() -> AsyncIterator[Surface]:
    """The client on 2025-11-25 (the ``initialize`` handshake), with form elicitation."""
    async with _surface("legacy") as surface:
        yield surface


@asynccontextmanager
async def mcp_modern() -> AsyncIterator[Surface]:
    """The client on 2026-07-28, with form elicitation."""
    async with _surface("2026-07-28") as surface:
        yield surface


@asynccontextmanager
async def _surface(mode: str) -> AsyncIterator[Surface]:
    base = Context("contract.mcp")
    tools = base.child("contract.mcp.tools")
    wire = _Wire()
    surface = McpSurface(tools, wire, modern=mode != "legacy")
    server = McpServer(tools, input_ttl=600.0)

    @asynccontextmanager
    async def transport() -> AsyncIterator[Any]:
        async with (
            create_client_server_memory_streams() as (client_streams, server_streams),
            anyio.create_task_group() as group,
        ):
            read, write = server_streams
            group.start_soon(server.serve, Watched(read, wire.read), _Sending(write, wire))
            try:
                yield client_streams
            finally:
                await client_streams[1].aclose()
                with anyio.move_on_after(scaled(WAIT)):
                    await server_streams[1].aclose()
                group.cancel_scope.cancel()

    _asking.append(surface)
    try:
        async with Scope("contract.mcp.tools", context=tools) as scope, server.running():
            scope.register_tool(contract_ask)
            client = mcp.Client(
                transport(),
                mode=mode,  # type: ignore[arg-type]
                elicitation_callback=surface.elicit,
            )
            async with client:
                surface.client = client
                yield surface
    finally:
        _asking.remove(surface)
