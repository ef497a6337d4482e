"""The JSON forms of the request and the answer: the seed's one-question forms exactly, any
other with its questions and entries, and a round trip for any valid request and answer
(Hypothesis)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hotseam import AbortController, Agent
from hotseam.interaction import (
    MAX_QUESTIONS,
    AskUserQuestionAnswer,
    AskUserQuestionInput,
    ErrorCode,
    Question,
    QuestionAnswer,
    UserInteractionError,
    check_answer,
    validate_request,
)
from hotseam.interaction._journal import question_digest

from ._model_support import (
    DB,
    FEATURES,
    FEATURES_V,
    NOTES,
    THREE,
    VALID_OPTIONS,
    Option,
    Request,
)


class TestSeedJson:
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
        assert caught.value.code == ErrorCode.INVALID_REQUEST
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
        assert caught.value.code == ErrorCode.INVALID_ANSWER


class TestJsonForms:
    def test_a_seed_request_keeps_its_exact_dict_and_digest(self) -> None:
        """No `questions` key for one plain question: journals written before replay."""
        request = validate_request(
            Request("Which region?", "Region", [Option("Europe", "eu")], False, Agent("d", "D"))
        )
        legacy = {
            "question": "Which region?",
            "header": "Region",
            "options": [{"label": "Europe", "value": "eu"}],
            "allow_custom": False,
        }
        assert request.to_dict() == {**legacy, "agent": {"id": "d", "name": "D"}}
        canonical = json.dumps(legacy, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert question_digest(request) == hashlib.sha256(canonical.encode()).hexdigest()

    def test_the_digest_covers_every_question(self) -> None:
        """Changing the third question, or a selection bound, changes the digest."""
        digest = question_digest(THREE)
        reworded = Request.of([DB, FEATURES, replace(NOTES, question="Anything more?")])
        bounded = Request.of([DB, replace(FEATURES, max_selections=3), NOTES])
        named = Request.of([DB, FEATURES, replace(NOTES, id="notes")])
        assert (
            len({digest, *map(question_digest, map(validate_request, (reworded, bounded, named)))})
            == 4
        )
        assert question_digest(validate_request(Request.of([DB, FEATURES, NOTES]))) == digest

    def test_a_request_of_questions_round_trips(self) -> None:
        """to_dict (snake or camel) then from_dict: the same validated request."""
        for camel in (False, True):
            data = json.loads(json.dumps(THREE.to_dict(camel_case=camel)))
            assert validate_request(Request.from_dict(data)) == THREE
        camel = THREE.to_dict(camel_case=True)["questions"][1]
        assert camel == {
            "question": "Which features?",
            "id": "q2",
            "header": "Features",
            "options": [
                {"label": "Auth", "value": "auth"},
                {"label": "Billing", "value": "billing"},
                {"label": "Search", "value": "search"},
            ],
            "allowCustom": True,
            "multiSelect": True,
            "maxSelections": 2,
        }

    def test_dict_input_with_questions_only_mirrors_the_first(self) -> None:
        """{"questions": [...]} alone is a request; top-level fields come from the first."""
        request = Request.from_dict({"questions": [{"question": "A?"}, {"question": "B?"}]})
        assert request.question == "A?" and len(request.questions) == 2
        with pytest.raises(UserInteractionError, match=r"question: Field required \(or give"):
            Request.from_dict({"header": "x"})

    @pytest.mark.parametrize(
        ("data", "message"),
        [
            ({"questions": []}, "questions: List should have at least 1 item"),
            ({"questions": [{"question": "Q?"}] * 9}, "questions: List should have at most 8"),
            ({"questions": [{"question": "Q?", "multiSelect": "yes"}]}, "questions[0].multiSelect"),
            ({"questions": [{"question": "Q?", "preview": "x"}]}, "questions[0].preview: Extra"),
            ({"questions": [{"header": "x"}]}, "questions[0].question: Field required"),
            ({"questions": [{"question": "Q?", "minSelections": 1.5}]}, "minSelections"),
        ],
    )
    def test_from_dict_errors_name_the_field(self, data: dict[str, Any], message: str) -> None:
        """Wrong shapes of `questions` are INVALID_REQUEST naming the field."""
        with pytest.raises(UserInteractionError) as caught:
            Request.from_dict(data)
        assert caught.value.code == ErrorCode.INVALID_REQUEST
        assert message in str(caught.value)

    def test_an_answer_of_questions_round_trips(self) -> None:
        """to_dict/from_dict of a multi-question answer, skip and custom included."""
        answer = check_answer(
            THREE,
            AskUserQuestionAnswer.of(
                [
                    QuestionAnswer("q1", "SQLite"),
                    QuestionAnswer.chosen(FEATURES_V, ["billing"], "Dark mode"),
                    QuestionAnswer.skip(THREE.questions[2], "dismissed"),
                ]
            ),
        )
        data = json.loads(json.dumps(answer.to_dict()))
        assert data["answers"][2] == {
            "id": "q3", "answer": None, "options": [], "skipped": "dismissed"
        }  # fmt: skip
        assert AskUserQuestionAnswer.from_dict(data) == answer

    @pytest.mark.parametrize(
        ("data", "message"),
        [
            ({"answer": "x", "answers": []}, "'answers' must be a non-empty list"),
            ({"answer": "x", "answers": [{"answer": "y"}]}, "answers[0]: id: Field required"),
            (
                {"answer": "x", "answers": [{"id": "q1", "answer": None, "skipped": "later"}]},
                "answers[0]: skipped: Input should be 'skipped' or 'dismissed'",
            ),
        ],
    )
    def test_answer_from_dict_errors(self, data: dict[str, Any], message: str) -> None:
        """A malformed entry is INVALID_ANSWER naming it."""
        with pytest.raises(UserInteractionError) as caught:
            AskUserQuestionAnswer.from_dict(data)
        assert caught.value.code == ErrorCode.INVALID_ANSWER
        assert message in str(caught.value)


# -- any valid request and answer round-trips ------------------------------------------------

_WORD = st.text(st.sampled_from("abcdefgHIJ éß0123 ?"), min_size=1, max_size=10).filter(
    lambda text: text.strip() != ""
)


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


@st.composite
def _question(draw: st.DrawFn, text: str, index: int) -> Question:
    labels = draw(st.lists(_WORD, max_size=4, unique_by=lambda label: label.strip().casefold()))
    allow_custom = draw(st.booleans())
    multi = bool(labels) and draw(st.booleans())
    least = most = None
    if multi:
        possible = len(labels) + allow_custom
        least = draw(st.none() | st.integers(0, possible))
        most = draw(st.none() | st.integers(max(1, least or 0), possible))
    limit = (1 if not multi else (most or len(labels) + allow_custom)) if labels else 0
    recommended = draw(st.sets(st.integers(0, max(len(labels) - 1, 0)), max_size=limit))
    options = [
        Option(label, draw(st.none() | st.just(f"v{i}")), draw(st.none() | _WORD), i in recommended)
        for i, label in enumerate(labels)
    ]
    return Question(
        text,
        draw(st.none() | _WORD),
        options or draw(st.sampled_from([None, []])),
        allow_custom,
        draw(st.sampled_from([None, f"id-{index}"])),
        multi,
        least,
        most,
        draw(st.booleans()),
    )


@st.composite
def _requests(draw: st.DrawFn) -> Request:
    texts = draw(st.lists(_WORD, min_size=1, max_size=MAX_QUESTIONS, unique_by=_norm))
    items = [draw(_question(text, index)) for index, text in enumerate(texts)]
    return Request.of(items, agent=draw(st.none() | st.just(Agent("a", "An agent"))))


def _entry(draw: st.DrawFn, question: Question) -> QuestionAnswer:
    if question.allow_skip and draw(st.booleans()):
        return QuestionAnswer.skip(question, draw(st.sampled_from(["skipped", "dismissed"])))
    custom_slot = len(question.choices) if question.accepts_custom else None
    slots = list(range(len(question.choices))) + ([] if custom_slot is None else [custom_slot])
    least, most = question.selection_range
    picked = draw(st.lists(st.sampled_from(slots), min_size=least, max_size=most, unique=True))
    custom = draw(_WORD) if custom_slot in picked else None
    return QuestionAnswer.chosen(
        question, [question.choices[i] for i in picked if i != custom_slot], custom
    )


# 30 examples in `make test`, 120 in `make test-stress` (the profiles: tests/conftest.py).
@pytest.mark.examples
@settings(
    max_examples=settings.default.max_examples * 3 // 10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data(), request=_requests())
def test_any_valid_request_and_answer_round_trip_through_json(
    data: st.DataObject, request: Request
) -> None:
    """Validation accepts what the rules allow; every JSON form gives the same back."""
    valid = validate_request(request)
    assert validate_request(valid) == valid
    for camel in (False, True):
        back = Request.from_dict(json.loads(json.dumps(valid.to_dict(camel_case=camel))))
        assert validate_request(back) == valid
    tool_input = {k: v for k, v in valid.to_dict(camel_case=True).items() if k != "agent"}
    checked = AskUserQuestionInput.model_validate(tool_input)
    parsed = Request.from_input(checked, agent=valid.agent)
    assert validate_request(parsed) == valid
    assert question_digest(back) == question_digest(valid)
    entries = [_entry(data.draw, item) for item in valid.questions]
    answer = check_answer(valid, AskUserQuestionAnswer.of(reversed(entries)))
    assert [entry.id for entry in answer.answers] == [item.id for item in valid.questions]
    assert check_answer(valid, answer) == answer
    assert AskUserQuestionAnswer.from_dict(json.loads(json.dumps(answer.to_dict()))) == answer
