"""The request/answer model: the seed's rules, validation messages, JSON forms."""

from __future__ import annotations

from typing import Any

import pytest

from hotseam import AbortController, Agent
from hotseam.interaction import (
    INVALID_ANSWER,
    INVALID_REQUEST,
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    UserInteractionError,
    check_answer,
    validate_request,
)

Option = AskUserQuestionOption
Request = AskUserQuestionRequest


class TestSeedRules:
    def test_value_defaults_to_label(self) -> None:
        """An option without value gives its label to the model."""
        assert Option("Postgres").model_value == "Postgres"
        assert Option("Postgres", value="pg").model_value == "pg"

    def test_absent_options_mean_free_form(self) -> None:
        """No options: free-form, and custom text is accepted."""
        request = Request("What is your name?")
        assert request.is_free_form and request.accepts_custom

    def test_optionless_request_is_free_form_even_without_allow_custom(self) -> None:
        """allow_custom=False cannot constrain a question that has nothing to choose from."""
        request = Request("What is your name?", allow_custom=False)
        assert request.is_free_form and request.accepts_custom
        assert check_answer(request, AskUserQuestionAnswer("Ada")).answer == "Ada"

    def test_empty_options_count_as_no_options(self) -> None:
        """An empty list is normalized to free-form."""
        request = validate_request(Request("Name?", options=[], allow_custom=False))
        assert request.options is None and request.accepts_custom

    def test_allow_custom_defaults_to_true(self) -> None:
        """The seed's default."""
        assert Request("Q?", options=[Option("a")]).allow_custom is True

    def test_recommended_option_is_found(self) -> None:
        """The recommended option is the one marked."""
        request = Request("Q?", options=[Option("a"), Option("b", recommended=True)])
        assert request.recommended == Option("b", recommended=True)


VALID_OPTIONS = [Option("Postgres", "pg", "Server database", True), Option("SQLite")]


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        pytest.param(Request(""), "question is blank", id="blank-question"),
        pytest.param(Request("   \n"), "question is blank", id="whitespace-question"),
        pytest.param(Request(42), "question must be a string, got int", id="question-type"),  # type: ignore[arg-type]
        pytest.param(Request("Q?", header=" "), "header is blank", id="blank-header"),
        pytest.param(
            Request("Q?", options=[Option("a"), Option("")]),
            "options[1].label is blank",
            id="blank-label",
        ),
        pytest.param(
            Request("Q?", options=[Option("a"), Option(None)]),  # type: ignore[arg-type]
            "options[1].label is required",
            id="missing-label",
        ),
        pytest.param(
            Request("Q?", options=[Option("a", value="")]),
            "options[0].value is blank",
            id="blank-value",
        ),
        pytest.param(
            Request("Q?", options=[Option("Yes"), Option("no"), Option("YES")]),
            "options[2].label duplicates options[0].label",
            id="duplicate-label-case-insensitive",
        ),
        pytest.param(
            Request("Q?", options=[Option("a", "x"), Option("b"), Option("c", "x")]),
            "options[2].value duplicates options[0].value",
            id="duplicate-value",
        ),
        pytest.param(
            Request("Q?", options=[Option("x"), Option("b", value="x")]),
            "options[1].value duplicates options[0].value",
            id="value-equals-other-label",
        ),
        pytest.param(
            Request(
                "Q?",
                options=[Option("a"), Option("b", recommended=True), Option("c", recommended=True)],
            ),
            "options[2].recommended is a second recommended option (options[1] already is)",
            id="two-recommended",
        ),
        pytest.param(
            Request("Q?", options=[Option("a", recommended="yes")]),  # type: ignore[arg-type]
            "options[0].recommended must be a bool, got str",
            id="recommended-type",
        ),
        pytest.param(
            Request("Q?", options=["a"]),  # type: ignore[list-item]
            "options[0] must be an AskUserQuestionOption, got str",
            id="option-type",
        ),
        pytest.param(
            Request("Q?", options="a, b"),  # type: ignore[arg-type]
            "options must be a list of options, got str",
            id="options-type",
        ),
        pytest.param(
            Request("Q?", allow_custom="no"),  # type: ignore[arg-type]
            "allow_custom must be a bool, got str",
            id="allow-custom-type",
        ),
        pytest.param(
            Request("Q?", agent="planner"),  # type: ignore[arg-type]
            "agent must be an Agent, got str",
            id="agent-type",
        ),
        pytest.param(
            Request("Q?", options=[Option("a", description=3)]),  # type: ignore[arg-type]
            "options[0].description must be a string, got int",
            id="description-type",
        ),
    ],
)
def test_invalid_requests_name_the_field(request_: Request, message: str) -> None:
    """Each broken rule is INVALID_REQUEST with a message naming the field."""
    with pytest.raises(UserInteractionError) as caught:
        validate_request(request_)
    assert caught.value.code == INVALID_REQUEST
    assert message in str(caught.value)


def test_every_problem_is_reported_at_once() -> None:
    """Several broken rules are listed together, each with its field."""
    with pytest.raises(UserInteractionError) as caught:
        validate_request(Request("", options=[Option(""), Option("b", value="")]))
    fields = [error["field"] for error in caught.value.details["errors"]]
    assert fields == ["question", "options[0].label", "options[1].value"]


def test_a_valid_request_passes_unchanged() -> None:
    """Validation returns the same request when nothing needs normalizing."""
    request = Request("Which database?", "Storage", tuple(VALID_OPTIONS))
    assert validate_request(request) is request


class TestCheckAnswer:
    request = Request("DB?", options=VALID_OPTIONS, allow_custom=False)

    def test_option_is_filled_in_from_the_value(self) -> None:
        """A provider that returns only the text still yields the option as metadata."""
        answer = check_answer(self.request, AskUserQuestionAnswer("pg"))
        assert answer.option == VALID_OPTIONS[0]

    def test_a_wrong_option_is_corrected_to_match_the_answer(self) -> None:
        """`answer` is what counts; option metadata always matches it."""
        answer = check_answer(self.request, AskUserQuestionAnswer("SQLite", VALID_OPTIONS[0]))
        assert answer.option == VALID_OPTIONS[1]

    @pytest.mark.parametrize(
        ("answer", "message"),
        [
            (AskUserQuestionAnswer("MySQL"), "none of the options ('pg', 'SQLite')"),
            (AskUserQuestionAnswer("Postgres"), "none of the options"),  # label, not value
            (AskUserQuestionAnswer("  "), "blank answer"),
            ("pg", "returned str, not an AskUserQuestionAnswer"),
            (AskUserQuestionAnswer(3), "must be a string, got int"),  # type: ignore[arg-type]
        ],
    )
    def test_answers_that_break_the_contract(self, answer: Any, message: str) -> None:
        """INVALID_ANSWER: the model never sees an answer the question did not allow."""
        with pytest.raises(UserInteractionError) as caught:
            check_answer(self.request, answer)
        assert caught.value.code == INVALID_ANSWER
        assert message in str(caught.value)

    def test_custom_text_is_fine_when_allowed(self) -> None:
        """With allow_custom, any non-blank text is an answer without an option."""
        request = Request("DB?", options=VALID_OPTIONS)
        answer = check_answer(request, AskUserQuestionAnswer("MySQL"))
        assert answer == AskUserQuestionAnswer("MySQL", None)


class TestJson:
    def test_request_round_trip_and_camel_case_input(self) -> None:
        """to_dict/from_dict round-trip; camelCase and snake_case are both accepted."""
        request = Request("DB?", "Storage", VALID_OPTIONS, False, Agent("p", "Planner"))
        data = request.to_dict()
        assert data["allow_custom"] is False
        assert Request.from_dict(data) == Request(
            "DB?", "Storage", VALID_OPTIONS, False, Agent("p", "Planner")
        )
        camel = request.to_dict(camel_case=True)
        assert camel["allowCustom"] is False
        assert Request.from_dict(camel).allow_custom is False

    def test_from_dict_keeps_a_signal(self) -> None:
        """The signal is not JSON; it is passed separately."""
        signal = AbortController().signal
        assert Request.from_dict({"question": "Q?"}, signal=signal).signal is signal

    @pytest.mark.parametrize(
        ("data", "message"),
        [
            ({"header": "x"}, "question: Field required"),
            ({"question": 1}, "question: Input should be a valid string"),
            ({"question": "Q?", "options": [{"label": "a"}, {}]}, "options[1].label"),
            ({"question": "Q?", "allowCustom": "yes"}, "allowCustom: Input should be a valid"),
            ({"question": "Q?", "multiSelect": True}, "multiSelect: Extra inputs"),
            ({"question": "Q?", "agent": 7}, "agent must be a string id"),
        ],
    )
    def test_from_dict_errors_name_the_field(self, data: dict[str, Any], message: str) -> None:
        """Wrong types are INVALID_REQUEST naming the field."""
        with pytest.raises(UserInteractionError) as caught:
            Request.from_dict(data)
        assert caught.value.code == INVALID_REQUEST
        assert message in str(caught.value)

    def test_answer_round_trip(self) -> None:
        """The tool's output form converts back."""
        answer = AskUserQuestionAnswer("pg", VALID_OPTIONS[0])
        assert answer.to_dict() == {
            "answer": "pg",
            "option": {
                "label": "Postgres",
                "value": "pg",
                "description": "Server database",
                "recommended": True,
            },
        }
        assert AskUserQuestionAnswer.from_dict(answer.to_dict()) == answer
        assert AskUserQuestionAnswer.from_dict({"answer": "x", "option": None}).option is None

    def test_answer_from_dict_errors(self) -> None:
        """A malformed answer dict is INVALID_ANSWER."""
        with pytest.raises(UserInteractionError) as caught:
            AskUserQuestionAnswer.from_dict({"answer": 1})
        assert caught.value.code == INVALID_ANSWER
