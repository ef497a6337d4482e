"""An answer that arrives in the event-loop turn its question is withdrawn is the answer
(the exactly-once rule): on 2025-11-25 the response is filed as it is read, before the
SDK drops it as late; on 2026-07-28 the continuation keeps it."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from pydantic import BaseModel

from hotseam import AbortController, ToolCall, tool
from hotseam.interaction import AskUserQuestionOption, AskUserQuestionRequest, ask
from hotseam.providers._mcp._input import Continuation

from .conftest import WAIT, accept, serving

controller = AbortController()
FORM = {
    "mode": "form",
    "message": "Which?",
    "requested_schema": {"type": "object", "properties": {}},
}


class Nothing(BaseModel):
    pass


def _request(signal: Any = None) -> AskUserQuestionRequest:
    return AskUserQuestionRequest(
        "Which database?",
        options=[AskUserQuestionOption("Postgres"), AskUserQuestionOption("SQLite")],
        signal=signal,
    )


@tool()
async def pick(input: Nothing, call: ToolCall) -> str:
    """Ask, abortable by the test's controller."""
    return (await ask(_request(controller.signal))).answer


@pytest.mark.anyio
async def test_an_answer_read_in_the_turn_of_its_withdrawal_stands() -> None:
    """The caller's signal fires in the very turn the client's answer is read (2025-11-25):
    the tool gets the answer, not ASK_ABORTED."""
    global controller
    controller = AbortController()
    aborted: list[bool] = []

    def on_read(item: Any) -> None:
        message = getattr(item, "message", None)
        if isinstance(message, types.JSONRPCResponse) and "action" in message.result:
            controller.abort("withdrawn as the answer arrives")  # the same turn
            aborted.append(True)

    async with serving([pick], elicit=accept(answer="SQLite"), on_read=on_read) as served:
        result = await served.client.call_tool("pick", {})
    assert aborted == [True]
    assert not result.is_error, result
    assert result.content[0].text == "SQLite"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_a_continuation_keeps_an_answer_delivered_in_the_turn_of_its_withdrawal() -> None:
    """2026-07-28: the retry's answer is delivered and the question withdrawn in one turn:
    the ask returns the answer."""
    continuation = Continuation("state", "pick", ttl=WAIT)
    results: list[Any] = []
    scope = anyio.CancelScope()

    async def asking() -> None:
        with scope:
            results.append(await continuation.ask(_request(), FORM))

    async with anyio.create_task_group() as group:
        group.start_soon(asking)
        with anyio.fail_after(WAIT):
            step = await continuation.next_step()
        assert isinstance(step, types.InputRequiredResult)
        assert list(step.input_requests or {}) == ["q1"]
        scope.cancel()  # withdrawn, and in the same turn the retry brings the answer
        continuation.deliver({"q1": {"action": "accept", "content": {"answer": "SQLite"}}})
    assert results == [{"action": "accept", "content": {"answer": "SQLite"}}]
