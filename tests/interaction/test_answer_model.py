"""The answer model: the seed's ``AskUserQuestionAnswer(answer, option)``, one entry per
question, and the rules ``check_answer`` holds a provider's answer to, each refusal naming
the question (``questions[1] (Which features?)``) and never quoting what the human typed."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from hotseam.interaction import (
    AskUserQuestionAnswer,
    ErrorCode,
    QuestionAnswer,
    UserInteractionError,
    check_answer,
    check_partial_answer,
    check_question_answer,
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
    refused,
)


class TestCheckSeedAnswer:
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
        assert caught.value.code == ErrorCode.INVALID_ANSWER
        assert message in str(caught.value)

    def test_custom_text_is_fine_when_allowed(self) -> None:
        """With allow_custom, any non-blank text is an answer without an option."""
        request = Request("DB?", options=VALID_OPTIONS)
        answer = check_answer(request, AskUserQuestionAnswer("MySQL"))
        assert answer == AskUserQuestionAnswer("MySQL", None)


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
        message = refused(self._answer(self._db(), too_many, self._notes()))
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
        assert message in refused(answer)

    def test_one_text_for_several_questions_is_refused(self) -> None:
        """A one-question answer to an ask of three says what a provider must do."""
        message = refused(AskUserQuestionAnswer("pg"))
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
        message = refused(AskUserQuestionAnswer("auth, secret plans"), strict)
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
