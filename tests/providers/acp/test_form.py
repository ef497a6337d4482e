"""A question as an elicitation form, and the client's result read back: pure, no loop."""

from __future__ import annotations

from typing import Any

import pytest
from acp.schema import ClientCapabilities, CreateFormSessionElicitationRequest
from acp.utils import serialize_params

from hotseam.interaction import (
    ASK_CANCELLED,
    ASK_DECLINED,
    INVALID_ANSWER,
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    UserInteractionError,
)
from hotseam.providers._acp._form import EmptyAnswerError, build_form
from hotseam.providers.acp import AcpProvider

PG = AskUserQuestionOption("Postgres", "pg", "Server database", recommended=True)
SQLITE = AskUserQuestionOption("SQLite", description="One file")
DUCK = AskUserQuestionOption("DuckDB")
DB = AskUserQuestionRequest("Which database?", "Storage", (PG, SQLITE, DUCK))
DB_STRICT = AskUserQuestionRequest("Which database?", "Storage", (PG, SQLITE), allow_custom=False)
NAME = AskUserQuestionRequest("What is your name?")


class TestSchema:
    def test_options_with_custom_answers(self) -> None:
        """Titled oneOf (const = value), recommended as default and in its title, + Other."""
        assert build_form(DB).requested_schema() == {
            "type": "object",
            "title": "Storage",
            "properties": {
                "answer": {
                    "type": "string",
                    "title": "Choice",
                    "default": "pg",
                    "oneOf": [
                        {
                            "const": "pg",
                            "title": "Postgres (Recommended)",
                            "description": "Server database",
                        },
                        {"const": "SQLite", "title": "SQLite", "description": "One file"},
                        {"const": "DuckDB", "title": "DuckDB"},
                        {"const": "_other", "title": "Other (type it below)"},
                    ],
                },
                "custom": {
                    "type": "string",
                    "title": "Other",
                    "description": (
                        "Your own answer instead of a choice; when filled in, it is used."
                    ),
                },
            },
            "required": ["answer"],
        }

    def test_the_choice_is_required_even_with_custom_answers(self) -> None:
        """Shaped so that a client honouring ``required`` (Zed) cannot send an empty form:
        with nothing recommended, nothing is preselected, yet something must be chosen."""
        request = AskUserQuestionRequest("Which?", options=(SQLITE, DUCK))
        schema = build_form(request).requested_schema()
        assert schema["required"] == ["answer"]
        assert "default" not in schema["properties"]["answer"]

    def test_other_never_collides_with_an_option(self) -> None:
        """An option whose value is "_other" keeps its meaning; "Other" gets another const."""
        taken = AskUserQuestionOption("Mine", "_other")
        request = AskUserQuestionRequest("Which?", options=(taken, DUCK))
        form = build_form(request)
        consts = [o["const"] for o in form.requested_schema()["properties"]["answer"]["oneOf"]]
        assert consts == ["_other", "DuckDB", "_other_"]
        assert form.read(_accept({"answer": "_other"})) == AskUserQuestionAnswer("_other", taken)
        with pytest.raises(EmptyAnswerError):
            form.read(_accept({"answer": "_other_"}))

    def test_options_without_custom_answers_require_a_choice(self) -> None:
        """No free-text field, and the choice is required."""
        schema = build_form(DB_STRICT).requested_schema()
        assert list(schema["properties"]) == ["answer"]
        assert schema["required"] == ["answer"]

    def test_no_recommendation_means_no_default(self) -> None:
        """Nothing is pre-selected on the human's behalf."""
        request = AskUserQuestionRequest("Which?", options=(SQLITE, DUCK))
        answer = build_form(request).requested_schema()["properties"]["answer"]
        assert "default" not in answer
        assert [o["title"] for o in answer["oneOf"]] == [
            "SQLite",
            "DuckDB",
            "Other (type it below)",
        ]

    def test_free_form_is_one_required_string(self) -> None:
        """A question without options: a single required, non-empty string."""
        assert build_form(NAME).requested_schema() == {
            "type": "object",
            "properties": {"answer": {"type": "string", "title": "Answer", "minLength": 1}},
            "required": ["answer"],
        }

    def test_free_form_even_when_custom_answers_are_off(self) -> None:
        """No options means free-form input, whatever allow_custom says."""
        request = AskUserQuestionRequest("Why?", allow_custom=False)
        assert build_form(request).requested_schema()["required"] == ["answer"]

    def test_params_are_scoped_to_the_session_and_tool_call(self) -> None:
        """message = question; sessionId, toolCallId and mode at the top level."""
        params = build_form(DB).params("sess_1", "tc_1")
        assert {k: v for k, v in params.items() if k != "requestedSchema"} == {
            "sessionId": "sess_1",
            "toolCallId": "tc_1",
            "mode": "form",
            "message": "Which database?",
        }
        assert params["requestedSchema"]["type"] == "object"
        assert "toolCallId" not in build_form(DB).params("sess_1")

    def test_params_validate_as_the_sdk_request(self) -> None:
        """What is sent is a valid ACP CreateFormSessionElicitationRequest."""
        params = build_form(DB).params("sess_1", "tc_1")
        parsed = CreateFormSessionElicitationRequest.model_validate(params)
        assert parsed.requested_schema.properties is not None
        assert parsed.requested_schema.properties["answer"].default == "pg"  # type: ignore[union-attr]

    def test_the_sdk_serializer_drops_type_object(self) -> None:
        """The defect wrapped: SDK 0.12.1's serialize_params loses "type": "object".

        If this starts failing, the SDK fixed it and the raw send can be reconsidered.
        """
        params = build_form(DB).params("sess_1")
        model = CreateFormSessionElicitationRequest.model_validate(params)
        assert "type" not in serialize_params(model)["requestedSchema"]


def _accept(content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


class TestRead:
    def test_a_chosen_option(self) -> None:
        """The option's model value is the answer, the option is its metadata."""
        assert build_form(DB).read(_accept({"answer": "pg"})) == AskUserQuestionAnswer("pg", PG)

    def test_custom_text_wins_over_the_choice(self) -> None:
        """Filled custom text is the answer even when an option is selected too."""
        answer = build_form(DB).read(_accept({"answer": "pg", "custom": "  MariaDB "}))
        assert answer == AskUserQuestionAnswer("MariaDB")

    def test_custom_text_alone(self) -> None:
        """No choice, just text."""
        assert build_form(DB).read(_accept({"custom": "MariaDB"})).answer == "MariaDB"

    def test_blank_custom_text_falls_back_to_the_choice(self) -> None:
        """Clients often send an untouched field as an empty string."""
        answer = build_form(DB).read(_accept({"answer": "SQLite", "custom": "  "}))
        assert answer == AskUserQuestionAnswer("SQLite", SQLITE)

    def test_free_form(self) -> None:
        """The text, trimmed."""
        assert build_form(NAME).read(_accept({"answer": " Ada "})) == AskUserQuestionAnswer("Ada")

    def test_extra_keys_in_the_result_are_ignored(self) -> None:
        """_meta and future fields of the result are not content."""
        result = {"action": "accept", "content": {"answer": "pg"}, "_meta": {"x": 1}}
        assert build_form(DB).read(result).answer == "pg"

    def test_decline(self) -> None:
        """decline → ASK_DECLINED."""
        with pytest.raises(UserInteractionError) as caught:
            build_form(DB).read({"action": "decline"})
        assert caught.value.code == ASK_DECLINED

    def test_cancel(self) -> None:
        """cancel → ASK_CANCELLED."""
        with pytest.raises(UserInteractionError) as caught:
            build_form(DB).read({"action": "cancel"})
        assert caught.value.code == ASK_CANCELLED

    @pytest.mark.parametrize(
        ("request_", "result", "message"),
        [
            (DB, ["accept"], "result must be an object, got array"),
            (DB, {"content": {"answer": "pg"}}, "action is missing (expected accept"),
            (DB, {"action": 1}, "action must be a string, got number"),
            (DB, {"action": "maybe"}, "action unknown action 'maybe' is not understood"),
            (DB, {"action": "_ext"}, "action custom action '_ext' is not understood"),
            (DB, _accept("pg"), "content must be an object, got string"),
            (DB, _accept({"answer": 2}), "content.answer must be a string, got number"),
            (DB, _accept({"answer": "pg", "custom": True}), "content.custom must be a string"),
            (
                DB,
                _accept({"answer": "pg", "colour": "red"}),
                "content.colour was not asked for (the form asks for 'answer', 'custom')",
            ),
            (DB_STRICT, _accept({"custom": "MariaDB"}), "content.custom was not asked for"),
            (
                DB,
                _accept({"answer": "Postgres"}),
                "content.answer is none of the options ('pg', 'SQLite', 'DuckDB') (a value of "
                "8 characters)",
            ),
            (NAME, _accept({"answer": ["a"]}), "content.answer must be a string, got array"),
        ],
    )
    def test_what_does_not_fit_is_named(
        self, request_: AskUserQuestionRequest, result: Any, message: str
    ) -> None:
        """INVALID_ANSWER saying which field is wrong, and how."""
        with pytest.raises(UserInteractionError) as caught:
            build_form(request_).read(result)
        assert caught.value.code == INVALID_ANSWER
        assert message in caught.value.message
        assert caught.value.message.startswith("the ACP client's answer does not fit the question")

    @pytest.mark.parametrize(
        ("request_", "result"),
        [
            (DB, _accept({})),
            (DB, {"action": "accept"}),
            (DB, _accept({"custom": "  "})),
            (DB, _accept({"answer": "_other"})),
            (DB, _accept({"answer": "_other", "custom": ""})),
            (DB_STRICT, _accept({"answer": ""})),
            (NAME, _accept(None)),
            (NAME, _accept({"answer": "  "})),
        ],
    )
    def test_a_schema_valid_but_empty_answer_is_not_an_error(
        self, request_: AskUserQuestionRequest, result: Any
    ) -> None:
        """Nothing chosen, nothing typed (what Zed's validator lets through when nothing is
        required): EmptyAnswerError, which the provider asks again, not INVALID_ANSWER."""
        with pytest.raises(EmptyAnswerError):
            build_form(request_).read(result)

    def test_other_with_text_is_the_text(self) -> None:
        """Choosing "Other" and typing: the typed text."""
        assert build_form(DB).read(_accept({"answer": "_other", "custom": "Mongo"})).answer == (
            "Mongo"
        )

    def test_every_problem_is_named_at_once(self) -> None:
        """Several problems → one error listing all of them, also as details."""
        with pytest.raises(UserInteractionError) as caught:
            build_form(DB).read(_accept({"answer": 3, "custom": 4, "extra": "x"}))
        fields = [error["field"] for error in caught.value.details["errors"]]
        assert fields == ["content.extra", "content.answer", "content.custom"]


class TestCapabilities:
    @pytest.mark.parametrize(
        ("advertised", "supported"),
        [
            ({"elicitation": {"form": {}}}, True),
            ({"elicitation": {"form": {}, "url": {}}}, True),
            ({"elicitation": {"form": {"_meta": {"x": 1}}}}, True),
            ({"elicitation": {}}, False),
            ({"elicitation": {"form": None, "url": None}}, False),
            ({"elicitation": {"url": {}}}, False),
            ({"elicitation": None}, False),
            ({}, False),
        ],
    )
    def test_form_only_when_present_and_not_null(
        self, advertised: dict[str, Any], supported: bool
    ) -> None:
        """ACP v1: {} and {"form": null} advertise no mode (unlike MCP's empty capability)."""
        provider = AcpProvider()
        provider.set_client_capabilities(ClientCapabilities.model_validate(advertised))
        assert provider.supports_form is supported

    def test_nothing_before_initialize(self) -> None:
        """No capabilities known → no form elicitation."""
        assert AcpProvider().supports_form is False
