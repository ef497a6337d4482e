"""A real ACP client for the tests: the SDK's own client side, answering as the test says.

``connected()`` serves an agent function in process over the SDK's memory transport pair
and connects the SDK's ``ClientSideConnection`` to it; both sides record every raw message
(``Wire``), and each request the agent sends to the client waits in ``Client`` until the
test answers it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import IO, Any

import anyio
import anyio.abc
from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp._transport import memory_transport_pair
from acp.client.connection import ClientSideConnection
from acp.connection import StreamEvent
from acp.exceptions import RequestError
from acp.router import Route
from acp.schema import (
    AgentMessageChunk,
    ClientCapabilities,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    PromptResponse,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
)
from tests._feed import Feed
from tests._timing import scaled

from hotseam import Context
from hotseam.providers.acp import AcpProvider, AgentFunction, serve

WAIT = 5.0  # seconds on an idle machine, scaled where used
"""The bound of every wait in these tests: long enough never to fire when things work."""
STARTUP = 4 * WAIT
"""The bound of a subprocess's first answer: starting Python on a loaded machine is slow."""

FORM = ClientCapabilities(elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities()))


class Wire:
    """Every raw JSON-RPC message one side of the connection saw, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self._changed = anyio.Event()
        self.on_message: Callable[[str, dict[str, Any]], None] | None = None
        """Called with each message as it is seen (synchronously, in the receive loop)."""

    def __call__(self, event: StreamEvent) -> None:
        self.events.append((event.direction.value, event.message))
        if self.on_message is not None:
            self.on_message(event.direction.value, event.message)
        self._changed.set()
        self._changed = anyio.Event()

    def messages(self, direction: str, method: str | None = None) -> list[dict[str, Any]]:
        """The messages in one direction (``"incoming"``/``"outgoing"``), of one method."""
        return [
            message
            for seen, message in self.events
            if seen == direction and (method is None or message.get("method") == method)
        ]

    def answer_to(self, request_id: Any, direction: str) -> dict[str, Any] | None:
        """The response with this id in ``direction``, if seen."""
        for seen, message in self.events:
            if seen == direction and "method" not in message and message.get("id") == request_id:
                return message
        return None

    async def wait_for(
        self, direction: str, predicate: Callable[[dict[str, Any]], bool], timeout: float = WAIT
    ) -> dict[str, Any]:
        """Wait until a message in ``direction`` satisfies ``predicate``; return it."""
        checked = 0
        with anyio.fail_after(scaled(timeout)):
            while True:
                for seen, message in self.events[checked:]:
                    if seen == direction and predicate(message):
                        return message
                checked = len(self.events)
                await self._changed.wait()

    async def changed(self, timeout: float = WAIT) -> None:
        """Wait for the next message (in either direction)."""
        with anyio.fail_after(scaled(timeout)):
            await self._changed.wait()

    def raw_lines(self) -> list[str]:
        """The messages as the JSON lines a stdio transport carries."""
        return [json.dumps(message, separators=(",", ":")) for _, message in self.events]


@dataclass(eq=False)
class ClientRequest:
    """A request from the agent that the test answers: ``elicitation/create`` or a permission."""

    method: str
    arguments: dict[str, Any]
    _done: anyio.Event = field(default_factory=anyio.Event)
    _result: Any = None
    _error: BaseException | None = None

    def answer(self, result: Any) -> None:
        """Return ``result`` (a raw dict, or an SDK model) to the agent."""
        self._result = result
        self._done.set()

    def fail(self, error: BaseException) -> None:
        """Answer with a JSON-RPC error (a ``RequestError``)."""
        self._error = error
        self._done.set()

    async def outcome(self) -> Any:
        await self._done.wait()
        if self._error is not None:
            raise self._error
        return self._result


class Client:
    """The client the SDK's ClientSideConnection calls; each agent request waits for the test."""

    def __init__(self) -> None:
        self.requests = Feed()
        self.updates: list[Any] = []
        self._updated = anyio.Event()
        self.cancelled: list[Any] = []

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        request = ClientRequest("elicitation/create", {"message": message, "mode": mode})
        self.requests.put(request)
        return await request.outcome()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: Any, **kwargs: Any
    ) -> Any:
        request = ClientRequest(
            "session/request_permission",
            {"session_id": session_id, "tool_call": tool_call, "options": options},
        )
        self.requests.put(request)
        return await request.outcome()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self._updated.set()
        self._updated = anyio.Event()

    async def on_cancel_request(self, params: Any) -> None:
        """``$/cancel_request`` from the agent: recorded; the test decides what to answer."""
        self.cancelled.append(params["requestId"])

    def said(self, session_id: str | None = None) -> str:
        """The agent message chunks (of one session), joined."""
        return "".join(
            update.content.text
            for sid, update in self.updates
            if isinstance(update, AgentMessageChunk)
            and isinstance(update.content, TextContentBlock)
            and (session_id is None or sid == session_id)
        )

    def tool_calls(self) -> list[ToolCallStart]:
        return [update for _, update in self.updates if isinstance(update, ToolCallStart)]

    def tool_call_updates(self) -> list[ToolCallProgress]:
        return [update for _, update in self.updates if isinstance(update, ToolCallProgress)]


class ChatOnlyClient(Client):
    """A client that shows agent messages and sends prompts, and nothing else: the SDK
    answers session/request_permission (and elicitation/create) with -32601, as it does
    for any method its client object lacks."""

    create_elicitation = None  # type: ignore[assignment]
    request_permission = None  # type: ignore[assignment]


@dataclass
class Connected:
    """An agent and its client, with one session open.

    ``agent_wire`` is the agent side's record in process; ``process`` is the
    ``hotseam acp`` subprocess otherwise.
    """

    conn: ClientSideConnection
    client: Client
    session_id: str
    agent_wire: Wire | None
    client_wire: Wire
    group: anyio.abc.TaskGroup
    process: asyncio.subprocess.Process | None = None
    logs: Feed | None = None

    async def prompt(self, text: str = "hello", session_id: str | None = None) -> PromptResponse:
        """Send a prompt and wait for the turn to end."""
        with anyio.fail_after(scaled(WAIT)):
            return await self.conn.prompt(
                session_id=session_id or self.session_id, prompt=[text_block(text)]
            )

    def start_prompt(self, text: str = "hello", session_id: str | None = None) -> Pending:
        """Send a prompt in the background; await ``.result()`` later."""
        pending = Pending()

        async def run() -> None:
            try:
                pending.set(await self.prompt(text, session_id))
            except Exception as error:
                pending.fail(error)

        self.group.start_soon(run)
        return pending

    async def next_request(self, method: str = "elicitation/create") -> ClientRequest:
        """The next request the agent sent to the client (it waits for an answer)."""
        request: ClientRequest = await self.client.requests.get()
        assert request.method == method, request
        return request

    def elicitations(self) -> list[dict[str, Any]]:
        """The ``elicitation/create`` requests as they arrived at the client, raw."""
        return self.client_wire.messages("incoming", "elicitation/create")

    async def wait_for_log(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The next JSON log line of the subprocess that satisfies ``predicate``."""
        assert self.logs is not None, "spawned(..., stderr=None) reads the logs live"
        with anyio.fail_after(scaled(WAIT)):
            while True:
                line: str = await self.logs.get()
                if line.startswith("{") and predicate(json.loads(line)):
                    return json.loads(line)  # type: ignore[no-any-return]

    async def close_session(self, session_id: str | None = None) -> Any:
        """Send ``session/close`` (the SDK routes it only as unstable)."""
        with anyio.fail_after(scaled(WAIT)):
            return await self.conn._conn.send_request(
                "session/close", {"sessionId": session_id or self.session_id}
            )

    async def wait_said(self, fragment: str, mark: int = 0) -> str:
        """Wait until the chunks received since ``mark`` contain ``fragment``; return them."""
        with anyio.fail_after(scaled(WAIT)):
            while fragment not in (said := self.said_since(mark)):
                await self.client._updated.wait()
        return said

    def said_since(self, mark: int) -> str:
        """The agent message chunks received after ``len(client.updates) == mark``."""
        return "".join(
            update.content.text
            for _, update in self.client.updates[mark:]
            if isinstance(update, AgentMessageChunk)
            and isinstance(update.content, TextContentBlock)
        )

    async def cancel_request(self, request_id: Any) -> None:
        """Send ``$/cancel_request`` (the SDK has no method for it)."""
        await self.conn._conn.send_notification("$/cancel_request", {"requestId": request_id})


class Pending:
    """The result of a background prompt."""

    def __init__(self) -> None:
        self._done = anyio.Event()
        self._value: PromptResponse | None = None
        self._error: BaseException | None = None

    def set(self, value: PromptResponse) -> None:
        self._value = value
        self._done.set()

    def fail(self, error: BaseException) -> None:
        self._error = error
        self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    async def result(self) -> PromptResponse:
        with anyio.fail_after(scaled(WAIT)):
            await self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value


@asynccontextmanager
async def connected(
    agent: AgentFunction,
    *,
    capabilities: ClientCapabilities | None = FORM,
    unstable: bool = True,
    context: Context | None = None,
    provider: AcpProvider | None = None,
    initialize: Mapping[str, Any] | None = None,
    session_idle_timeout: float | None = 3600.0,
    client: Client | None = None,
) -> AsyncIterator[Connected]:
    """Serve ``agent`` in process and connect the SDK's client to it, one session open.

    ``initialize``: raw ``initialize`` params to send instead of the SDK's own (a real
    client's exact handshake). ``client``: the client object (default: a :class:`Client`).
    """
    agent_side, client_side = memory_transport_pair()
    agent_wire, client_wire = Wire(), Wire()
    client = client if client is not None else Client()
    served = context if context is not None else Context("acp-test")
    async with anyio.create_task_group() as group:
        group.start_soon(
            _serve, agent, served, agent_side, agent_wire, provider, session_idle_timeout
        )
        conn = ClientSideConnection(
            client, client_side, use_unstable_protocol=unstable, observers=[client_wire]
        )
        try:
            session_id = await _open(conn, client, capabilities, initialize=initialize)
            yield Connected(conn, client, session_id, agent_wire, client_wire, group)
        finally:
            await conn.close()


@asynccontextmanager
async def spawned(
    *args: str,
    stderr: IO[bytes] | None,
    capabilities: ClientCapabilities | None = FORM,
    client: Client | None = None,
) -> AsyncIterator[Connected]:
    """Run ``hotseam acp ARGS`` as a subprocess and connect the SDK's client to its stdio.

    The process's stderr goes to ``stderr`` (a file: nobody has to drain a pipe), or, when
    it is ``None``, is read line by line into ``Connected.logs`` as the process runs.
    """
    client_wire = Wire()
    client = client if client is not None else Client()
    transport_kwargs = {} if stderr is None else {"stderr": stderr.fileno()}
    async with (
        anyio.create_task_group() as group,
        spawn_agent_process(
            client,
            sys.executable,
            "-m",
            "hotseam",
            "acp",
            *args,
            use_unstable_protocol=True,
            observers=[client_wire],
            transport_kwargs=transport_kwargs,
        ) as (conn, process),
    ):
        logs = None
        if stderr is None:
            assert process.stderr is not None
            logs = Feed()
            group.start_soon(_read_lines, process.stderr, logs)
        session_id = await _open(conn, client, capabilities, timeout=STARTUP)
        yield Connected(conn, client, session_id, None, client_wire, group, process, logs)


async def _read_lines(stream: asyncio.StreamReader, feed: Feed) -> None:
    while line := await stream.readline():
        feed.put(line.decode())


async def _open(
    conn: ClientSideConnection,
    client: Client,
    capabilities: ClientCapabilities | None,
    timeout: float = WAIT,
    initialize: Mapping[str, Any] | None = None,
) -> str:
    """Initialize and open a session; let the client handle $/cancel_request."""
    # The SDK's client has no $/cancel_request either; a real client handles it.
    conn._conn._handler.add_route(  # type: ignore[attr-defined]
        Route(method="$/cancel_request", func=client.on_cancel_request, kind="notification")
    )
    with anyio.fail_after(scaled(timeout)):
        if initialize is not None:
            await conn._conn.send_request("initialize", dict(initialize))
        else:
            await conn.initialize(
                protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities
            )
        session = await conn.new_session(cwd="/tmp")
    return session.session_id


async def _serve(
    agent: AgentFunction,
    context: Context,
    transport: Any,
    wire: Wire,
    provider: AcpProvider | None,
    session_idle_timeout: float | None,
) -> None:
    await serve(
        agent,
        context,
        transport=transport,
        observers=[wire],
        provider=provider,
        session_idle_timeout=session_idle_timeout,
    )


def ask_agent(
    *questions: Mapping[str, Any],
    results: list[Any] | None = None,
    signal: Any = None,
) -> AgentFunction:
    """An agent that asks ``questions`` through the tool, records each result and says it."""
    from hotseam.providers.acp import current_turn

    async def agent(context: Context) -> None:
        turn = current_turn()
        for question in questions:
            result = await context.tools.execute("ask_user_question", question, signal=signal)
            if results is not None:
                results.append(result)
            if result.ok:
                await turn.say(f"answer: {result.output['answer']}\n")
            else:
                await turn.say(f"error: {result.error['code']}\n")

    return agent


def answers(request_id: Any) -> Callable[[dict[str, Any]], bool]:
    """A predicate for ``Wire.wait_for``: the response to ``request_id``."""
    return lambda message: "method" not in message and message.get("id") == request_id


def rpc_error(code: int, message: str, data: Any = None) -> RequestError:
    return RequestError(code, message, data)
