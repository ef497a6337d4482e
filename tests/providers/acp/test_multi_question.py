"""Several questions in one ask over ACP: one form with a property per question (valid
against the ACP v1 schema), and, without form elicitation, the fallbacks one question after
the other; end to end in process with the SDK's own client.

The ask is Claude Code's AskUserQuestion shape through the ``ask_user_question`` tool:
"Which database?" (one choice), "Which features?" (several), "Anything else?" (free text).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from hotseam import Context, ToolResult
from hotseam.interaction import (
    AskUserQuestionInput,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ErrorCode,
    Question,
    validate_request,
)
from hotseam.providers._acp._permission import CUSTOM_DROPPED, ONE_CHOICE
from hotseam.providers._acp._provider import form_params
from hotseam.providers._kit import build_form
from hotseam.providers.acp import current_turn

from ._harness import ChatOnlyClient, connected, rpc_error
from .test_reload_reask import Relay, Reloading

pytestmark = pytest.mark.anyio

STACK: dict[str, Any] = {
    "questions": [
        {
            "question": "Which database?",
            "header": "Storage",
            "options": [
                {"label": "Postgres", "description": "Server database"},
                {"label": "SQLite", "description": "One file"},
            ],
            "multiSelect": False,
        },
        {
            "question": "Which features?",
            "header": "Features",
            "options": [
                {"label": "Auth", "description": "Sign-in"},
                {"label": "Billing"},
                {"label": "Search"},
            ],
            "multiSelect": True,
        },
        {"question": "Anything else?", "header": "Notes"},
    ]
}
PERMISSION = "session/request_permission"

_SCHEMA = json.loads(Path(__file__).with_name("acp_v1_elicitation.schema.json").read_text())


def acp_schema_errors(definition: str, instance: object) -> list[str]:
    """What the ACP v1 schema's ``definition`` finds wrong with ``instance`` (none: valid)."""
    validator = Draft202012Validator({**_SCHEMA, "$ref": f"#/$defs/{definition}"})
    return [
        f"{list(error.absolute_path)}: {error.message}" for error in validator.iter_errors(instance)
    ]


def _request(data: Mapping[str, Any]) -> AskUserQuestionRequest:
    checked = AskUserQuestionInput.model_validate(dict(data))
    return validate_request(AskUserQuestionRequest.from_input(checked))


def _accept(content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


def _selected(option_id: str) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


def stack_agent(results: list[ToolResult], ask: Mapping[str, Any] = STACK) -> Any:
    """Asks ``ask`` through the tool once per prompt turn and says each answer."""

    async def agent(context: Context) -> None:
        result = await context.tools.execute("ask_user_question", dict(ask))
        results.append(result)
        if result.ok:
            lines = [f"{q['id']}: {q['answer']}" for q in result.output["questions"]]
            await current_turn().say("\n".join(lines) + "\n")
        else:
            await current_turn().say(f"error: {result.error['code']}\n")  # type: ignore[index]

    return agent


def _values(result: ToolResult) -> list[list[str]]:
    return [q["values"] for q in result.output["questions"]]


THREE_SCHEMA = {
    "type": "object",
    "properties": {
        "q1": {
            "type": "string",
            "title": "Which database?",
            "description": "Storage: pick one, or type your own",
            "oneOf": [
                {"const": "Postgres", "title": "Postgres", "description": "Server database"},
                {"const": "SQLite", "title": "SQLite", "description": "One file"},
                {"const": "_other", "title": "Other (type it below)"},
            ],
        },
        "q1_custom": {
            "type": "string",
            "title": "Other",
            "description": (
                "“Which database?”: your own answer instead of a choice; when filled in, it "
                "is used."
            ),
        },
        "q2": {
            "type": "array",
            "title": "Which features?",
            "description": "Features: pick one or more, or type your own",
            "minItems": 1,
            "maxItems": 4,
            "items": {
                "anyOf": [
                    {"const": "Auth", "title": "Auth", "description": "Sign-in"},
                    {"const": "Billing", "title": "Billing"},
                    {"const": "Search", "title": "Search"},
                    {"const": "_other", "title": "Other (type it below)"},
                ]
            },
        },
        "q2_custom": {
            "type": "string",
            "title": "Other",
            "description": (
                "“Which features?”: your own answer; when filled in, it counts as one more choice."
            ),
        },
        "q3": {
            "type": "string",
            "title": "Anything else?",
            "description": "Notes: type your answer",
            "minLength": 1,
        },
    },
    "required": ["q1", "q2", "q3"],
}


class TestOneForm:
    async def test_three_questions_answered_through_one_form(self) -> None:
        """One elicitation/create with a property per question; the reply is one answer
        per question: a choice, several choices (with the human's own text as one more),
        and free text. What the client received is valid ACP v1."""
        results: list[ToolResult] = []
        async with connected(stack_agent(results)) as acp:
            pending = acp.start_prompt()
            request = await acp.next_request()
            reply = _accept(
                {
                    "q1": "SQLite",
                    "q1_custom": "",
                    "q2": ["Search", "Auth", "_other"],
                    "q2_custom": " Audit log ",
                    "q3": "Ship it on Friday",
                }
            )
            assert acp_schema_errors("CreateElicitationResponse", reply) == []
            request.answer(reply)
            assert (await pending.result()).stop_reason == "end_turn"
            (raw,) = acp.elicitations()
            assert acp.client.said() == (
                "q1: SQLite\nq2: Auth, Search, Audit log\nq3: Ship it on Friday\n"
            )
        params = raw["params"]
        assert params["message"] == (
            "Please answer these 3 questions:\n1. Storage: Which database?\n"
            "2. Features: Which features?\n3. Notes: Anything else?"
        )
        assert params["requestedSchema"] == THREE_SCHEMA
        assert acp_schema_errors("CreateElicitationRequest", params) == []
        (result,) = results
        assert result.output["answers"] == {
            "Which database?": "SQLite",
            "Which features?": "Auth, Search, Audit log",
            "Anything else?": "Ship it on Friday",
        }
        assert _values(result) == [
            ["SQLite"],
            ["Auth", "Search", "Audit log"],
            ["Ship it on Friday"],
        ]

    async def test_decline_ends_the_whole_ask(self) -> None:
        """decline (and cancel) on the form: the ask fails as a whole, nothing re-asked."""
        for action, code in (
            ("decline", ErrorCode.ASK_DECLINED),
            ("cancel", ErrorCode.ASK_CANCELLED),
        ):
            results: list[ToolResult] = []
            async with connected(stack_agent(results)) as acp:
                pending = acp.start_prompt()
                (await acp.next_request()).answer({"action": action})
                assert (await pending.result()).stop_reason == "end_turn"
                assert len(acp.elicitations()) == 1
                assert len(acp.client.requests) == 0
            assert [r.error["code"] for r in results] == [code]  # type: ignore[index]

    async def test_a_question_left_unanswered_is_asked_again_with_the_answers_kept(
        self,
    ) -> None:
        """A client that does not enforce ``required``/``minItems``: the form comes back
        with a note naming what is missing, pre-filled with what was given."""
        results: list[ToolResult] = []
        async with connected(stack_agent(results)) as acp:
            pending = acp.start_prompt()
            (await acp.next_request()).answer(_accept({"q1": "Postgres", "q2": [], "q3": "No"}))
            again = await acp.next_request()
            again.answer(_accept({"q1": "Postgres", "q2": ["Billing"], "q3": "No"}))
            assert (await pending.result()).stop_reason == "end_turn"
            _, second = acp.elicitations()
        assert second["params"]["message"].startswith(
            "Please answer every question: “Which features?” has no answer (pick one or "
            "more, or type your own).\n\nPlease answer these 3 questions:"
        )
        properties = second["params"]["requestedSchema"]["properties"]
        assert (properties["q1"]["default"], properties["q3"]["default"]) == ("Postgres", "No")
        assert "default" not in properties["q2"]
        assert acp_schema_errors("CreateElicitationRequest", second["params"]) == []
        assert _values(results[0]) == [["Postgres"], ["Billing"], ["No"]]

    async def test_a_third_incomplete_answer_is_invalid(self) -> None:
        """Asked again at most twice, as an empty answer is; then INVALID_ANSWER naming the
        question, never what the human sent."""
        results: list[ToolResult] = []
        async with connected(stack_agent(results)) as acp:
            pending = acp.start_prompt()
            for _ in range(3):
                (await acp.next_request()).answer(_accept({"q1": "SQLite", "q3": "Secret"}))
            assert (await pending.result()).stop_reason == "end_turn"
            assert len(acp.elicitations()) == 3
        error = results[0].error
        assert error is not None and error["code"] == ErrorCode.INVALID_ANSWER
        assert error["message"] == (
            "the ACP client's answer left questions unanswered or out of bounds 3 times: "
            "questions[1] (Which features?) has no answer"
        )

    async def test_form_refused_mid_ask_asks_the_rest_one_by_one(self) -> None:
        """Form advertised, but -32601 to the form of three: the same ask goes on through
        the fallbacks, one question after the other."""
        results: list[ToolResult] = []
        async with connected(stack_agent(results)) as acp:
            pending = acp.start_prompt()
            (await acp.next_request()).fail(rpc_error(-32601, "Method not found"))
            (await acp.next_request(PERMISSION)).answer(_selected("Postgres"))
            features = await acp.next_request(PERMISSION)
            features.answer(_selected("Search"))
            assert (await pending.result()).stop_reason == "end_turn"  # q3 waits in the chat
            assert "**Notes**: Anything else?" in acp.client.said()
            await acp.prompt("Nothing")
        assert _values(results[0]) == [["Postgres"], ["Search"], ["Nothing"]]


class TestSchema:
    def test_every_form_validates_against_the_acp_schema(self) -> None:
        """One question of each kind, alone and together, first asked and asked again."""
        bounded = Question(
            "Which regions?",
            options=[AskUserQuestionOption(name) for name in ("eu", "us", "ap", "sa")],
            multi_select=True,
            min_selections=2,
            max_selections=3,
            allow_custom=False,
            id="regions",
        )
        optional = Question("Any notes?", allow_skip=True, id="notes")
        requests = [
            _request(STACK),
            AskUserQuestionRequest.of([bounded]),
            AskUserQuestionRequest.of([optional]),
            AskUserQuestionRequest.of([bounded, optional]),
            AskUserQuestionRequest("Which database?", options=[AskUserQuestionOption("pg")]),
        ]
        for request in requests:
            form = build_form(validate_request(request))
            params = form_params(form, "sess_1", "tc_1", note="Please answer every question.")
            assert acp_schema_errors("CreateElicitationRequest", params) == [], params
        again = build_form(_request(STACK), {"q1": "SQLite", "q2": ["Auth"], "q2_custom": "x"})
        assert acp_schema_errors("CreateElicitationRequest", form_params(again, "sess_1")) == []

    def test_the_validator_catches_a_broken_form(self) -> None:
        """The check is not vacuous: what the schema forbids is reported."""
        params = form_params(build_form(_request(STACK)), "sess_1")
        broken = json.loads(json.dumps(params))
        del broken["requestedSchema"]["properties"]["q2"]["items"]
        broken["requestedSchema"]["properties"]["q1"]["oneOf"][0].pop("title")
        broken["requestedSchema"]["properties"]["q3"]["minLength"] = -1
        assert len(acp_schema_errors("CreateElicitationRequest", broken)) >= 1
        for key, value in (("items", None), ("minItems", -1)):
            one = json.loads(json.dumps(params))
            if value is None:
                del one["requestedSchema"]["properties"]["q2"][key]
            else:
                one["requestedSchema"]["properties"]["q2"][key] = value
            assert acp_schema_errors("CreateElicitationRequest", one) != [], key


class TestFallbacks:
    async def test_permission_fallback_asks_one_after_the_other(self) -> None:
        """No form elicitation: each question with options is its own permission request,
        in order (the multi-select one takes one choice, and says so); the free-form one is
        asked in the chat; the ask's answer has all three."""
        results: list[ToolResult] = []
        async with connected(stack_agent(results), capabilities=None) as acp:
            pending = acp.start_prompt()
            database = await acp.next_request(PERMISSION)
            assert len(acp.client.requests) == 0  # one at a time
            database.answer(_selected("SQLite"))
            features = await acp.next_request(PERMISSION)
            features.answer(_selected("Billing"))
            assert (await pending.result()).stop_reason == "end_turn"
            mark = len(acp.client.updates)
            await acp.prompt("Ship it on Friday")
            assert acp.said_since(mark) == "q1: SQLite\nq2: Billing\nq3: Ship it on Friday\n"
            first, second = acp.client_wire.messages("incoming", PERMISSION)
        assert first["params"]["toolCall"]["title"] == "Storage: Which database?"
        assert [o["optionId"] for o in second["params"]["options"]] == [
            "Auth",
            "Billing",
            "Search",
        ]
        text = second["params"]["toolCall"]["content"][0]["content"]["text"]
        assert text == f"- **Auth**: Sign-in\n\n{ONE_CHOICE}\n{CUSTOM_DROPPED}"
        assert _values(results[0]) == [["SQLite"], ["Billing"], ["Ship it on Friday"]]

    async def test_conversation_fallback_takes_several_choices(self) -> None:
        """A client that only chats: each question in turn in the chat; ``1,3`` picks the
        first and third features, and names separated by commas work too."""
        results: list[ToolResult] = []
        agent = stack_agent(results)
        async with connected(agent, capabilities=None, client=ChatOnlyClient()) as acp:
            assert (await acp.prompt("start")).stop_reason == "end_turn"
            assert "**Storage**: Which database?" in acp.client.said()
            mark = len(acp.client.updates)
            await acp.prompt("2")
            asked = acp.said_since(mark)
            assert (
                "**Features**: Which features? _(pick one or more, or type your own)_\n\n"
                "1. **Auth**: Sign-in\n2. **Billing**\n3. **Search**\n\n"
                "_(Reply with the numbers or the names of your choices, separated by commas: "
                "`1, 3`; an answer of your own counts as one more.)_\n"
            ) in asked
            await acp.prompt("1,3")
            mark = len(acp.client.updates)
            await acp.prompt("nothing")
            assert acp.said_since(mark) == "q1: SQLite\nq2: Auth, Search\nq3: nothing\n"
            assert (await acp.prompt("again")).stop_reason == "end_turn"
            await acp.prompt("Postgres")
            await acp.prompt("billing, Search, Audit log")
            mark = len(acp.client.updates)
            await acp.prompt("-")
            assert acp.said_since(mark) == "q1: Postgres\nq2: Billing, Search, Audit log\nq3: -\n"

    async def test_conversation_re_asks_a_reply_outside_the_bounds(self) -> None:
        """A multi-select question that takes two: it cannot go as a permission request
        (one choice), so it is asked in the chat; one choice is asked again with a note."""
        regions = {
            "questions": [
                {
                    "question": "Which regions?",
                    "options": [{"label": "eu"}, {"label": "us"}, {"label": "ap"}],
                    "multiSelect": True,
                    "minSelections": 2,
                    "allowCustom": False,
                    "id": "regions",
                },
                {"question": "Which database?", "options": [{"label": "pg"}, {"label": "lite"}]},
            ]
        }
        results: list[ToolResult] = []
        async with connected(stack_agent(results, regions), capabilities=None) as acp:
            assert (await acp.prompt("start")).stop_reason == "end_turn"
            assert "**Which regions?** _(pick 2 or more)_" in acp.client.said()
            mark = len(acp.client.updates)
            await acp.prompt("eu")
            assert "_That reply has 1 choice: please pick 2 to 3._" in acp.said_since(mark)
            pending = acp.start_prompt("eu, ap")
            (await acp.next_request(PERMISSION)).answer(_selected("lite"))
            assert (await pending.result()).stop_reason == "end_turn"
        assert _values(results[0]) == [["eu", "ap"], ["lite"]]


class TestOneQuestionAtATime:
    async def test_a_relay_without_the_flag_gets_one_form_per_question(self) -> None:
        """A provider module that relays questions and does not say multiple_questions, on
        a client with forms: ask() puts them one by one, so three forms; the multi-select
        one is a form whose ``answer`` is an array."""
        reloading = Reloading()
        results: list[ToolResult] = []
        async with connected(
            stack_agent(results), context=reloading.agent_context, provider=reloading.provider
        ) as acp:
            pending = acp.start_prompt()
            (await acp.next_request()).answer(_accept({"answer": "Postgres"}))
            features = await acp.next_request()
            features.answer(_accept({"answer": ["Billing", "_other"], "custom": "Audit"}))
            (await acp.next_request()).answer(_accept({"answer": "fine"}))
            assert (await pending.result()).stop_reason == "end_turn"
            _, raw, _ = acp.elicitations()
        assert raw["params"]["message"] == "Which features?"
        assert raw["params"]["requestedSchema"] == {
            "type": "object",
            "title": "Features",
            "properties": {
                "answer": {
                    "type": "array",
                    "title": "Choices",
                    "description": "Pick one or more, or type your own",
                    "minItems": 1,
                    "maxItems": 4,
                    "items": THREE_SCHEMA["properties"]["q2"]["items"],  # type: ignore[index]
                },
                "custom": {
                    "type": "string",
                    "title": "Other",
                    "description": "Your own answer; when filled in, it counts as one more choice.",
                },
            },
            "required": ["answer"],
        }
        assert acp_schema_errors("CreateElicitationRequest", raw["params"]) == []
        assert _values(results[0]) == [["Postgres"], ["Billing", "Audit"], ["fine"]]

    async def test_questions_that_may_be_skipped_in_the_fallbacks(self) -> None:
        """allow_skip without forms: a "Skip" permission option, and ``skip`` in the chat."""
        optional = {
            "questions": [
                {
                    "question": "Which database?",
                    "options": [{"label": "pg"}, {"label": "lite"}],
                    "allowSkip": True,
                    "id": "db",
                },
                {"question": "Any notes?", "allowSkip": True, "id": "notes"},
            ]
        }
        results: list[ToolResult] = []
        async with connected(stack_agent(results, optional), capabilities=None) as acp:
            pending = acp.start_prompt()
            database = await acp.next_request(PERMISSION)
            (skip,) = [o for o in database.arguments["options"] if o.name == "Skip"]
            assert (skip.option_id, skip.kind) == ("_skip", "reject_once")
            database.answer(_selected("_skip"))
            assert (await pending.result()).stop_reason == "end_turn"
            assert "_(Reply `skip` to leave it unanswered.)_" in acp.client.said()
            await acp.prompt("Skip")
        assert results[0].output["answers"] == {}
        assert [q["skipped"] for q in results[0].output["questions"]] == ["skipped", "skipped"]


class FlagRelay(Relay):
    """A relay that takes several questions at once exactly when the ACP provider does."""

    @property
    def multiple_questions(self) -> bool:
        return self._acp.multiple_questions


@pytest.mark.parametrize("relay", [Relay, FlagRelay])
async def test_a_reload_keeps_the_answers_given_one_at_a_time(relay: type[Relay]) -> None:
    """The questions go one after the other (no form) through a relay provider module
    (which passes the ACP provider's multiple_questions on, or has none); the module is
    reloaded while the second question is open: the second is asked again on the new
    generation, the first never is, and the ask gets both answers once."""
    reloading = Reloading(relay)
    results: list[ToolResult] = []
    two = {"questions": STACK["questions"][:2]}
    async with connected(
        stack_agent(results, two),
        context=reloading.agent_context,
        provider=reloading.provider,
        capabilities=None,
    ) as acp:
        pending = acp.start_prompt()
        (await acp.next_request(PERMISSION)).answer(_selected("Postgres"))
        old = await acp.next_request(PERMISSION)
        await reloading.reload()
        new = await acp.next_request(PERMISSION)
        new.answer(_selected("Search"))
        assert (await pending.result()).stop_reason == "end_turn"
        asked = acp.client_wire.messages("incoming", PERMISSION)
        titles = [m["params"]["toolCall"]["title"] for m in asked]
        assert titles == [
            "Storage: Which database?",
            "Features: Which features?",
            "Features: Which features?",
        ]
        assert acp.client.cancelled == [asked[1]["id"]]  # the open one withdrawn, once
        old.answer({"outcome": {"outcome": "cancelled"}})  # the client's acknowledgement
    assert _values(results[0]) == [["Postgres"], ["Search"]]
    assert acp.client.said() == "q1: Postgres\nq2: Search\n"
