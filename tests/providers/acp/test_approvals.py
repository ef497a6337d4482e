"""An approval rendered as ACP's own permission request: the mapping, and end to end
through ``ctx.tools.execute`` with :class:`HumanGate` against the SDK's real client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from acp.schema import ClientCapabilities, RequestPermissionRequest
from pydantic import BaseModel

from hotseam import TOOL_GATE, Context, ToolCall, ToolResult, tool
from hotseam.interaction import AskUserQuestionRequest, ErrorCode, UserInteractionError
from hotseam.interaction.approvals import (
    Approval,
    Decision,
    HumanGate,
    approval_request,
    read_decision,
)
from hotseam.providers._acp._approval import REJECTED_HERE, Decided, approval_permission

from ._harness import FORM, Client, Connected, connected

REQUEST_PERMISSION = "session/request_permission"
ELICITATION = "elicitation/create"
DEPLOY = Approval.of("deploy", {"service": "api", "replicas": 9}, reason="the release is due")
ARGUMENTS_BLOCK = '```json\n{\n  "replicas": 9,\n  "service": "api"\n}\n```'
CONTENT = f"**deploy** asks to run with:\n\n{ARGUMENTS_BLOCK}\n\nReason: the release is due"
EVERY_OPTION = [
    {"optionId": "approve", "name": "Approve", "kind": "allow_once"},
    {"optionId": "edit", "name": "Edit", "kind": "allow_once"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
    {"optionId": "respond", "name": "Respond", "kind": "reject_once"},
]
APPROVE_OR_REJECT = [EVERY_OPTION[0], EVERY_OPTION[2]]


def _selected(option_id: str) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


CANCELLED = {"outcome": {"outcome": "cancelled"}}


class TestMapping:
    """Pure: the approval's request as permission params, and outcomes read back."""

    def test_the_permission_request(self) -> None:
        """Titled with the call, the arguments as a JSON block and the reason in the
        content, the call's arguments as rawInput, options of ACP's once-kinds only."""
        native = approval_permission(approval_request(DEPLOY), forms=True)
        assert native is not None
        params = native.params("sess_1")
        tool_call_id = params["toolCall"]["toolCallId"]
        assert tool_call_id.startswith("approve_")
        assert params == {
            "sessionId": "sess_1",
            "toolCall": {
                "toolCallId": tool_call_id,
                "title": 'deploy({"replicas":9,"service":"api"})',
                "kind": "other",
                "status": "pending",
                "rawInput": {"replicas": 9, "service": "api"},
                "content": [{"type": "content", "content": {"type": "text", "text": CONTENT}}],
            },
            "options": EVERY_OPTION,
        }
        RequestPermissionRequest.model_validate(params)

    def test_without_forms_only_approve_and_reject(self) -> None:
        """Edit and Respond need text, which a permission outcome cannot carry."""
        native = approval_permission(approval_request(DEPLOY), forms=False)
        assert native is not None
        assert native.params("s")["options"] == APPROVE_OR_REJECT

    def test_only_the_decisions_offered(self) -> None:
        approval = Approval.of("deploy", {}, decisions=(Decision.APPROVE, Decision.RESPOND))
        native = approval_permission(approval_request(approval), forms=True)
        assert native is not None
        assert [o["optionId"] for o in native.params("s")["options"]] == ["approve", "respond"]

    def test_a_gate_keeping_rules_offers_the_always_kinds(self) -> None:
        """Always allow / Always reject are ACP's allow_always / reject_always."""
        decisions = (Decision.APPROVE, Decision.REJECT, Decision.ALWAYS, Decision.NEVER)
        approval = Approval.of("deploy", {}, decisions=decisions)
        native = approval_permission(approval_request(approval), forms=False)
        assert native is not None
        assert native.params("s")["options"] == [
            *APPROVE_OR_REJECT,
            {"optionId": "always", "name": "Always allow", "kind": "allow_always"},
            {"optionId": "never", "name": "Always reject", "kind": "reject_always"},
        ]
        decided = read_decision(approval, native.read(_selected("never")))
        assert (decided.decision, decided.message) == (Decision.NEVER, "always rejected")

    def test_plain_questions_where_a_permission_decides_nothing(self) -> None:
        """No approval, or only decisions that need text and no form: the plain questions."""
        assert approval_permission(AskUserQuestionRequest("Deploy?"), forms=True) is None
        texts = Approval.of("deploy", {}, decisions=(Decision.EDIT, Decision.RESPOND))
        assert approval_permission(approval_request(texts), forms=False) is None
        assert approval_permission(approval_request(texts), forms=True) is not None

    def test_a_note_and_backticks(self) -> None:
        """Asked again, the content says why; backticks in an argument lengthen the fence."""
        approval = Approval.of("run", {"code": "```"})
        native = approval_permission(approval_request(approval, note="Not taken: x."), forms=True)
        assert native is not None
        text = native.params("s")["toolCall"]["content"][0]["content"]["text"]
        assert text == (
            '_Not taken: x._\n\n**run** asks to run with:\n\n````json\n{\n  "code": "```"\n}\n````'
        )

    @pytest.mark.parametrize(
        ("option", "decision", "message"),
        [("approve", Decision.APPROVE, None), ("reject", Decision.REJECT, REJECTED_HERE)],
    )
    def test_outcomes_read_as_decisions(
        self, option: str, decision: Decision, message: str | None
    ) -> None:
        """What read_decision reads: a rejection with a reason for the model."""
        request = approval_request(DEPLOY)
        native = approval_permission(request, forms=False)
        assert native is not None
        decided = read_decision(DEPLOY, native.read(_selected(option)))
        assert (decided.decision, decided.message) == (decision, message)

    @pytest.mark.parametrize(
        ("result", "code"),
        [
            (CANCELLED, ErrorCode.ASK_CANCELLED),
            (_selected("edit"), ErrorCode.INVALID_ANSWER),  # not offered without forms
            (_selected("allow_always"), ErrorCode.INVALID_ANSWER),
            ("approve", ErrorCode.INVALID_ANSWER),
        ],
    )
    def test_what_decides_nothing(self, result: Any, code: ErrorCode) -> None:
        native = approval_permission(approval_request(DEPLOY), forms=False)
        assert native is not None
        with pytest.raises(UserInteractionError) as caught:
            native.read(result)
        assert caught.value.code == code

    def test_a_text_part_is_answered_only_after_its_decision_here(self) -> None:
        """The text part of an ask put one question at a time: answered from the decision
        made on its decision part, in the same ask and for the same call; else asked."""
        decision_part, text_part = approval_request(DEPLOY).parts()
        native = approval_permission(decision_part, forms=False)
        assert native is not None and native.is_part
        decided = Decided()
        assert decided.answer("q1", text_part) is None  # decided elsewhere: asked
        decided.keep("q1", native, native.read(_selected("reject")))
        assert decided.answer("q2", text_part) is None  # another ask
        other, _ = approval_request(Approval.of("deploy", {"service": "db"})).parts()
        other_native = approval_permission(other, forms=False)
        assert other_native is not None
        decided.keep("q3", other_native, other_native.read(_selected("reject")))
        assert decided.answer("q3", text_part) is None  # another call
        answer = decided.answer("q1", text_part)
        assert answer is not None
        assert [(entry.id, entry.answer) for entry in answer.answers] == [("text", REJECTED_HERE)]
        assert decided.answer("q1", text_part) is None  # used once


# -- end to end -----------------------------------------------------------------------------


class DeployInput(BaseModel):
    service: str
    replicas: int = 1


CALL = {"service": "api", "replicas": 9}


@asynccontextmanager
async def gated(
    *,
    capabilities: ClientCapabilities | None = FORM,
    client: Client | None = None,
    in_turn: bool = False,
    gate: HumanGate | None = None,
    calls: int = 1,
) -> AsyncIterator[tuple[Connected, list[ToolResult], list[DeployInput]]]:
    """An ACP agent whose prompt calls ``deploy`` (needs_approval) once through
    ``ctx.tools.execute``, with HumanGate as TOOL_GATE; yields the connection, the results
    and the inputs the tool ran with.

    ``in_turn``: execute in the turn's context (the agent's argument) rather than in the
    context served.
    """
    ran: list[DeployInput] = []
    results: list[ToolResult] = []

    @tool("deploy", needs_approval=True)
    async def deploy(input: DeployInput, call: ToolCall) -> str:
        """Deploy a service."""
        ran.append(input)
        return f"deployed {input.service} x{input.replicas}"

    served = Context("acp-approvals")

    async def agent(turn_context: Context) -> None:
        where = turn_context if in_turn else served
        results.extend([await where.tools.execute("deploy", CALL) for _ in range(calls)])

    if gate is None:
        gate = HumanGate(reason=lambda tool, input, call: "the release is due")
    async with served.scope("gate") as scope:
        scope.provide(TOOL_GATE, gate)
        scope.register_tool(deploy)
        async with connected(
            agent, context=served, capabilities=capabilities, client=client
        ) as acp:
            yield acp, results, ran


@pytest.mark.anyio
class TestEndToEnd:
    async def test_approve_and_the_request_the_client_receives(self) -> None:
        """Approve: the tool runs with the call's arguments; the raw JSON-RPC request."""
        async with gated() as (acp, results, ran):
            pending = acp.start_prompt("deploy")
            request = await acp.next_request(REQUEST_PERMISSION)
            request.answer(_selected("approve"))
            assert (await pending.result()).stop_reason == "end_turn"
            (raw,) = acp.client_wire.messages("incoming", REQUEST_PERMISSION)
        params = raw["params"]
        assert params["toolCall"]["title"] == 'deploy({"replicas":9,"service":"api"})'
        assert params["toolCall"]["content"] == [
            {"type": "content", "content": {"type": "text", "text": CONTENT}}
        ]
        assert params["options"] == EVERY_OPTION
        assert params["sessionId"] == acp.session_id
        assert [result.to_dict() for result in results] == [
            {"ok": True, "output": "deployed api x9"}
        ]
        assert ran == [DeployInput(service="api", replicas=9)]

    async def test_always_allow_makes_a_rule(self) -> None:
        """allow_always: this call runs, and the next is not asked."""
        async with gated(gate=HumanGate(offer_rules=True), calls=2) as (acp, results, ran):
            pending = acp.start_prompt()
            request = await acp.next_request(REQUEST_PERMISSION)
            kinds = [option.kind for option in request.arguments["options"]]
            assert kinds[-2:] == ["allow_always", "reject_always"]
            request.answer(_selected("always"))
            await pending.result()
            assert len(acp.client_wire.messages("incoming", REQUEST_PERMISSION)) == 1
        assert [result.ok for result in results] == [True, True]
        assert len(ran) == 2

    async def test_reject(self) -> None:
        """Reject: the tool does not run; the model is told it was rejected in the editor."""
        async with gated() as (acp, results, ran):
            pending = acp.start_prompt()
            (await acp.next_request(REQUEST_PERMISSION)).answer(_selected("reject"))
            await pending.result()
        (result,) = results
        assert result.error is not None
        assert result.error["code"] == "APPROVAL_REJECTED"
        assert result.error["message"] == (
            f"the human rejected the call of 'deploy': {REJECTED_HERE}"
        )
        assert ran == []

    async def test_cancelled_is_a_refused_call(self) -> None:
        """The human dismissing the request: the call is refused, never run."""
        async with gated() as (acp, results, ran):
            pending = acp.start_prompt()
            (await acp.next_request(REQUEST_PERMISSION)).answer(CANCELLED)
            await pending.result()
        (result,) = results
        assert result.error is not None
        assert result.error["code"] == "APPROVAL_UNANSWERED"
        assert result.error["details"]["reason"] == "ASK_CANCELLED"
        assert ran == []

    async def test_edit_goes_through_a_prefilled_form(self) -> None:
        """Edit: a form asks for the arguments, starting from the call's; it runs edited."""
        async with gated() as (acp, results, ran):
            pending = acp.start_prompt()
            (await acp.next_request(REQUEST_PERMISSION)).answer(_selected("edit"))
            form = await acp.next_request(ELICITATION)
            (raw,) = acp.elicitations()
            answer = raw["params"]["requestedSchema"]["properties"]["answer"]
            assert json.loads(answer["default"]) == CALL
            assert raw["params"]["requestedSchema"]["required"] == ["answer"]
            form.answer(
                {"action": "accept", "content": {"answer": '{"replicas": 2, "service": "api"}'}}
            )
            await pending.result()
        assert [result.to_dict() for result in results] == [
            {"ok": True, "output": "deployed api x2"}
        ]
        assert ran == [DeployInput(service="api", replicas=2)]

    async def test_an_edit_that_does_not_validate_is_asked_again(self) -> None:
        """The gate's note comes back in the next permission request's content."""
        async with gated() as (acp, _results, ran):
            pending = acp.start_prompt()
            (await acp.next_request(REQUEST_PERMISSION)).answer(_selected("edit"))
            (await acp.next_request(ELICITATION)).answer(
                {"action": "accept", "content": {"answer": '{"replicas": 2}'}}
            )
            again = await acp.next_request(REQUEST_PERMISSION)
            again.answer(_selected("approve"))
            await pending.result()
            _, raw = acp.client_wire.messages("incoming", REQUEST_PERMISSION)
        text = raw["params"]["toolCall"]["content"][0]["content"]["text"]
        assert text.startswith("_Not taken: the edited arguments are not valid input for deploy")
        assert ran == [DeployInput(service="api", replicas=9)]

    async def test_respond_goes_through_a_form(self) -> None:
        """Respond: the text typed is the tool's result; the tool does not run."""
        async with gated() as (acp, results, ran):
            pending = acp.start_prompt()
            (await acp.next_request(REQUEST_PERMISSION)).answer(_selected("respond"))
            form = await acp.next_request(ELICITATION)
            assert (
                "default"
                not in acp.elicitations()[0]["params"]["requestedSchema"]["properties"]["answer"]
            )
            form.answer({"action": "accept", "content": {"answer": "already deployed"}})
            await pending.result()
        assert [result.to_dict() for result in results] == [
            {"ok": True, "output": "already deployed"}
        ]
        assert ran == []

    async def test_declining_the_form_goes_back_to_the_approval(self) -> None:
        async with gated() as (acp, _results, ran):
            pending = acp.start_prompt()
            (await acp.next_request(REQUEST_PERMISSION)).answer(_selected("edit"))
            (await acp.next_request(ELICITATION)).answer({"action": "decline"})
            (await acp.next_request(REQUEST_PERMISSION)).answer(_selected("approve"))
            await pending.result()
        assert ran == [DeployInput(service="api", replicas=9)]

    @pytest.mark.parametrize(
        ("option", "output", "error"),
        [
            ("approve", "deployed api x9", None),
            ("reject", None, f"the human rejected the call of 'deploy': {REJECTED_HERE}"),
        ],
    )
    async def test_without_forms_approve_or_reject(
        self, option: str, output: str | None, error: str | None
    ) -> None:
        """A client without forms is offered Approve and Reject only; ask() puts the
        questions one at a time, and the text part is answered from the decision, not
        asked in the conversation."""
        async with gated(capabilities=None) as (acp, results, ran):
            pending = acp.start_prompt()
            (await acp.next_request(REQUEST_PERMISSION)).answer(_selected(option))
            assert (await pending.result()).stop_reason == "end_turn"
            (raw,) = acp.client_wire.messages("incoming", REQUEST_PERMISSION)
            assert acp.client.said() == ""
        assert raw["params"]["options"] == APPROVE_OR_REJECT
        (result,) = results
        assert result.output == output
        assert (result.error or {}).get("message") == error
        assert len(ran) == (option == "approve")

    async def test_a_client_refusing_permission_requests_gets_the_plain_questions(self) -> None:
        """-32601 for session/request_permission: the approval's two questions, as a form."""

        class FormOnlyClient(Client):
            request_permission = None  # type: ignore[assignment]

        async with gated(client=FormOnlyClient()) as (acp, _results, ran):
            pending = acp.start_prompt()
            form = await acp.next_request(ELICITATION)
            form.answer({"action": "accept", "content": {"decision": "approve"}})
            await pending.result()
            (raw,) = acp.elicitations()
        assert set(raw["params"]["requestedSchema"]["properties"]) >= {"decision", "text"}
        assert ran == [DeployInput(service="api", replicas=9)]

    async def test_in_the_turns_context(self) -> None:
        """The agent function's own context asks too (what a real agent calls)."""

        def asked_or_done(message: dict[str, Any]) -> bool:
            result = message.get("result")
            ended = isinstance(result, dict) and "stopReason" in result
            return ended or message.get("method") == REQUEST_PERMISSION

        async with gated(in_turn=True) as (acp, _results, ran):
            pending = acp.start_prompt()
            first = await acp.client_wire.wait_for("incoming", asked_or_done)
            assert first.get("method") == REQUEST_PERMISSION, f"not asked; ran {ran}"
            (await acp.next_request(REQUEST_PERMISSION)).answer(_selected("reject"))
            await pending.result()
        assert ran == []
