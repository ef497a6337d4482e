"""An ask as a JSON-schema elicitation form, and the client's result read back: pure, no
loop (the surface kit's form, shared by ACP and MCP)."""

from __future__ import annotations

from typing import Any

import pytest

from hotseam.interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionInput,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ErrorCode,
    Question,
    QuestionAnswer,
    UserInteractionError,
    validate_request,
)
from hotseam.providers._kit import EmptyAnswerError, IncompleteAnswerError, build_form
from providers.acp.test_multi_question import STACK  # Claude Code's AskUserQuestion shape

PG = AskUserQuestionOption("Postgres", "pg", "Server database", recommended=True)
SQLITE = AskUserQuestionOption("SQLite", description="One file")
DUCK = AskUserQuestionOption("DuckDB")
DB = AskUserQuestionRequest("Which database?", "Storage", (PG, SQLITE, DUCK))
DB_STRICT = AskUserQuestionRequest("Which database?", "Storage", (PG, SQLITE), allow_custom=False)
NAME = AskUserQuestionRequest("What is your name?")


def _request(data: dict[str, Any]) -> AskUserQuestionRequest:
    checked = AskUserQuestionInput.model_validate(dict(data))
    return validate_request(AskUserQuestionRequest.from_input(checked))


class TestSchema:
    def test_options_with_custom_answers(self) -> None:
        """Titled oneOf (const = value), recommended as default and in its title, + Other."""
        assert build_form(DB).schema() == {
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
        schema = build_form(request).schema()
        assert schema["required"] == ["answer"]
        assert "default" not in schema["properties"]["answer"]

    def test_other_never_collides_with_an_option(self) -> None:
        """An option whose value is "_other" keeps its meaning; "Other" gets another const."""
        taken = AskUserQuestionOption("Mine", "_other")
        request = AskUserQuestionRequest("Which?", options=(taken, DUCK))
        form = build_form(request)
        consts = [o["const"] for o in form.schema()["properties"]["answer"]["oneOf"]]
        assert consts == ["_other", "DuckDB", "_other_"]
        assert form.read(_accept({"answer": "_other"})) == AskUserQuestionAnswer("_other", taken)
        with pytest.raises(EmptyAnswerError):
            form.read(_accept({"answer": "_other_"}))

    def test_options_without_custom_answers_require_a_choice(self) -> None:
        """No free-text field, and the choice is required."""
        schema = build_form(DB_STRICT).schema()
        assert list(schema["properties"]) == ["answer"]
        assert schema["required"] == ["answer"]

    def test_no_recommendation_means_no_default(self) -> None:
        """Nothing is pre-selected on the human's behalf."""
        request = AskUserQuestionRequest("Which?", options=(SQLITE, DUCK))
        answer = build_form(request).schema()["properties"]["answer"]
        assert "default" not in answer
        assert [o["title"] for o in answer["oneOf"]] == [
            "SQLite",
            "DuckDB",
            "Other (type it below)",
        ]

    def test_free_form_is_one_required_string(self) -> None:
        """A question without options: a single required, non-empty string."""
        assert build_form(NAME).schema() == {
            "type": "object",
            "properties": {"answer": {"type": "string", "title": "Answer", "minLength": 1}},
            "required": ["answer"],
        }

    def test_free_form_even_when_custom_answers_are_off(self) -> None:
        """No options means free-form input, whatever allow_custom says."""
        request = AskUserQuestionRequest("Why?", allow_custom=False)
        assert build_form(request).schema()["required"] == ["answer"]


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
        assert caught.value.code == ErrorCode.ASK_DECLINED

    def test_cancel(self) -> None:
        """cancel → ASK_CANCELLED."""
        with pytest.raises(UserInteractionError) as caught:
            build_form(DB).read({"action": "cancel"})
        assert caught.value.code == ErrorCode.ASK_CANCELLED

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
        assert caught.value.code == ErrorCode.INVALID_ANSWER
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


class TestSeveralQuestions:
    def test_min_and_max_selections(self) -> None:
        """minItems/maxItems are the question's selection range; "Other" counts as one, as
        a custom answer does; without custom answers the array holds the options only."""
        bounded = Question(
            "Which regions?",
            options=[AskUserQuestionOption(n, recommended=n in "euus") for n in ("eu", "us", "ap")],
            multi_select=True,
            min_selections=2,
            max_selections=2,
            allow_custom=False,
            id="regions",
        )
        loose = Question(
            "Which tags?",
            options=[AskUserQuestionOption("a"), AskUserQuestionOption("b")],
            multi_select=True,
            min_selections=0,
            id="tags",
        )
        form = build_form(validate_request(AskUserQuestionRequest.of([bounded, loose])))
        schema = form.schema()
        regions, tags = schema["properties"]["regions"], schema["properties"]["tags"]
        assert (regions["minItems"], regions["maxItems"], regions["default"]) == (
            2,
            2,
            ["eu", "us"],
        )
        assert [o["const"] for o in regions["items"]["anyOf"]] == ["eu", "us", "ap"]
        assert (tags["minItems"], tags["maxItems"]) == (0, 3)
        assert [o["const"] for o in tags["items"]["anyOf"]] == ["a", "b", "_other"]
        assert schema["required"] == ["regions"]  # an empty selection of tags is an answer
        answer = form.read(_accept({"regions": ["us", "eu"]}))
        assert [(e.id, e.values) for e in answer.answers] == [
            ("regions", ("eu", "us")),
            ("tags", ()),
        ]
        for chosen in (["eu"], ["eu", "us", "ap"]):
            with pytest.raises(IncompleteAnswerError) as caught:
                form.read(_accept({"regions": chosen, "tags": ["a"]}))
            assert caught.value.note == (
                f"Please answer every question: “Which regions?” has {len(chosen)} selected, "
                "but takes 2."
            )
            assert caught.value.given == {"tags": ["a"]}  # what fits, to pre-fill
            assert "questions[0] (Which regions?)" in caught.value.problems[0]

    def test_skipping_is_leaving_the_property_out(self) -> None:
        """allow_skip: not required; left out (or blank) → skipped; answered → the answer."""
        request = validate_request(
            AskUserQuestionRequest.of(
                [
                    Question("Which?", options=[AskUserQuestionOption("a")], id="which"),
                    Question("Any notes?", allow_skip=True, id="notes"),
                ]
            )
        )
        form = build_form(request)
        assert form.schema()["required"] == ["which"]
        skipped = form.read(_accept({"which": "a", "notes": " "}))
        assert skipped.answers[1] == QuestionAnswer("notes", None, skipped="skipped")
        assert form.read(_accept({"which": "a", "notes": "ok"})).answers[1].answer == "ok"

    @pytest.mark.parametrize(
        ("content", "message"),
        [
            ({"q1": "pg", "q2": ["Auth"], "q3": "x"}, "content.q1 is none of the options"),
            ({"q1": "SQLite", "q2": "Auth", "q3": "x"}, "content.q2 must be an array of strings"),
            ({"q1": "SQLite", "q2": ["Auth", 3], "q3": "x"}, "content.q2[1] must be a string"),
            (
                {"q1": "SQLite", "q2": ["Auth", "Secret"], "q3": "x"},
                "content.q2[1] is none of the options ('Auth', 'Billing', 'Search') (a value "
                "of 6 characters)",
            ),
            ({"q1": "SQLite", "q2": ["Auth"], "q3": 5}, "content.q3 must be a string"),
            ({"q1": "SQLite", "q2": ["Auth"], "q4": "x"}, "content.q4 was not asked for"),
        ],
    )
    def test_what_does_not_fit_is_named(self, content: dict[str, Any], message: str) -> None:
        """INVALID_ANSWER naming the field, the value described, never quoted."""
        with pytest.raises(UserInteractionError) as caught:
            build_form(_request(STACK)).read(_accept(content))
        assert caught.value.code == ErrorCode.INVALID_ANSWER
        assert message in caught.value.message
        assert "Secret" not in caught.value.message

    def test_nothing_at_all_is_an_empty_answer(self) -> None:
        """Nothing chosen or typed anywhere: asked again as a one-question form is."""
        for content in ({}, {"q1": "", "q2": [], "q3": " "}, {"q1": "_other", "q1_custom": ""}):
            with pytest.raises(EmptyAnswerError):
                build_form(_request(STACK)).read(_accept(content))
