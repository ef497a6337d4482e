"""One ``session/prompt`` turn: what the client said, the way to answer it, and the turn the
calling agent function serves (:func:`current_turn`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal, TypeAlias

import anyio
from acp.agent.connection import AgentSideConnection
from acp.helpers import (
    SessionUpdate,
    start_tool_call,
    update_agent_message_text,
    update_tool_call,
)
from acp.schema import (
    AudioContentBlock,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
)
from pydantic import BaseModel

from ..._core import (
    AbortController,
    AbortError,
    AbortSignal,
    DisposalError,
    HarnessError,
    Tool,
    ToolCall,
    get_logger,
)
from ...interaction import AskUserQuestionInput
from ._provider import AcpProvider, ask_scope

ContentBlock: TypeAlias = (
    TextContentBlock
    | ImageContentBlock
    | AudioContentBlock
    | ResourceContentBlock
    | EmbeddedResourceContentBlock
)

_log = get_logger("hotseam.providers.acp")
_current_turn: ContextVar[PromptTurn | None] = ContextVar("hotseam_acp_turn", default=None)
_UPDATE_TIMEOUT = 2.0


class PromptTurn:
    """One ``session/prompt``: what the client said, and the way to answer it."""

    def __init__(
        self,
        session_id: str,
        cwd: str,
        prompt: Sequence[ContentBlock],
        connection: AgentSideConnection,
    ) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.prompt: tuple[ContentBlock, ...] = tuple(prompt)
        self._connection = connection
        self._controller = AbortController()
        self._cancel_scope = anyio.CancelScope()
        self._end_turn: Callable[[], None] | None = None

    def __repr__(self) -> str:
        state = " cancelled" if self.cancelled else ""
        return f"<PromptTurn session={self.session_id!r}{state}>"

    @property
    def text(self) -> str:
        """The prompt's text blocks, joined by newlines (other blocks are left out)."""
        return prompt_text(self.prompt)

    @property
    def signal(self) -> AbortSignal:
        """Fires when the client cancels the turn (``session/cancel``)."""
        return self._controller.signal

    @property
    def cancelled(self) -> bool:
        """True once the client cancelled the turn."""
        return self._controller.signal.aborted

    async def say(self, text: str) -> None:
        """Send an agent message chunk to the client."""
        await self.send(update_agent_message_text(text))

    async def send(self, update: SessionUpdate) -> None:
        """Send any session update (a thought, a plan, a tool call...) to the client."""
        await self._connection.session_update(session_id=self.session_id, update=update)

    async def _send_shielded(self, update: SessionUpdate) -> None:
        """Send an update that must go out even while the turn is being cancelled."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(_UPDATE_TIMEOUT):
            try:
                await self.send(update)
            except Exception as error:  # the client is gone; nothing to tell it
                _log.info(
                    "acp.update_not_sent",
                    session_id=self.session_id,
                    error=f"{type(error).__name__}: {error}",
                )

    async def _cancel(self, provider: AcpProvider) -> None:
        """End pending questions as ``ASK_CANCELLED`` first, then the agent function."""
        if self.cancelled:
            return
        _log.info("acp.turn_cancel_requested", session_id=self.session_id)
        reason = AbortError(
            f"the ACP client cancelled the prompt turn of session {self.session_id!r}",
            "CANCELLED",
        )
        try:
            self._controller.abort(reason)
        except Exception:  # an agent's callback failed; the turn is cancelled all the same
            _log.error("acp.cancel_callback_failed", exc_info=True, session_id=self.session_id)
        try:
            await provider.cancel_session(self.session_id)
        finally:
            self._cancel_scope.cancel()

    async def _run_tool(self, call: ToolCall, tool: Tool[Any], input: BaseModel) -> object:
        """Run a tool as an ACP tool call; asks inside it name the tool call."""
        tool_call_id = call.call_id
        await self.send(
            start_tool_call(
                tool_call_id,
                _tool_title(tool, input),
                kind="other",
                status="in_progress",
                raw_input=input.model_dump(mode="json"),
            )
        )
        status: Literal["completed", "failed"] = "failed"
        raw_output: object = None
        try:
            with ask_scope(
                self.session_id,
                tool_call_id=tool_call_id,
                cancelled=self.signal,
                end_turn=self._end_turn,
            ):
                output = await tool.handler(input, call)
            status, raw_output = "completed", _jsonable(output)
            return output
        except Exception as failure:
            raw_output = {"error": _error_dict(failure)}
            raise
        finally:
            await self._send_shielded(
                update_tool_call(tool_call_id, status=status, raw_output=raw_output)
            )


def current_turn() -> PromptTurn:
    """The ACP prompt turn the calling agent function is serving.

    Raises:
        HarnessError: (code ``NO_PROMPT_TURN``) outside a prompt turn.
    """
    turn = _current_turn.get()
    if turn is None:
        raise HarnessError(
            "no ACP prompt turn is active: current_turn() works inside an agent function "
            "served by 'hotseam acp' (hotseam.providers.acp.serve)",
            "NO_PROMPT_TURN",
        )
    return turn


@contextmanager
def serving_turn(turn: PromptTurn) -> Iterator[None]:
    """Make ``turn`` the current turn (and its session the asks' scope) for the block."""
    token = _current_turn.set(turn)
    try:
        with ask_scope(turn.session_id, cancelled=turn.signal, end_turn=turn._end_turn):
            yield
    finally:
        _current_turn.reset(token)


def prompt_text(prompt: Sequence[ContentBlock]) -> str:
    return "\n".join(block.text for block in prompt if isinstance(block, TextContentBlock))


def _tool_title(tool: Tool[Any], input: BaseModel) -> str:
    if isinstance(input, AskUserQuestionInput):
        return input.question
    return tool.name


def _jsonable(value: object) -> object:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    result: object = json.loads(json.dumps(value, default=str))
    return result


def _error_dict(error: BaseException) -> dict[str, Any]:
    if isinstance(error, HarnessError | DisposalError):
        return error.to_dict()
    return {"name": type(error).__name__, "code": "INTERNAL", "message": str(error)}
