"""Approvals in the web inbox: listed with the call, answered with the two plain questions,
an answer that makes no decision refused before it is taken (an edit checked against the
tool's schema), end to end through ``ctx.tools.execute`` with ``HumanGate``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from pydantic import BaseModel
from tests._timing import scaled

from hotseam import TOOL_GATE, ToolCall, ToolResult, tool
from hotseam.interaction.approvals import Approval, Decision, HumanGate, approval_request
from hotseam.providers._web._approvals import schema_problem

from .conftest import Served, serving
from .test_journal_inbox import fleet

pytestmark = pytest.mark.anyio


class Window(BaseModel):
    start: int


class DeployInput(BaseModel):
    service: str
    replicas: int = 1
    window: Window | None = None


@tool("deploy", needs_approval=True)
async def deploy(input: DeployInput, call: ToolCall) -> str:
    """Deploy a service."""
    return f"deployed {input.service} x{input.replicas}"


def why(tool: Any, input: Any, call: Any) -> str:
    return "the release is tagged"


class Deploying:
    """A served inbox with ``deploy`` behind ``HumanGate``, and calls of it run in tasks."""

    def __init__(self, served: Served) -> None:
        self.s = served
        self.results: list[ToolResult] = []
        self._done = anyio.Event()

    def call(self, arguments: dict[str, Any]) -> None:
        self._done = anyio.Event()

        async def run() -> None:
            self.results.append(await self.s.context.tools.execute("deploy", arguments))
            self._done.set()

        self.s.tasks.start_soon(run)

    async def result(self) -> dict[str, Any]:
        with anyio.fail_after(scaled(10)):
            await self._done.wait()
        outcome: dict[str, Any] = self.results[-1].to_dict()
        return outcome

    async def card(self) -> dict[str, Any]:
        (card,) = await self.s.pending(1)
        return card

    async def decide(self, card: dict[str, Any], decision: str, text: str | None) -> httpx.Response:
        return await self.s.answer(card["id"], body(card, decision, text))


def body(card: dict[str, Any], decision: str, text: str | None) -> dict[str, Any]:
    """The answer the page sends: the decision's option, and the text (or a skip)."""
    index = card["approval"]["decisions"].index(decision)
    return {
        "answers": {
            "decision": {"option": index},
            "text": {"skip": True} if text is None else {"text": text},
        }
    }


@asynccontextmanager
async def deploying(**gate: Any) -> AsyncIterator[Deploying]:
    async with serving() as s:
        s.scope.provide(TOOL_GATE, HumanGate(reason=why, **gate))
        s.scope.register_tool(deploy)
        yield Deploying(s)


async def test_a_pending_approval_is_listed_with_the_call_it_asks_about() -> None:
    async with deploying() as d:
        d.call({"service": "api", "replicas": 9})
        await d.card()
        (card,) = (await d.s.client.get("/api/questions")).json()["questions"]
        approval = card["approval"]
        assert approval["tool"] == "deploy"
        assert approval["arguments"] == {"replicas": 9, "service": "api", "window": None}
        assert approval["reason"] == "the release is tagged"
        assert approval["decisions"] == ["approve", "edit", "reject", "respond"]
        assert approval["input_schema"]["required"] == ["service"]
        expected = Approval.of("deploy", approval["arguments"], reason="the release is tagged")
        assert approval["digest"] == expected.digest
        # The two plain questions are there too: a page or script that knows no approvals.
        assert [item["id"] for item in card["questions"]] == ["decision", "text"]
        assert [o["label"] for o in card["questions"][0]["options"]] == [
            "Approve",
            "Edit",
            "Reject",
            "Respond",
        ]


async def test_a_plain_question_has_no_approval() -> None:
    async with serving() as s:
        from .conftest import DB

        s.ask_soon("db", DB)
        (card,) = await s.pending(1)
        assert "approval" not in card


async def test_approving_runs_the_call_as_asked() -> None:
    async with deploying() as d:
        d.call({"service": "api", "replicas": 3})
        response = await d.decide(await d.card(), "approve", None)
        assert response.status_code == 200, response.text
        assert await d.result() == {"ok": True, "output": "deployed api x3"}


async def test_a_rejection_needs_a_reason_and_the_model_gets_it() -> None:
    async with deploying() as d:
        d.call({"service": "api"})
        card = await d.card()
        refused = await d.decide(card, "reject", None)
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"] == {
            "code": "INVALID_ANSWER",
            "message": "reject needs the reason, for the model",
        }
        response = await d.decide(card, "reject", "not during the freeze")
        assert response.status_code == 200, response.text
        result = await d.result()
        assert result["ok"] is False
        assert result["error"]["code"] == "APPROVAL_REJECTED"
        assert "not during the freeze" in result["error"]["message"]


async def test_a_response_needs_a_text_which_is_the_tools_result() -> None:
    async with deploying() as d:
        d.call({"service": "api"})
        card = await d.card()
        refused = await d.decide(card, "respond", None)
        assert refused.status_code == 422
        assert refused.json()["error"]["message"] == "respond needs the response, for the model"
        assert (await d.decide(card, "respond", "deployed by hand")).status_code == 200
        assert await d.result() == {"ok": True, "output": "deployed by hand"}


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("", "edit needs the edited arguments, as a JSON object"),
        ('{"service": "api",', "the edited arguments are not JSON: Expecting property name"),
        ('["api"]', "the edited arguments must be a JSON object, got list"),
        ('{"replicas": 2}', "not valid input for deploy: missing required field 'service'"),
        (
            '{"service": "api", "replicas": "two"}',
            "not valid input for deploy: field 'replicas' must be an integer (got a string)",
        ),
        (
            '{"service": 7}',
            "not valid input for deploy: field 'service' must be a string (got an integer)",
        ),
    ],
)
async def test_an_edit_the_schema_refuses_is_refused_naming_the_field_and_nothing_runs(
    edit: str, message: str
) -> None:
    async with deploying() as d:
        d.call({"service": "api"})
        card = await d.card()
        refused = await d.decide(card, "edit", edit or None)
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["code"] == "INVALID_ANSWER"
        assert message in refused.json()["error"]["message"]
        # Still pending, the same card: nothing was taken.
        listed = (await d.s.client.get("/api/questions")).json()["questions"]
        assert [q["id"] for q in listed] == [card["id"]]
        assert d.results == []


async def test_a_valid_edit_runs_with_the_edited_arguments() -> None:
    async with deploying() as d:
        d.call({"service": "api", "replicas": 9})
        card = await d.card()
        edited = '{\n  "service": "api",\n  "replicas": 2,\n  "window": null\n}'
        response = await d.decide(card, "edit", edited)
        assert response.status_code == 200, response.text
        assert await d.result() == {"ok": True, "output": "deployed api x2"}


async def test_an_edit_leaving_out_a_default_runs() -> None:
    async with deploying() as d:
        d.call({"service": "api", "replicas": 9})
        response = await d.decide(await d.card(), "edit", '{"service": "db"}')
        assert response.status_code == 200, response.text
        assert await d.result() == {"ok": True, "output": "deployed db x1"}


async def test_an_edit_the_schema_cannot_check_simply_is_left_to_the_gate_which_asks_again() -> (
    None
):
    async with deploying() as d:
        d.call({"service": "api"})
        card = await d.card()
        # "window" is a nested model (a $ref): the inbox takes the edit, the gate does not.
        bad = '{"service": "api", "window": {"start": "noon"}}'
        assert (await d.decide(card, "edit", bad)).status_code == 200
        async with d.s.events() as events:
            again = await events.until(lambda e: _one(e) is not None)
        asked = _one(again)
        assert asked is not None
        assert asked["approval"]["digest"] == card["approval"]["digest"]
        assert "window.start" in asked["questions"][0]["question"]
        good = '{"replicas": 1, "service": "api", "window": {"start": 12}}'
        assert (await d.decide(asked, "edit", good)).status_code == 200
        assert await d.result() == {"ok": True, "output": "deployed api x1"}


def _one(event: dict[str, Any]) -> dict[str, Any] | None:
    """The question an event lists or adds (the first of a snapshot), if any."""
    if event["type"] not in ("snapshot", "added"):
        return None
    questions = event["questions"] if event["type"] == "snapshot" else [event["question"]]
    return questions[0] if questions else None


async def test_the_fleet_inbox_lists_an_approval_read_back_from_the_journal_and_checks_edits() -> (
    None
):
    approval = Approval.of(
        "deploy",
        {"service": "api"},
        reason="tagged",
        decisions=[Decision.APPROVE, Decision.EDIT],
        input_schema=DeployInput.model_json_schema(),
    )
    async with fleet() as f:
        _, run = await f.daemon("alpha")
        await f.ask(run, "alpha-deploy", approval_request(approval))
        await f.shown("alpha-deploy")
        (card,) = await f.listed()
        assert card["approval"] == approval.to_dict()
        refused = await f.post("alpha-deploy", "answer", body(card, "edit", '{"replicas": 2}'))
        assert refused.status_code == 422, refused.text
        assert "missing required field 'service'" in refused.json()["error"]["message"]
        reject = {"answers": {"decision": {"option": 2}, "text": {"text": "no"}}}
        refused = await f.post("alpha-deploy", "answer", reject)  # not offered
        assert refused.status_code == 422, refused.text
        edit = body(card, "edit", '{"service": "db"}')
        assert (await f.post("alpha-deploy", "answer", edit)).status_code == 200
        record = await f.journal.get_ask("alpha-deploy")
        assert record.answer is not None
        assert [entry.answer for entry in record.answer.answers] == ["edit", '{"service": "db"}']


def test_what_the_schema_says_simply_is_checked_and_the_rest_left_alone() -> None:
    schema = {
        "type": "object",
        "properties": {
            "mode": {"enum": ["fast", "safe"]},
            "tag": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "flag": {"type": "boolean"},
            "nested": {"$ref": "#/$defs/Nested"},
            "count": {"type": "integer"},
        },
        "required": ["mode"],
        "additionalProperties": False,
    }
    assert schema_problem(schema, {"mode": "fast", "tag": None, "nested": 5}) is None
    assert (
        schema_problem(schema, {"mode": "slow"}) == 'field \'mode\' must be one of "fast", "safe"'
    )
    assert (
        schema_problem(schema, {"mode": "fast", "tag": 3})
        == "field 'tag' must be a string or null (got an integer)"
    )
    assert (
        schema_problem(schema, {"mode": "fast", "count": True})
        == "field 'count' must be an integer (got true or false)"
    )
    assert schema_problem(schema, {"mode": "fast", "other": 1}) == "unknown field 'other'"
    assert schema_problem(schema, {}) == "missing required field 'mode'"


async def test_always_reject_offered_by_a_gate_with_rules_may_go_without_a_reason() -> None:
    async with deploying(offer_rules=True) as d:
        d.call({"service": "api"})
        card = await d.card()
        assert card["approval"]["decisions"][-2:] == ["always", "never"]
        assert (await d.decide(card, "never", None)).status_code == 200
        first = await d.result()
        assert first["ok"] is False and "always rejected" in first["error"]["message"]
        d.call({"service": "db"})  # refused by the rule, unasked
        assert (await d.result())["ok"] is False
        assert (await d.s.client.get("/api/questions")).json()["questions"] == []
