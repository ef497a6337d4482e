"""What the human answers never reaches a log line above debug level.

Whole ACP exchanges in process, where the human types a distinctive secret: an answer that
does not fit a strict question (so ``INVALID_ANSWER`` reaches ``acp.turn_failed`` at error
level), a valid custom answer, an answer a provider breaks its contract with, and late
answers to withdrawn questions. Every captured event at info or above is searched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import structlog
from acp.exceptions import RequestError
from acp.schema import AllowedOutcome, RequestPermissionResponse

from hotseam import AbortController, Context
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ask,
)
from hotseam.providers.acp import current_turn

from ._harness import Connected, answers, connected

pytestmark = pytest.mark.anyio

SECRET = "Zanzibar-7f3a9c-my-bank-pin"
STRICT = AskUserQuestionRequest(
    "Deploy now?",
    options=(AskUserQuestionOption("Yes", "yes"), AskUserQuestionOption("No", "no")),
    allow_custom=False,
)
OPEN = {"question": "Which database?", "options": [{"label": "Postgres", "value": "pg"}]}


class _ContractBreaker:
    """A provider that answers the secret, none of the options of a strict question."""

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        return AskUserQuestionAnswer(SECRET)


def _agent(controllers: list[AbortController]) -> Any:
    """One behaviour per prompt text, so one connection runs every case."""

    async def agent(context: Context) -> None:
        turn = current_turn()
        if turn.text == "strict":  # asked directly: INVALID_ANSWER fails the turn
            await ask(STRICT, context=context)
        elif turn.text == "custom":
            result = await context.tools.execute("ask_user_question", OPEN)
            await turn.say(f"answer: {result.output['answer']}")
        elif turn.text == "contract":
            shadow = context.child("breaker")
            shadow.provide(USER_INTERACTION, _ContractBreaker())
            await ask(STRICT, context=shadow)
        elif turn.text == "late":
            signal = controllers.pop(0).signal
            result = await context.tools.execute("ask_user_question", OPEN, signal=signal)
            await turn.say(f"error: {result.error and result.error['code']}")

    return agent


def _leaks(logs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The events at info or above whose rendering contains the secret."""
    return [
        event
        for event in logs
        if event.get("log_level") not in ("debug", "notset") and SECRET in repr(event)
    ]


async def _late(acp: Connected, controller: AbortController, reply: dict[str, Any]) -> None:
    """A question withdrawn by the agent; the human's answer arrives after that."""
    pending = acp.start_prompt("late")
    request = await acp.next_request()
    request_id = acp.elicitations()[-1]["id"]
    controller.abort()
    await pending.result()
    request.answer(reply)
    assert acp.agent_wire is not None
    await acp.agent_wire.wait_for("incoming", answers(request_id))


async def test_the_secret_answer_is_in_no_log_line_above_debug() -> None:
    """Invalid answers fail as INVALID_ANSWER described without quoting; a valid custom
    answer is logged at debug only; late answers are summarized without content."""
    first, second = AbortController(), AbortController()
    with structlog.testing.capture_logs() as logs:
        async with connected(_agent([first, second])) as acp:
            pending = acp.start_prompt("strict")
            request = await acp.next_request()
            request.answer({"action": "accept", "content": {"answer": SECRET}})
            with pytest.raises(RequestError) as failed:
                await pending.result()
            assert SECRET not in repr(failed.value.data)

            pending = acp.start_prompt("custom")
            request = await acp.next_request()
            request.answer({"action": "accept", "content": {"custom": SECRET}})
            assert (await pending.result()).stop_reason == "end_turn"
            assert acp.client.said() == f"answer: {SECRET}"  # it did reach the agent

            with pytest.raises(RequestError):
                await acp.prompt("contract")

            await _late(acp, first, {"action": "accept", "content": {"answer": SECRET}})
            await _late(acp, second, {"action": SECRET})

    events = [event["event"] for event in logs]
    failures = [event for event in logs if event["event"] == "acp.turn_failed"]
    assert [event["log_level"] for event in failures] == ["error", "error"]
    assert "is none of the options ('yes', 'no') (a value of 27 characters)" in failures[0]["error"]
    assert "(a custom answer of 27 characters)" in failures[1]["error"]
    late = [event for event in logs if event["event"] == "acp.late_response_ignored"]
    assert [event["response"] for event in late] == [
        {"action": "accept"},
        {"action": "<unknown str>"},
    ]
    assert "ask.answered" in events
    assert [e for e in logs if e["event"] == "ask.answer_text" and e["answer"] == SECRET]
    assert _leaks(logs) == []


async def test_a_permission_answer_is_described_not_quoted() -> None:
    """The permission fallback (no form elicitation): an unknown option id is not logged."""
    with structlog.testing.capture_logs() as logs:
        async with connected(_agent([]), capabilities=None) as acp:
            pending = acp.start_prompt("strict")
            request = await acp.next_request("session/request_permission")
            request.answer(
                RequestPermissionResponse(
                    outcome=AllowedOutcome(outcome="selected", option_id=SECRET)
                )
            )
            with pytest.raises(RequestError):
                await pending.result()
    (failure,) = [event for event in logs if event["event"] == "acp.turn_failed"]
    assert "outcome.optionId is none of the offered options ('yes', 'no')" in failure["error"]
    assert _leaks(logs) == []
