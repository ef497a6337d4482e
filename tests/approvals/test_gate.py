"""A tool registered as needing approval is put through the tool gate by
``ctx.tools.execute()``: approved, edited, rejected or answered by the human, each coming
back as a tool result (never an exception), an edited call running with what was typed."""

from __future__ import annotations

import json

import anyio
import pytest
from pydantic import BaseModel, Field
from tests._timing import scaled

from hotseam import TOOL_GATE, Context, GateVerdict, ToolCall, tool
from hotseam.interaction import USER_INTERACTION, AskUserQuestionRequest
from hotseam.interaction.approvals import (
    Approval,
    Decision,
    HumanGate,
    approval_request,
    call_digest,
)
from hotseam.providers.scripted import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


class DeployInput(BaseModel):
    service: str
    replicas: int = Field(ge=1, le=10)


def deploy_tool(ran: list[DeployInput], **options: object) -> object:
    @tool("deploy", **options)  # type: ignore[arg-type]
    async def deploy(input: DeployInput, call: ToolCall) -> dict[str, object]:
        """Deploy a service."""
        ran.append(input)
        return {"deployed": input.service, "replicas": input.replicas}

    return deploy


class Asked:
    """A scripted provider that keeps each request it was asked."""

    multiple_questions = True

    def __init__(self, *replies: object) -> None:
        self.requests: list[AskUserQuestionRequest] = []
        self.scripted = ScriptedProvider(list(replies))  # type: ignore[arg-type]

    async def ask(self, request: AskUserQuestionRequest):  # type: ignore[no-untyped-def]
        self.requests.append(request)
        return await self.scripted.ask(request)


async def _gated(*replies: object, **options: object):  # type: ignore[no-untyped-def]
    ran: list[DeployInput] = []
    context = Context("agent")
    provider = Asked(*replies)
    scope = context.scope("ui")
    return ran, context, provider, scope, deploy_tool(ran, needs_approval=True, **options)


async def test_an_approved_call_runs_with_its_arguments_and_the_approval_names_the_call() -> None:
    ran, context, provider, scope, deploy = await _gated(Reply.approve())
    async with scope:
        scope.provide(USER_INTERACTION, provider)
        scope.provide(TOOL_GATE, HumanGate())
        scope.register_tool(deploy)  # type: ignore[arg-type]
        result = await context.tools.execute("deploy", {"service": "api", "replicas": 2})
    assert result.ok and result.output == {"deployed": "api", "replicas": 2}
    assert ran == [DeployInput(service="api", replicas=2)]
    (request,) = provider.requests
    assert request.approval is not None
    assert request.approval.tool == "deploy"
    assert request.approval.arguments == {"replicas": 2, "service": "api"}
    assert request.approval.digest == call_digest("deploy", {"service": "api", "replicas": 2})
    assert request.approval.input_schema == DeployInput.model_json_schema()
    assert [item.id for item in request.questions] == ["decision", "text"]  # the seed's words


async def test_an_edited_call_runs_with_the_edited_arguments() -> None:
    ran, context, provider, scope, deploy = await _gated(
        Reply.edit({"service": "api", "replicas": 3})
    )
    async with scope:
        scope.provide(USER_INTERACTION, provider)
        scope.provide(TOOL_GATE, HumanGate())
        scope.register_tool(deploy)  # type: ignore[arg-type]
        result = await context.tools.execute("deploy", {"service": "api", "replicas": 9})
    assert result.ok and result.output == {"deployed": "api", "replicas": 3}
    assert ran == [DeployInput(service="api", replicas=3)]


async def test_an_edit_that_is_not_valid_input_is_asked_again_saying_why() -> None:
    ran, context, provider, scope, deploy = await _gated(
        Reply.edit('{"service": "api", "replicas": 99}'),
        Reply.edit('{"service": "api", "replicas": '),
        Reply.edit({"service": "api", "replicas": 4}),
    )
    async with scope:
        scope.provide(USER_INTERACTION, provider)
        scope.provide(TOOL_GATE, HumanGate())
        scope.register_tool(deploy)  # type: ignore[arg-type]
        result = await context.tools.execute("deploy", {"service": "api", "replicas": 1})
    assert result.ok and ran == [DeployInput(service="api", replicas=4)]
    first, second, third = (request.questions[0].question for request in provider.requests)
    assert "Not taken" not in first
    assert "replicas" in second and "less than or equal to 10" in second
    assert "not JSON" in third and "line 1" in third


async def test_a_rejection_is_a_tool_result_with_its_code_and_the_reason() -> None:
    ran, context, provider, scope, deploy = await _gated(Reply.reject("not on a Friday"))
    async with scope:
        scope.provide(USER_INTERACTION, provider)
        scope.provide(TOOL_GATE, HumanGate())
        scope.register_tool(deploy)  # type: ignore[arg-type]
        result = await context.tools.execute("deploy", {"service": "api", "replicas": 1})
    assert ran == []
    assert result.error is not None
    assert result.error["code"] == "APPROVAL_REJECTED" and result.error["name"] == "ToolError"
    assert "not on a Friday" in result.error["message"]
    assert result.error["details"]["decision"] == "reject"


async def test_a_response_is_the_result_instead_of_running_the_tool() -> None:
    ran, context, provider, scope, deploy = await _gated(Reply.respond("use the staging tool"))
    async with scope:
        scope.provide(USER_INTERACTION, provider)
        scope.provide(TOOL_GATE, HumanGate())
        scope.register_tool(deploy)  # type: ignore[arg-type]
        result = await context.tools.execute("deploy", {"service": "api", "replicas": 1})
    assert ran == [] and result.ok and result.output == "use the staging tool"


async def test_a_policy_decides_per_call_which_calls_are_asked() -> None:
    def big(input: DeployInput, call: ToolCall) -> bool:
        return input.replicas > 5

    ran, context, provider, scope, deploy = await _gated(Reply.reject("too many"))
    deploy = deploy_tool(ran, needs_approval=big)
    async with scope:
        scope.provide(USER_INTERACTION, provider)
        scope.provide(TOOL_GATE, HumanGate())
        scope.register_tool(deploy)  # type: ignore[arg-type]
        small = await context.tools.execute("deploy", {"service": "api", "replicas": 2})
        large = await context.tools.execute("deploy", {"service": "api", "replicas": 8})
    assert small.ok and large.error is not None and large.error["code"] == "APPROVAL_REJECTED"
    assert len(provider.requests) == 1 and ran == [DeployInput(service="api", replicas=2)]


async def test_a_call_needing_approval_without_a_gate_is_refused_not_run() -> None:
    ran: list[DeployInput] = []
    context = Context("agent")
    async with context.scope("tools") as scope:
        scope.register_tool(deploy_tool(ran, needs_approval=True))  # type: ignore[arg-type]
        result = await context.tools.execute("deploy", {"service": "api", "replicas": 1})
    assert ran == [] and result.error is not None
    assert result.error["code"] == "APPROVAL_UNAVAILABLE"


async def test_an_unanswered_approval_refuses_the_call() -> None:
    ran, context, provider, scope, deploy = await _gated(Reply.fail("ASK_DECLINED"))
    async with scope:
        scope.provide(USER_INTERACTION, provider)
        scope.provide(TOOL_GATE, HumanGate())
        scope.register_tool(deploy)  # type: ignore[arg-type]
        result = await context.tools.execute("deploy", {"service": "api", "replicas": 1})
    assert ran == [] and result.error is not None
    assert result.error["code"] == "APPROVAL_UNANSWERED"
    assert result.error["details"]["reason"] == "ASK_DECLINED"


async def test_a_gate_that_lets_a_call_run_with_another_model_fails_the_call() -> None:
    class Sloppy:
        async def review(self, tool, input, call):  # type: ignore[no-untyped-def]
            return GateVerdict.run(BaseModel())

    ran: list[DeployInput] = []
    context = Context("agent")
    async with context.scope("tools") as scope:
        scope.provide(TOOL_GATE, Sloppy())
        scope.register_tool(deploy_tool(ran, needs_approval=True))  # type: ignore[arg-type]
        result = await context.tools.execute("deploy", {"service": "api", "replicas": 1})
    assert ran == [] and result.error is not None and result.error["code"] == "INTERNAL"


def test_the_approval_request_is_the_seed_vocabulary_and_round_trips_through_json() -> None:
    approval = Approval.of("deploy", {"service": "api", "replicas": 2}, reason="a release")
    request = approval_request(approval)
    again = AskUserQuestionRequest.from_dict(json.loads(json.dumps(request.to_dict())))
    assert again.approval == approval and again.questions == request.questions
    assert request.to_dict()["approval"]["arguments"] == {"replicas": 2, "service": "api"}
    assert "a release" in request.questions[0].question
    only = approval_request(Approval.of("deploy", {}, decisions=[Decision.APPROVE]))
    assert [item.id for item in only.questions] == ["decision"]


def test_a_forged_digest_is_refused() -> None:
    data = Approval.of("deploy", {"replicas": 2}).to_dict()
    data["arguments"] = {"replicas": 9}
    with pytest.raises(Exception, match="digest"):
        Approval.from_dict(data)


class OneAtATime:
    """A provider written to the seed's interface (``ask`` alone): it gets one question at
    a time, as a plain terminal prompt would."""

    def __init__(self, *texts: str) -> None:
        self.texts = list(texts)
        self.asked: list[str] = []

    async def ask(self, request: AskUserQuestionRequest):  # type: ignore[no-untyped-def]
        from hotseam.interaction import AskUserQuestionAnswer

        (item,) = request.questions
        self.asked.append(str(item.id))
        return AskUserQuestionAnswer(self.texts.pop(0))


async def test_a_provider_of_one_question_at_a_time_decides_in_two_answers() -> None:
    ran: list[DeployInput] = []
    context = Context("agent")
    provider = OneAtATime("reject", "wait for the freeze to end")
    async with context.scope("ui") as scope:
        scope.provide(USER_INTERACTION, provider)
        scope.provide(TOOL_GATE, HumanGate())
        scope.register_tool(deploy_tool(ran, needs_approval=True))  # type: ignore[arg-type]
        result = await context.tools.execute("deploy", {"service": "api", "replicas": 1})
    assert provider.asked == ["decision", "text"]
    assert result.error is not None and "wait for the freeze" in result.error["message"]


class Defaulted(BaseModel):
    service: str
    replicas: int = 1


async def test_an_edit_leaving_out_a_default_runs_with_the_default() -> None:
    """The decision is bound to the input as the tool's model reads the edit (its defaults
    filled in, ``2.0`` read as ``2``), so the grant is for the call that runs."""

    @tool("deploy", needs_approval=True)
    async def deploy(input: Defaulted, call: ToolCall) -> str:
        """Deploy."""
        return f"{input.service} x{input.replicas}"

    context = Context("agent")
    async with context.scope("ui") as scope:
        scope.provide(
            USER_INTERACTION,
            Asked(Reply.edit({"service": "db"}), Reply.edit('{"service": "db", "replicas": 2.0}')),
        )
        scope.provide(TOOL_GATE, HumanGate())
        scope.register_tool(deploy)
        first = await context.tools.execute("deploy", {"service": "api", "replicas": 9})
        second = await context.tools.execute("deploy", {"service": "api", "replicas": 9})
    assert first.to_dict() == {"ok": True, "output": "db x1"}
    assert second.to_dict() == {"ok": True, "output": "db x2"}


async def test_the_calls_abort_withdraws_its_approval_and_refuses_the_call() -> None:
    """The caller aborts the call (``execute(..., signal=...)``) while the human decides:
    the question is withdrawn (the provider sees the ask end), the call refused, not run."""
    from hotseam import AbortController

    ran: list[DeployInput] = []
    provider = Asked(Reply.never())
    controller = AbortController()
    context = Context("agent")
    async with context.scope("ui") as scope, anyio.create_task_group() as tasks:
        scope.provide(USER_INTERACTION, provider)
        scope.provide(TOOL_GATE, HumanGate())
        scope.register_tool(deploy_tool(ran, needs_approval=True))  # type: ignore[arg-type]
        results = []

        async def call() -> None:
            results.append(
                await context.tools.execute(
                    "deploy", {"service": "api", "replicas": 1}, signal=controller.signal
                )
            )

        tasks.start_soon(call)
        with anyio.fail_after(scaled(10)):
            while not provider.requests:  # noqa: ASYNC110 (the provider has no event to await)
                await anyio.sleep(0.01)
        controller.abort("the agent moved on")
    (result,) = results
    assert ran == [] and result.error is not None
    assert result.error["code"] == "APPROVAL_UNANSWERED"
    assert result.error["details"]["reason"] == "ASK_ABORTED"
    (request,) = provider.requests
    assert request.signal is controller.signal


async def test_a_gate_holds_no_grant_once_its_calls_are_done() -> None:
    """Each grant lives as long as its call: after many approved calls the gate keeps
    none — a long-running daemon's gate does not grow."""
    ran, context, provider, scope, deploy = await _gated(*[Reply.approve()] * 50)
    gate = HumanGate()
    async with scope:
        scope.provide(USER_INTERACTION, provider)
        scope.provide(TOOL_GATE, gate)
        scope.register_tool(deploy)  # type: ignore[arg-type]
        for n in range(50):
            result = await context.tools.execute("deploy", {"service": f"s{n}", "replicas": 1})
            assert result.ok
    assert len(ran) == 50 and gate.grants._open == {}
