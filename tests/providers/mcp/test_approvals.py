"""A tool needing approval, served over MCP behind ``HumanGate``: the approval reaches the
host as an ordinary form elicitation (its two plain questions: an enum ``decision`` and a
string ``text``), valid against the revision's published schema, and the host's answer
approves, edits, rejects or answers the call — on both revisions, with the ``mcp`` SDK's
own client answering in its elicitation callback."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest
from jsonschema import Draft7Validator, Draft202012Validator
from pydantic import BaseModel, Field
from tests.providers.kit.test_form_variants import _SCHEMAS, mcp_schema_errors

from hotseam import TOOL_GATE, Tool, ToolCall, tool
from hotseam.interaction.approvals import Approval, HumanGate, approval_request

from .conftest import ERAS, Elicit, Served, accept, action, serving

pytestmark = pytest.mark.anyio

REVISION = {"legacy": "2025-11-25", "2026-07-28": "2026-07-28"}
"""The revision each client mode speaks (``legacy`` negotiates 2025-11-25)."""


class DeployInput(BaseModel):
    service: str
    replicas: int = Field(1, ge=1, le=10)


def deploy_tool(ran: list[DeployInput]) -> Tool[DeployInput]:
    """``deploy``, needing approval, keeping in ``ran`` each input it ran with."""

    @tool("deploy", needs_approval=True)
    async def deploy(input: DeployInput, call: ToolCall) -> dict[str, object]:
        """Deploy a service."""
        ran.append(input)
        return {"deployed": input.service, "replicas": input.replicas}

    return deploy


def answers(*contents: dict[str, Any]) -> Elicit:
    """An elicitation callback accepting each form with the next of ``contents``."""
    left = list(contents)

    async def answer(params: types.ElicitRequestFormParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content=left.pop(0))

    return answer


async def call_deploy(
    mode: str, elicit: Elicit, **arguments: Any
) -> tuple[Served, Any, list[DeployInput]]:
    """Call ``deploy`` with ``arguments`` over a fresh connection whose host answers with
    ``elicit``, the server putting it through ``HumanGate``: what was elicited, the host's
    result, and the inputs the tool ran with."""
    ran: list[DeployInput] = []
    async with serving([deploy_tool(ran)], mode=mode, elicit=elicit) as served:
        served.scope.provide(TOOL_GATE, HumanGate())
        result = await served.client.call_tool("deploy", arguments)
    return served, result, ran


def wire_errors(revision: str, params: types.ElicitRequestFormParams) -> list[str]:
    """What ``revision``'s published schema finds wrong with the ``elicitation/create`` that
    carried ``params`` (as the host received them; none: valid)."""
    published = _SCHEMAS[revision]
    where = "definitions" if "definitions" in published else "$defs"
    validator_type = Draft7Validator if where == "definitions" else Draft202012Validator
    validator = validator_type({**published, "$ref": f"#/{where}/ElicitRequest"})
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "elicitation/create",
        "params": params.model_dump(by_alias=True, exclude_none=True, mode="json"),
    }
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(message)]


@pytest.mark.parametrize("mode", ERAS)
async def test_an_approval_is_a_form_of_an_enum_decision_and_a_text_and_approve_runs_it(
    mode: str,
) -> None:
    """The form names the call; ``decision`` is a required single choice of the four
    decisions (approve recommended, the default), ``text`` an optional string; the form is
    valid on the revision spoken; accepting ``approve`` runs the call as it was made."""
    served, result, ran = await call_deploy(
        mode, accept(decision="approve"), service="api", replicas=2
    )
    assert not result.is_error, result
    assert result.structured_content == {"deployed": "api", "replicas": 2}
    assert ran == [DeployInput(service="api", replicas=2)]
    (params,) = served.elicited
    assert 'Allow deploy({"replicas":2,"service":"api"})?' in params.message
    schema = params.requested_schema
    assert set(schema["properties"]) == {"decision", "text"}
    assert schema["required"] == ["decision"]
    decision = schema["properties"]["decision"]
    assert decision["type"] == "string"
    assert [o["const"] for o in decision["oneOf"]] == ["approve", "edit", "reject", "respond"]
    assert decision["default"] == "approve"
    assert schema["properties"]["text"]["type"] == "string"
    assert wire_errors(REVISION[mode], params) == []


@pytest.mark.parametrize("revision", ["2025-06-18", "2025-11-25", "2026-07-28"])
def test_the_approval_form_is_valid_on_every_published_revision(revision: str) -> None:
    """What hotseam builds of an approval's request (2025-06-18 too, which the SDK's client
    no longer speaks) passes each revision's published schema."""
    approval = Approval.of("deploy", {"service": "api", "replicas": 2}, reason="tagged")
    assert mcp_schema_errors(revision, approval_request(approval)) == []
    note = "Not taken: edit needs the edited arguments, as a JSON object."
    assert mcp_schema_errors(revision, approval_request(approval, note=note)) == []


@pytest.mark.parametrize("mode", ERAS)
async def test_an_edit_runs_the_call_with_the_arguments_typed(mode: str) -> None:
    """``edit`` with the arguments as JSON in ``text``: the call runs with them, not the
    model's."""
    typed = json.dumps({"service": "api", "replicas": 3})
    _, result, ran = await call_deploy(
        mode, accept(decision="edit", text=typed), service="api", replicas=2
    )
    assert not result.is_error, result
    assert result.structured_content == {"deployed": "api", "replicas": 3}
    assert ran == [DeployInput(service="api", replicas=3)]


@pytest.mark.parametrize("mode", ERAS)
async def test_an_edit_that_is_not_valid_input_is_asked_again_with_why(mode: str) -> None:
    """An edit the input model refuses is not run: the form comes again, its message saying
    what was wrong, and the next valid edit runs."""
    served, result, ran = await call_deploy(
        mode,
        answers(
            {"decision": "edit", "text": '{"service": "api", "replicas": 99}'},
            {"decision": "edit", "text": '{"service": "api", "replicas": 4}'},
        ),
        service="api",
        replicas=2,
    )
    assert not result.is_error, result
    assert ran == [DeployInput(service="api", replicas=4)]
    first, second = served.elicited
    assert "Not taken" not in first.message
    assert "Not taken: the edited arguments are not valid input for deploy" in second.message
    assert "replicas" in second.message.split("Not taken", 1)[1]
    assert wire_errors(REVISION[mode], second) == []


@pytest.mark.parametrize("mode", ERAS)
async def test_a_rejection_is_an_error_result_with_the_reason_and_nothing_runs(
    mode: str,
) -> None:
    """``reject`` with a reason: the host gets an error result ``APPROVAL_REJECTED`` that
    carries the reason (for the model); the tool never runs."""
    _, result, ran = await call_deploy(
        mode, accept(decision="reject", text="not on a Friday"), service="api", replicas=2
    )
    assert result.is_error
    error = result.structured_content
    assert error["code"] == "APPROVAL_REJECTED"
    assert error["message"] == "the human rejected the call of 'deploy': not on a Friday"
    assert error["details"]["decision"] == "reject"
    assert ran == []


@pytest.mark.parametrize("mode", ERAS)
async def test_a_response_is_the_result_and_nothing_runs(mode: str) -> None:
    """``respond``: the text typed is the call's result, not an error; the tool never runs."""
    _, result, ran = await call_deploy(
        mode, accept(decision="respond", text="already deployed"), service="api"
    )
    assert not result.is_error, result
    assert [item.text for item in result.content] == ["already deployed"]  # type: ignore[union-attr]
    assert ran == []


@pytest.mark.parametrize("mode", ERAS)
async def test_a_declined_form_refuses_the_call(mode: str) -> None:
    """The host declining the form decides nothing: ``APPROVAL_UNANSWERED`` (why:
    ``ASK_DECLINED``), and the tool never runs."""
    _, result, ran = await call_deploy(mode, action("decline"), service="api")
    assert result.is_error
    assert result.structured_content["code"] == "APPROVAL_UNANSWERED"
    assert result.structured_content["details"]["reason"] == "ASK_DECLINED"
    assert ran == []
