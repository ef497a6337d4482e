"""The request model: a request is its questions; the seed's one-question vocabulary builds
and reads one. Every rule has a case here that names the field (``options[2].value`` for the
seed's one question, ``questions[2].options[1].label`` for any other), and the one option
matcher every surface uses (``Question.option_named``) is specified here."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from hotseam import Agent
from hotseam.interaction import (
    MAX_QUESTIONS,
    AskUserQuestionAnswer,
    ErrorCode,
    Question,
    UserInteractionError,
    check_answer,
    validate_request,
)

from ._model_support import (
    DB,
    FEATURES,
    FEATURES_V,
    NOTES,
    THREE,
    VALID_OPTIONS,
    Option,
    Request,
    features,
    invalid,
)


class TestSeedVocabulary:
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
def test_invalid_seed_requests_name_the_field(request_: Request, message: str) -> None:
    """Each broken rule is INVALID_REQUEST with a message naming the field."""
    with pytest.raises(UserInteractionError) as caught:
        validate_request(request_)
    assert caught.value.code == ErrorCode.INVALID_REQUEST
    assert message in str(caught.value)


def test_every_problem_of_a_seed_request_is_reported_at_once() -> None:
    """Several broken rules are listed together, each with its field."""
    with pytest.raises(UserInteractionError) as caught:
        validate_request(Request("", options=[Option(""), Option("b", value="")]))
    fields = [error["field"] for error in caught.value.details["errors"]]
    assert fields == ["question", "options[0].label", "options[1].value"]


def test_a_valid_request_passes_unchanged() -> None:
    """Validation returns the same request when nothing needs normalizing."""
    request = Request("Which database?", "Storage", tuple(VALID_OPTIONS))
    assert validate_request(request) is request


class TestTypes:
    def test_a_seed_request_holds_its_one_question_as_q1(self) -> None:
        """`questions` is never empty: the top-level fields make question "q1"."""
        request = Request("Which database?", "Database", [Option("Postgres")], False)
        (item,) = request.questions
        assert item == Question("Which database?", "Database", (Option("Postgres"),), False, "q1")
        assert len(request.questions) == 1
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
        assert request.agent == Agent("planner")

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

    def test_parts_ask_each_question_alone(self) -> None:
        """parts(): one single-question request per question, same agent and signal."""
        parts = THREE.parts()
        assert [part.questions for part in parts] == [(q,) for q in THREE.questions]
        assert all(part.agent == THREE.agent for part in parts)
        assert parts[1].question == "Which features?" and parts[1].choices == FEATURES_V.choices

    def test_parts_leave_out_what_is_answered(self) -> None:
        """parts(answered): the questions not answered yet, one by one or together."""
        parts = THREE.parts({"q1"})
        assert [part.questions for part in parts] == [(q,) for q in THREE.questions[1:]]
        (rest,) = THREE.parts({"q2"}, together=True)
        assert rest.questions == (THREE.questions[0], THREE.questions[2])
        assert rest.agent == THREE.agent and rest.signal is THREE.signal
        assert THREE.parts({"q1", "q2", "q3"}) == THREE.parts({"q1", "q2", "q3"}, together=True)
        assert THREE.parts({"q1", "q2", "q3"}) == ()

    def test_a_part_of_every_question_is_the_request_itself(self) -> None:
        """Nothing answered, asked together, or a request of one question: its one part is
        the request (so its answer is the whole request's, checked as such)."""
        one = validate_request(Request("Which database?", options=[Option("Postgres")]))
        for request, together in ((THREE, True), (one, True), (one, False)):
            (part,) = request.parts(together=together)
            assert part is request
        assert THREE.parts()[0] is not THREE

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
            (features(max_selections=None), (1, 4), "pick one or more, or type your own"),
            (features(max_selections=None, allow_custom=False), (1, 3), "pick one or more"),
            (features(min_selections=0, allow_custom=False), (0, 2), "pick up to 2"),
            (
                features(min_selections=0, max_selections=None, allow_custom=False),
                (0, 3),
                "pick any",
            ),
            (features(min_selections=2, allow_custom=False), (2, 2), "pick 2"),
            (
                features(min_selections=2, max_selections=None, allow_custom=False),
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
    assert message in invalid(request_)


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
        assert caught.value.code == ErrorCode.INVALID_REQUEST
        assert "questions" in str(caught.value)


def test_a_single_question_with_new_fields_is_checked_as_a_question() -> None:
    """One question may be multi-select too; its rules are those of questions[0]."""
    message = invalid(Request.of([_q(options=OPTS, multi_select=True, max_selections=9)]))
    assert "questions[0].max_selections is 9" in message


def test_a_valid_request_of_questions_validates_again_unchanged() -> None:
    """Validation is idempotent."""
    assert validate_request(THREE) == THREE
