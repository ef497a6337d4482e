"""AcpAgent: an ACP agent that runs a hotseam agent function for each prompt turn.

The function ``hotseam dev`` and ``hotseam run`` call, once per ``session/prompt``: it
reads the prompt from :func:`current_turn` and streams chunks with :meth:`PromptTurn.say`
(a string it returns is the last one). In its child context each visible tool is
reported as an ACP tool call (``toolCallId``: the hotseam ``ToolCall.call_id``), and asks
are scoped to the session and tool call, so ``elicitation/create`` names both.

``session/cancel`` (or ``$/cancel_request`` for the prompt) fires the turn's signal, ends
its questions with ``ASK_CANCELLED``, then cancels the function: stop reason
``cancelled``. A function that raises fails that prompt only. Under
:meth:`AcpAgent.running` the function runs in a task of its own (:class:`~._sessions.Run`)
so that a question asked in the conversation can end the turn while it waits.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import anyio
import anyio.abc
from acp.agent.connection import AgentSideConnection
from acp.exceptions import RequestError
from acp.meta import PROTOCOL_VERSION
from acp.schema import (
    AgentCapabilities,
    ClientCapabilities,
    CloseSessionResponse,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
)
from acp.stdio import stdio_streams
from pydantic import BaseModel

from ... import __version__
from ..._core import (
    Context,
    Scope,
    Tool,
    ToolCall,
    ToolError,
    get_logger,
)
from ...interaction import USER_INTERACTION, ask_user_question_tool
from .._kit import DEFAULT_MAX_LINE_BYTES
from ._provider import AcpProvider
from ._sessions import DEFAULT_IDLE_TIMEOUT, Run, Session, Sessions, StopReason
from ._turn import ContentBlock, PromptTurn, prompt_text, serving_turn
from ._wire import close_connection, guard_lines, guard_sender

if TYPE_CHECKING:
    from acp._transport import Transport
    from acp.connection import StreamObserver
    from acp.interfaces import Agent as SdkAgent

AgentFunction: TypeAlias = Callable[[Context], Awaitable[object]]
_RESOURCE_NOT_FOUND = -32002

_log = get_logger("hotseam.providers.acp")


class AcpAgent:
    """The ``acp.interfaces.Agent`` that serves a hotseam agent function.

    Args:
        agent: ``async def agent(context) -> object``, called once per prompt turn.
        context: The context the agent runs in (each turn in a child of it); it must see
            ``provider`` as its user-interaction provider, or one that shadows it.
        provider: Attached to the connection when it is made; told the client's
            capabilities at ``initialize`` and the sessions cancelled by the client.
        name: The agent's name in ``initialize``'s ``agentInfo``.
        title: Its display title there.
        session_idle_timeout: Seconds after its last prompt at which a session is released
            (checked when a session is opened; ``None``: never).
    """

    def __init__(
        self,
        agent: AgentFunction,
        context: Context,
        *,
        provider: AcpProvider,
        name: str = "hotseam",
        title: str | None = "hotseam",
        session_idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        self._agent = agent
        self._context = context
        self._provider = provider
        self._info = Implementation(name=name, title=title, version=__version__)
        self._connection: AgentSideConnection | None = None
        self._sessions = Sessions(idle_timeout=session_idle_timeout)
        self._runs: anyio.abc.TaskGroup | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run agent functions in tasks of their own while inside (conversation mode);
        outside, a free-form question cannot wait across prompts."""
        async with anyio.create_task_group() as runs:
            self._runs = runs
            try:
                yield
            finally:
                self._runs = None
                runs.cancel_scope.cancel()

    def __repr__(self) -> str:
        return f"<AcpAgent {self._info.name!r} sessions={len(self._sessions)}>"

    @property
    def connection(self) -> AgentSideConnection:
        """The client connection (set when the SDK connects the agent)."""
        if self._connection is None:
            raise RuntimeError("the ACP agent is not connected yet")
        return self._connection

    def on_connect(self, conn: AgentSideConnection) -> None:
        """Called by the SDK with the connection: attach the provider to it."""
        self._connection = conn
        wire = self._provider.attach(conn)
        wire.on_prompt_cancel = self._cancel_session
        wire.on_session_close = self._close_session

    @property
    def sessions(self) -> int:
        """How many sessions are open (not closed, not released as idle)."""
        return len(self._sessions)

    # -- ACP agent methods ----------------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        """Record the client's capabilities; answer with protocol version 1."""
        self._provider.set_client_capabilities(client_capabilities)
        _log.info(
            "acp.initialized",
            protocol_version=protocol_version,
            client=None if client_info is None else f"{client_info.name} {client_info.version}",
            form_elicitation=self._provider.supports_form,
        )
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                session_capabilities=SessionCapabilities(close=SessionCloseCapabilities())
            ),
            agent_info=self._info,
        )

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        """Open a session; prompts name it. Sessions idle past the bound are released."""
        for idle in self._sessions.release_idle():
            await self._released(idle, "idle")
        session_id = f"sess_{uuid.uuid4().hex[:16]}"
        self._sessions.open(session_id, cwd)
        _log.info("acp.session_created", session_id=session_id, cwd=cwd)
        return NewSessionResponse(session_id=session_id)

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        """``session/close``: cancel the session's work and release it."""
        await self._close_session(session_id)
        return CloseSessionResponse()

    async def prompt(
        self, session_id: str, prompt: list[ContentBlock], **kwargs: Any
    ) -> PromptResponse:
        """Run the agent function for one turn (or, when a question of the session waits in
        the conversation, answer it and host the rest of that run)."""
        session = self._sessions.use(session_id)
        if session is None:
            raise _session_not_found(session_id)
        if session.prompting:
            raise RequestError.invalid_request(
                {
                    "sessionId": session_id,
                    "details": "a prompt turn is already running in this session; wait for "
                    "its response or send session/cancel",
                }
            )
        session.prompting = True
        started = time.perf_counter()
        try:
            run = session.live_run
            if run is not None and run.turn.cancelled:  # unwinding (bounded): start afresh
                await run.wait_finished()
                run = None
            if run is None:
                run = self._start(session, prompt)
                _log.info("acp.turn_started", session_id=session_id)
                if self._runs is None:  # not under running(): inline, no conversation mode
                    await self._execute(run)
            elif self._provider.conversations.waiting(session_id):
                run.resume()
                self._provider.conversations.answer(session_id, prompt_text(prompt))
                _log.info("acp.turn_started", session_id=session_id, answers_question=True)
            else:
                raise RequestError.invalid_request(
                    {
                        "sessionId": session_id,
                        "details": "the agent is still working on an earlier prompt of this "
                        "session; send session/cancel to stop it",
                    }
                )
            stop_reason = await run.next_stop()
        finally:
            session.prompting = False
            self._sessions.use(session_id)
        _log.info(
            "acp.turn_ended",
            session_id=session_id,
            stop_reason=stop_reason,
            waiting_for_answer=not run.finished,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
        )
        return PromptResponse(stop_reason=stop_reason)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        """``session/cancel``: end the session's questions and its prompt turn."""
        await self._cancel_session(session_id)

    # -- sessions and runs ----------------------------------------------------------------------

    def _start(self, session: Session, prompt: Sequence[ContentBlock]) -> Run:
        turn = PromptTurn(session.id, session.cwd, prompt, self.connection)
        run = Run(turn)
        session.run = run
        if self._runs is not None:
            turn._end_turn = run.end_turn
            self._runs.start_soon(self._execute, run)
        return run

    async def _execute(self, run: Run) -> None:
        try:
            run.finish(await self._run(run.turn))
        except RequestError as error:
            run.fail(error)
        finally:
            run.finish("cancelled")  # cancelled from outside (the server stops): no-op else

    async def _cancel_session(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        if session is None:
            _log.warning("acp.cancel_ignored", session_id=session_id, reason="unknown session")
            return
        run = session.live_run
        if run is None:
            _log.info("acp.cancel_ignored", session_id=session_id, reason="no prompt turn running")
            return
        await run.turn._cancel(self._provider)

    async def _close_session(self, session_id: str) -> None:
        session = self._sessions.release(session_id)
        if session is None:
            raise _session_not_found(session_id)
        await self._released(session, "closed")

    async def _released(self, session: Session, reason: str) -> None:
        """Cancel what the released session still runs (a question waiting in the chat)."""
        _log.info("acp.session_released", session_id=session.id, reason=reason)
        run = session.live_run
        if run is not None:
            await run.turn._cancel(self._provider)

    async def _run(self, turn: PromptTurn) -> StopReason:
        failed = False
        with turn._cancel_scope:
            try:
                await self._call_agent(turn)
            except ConnectionError as closed:  # the client went away mid-turn
                _log.info("acp.turn_abandoned", session_id=turn.session_id, error=str(closed))
                return "cancelled"
            except Exception as failure:
                failed = True
                if not turn.cancelled:
                    _log.error(
                        "acp.turn_failed",
                        exc_info=True,
                        session_id=turn.session_id,
                        error=f"{type(failure).__name__}: {failure}",
                    )
                    raise RequestError.internal_error(
                        {"details": f"the agent failed: {type(failure).__name__}: {failure}"}
                    ) from failure
        if turn.cancelled:
            if failed:
                _log.info("acp.turn_failed_after_cancel", session_id=turn.session_id)
            return "cancelled"
        return "end_turn"

    async def _call_agent(self, turn: PromptTurn) -> None:
        context = self._context.child(f"{self._context.name}.turn")
        result: object = None
        async with Scope("acp.turn", context=context) as scope:
            for tool in list(self._context.tools):
                scope.register_tool(_reported(tool, turn, self._context))
            with serving_turn(turn):
                result = await self._agent(context)
        if isinstance(result, str) and result:
            await turn.say(result)


def _session_not_found(session_id: str) -> RequestError:
    """-32002 with ``data.sessionId``, as the TypeScript SDK's ``sessionNotFound`` (its
    client takes it as success for ``session/close``)."""
    return RequestError(
        _RESOURCE_NOT_FOUND,
        "Resource not found",
        {
            "sessionId": session_id,
            "details": "unknown session (never opened, closed, or released after being idle); "
            "create one with session/new",
        },
    )


def _reported(tool: Tool[Any], turn: PromptTurn, source: Context) -> Tool[Any]:
    """Wrap ``tool`` so that a call to it is an ACP tool call of ``turn``, looked up again
    in ``source`` at each call (a reload's new tool, never the disposed one)."""
    name = tool.name

    async def handler(input: BaseModel, call: ToolCall) -> object:
        current = source.tools.get(name)
        if current is None:
            raise ToolError(f"the tool {name!r} is no longer registered", "TOOL_NOT_FOUND")
        if not isinstance(input, current.input_model):
            input = current.input_model.model_validate(input.model_dump())
        return await turn._run_tool(call, current, input)

    def needs_approval(input: BaseModel, call: ToolCall) -> bool | Awaitable[bool]:
        # The tool's own policy, as registered now (a reload may change it): a turn's call
        # is gated as a call made anywhere else.
        current = source.tools.get(name)
        policy = (current or tool).needs_approval
        return policy if isinstance(policy, bool) else policy(input, call)

    return Tool(name, tool.description, tool.input_model, handler, needs_approval=needs_approval)


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
