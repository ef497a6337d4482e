"""Several questions in one ask: the types, their helpers, validation, answers, JSON forms.

Every rule of a request of several questions and of its answer has a case here that names
the field (``questions[2].options[1].label is blank``) or the question
(``questions[1] (Which features?)``); the JSON forms round-trip for any valid request and
answer (Hypothesis), and the seed's one-question shapes keep their exact forms.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hotseam import Agent
from hotseam.interaction import (
    INVALID_ANSWER,
    INVALID_REQUEST,
    MAX_QUESTIONS,
    AskUserQuestionAnswer,
    AskUserQuestionInput,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    QuestionAnswer,
    UserInteractionError,
    check_answer,
    check_partial_answer,
    check_question_answer,
    validate_request,
)
from hotseam.interaction._journal import question_digest

Option = AskUserQuestionOption
Request = AskUserQuestionRequest

DB = Question(
    "Which database?",
    "Database",
    [Option("Postgres", "pg", recommended=True), Option("SQLite")],
    allow_custom=False,
)
FEATURES = Question(
    "Which features?",
    "Features",
    [Option("Auth", "auth"), Option("Billing", "billing"), Option("Search", "search")],
    multi_select=True,
    max_selections=2,
)
NOTES = Question("Anything else?", allow_skip=True)
THREE = validate_request(Request.of([DB, FEATURES, NOTES], agent=Agent("planner", "Planner")))
FEATURES_V = THREE.questions[1]


def _features(**changes: Any) -> Question:
    return replace(FEATURES, **changes)


def _invalid(request: object) -> str:
    with pytest.raises(UserInteractionError) as caught:
        validate_request(request)
    assert caught.value.code == INVALID_REQUEST
    return str(caught.value)


def _refused(answer: object, request: Request = THREE) -> str:
    with pytest.raises(UserInteractionError) as caught:
        check_answer(request, answer)
    assert caught.value.code == INVALID_ANSWER
    return str(caught.value)


class TestTypes:
    def test_a_seed_request_holds_its_one_question_as_q1(self) -> None:
        """`questions` is never empty: the top-level fields make question "q1"."""
        request = Request("Which database?", "Database", [Option("Postgres")], False)
        (item,) = request.questions
        assert item == Question("Which database?", "Database", (Option("Postgres"),), False, "q1")
        assert not request.is_multi_question
        assert validate_request(request).questions == request.questions

    def test_the_question_of_the_top_level_fields_follows_them(self) -> None:
        """dataclasses.replace of a top-level field is seen in `questions` too."""
        request = Request("Which database?", options=[Option("Postgres")])
        changed = replace(request, question="Which store?", options=None)
        assert changed.questions[0].question == "Which store?"
        assert changed.questions[0].is_free_form
        assert validate_request(changed) == changed

    def test_of_mirrors_the_first_question_and_keeps_them_all(self) -> None:
        """Code reading only the top-level fields sees the first question."""
        request = Request.of([DB, FEATURES, NOTES], agent=Agent("planner"))
        assert (request.question, request.header, request.choices, request.allow_custom) == (
            DB.question,
            DB.header,
            DB.choices,
            False,
        )
        assert request.questions == (DB, FEATURES, NOTES)
        assert request.is_multi_question and request.agent == Agent("planner")

    def test_the_top_level_fields_are_the_first_questions(self) -> None:
        """A request is its questions: the seed's fields, given beside `questions` (or
        through dataclasses.replace), set the first question's; there is nothing that could
        differ from it."""
        opts = [Option("x"), Option("y")]
        given = Request("A?", header="H", questions=[Question("Z?"), Question("B?")])
        assert given.questions[0] == Question("A?", "H") and given.header == "H"
        changed = replace(Request.of([Question("A?", options=opts), Question("B?")]), question="C?")
        assert changed.questions[0] == Question("C?", options=opts)
        assert changed.questions[1] == Question("B?")
        narrowed = replace(changed, options=opts[:1], allow_custom=False)
        assert narrowed.questions[0] == Question("C?", options=opts[:1], allow_custom=False)
        assert (narrowed.question, narrowed.choices, narrowed.allow_custom) == (
            "C?",
            (Option("x"),),
            False,
        )

    def test_one_plain_question_has_one_form(self) -> None:
        """of([Question(...)]) of a plain question is the seed's request, equal and alike."""
        assert Request.of([Question("Name?")]) == Request("Name?")
        assert Request.of([Question("Name?")]).to_dict() == {
            "question": "Name?",
            "allow_custom": True,
        }
        assert Request.of([Question("Name?", id="who")]) != Request("Name?")

    def test_validation_gives_ids_and_tuples(self) -> None:
        """Missing ids become q1, q2...; options become tuples."""
        assert [item.id for item in THREE.questions] == ["q1", "q2", "q3"]
        assert isinstance(THREE.questions[1].options, tuple)
        named = validate_request(Request.of([replace(DB, id="db"), FEATURES]))
        assert [item.id for item in named.questions] == ["db", "q2"]
        assert named.question_for("q2") == named.questions[1]
        assert named.question_for("nope") is None

    def test_split_asks_each_question_alone(self) -> None:
        """split(): one single-question request per question, same agent and signal."""
        parts = THREE.split()
        assert [part.questions for part in parts] == [(q,) for q in THREE.questions]
        assert all(part.agent == THREE.agent and not part.is_multi_question for part in parts)
        assert parts[1].question == "Which features?" and parts[1].choices == FEATURES_V.choices

    @pytest.mark.parametrize(
        ("reply", "named"),
        [
            ("Postgres", 0),
            ("  postgres ", 0),  # case and the spaces around
            ("pg", 0),  # the model-facing value
            ("PG (recommended)", 0),  # as a chat marks the recommended option
            ("Two  Words", 2),  # the spaces between words too
            ("2", 1),
            ("2.", 1),
            ("2)", 1),
            ("3", 2),
            ("4", None),  # no option 4
            ("0", None),
            ("", None),
            ("MySQL", None),
            ("beta", None),  # option 4's label is option 3's value: names neither
            ("1", 3),  # a name is tried before a number: option 4 is called "1"
        ],
    )
    def test_option_named_reads_a_reply_as_every_surface_does(
        self, reply: str, named: int | None
    ) -> None:
        """The one matcher (terminal, chat, scripts): label, value or number; ambiguous text
        picks no option."""
        options = [
            Option("Postgres", "pg", recommended=True),
            Option("SQLite"),
            Option("two words", "beta"),
            Option("Beta", "1"),
        ]
        question = Question("Which?", options=options[:3] if reply in ("4", "3") else options)
        found = question.option_named(reply)
        assert found is (None if named is None else question.choices[named])
        assert Request.of([question]).option_named(reply) is found

    def test_question_helpers(self) -> None:
        """The request's helpers, per question; recommended_options for multi-select."""
        marked = [Option("a", recommended=True), Option("b"), Option("c", recommended=True)]
        many = Question("Which?", options=marked, multi_select=True)
        assert many.recommended == Option("a", recommended=True)
        assert [o.label for o in many.recommended_options] == ["a", "c"]
        assert many.option_for("b") == Option("b") and many.option_for("B") is None
        assert NOTES.is_free_form and NOTES.accepts_custom and not NOTES.is_multi_select
        assert DB.choices == DB.options and not DB.accepts_custom
        assert Question("Q?", multi_select=True).is_multi_select is False  # nothing to pick

    @pytest.mark.parametrize(
        ("question", "selection_range", "hint"),
        [
            (DB, (1, 1), "pick one"),
            (replace(DB, allow_custom=True), (1, 1), "pick one, or type your own"),
            (NOTES, (1, 1), "type your answer; optional"),
            (FEATURES, (1, 2), "pick 1 to 2, or type your own"),
            (_features(max_selections=None), (1, 4), "pick one or more, or type your own"),
            (_features(max_selections=None, allow_custom=False), (1, 3), "pick one or more"),
            (_features(min_selections=0, allow_custom=False), (0, 2), "pick up to 2"),
            (
                _features(min_selections=0, max_selections=None, allow_custom=False),
                (0, 3),
                "pick any",
            ),
            (_features(min_selections=2, allow_custom=False), (2, 2), "pick 2"),
            (
                _features(min_selections=2, max_selections=None, allow_custom=False),
                (2, 3),
                "pick 2 or more",
            ),
        ],
    )
    def test_selection_range_and_hint(
        self, question: Question, selection_range: tuple[int, int], hint: str
    ) -> None:
        """How many selections an answer takes, and the one-line hint that says it."""
        assert question.selection_range == selection_range
        assert question.hint == hint

    def test_describe_is_one_line(self) -> None:
        """Header, the question with its whitespace collapsed, the hint."""
        assert DB.describe() == "Database: Which database? (pick one)"
        assert Question("Why\n  not?").describe() == "Why not? (type your answer)"


def _q(text: str = "Q?", **fields: Any) -> Question:
    return Question(text, **fields)


OPTS = [Option("a"), Option("b"), Option("c")]


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        pytest.param(
            Request.of([_q("A?"), _q("B?"), _q("C?", options=[Option("x"), Option(" ")])]),
            "questions[2].options[1].label is blank",
            id="blank-label",
        ),
        pytest.param(
            Request.of([_q("A?", id="db"), _q("B?", id="db")]),
            "questions[1].id duplicates questions[0].id",
            id="duplicate-id",
        ),
        pytest.param(
            Request.of([_q("A?", id="q2"), _q("B?")]),
            "questions[1].id is missing, and its default 'q2' is questions[0].id",
            id="default-id-taken",
        ),
        pytest.param(
            Request.of([_q("A?", id="the db"), _q("B?")]),
            "questions[0].id must be 1-64 letters, digits, '_', '-' or '.'",
            id="id-characters",
        ),
        pytest.param(
            Request.of([_q("A?"), _q("B?", id=7)]),
            "questions[1].id must be a string, got int",
            id="id-type",
        ),
        pytest.param(
            Request.of([_q(options=OPTS, multi_select=True, min_selections=3, max_selections=2)]),
            "questions[0].min_selections is 3, more than max_selections 2",
            id="min-over-max",
        ),
        pytest.param(
            Request.of([_q(options=OPTS, multi_select=True, min_selections=-1)]),
            "questions[0].min_selections is -1; it must be >= 0",
            id="negative-min",
        ),
        pytest.param(
            Request.of([_q(options=OPTS, multi_select=True, max_selections=0)]),
            "questions[0].max_selections is 0; it must be >= 1",
            id="zero-max",
        ),
        pytest.param(
            Request.of([_q(options=OPTS, multi_select=True, max_selections=4, allow_custom=False)]),
            "questions[0].max_selections is 4, but at most 3 can be chosen (3 options)",
            id="max-over-options",
        ),
        pytest.param(
            Request.of([_q(options=OPTS, multi_select=True, max_selections=5)]),
            "questions[0].max_selections is 5, but at most 4 can be chosen (3 options and a "
            "custom answer)",
            id="max-over-options-and-custom",
        ),
        pytest.param(
            Request.of([_q(options=OPTS, multi_select=True, min_selections=4, allow_custom=False)]),
            "questions[0].min_selections is 4, but at most 3 can be chosen",
            id="min-over-options",
        ),
        pytest.param(
            Request.of([_q(options=OPTS, max_selections=2)]),
            "questions[0].max_selections is only for a multi_select question",
            id="max-without-multi-select",
        ),
        pytest.param(
            Request.of([_q(options=OPTS, multi_select=True, min_selections=True)]),
            "questions[0].min_selections must be an int, got bool",
            id="min-type",
        ),
        pytest.param(
            Request.of([_q("A?"), _q("B?", multi_select=True)]),
            "questions[1].multi_select needs options to choose from",
            id="multi-select-without-options",
        ),
        pytest.param(
            Request.of(
                [
                    _q("A?"),
                    _q(options=[Option("a", recommended=True), Option("b", recommended=True)]),
                ]
            ),
            "questions[1].options[1].recommended is a second recommended option (options[0] "
            "already is)",
            id="two-recommended-single-select",
        ),
        pytest.param(
            Request.of(
                [
                    _q(
                        options=[Option(x, recommended=True) for x in "abc"],
                        multi_select=True,
                        max_selections=2,
                    )
                ]
            ),
            "questions[0].options[2].recommended is recommended option 3, but at most 2 can be "
            "chosen (max_selections)",
            id="recommended-over-max",
        ),
        pytest.param(
            Request.of([_q(f"Q{i}?") for i in range(MAX_QUESTIONS + 1)]),
            f"questions holds 9 questions; give 1 to {MAX_QUESTIONS}",
            id="too-many",
        ),
        pytest.param(
            Request.of([_q("Which one?"), _q("  which   ONE? ")]),
            "questions[1].question duplicates questions[0].question",
            id="duplicate-question-text",
        ),
        pytest.param(
            Request("A?", questions="A?, B?"),  # type: ignore[arg-type]
            "questions must be a list of questions, got str",
            id="questions-type",
        ),
        pytest.param(
            Request.of([_q("A?"), "B?"]),  # type: ignore[list-item]
            "questions[1] must be a Question, got str",
            id="item-type",
        ),
        pytest.param(
            Request.of([_q("A?"), _q("B?", options=OPTS, multi_select="yes")]),
            "questions[1].multi_select must be a bool, got str",
            id="flag-type",
        ),
        pytest.param(
            Request.of([_q("A?"), _q("B?", allow_skip=1)]),
            "questions[1].allow_skip must be a bool, got int",
            id="skip-type",
        ),
        pytest.param(
            Request.of([_q("A?"), _q(" ", header="")]),
            "questions[1].question is blank; questions[1].header is blank (leave it out instead)",
            id="blank-question-and-header",
        ),
        pytest.param(
            Request.of([_q("A?"), _q("B?", options="a, b")]),
            "questions[1].options must be a list of options, got str",
            id="options-type",
        ),
        pytest.param(
            Request.of([_q("A?"), _q("B?")], agent="planner"),  # type: ignore[arg-type]
            "agent must be an Agent, got str",
            id="agent-type",
        ),
    ],
)
def test_invalid_requests_name_the_field(request_: Request, message: str) -> None:
    """Each broken rule of a request of questions is INVALID_REQUEST naming the field."""
    assert message in _invalid(request_)


def test_every_problem_of_every_question_is_reported_at_once() -> None:
    """Problems are listed together, each with its field, in order."""
    with pytest.raises(UserInteractionError) as caught:
        validate_request(
            Request.of([_q("A?", id="x"), _q("", id="x"), _q("C?", options=[Option("")])])
        )
    fields = [error["field"] for error in caught.value.details["errors"]]
    assert fields == ["questions[1].question", "questions[1].id", "questions[2].options[0].label"]


def test_an_ask_of_no_questions_cannot_be_built() -> None:
    """of([]) is INVALID_REQUEST at once: there is no first question to mirror."""
    for nothing in ([], "Q?", [3]):
        with pytest.raises(UserInteractionError) as caught:
            Request.of(nothing)  # type: ignore[arg-type]
        assert caught.value.code == INVALID_REQUEST
        assert "questions" in str(caught.value)


def test_a_single_question_with_new_fields_is_checked_as_a_question() -> None:
    """One question may be multi-select too; its rules are those of questions[0]."""
    message = _invalid(Request.of([_q(options=OPTS, multi_select=True, max_selections=9)]))
    assert "questions[0].max_selections is 9" in message


def test_a_valid_request_of_questions_validates_again_unchanged() -> None:
    """Validation is idempotent."""
    assert validate_request(THREE) == THREE


class TestCheckAnswer:
    def _answer(self, *entries: QuestionAnswer) -> AskUserQuestionAnswer:
        return AskUserQuestionAnswer.of(entries)

    def _db(self) -> QuestionAnswer:
        return QuestionAnswer.chosen(THREE.questions[0], ["pg"])

    def _notes(self) -> QuestionAnswer:
        return QuestionAnswer.skip(THREE.questions[2])

    def test_a_complete_answer_is_normalized_and_summarized(self) -> None:
        """Entries in question order, options in option order, answer text recomputed."""
        features = QuestionAnswer(
            "q2", "whatever the UI wrote", (FEATURES.choices[2], FEATURES.choices[0])
        )
        checked = check_answer(THREE, self._answer(self._notes(), features, self._db()))
        assert [entry.id for entry in checked.answers] == ["q1", "q2", "q3"]
        assert checked.answers[1] == QuestionAnswer(
            "q2", "auth, search", (FEATURES.choices[0], FEATURES.choices[2])
        )
        assert checked.answer == (
            "Which database? pg\nWhich features? auth, search\nAnything else? (skipped)"
        )
        assert checked.option is None
        assert checked.for_question("q2") == checked.answers[1]
        assert check_answer(THREE, checked) == checked

    def test_custom_text_counts_as_one_selection(self) -> None:
        """One option plus custom text is two selections: fine with max_selections=2."""
        entry = QuestionAnswer.chosen(FEATURES_V, ["auth"], custom="Dark mode")
        checked = check_answer(THREE, self._answer(self._db(), entry, self._notes()))
        assert checked.answers[1].values == ("auth", "Dark mode")
        assert checked.answers[1].answer == "auth, Dark mode"
        too_many = QuestionAnswer.chosen(FEATURES_V, ["auth", "billing"], custom="Dark mode")
        message = _refused(self._answer(self._db(), too_many, self._notes()))
        assert "questions[1] (Which features?): 3 selections, but the question takes 1 to 2" in (
            message
        )
        assert "Dark mode" not in message  # never what the human typed

    @pytest.mark.parametrize(
        ("entries", "message"),
        [
            pytest.param(
                lambda s: [s._db(), s._notes()],
                "questions[1] (Which features?) has no answer",
                id="missing-question",
            ),
            pytest.param(
                lambda s: [s._db(), QuestionAnswer("q9", "x"), s._notes()],
                "answers[1].id names no question of the ask (its ids: 'q1', 'q2', 'q3')",
                id="unknown-id",
            ),
            pytest.param(
                lambda s: [s._db(), s._db(), s._notes()],
                "answers[1] answers questions[0] (Which database?) a second time",
                id="twice",
            ),
            pytest.param(
                lambda s: [QuestionAnswer.skip(THREE.questions[0]), s._notes()],
                "questions[0] (Which database?): was skipped, but the question does not allow "
                "skipping",
                id="skip-not-allowed",
            ),
            pytest.param(
                lambda s: [s._db(), QuestionAnswer("q3", None, skipped="later")],  # type: ignore[arg-type]
                "questions[2] (Anything else?): skipped must be one of 'skipped', 'dismissed'",
                id="skip-reason",
            ),
            pytest.param(
                lambda s: [s._db(), QuestionAnswer("q3", "x", custom="x", skipped="skipped")],
                "questions[2] (Anything else?): is skipped and answered at once",
                id="skipped-and-answered",
            ),
            pytest.param(
                lambda s: [s._db(), QuestionAnswer("q2", ""), s._notes()],
                "questions[1] (Which features?): 0 selections, but the question takes 1 to 2",
                id="too-few",
            ),
            pytest.param(
                lambda s: [QuestionAnswer("q1", None, (Option("MySQL"),))],
                "questions[0] (Which database?): options[0] is none of the question's options",
                id="value-not-offered",
            ),
            pytest.param(
                lambda s: [QuestionAnswer("q1", None, (), custom="MySQL")],
                "questions[0] (Which database?): a custom answer (of 5 characters) to a question "
                "that allows none",
                id="custom-not-allowed",
            ),
            pytest.param(
                lambda s: [QuestionAnswer("q1", None, DB.choices)],
                "questions[0] (Which database?): 2 selections, but the question takes exactly one",
                id="single-select-two-values",
            ),
            pytest.param(
                lambda s: [s._db(), QuestionAnswer("q2", None, (FEATURES.choices[0],) * 2)],
                "questions[1] (Which features?): options[1] chooses an option a second time",
                id="same-option-twice",
            ),
            pytest.param(
                lambda s: [s._db(), QuestionAnswer("q3", None, custom="  ")],
                "questions[2] (Anything else?): the custom answer is blank",
                id="blank-custom",
            ),
            pytest.param(
                lambda s: [s._db(), "auth", s._notes()],
                "answers[1] must be a QuestionAnswer, got str",
                id="entry-type",
            ),
        ],
    )
    def test_answers_that_do_not_fit_name_the_question(self, entries: Any, message: str) -> None:
        """INVALID_ANSWER naming the question, for each rule of an answer."""
        answer = AskUserQuestionAnswer("summary", answers=entries(self))
        assert message in _refused(answer)

    def test_one_text_for_several_questions_is_refused(self) -> None:
        """A one-question answer to an ask of three says what a provider must do."""
        message = _refused(AskUserQuestionAnswer("pg"))
        assert "an ask of 3 questions with one text" in message
        assert "multiple_questions" in message

    def test_a_text_answer_to_a_multi_select_question(self) -> None:
        """A one-question UI's text: one option, values joined by ',', or custom text."""
        request = validate_request(Request.of([FEATURES]))
        assert check_answer(request, AskUserQuestionAnswer("billing")).answers[0].values == (
            "billing",
        )
        both = check_answer(request, AskUserQuestionAnswer("search,auth"))
        assert both.answers[0].options == (FEATURES.choices[0], FEATURES.choices[2])
        assert (both.answer, both.option) == ("auth, search", None)
        custom = check_answer(request, AskUserQuestionAnswer("auth, dark mode"))
        assert custom.answers[0] == QuestionAnswer("q1", "auth, dark mode", (), "auth, dark mode")
        assert AskUserQuestionAnswer.from_dict(custom.to_dict()) == custom
        strict = validate_request(Request.of([replace(FEATURES, allow_custom=False)]))
        message = _refused(AskUserQuestionAnswer("auth, secret plans"), strict)
        assert "questions[0] (Which features?): the answer is none of the options" in message
        assert "secret plans" not in message

    def test_a_single_multi_select_answer_names_its_option_only_when_one(self) -> None:
        """`option` is the one option chosen; None for several or for custom text."""
        request = validate_request(Request.of([FEATURES]))
        entry = QuestionAnswer.chosen(request.questions[0], ["auth"])
        one = check_answer(request, AskUserQuestionAnswer.of([entry]))
        assert (one.answer, one.option) == ("auth", FEATURES.choices[0])
        assert one.to_dict() == {"answer": "auth", "option": {"label": "Auth", "value": "auth"}}
        two = check_answer(request, AskUserQuestionAnswer("auth,billing"))
        assert (two.answer, two.option) == ("auth, billing", None)
        assert two.to_dict()["answers"] == [
            {
                "id": "q1",
                "answer": "auth, billing",
                "options": [
                    {"label": "Auth", "value": "auth"},
                    {"label": "Billing", "value": "billing"},
                ],
            }
        ]

    def test_a_skipped_only_question(self) -> None:
        """A request of one skippable question answered with a skip: answer ""."""
        request = validate_request(Request.of([NOTES]))
        skipped = check_answer(
            request,
            AskUserQuestionAnswer.of([QuestionAnswer.skip(request.questions[0], "dismissed")]),
        )
        assert (skipped.answer, skipped.option) == ("", None)
        assert skipped.answers[0].skipped == "dismissed" and skipped.answers[0].values == ()

    def test_an_empty_selection_when_min_selections_is_zero(self) -> None:
        """min_selections=0: nothing chosen is an answer ("") and reads "(none)"."""
        none_ok = replace(FEATURES, min_selections=0)
        request = validate_request(Request.of([DB, none_ok]))
        checked = check_answer(
            request,
            AskUserQuestionAnswer.of(
                [
                    QuestionAnswer.chosen(request.questions[0], ["SQLite"]),
                    QuestionAnswer.chosen(request.questions[1]),
                ]
            ),
        )
        assert checked.answers[1].answer == "" and checked.answer.endswith("Which features? (none)")

    def test_the_seed_shape_is_unchanged(self) -> None:
        """A one-question request answered with text: the same object, or option filled."""
        postgres = Option("Postgres", "pg")
        request = Request("DB?", options=[postgres], allow_custom=False)
        same = AskUserQuestionAnswer("pg", postgres)
        assert check_answer(request, same) is same
        assert check_answer(request, AskUserQuestionAnswer("pg")) == same
        assert same.answers == (QuestionAnswer("q1", "pg", (Option("Postgres", "pg"),)),)
        assert same.to_dict() == {"answer": "pg", "option": {"label": "Postgres", "value": "pg"}}

    def test_entries_by_a_provider_to_a_seed_request(self) -> None:
        """A provider that builds entries may answer a one-question request too."""
        request = validate_request(Request("DB?", options=[Option("Postgres", "pg")]))
        entry = QuestionAnswer.chosen(request.questions[0], ["pg"])
        answer = check_answer(request, AskUserQuestionAnswer.of([entry], request))
        assert answer == AskUserQuestionAnswer("pg", Option("Postgres", "pg"))

    def test_the_entry_of_an_answer_follows_its_fields(self) -> None:
        """dataclasses.replace of `answer` is seen in `answers` too."""
        answer = replace(AskUserQuestionAnswer("teal"), answer="blue")
        assert answer.answers == (QuestionAnswer("q1", "blue", (), "blue"),)


class TestEntryHelpers:
    def test_chosen_orders_and_matches_values(self) -> None:
        """Options or model values, any order; blank custom text is none."""
        entry = QuestionAnswer.chosen(FEATURES_V, ["search", FEATURES.choices[0]], custom=" ")
        assert entry == QuestionAnswer(
            "q2", "auth, search", (FEATURES.choices[0], FEATURES.choices[2]), None
        )
        assert entry.values == ("auth", "search")

    def test_chosen_refuses_what_is_not_offered(self) -> None:
        """INVALID_ANSWER naming the question; an unvalidated question is a ValueError."""
        with pytest.raises(UserInteractionError, match=r"questions\[\?\] \(Which features\?\)"):
            QuestionAnswer.chosen(FEATURES_V, ["MySQL"])
        with pytest.raises(ValueError, match="no id"):
            QuestionAnswer.chosen(FEATURES, ["auth"])
        with pytest.raises(ValueError, match="no id"):
            QuestionAnswer.skip(NOTES)

    def test_check_question_answer_alone(self) -> None:
        """One entry against one question, named by its index."""
        assert check_question_answer(FEATURES_V, QuestionAnswer("q2", "auth")).options == (
            FEATURES.choices[0],
        )
        with pytest.raises(UserInteractionError, match=r"^questions\[1\] \(Which features\?\)"):
            check_question_answer(FEATURES_V, QuestionAnswer("q2", ""), index=1)

    def test_a_partial_answer(self) -> None:
        """Any subset of the questions, checked and in question order; no duplicates."""
        notes = QuestionAnswer("q3", "Ship it on Friday")
        db = QuestionAnswer("q1", "pg")
        assert check_partial_answer(THREE, [notes, db]) == (
            QuestionAnswer("q1", "pg", (DB.choices[0],)),
            QuestionAnswer("q3", "Ship it on Friday", (), "Ship it on Friday"),
        )
        assert check_partial_answer(THREE, []) == ()
        with pytest.raises(UserInteractionError, match="a second time"):
            check_partial_answer(THREE, [db, db])
        with pytest.raises(UserInteractionError, match="takes exactly one"):
            check_partial_answer(THREE, [QuestionAnswer("q1", None, DB.choices)])


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
        assert caught.value.code == INVALID_REQUEST
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
        assert caught.value.code == INVALID_ANSWER
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
    parsed = AskUserQuestionInput.model_validate(tool_input).to_request(agent=valid.agent)
    assert validate_request(parsed) == valid
    assert question_digest(back) == question_digest(valid)
    entries = [_entry(data.draw, item) for item in valid.questions]
    answer = check_answer(valid, AskUserQuestionAnswer.of(reversed(entries)))
    assert [entry.id for entry in answer.answers] == [item.id for item in valid.questions]
    assert check_answer(valid, answer) == answer
    assert AskUserQuestionAnswer.from_dict(json.loads(json.dumps(answer.to_dict()))) == answer
