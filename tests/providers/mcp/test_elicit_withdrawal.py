"""An answer that arrives in the event-loop turn its question is withdrawn is the answer
(the exactly-once rule): on 2025-11-25 the response is filed as it is read, before the
SDK drops it as late; on 2026-07-28 the continuation keeps it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from pydantic import BaseModel
from tests._timing import scaled

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
    continuation = Continuation("state", "pick", ttl=scaled(WAIT))
    results: list[Any] = []
    scope = anyio.CancelScope()

    async def asking() -> None:
        with scope:
            results.append(await continuation.ask(_request(), FORM))

    async with anyio.create_task_group() as group:
        group.start_soon(asking)
        with anyio.fail_after(scaled(WAIT)):
            step = await continuation.next_step()
        assert isinstance(step, types.InputRequiredResult)
        assert list(step.input_requests or {}) == ["q1"]
        scope.cancel()  # withdrawn, and in the same turn the retry brings the answer
        continuation.deliver({"q1": {"action": "accept", "content": {"answer": "SQLite"}}})
    assert results == [{"action": "accept", "content": {"answer": "SQLite"}}]


ASKING_TOOL = """
from pydantic import BaseModel
from hotseam import tool
from hotseam.interaction import AskUserQuestionOption, AskUserQuestionRequest, ask

class Nothing(BaseModel):
    pass

@tool()
async def pick(input: Nothing, call) -> str:
    request = AskUserQuestionRequest("Which database?", options=[
        AskUserQuestionOption("Postgres"), AskUserQuestionOption("SQLite")])
    return (await ask(request)).answer

def setup(scope):
    scope.register_tool(pick)
"""

UI = """
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.mcp import McpProvider

def setup(scope):
    scope.provide(USER_INTERACTION, McpProvider(name="{version}"))
"""


@pytest.mark.anyio
async def test_a_late_answer_to_a_withdrawn_form_answers_the_question_asked_again(
    tmp_path: Path,
) -> None:
    """A host that ignores the withdrawal of a form (its notifications/cancelled never
    reaches it) lets the human answer it after the reload asked the question again: that
    answer is the question's, and the new form is withdrawn — answered once."""
    (tmp_path / "pick.py").write_text(ASKING_TOOL)
    ui = tmp_path / "ui.py"
    ui.write_text(UI.format(version="v1"))
    first_id: list[Any] = []
    shown = [anyio.Event(), anyio.Event()]
    release_first = anyio.Event()
    withdrawn: list[int] = []
    forms = 0

    def drop(item: Any) -> bool:
        message = item.message
        if isinstance(message, types.JSONRPCRequest) and message.method == "elicitation/create":
            first_id[:] = first_id or [message.id]
        return (
            isinstance(message, types.JSONRPCNotification)
            and message.method == "notifications/cancelled"
            and bool(first_id)
            and (message.params or {}).get("requestId") == first_id[0]
        )

    async def elicit(params: types.ElicitRequestFormParams) -> types.ElicitResult:
        nonlocal forms
        forms += 1
        number = forms
        shown[number - 1].set()
        try:
            if number == 1:
                await release_first.wait()
                return types.ElicitResult(action="accept", content={"answer": "SQLite"})
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            withdrawn.append(number)
            raise
        raise AssertionError("unreachable")

    async with serving(folder=tmp_path, provide=False, elicit=elicit, drop=drop) as served:
        assert served.reloader is not None
        results: list[types.CallToolResult] = []

        async def call() -> None:
            results.append(await served.client.call_tool("pick", {}))

        with anyio.fail_after(scaled(WAIT)):
            async with anyio.create_task_group() as group:
                group.start_soon(call)
                await shown[0].wait()
                ui.write_text(UI.format(version="v2"))
                await served.reloader.reload()
                await shown[1].wait()  # asked again on the new provider
                release_first.set()  # the human answers the form the host kept open
    (result,) = results
    assert result.content[0].text == "SQLite"  # type: ignore[union-attr]
    assert forms == 2
    assert withdrawn == [2]
