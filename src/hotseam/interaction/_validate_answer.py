"""The rules an answer must follow, with errors that name the question and never quote what
the human typed."""

from __future__ import annotations

from collections.abc import Sequence

from ._answer import (
    SKIP_REASONS,
    AskUserQuestionAnswer,
    QuestionAnswer,
    answer_text,
    answered_in_text,
    where,
)
from ._errors import ErrorCode, UserInteractionError
from ._request import (
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    in_seed_form,
    wrong_type,
)

__all__ = ["check_answer", "check_partial_answer", "check_question_answer", "entries_of"]


def check_answer(request: AskUserQuestionRequest, answer: object) -> AskUserQuestionAnswer:
    """Check a provider's answer against the request (validated) and complete it.

    An answer of text alone (the seed's ``AskUserQuestionAnswer(answer, option)``) answers a
    one-question request: its ``option`` is set to the question's option whose model-facing
    value equals the text (and cleared otherwise); when options exist and custom answers are
    not allowed, text that is none of the option values is the provider breaking its
    contract. Otherwise ``answers`` holds one checked entry per question, in question order
    (see :func:`check_question_answer`), and for several questions ``answer`` is their
    summary.

    Raises:
        UserInteractionError: ``INVALID_ANSWER`` saying what is wrong, naming the question
            (``questions[1] (Which features?)``) and never quoting what the human typed.
    """
    if not isinstance(answer, AskUserQuestionAnswer):
        raise UserInteractionError(
            f"the provider returned {type(answer).__name__}, not an AskUserQuestionAnswer",
            ErrorCode.INVALID_ANSWER,
        )
    items = request.questions
    seed = in_seed_form(items)
    in_text = answered_in_text(answer)
    if in_text and len(items) > 1:
        raise UserInteractionError(
            f"the provider answered an ask of {len(items)} questions with one text; "
            "give one entry per question in answers (a provider that shows one question "
            "at a time leaves out multiple_questions and is asked them one by one)",
            ErrorCode.INVALID_ANSWER,
        )
    if in_text and seed:  # the seed's answer to the seed's question: what most asks are
        question = items[0]
        typed = _text_of(answer.answer, "")
        option = question.option_for(typed)
        if option is None:
            _refuse_custom(question, typed, "")
        if option is answer.option:
            return answer  # already complete
        return AskUserQuestionAnswer(typed, option)
    checked: tuple[QuestionAnswer, ...]
    if in_text:
        named = where(items[0], 0)
        checked = (_check_count(items[0], named, _from_text(items[0], answer.answer, named)),)
    else:
        checked = _check_entries(request, answer.answers, complete=True)
    if not seed:
        return AskUserQuestionAnswer.of(checked, request)
    (entry,) = checked
    option = entry.options[0] if len(entry.options) == 1 else None
    return AskUserQuestionAnswer(entry.answer or "", option)


def entries_of(
    answer: AskUserQuestionAnswer, asked: Sequence[Question]
) -> tuple[QuestionAnswer, ...]:
    """``answer``'s entries for the questions ``asked``: an answer of text alone to one
    question is that question's text answer (whatever id it was given)."""
    if len(asked) == 1 and answered_in_text(answer):
        return (QuestionAnswer(str(asked[0].id), answer.answer),)
    return tuple(answer.answers)


def _text_of(text: object, named: str, what: str = "the answer") -> str:
    """The text of an answer, checked; ``named`` is ``""`` for the seed's one question,
    whose errors speak of "the provider's answer"."""
    if not isinstance(text, str):
        subject = f"{named}: {what}" if named else "the provider's answer"
        raise UserInteractionError(
            f"{subject} must be a string, got {type(text).__name__}", ErrorCode.INVALID_ANSWER
        )
    if not text.strip():
        if not named:
            raise UserInteractionError(
                "the provider returned a blank answer (a UI should re-prompt, or decline/cancel)",
                ErrorCode.INVALID_ANSWER,
            )
        raise UserInteractionError(
            f"{named}: {what} is blank (a UI should re-prompt, or decline/cancel)",
            ErrorCode.INVALID_ANSWER,
        )
    return text


def _from_text(question: Question, text: object, named: str) -> QuestionAnswer:
    """The entry of a question answered with text, as a one-question UI answers: an
    option's model value, else (for a multi-select question) option values joined by
    ``","``, else the human's own text."""
    typed = _text_of(text, named)
    question_id = question.id or "q1"  # the seed's one question may not be validated
    option = question.option_for(typed)
    if option is not None:
        return QuestionAnswer(question_id, typed, (option,))
    if question.is_multi_select:
        parts = [part.strip() for part in typed.split(",")]
        found = [question.option_for(part) for part in parts]
        if len(parts) > 1 and all(found) and len(set(parts)) == len(parts):
            chosen = tuple(o for o in question.choices if o in found)
            return QuestionAnswer(question_id, answer_text(chosen, None), chosen)
    _refuse_custom(question, typed, named)
    return QuestionAnswer(question_id, typed, (), typed)


def _refuse_custom(question: Question, typed: str, named: str) -> None:
    """Text that is none of the options is refused unless the question accepts custom
    answers (described, never quoted: errors reach the logs)."""
    if not question.accepts_custom:
        allowed = ", ".join(repr(o.model_value) for o in question.choices)
        subject = f"{named}: the answer" if named else "the provider's answer"
        raise UserInteractionError(
            f"{subject} is none of the options ({allowed}) of a question that "
            f"allows no custom answer (a custom answer of {len(typed)} characters)",
            ErrorCode.INVALID_ANSWER,
        )


def check_question_answer(
    question: Question, entry: object, *, index: int | None = None
) -> QuestionAnswer:
    """Check one question's answer (``question`` from a validated request) and return it
    normalized: its options are the question's own, in option order, and ``answer`` is
    computed from them and the custom text. ``index`` (the question's position) is used
    to name it in errors.

    The rules: skipped only when the question has ``allow_skip`` (and then with no
    selection); every option one of the question's; custom text only when the question
    accepts it, never blank; a single-select (or free-form) question has exactly one
    value; a multi-select one between ``min_selections`` and ``max_selections`` (custom
    text counts as one). An entry with only ``answer`` text is read as a one-question UI's
    text answer.

    Raises:
        UserInteractionError: ``INVALID_ANSWER`` naming the question.
    """
    named = where(question, index)
    if not isinstance(entry, QuestionAnswer):
        raise UserInteractionError(
            f"{named}: the answer must be a QuestionAnswer, got {type(entry).__name__}",
            ErrorCode.INVALID_ANSWER,
        )
    assert question.id is not None
    fields: dict[str, object] = {
        "options": entry.options,
        "custom": entry.custom,
        "skipped": entry.skipped,
        "answer": entry.answer,
    }
    if fields["skipped"] is not None:
        return _skipped(question, named, fields)
    options = fields["options"]
    if not isinstance(options, tuple):
        raise UserInteractionError(
            f"{named}: options {wrong_type('a tuple of options', options)}",
            ErrorCode.INVALID_ANSWER,
        )
    custom = fields["custom"]
    if not options and custom is None and fields["answer"]:  # text, as a one-question UI gives
        return _check_count(question, named, _from_text(question, fields["answer"], named))
    chosen: set[int] = set()
    for position, option in enumerate(options):
        value = option.model_value if isinstance(option, AskUserQuestionOption) else None
        index_of = next(
            (i for i, offered in enumerate(question.choices) if offered.model_value == value),
            None,
        )
        if index_of is None:
            raise UserInteractionError(
                f"{named}: options[{position}] is none of the question's options",
                ErrorCode.INVALID_ANSWER,
            )
        if index_of in chosen:
            raise UserInteractionError(
                f"{named}: options[{position}] chooses an option a second time",
                ErrorCode.INVALID_ANSWER,
            )
        chosen.add(index_of)
    if custom is not None:
        text = _text_of(custom, named, "the custom answer")
        if not question.accepts_custom:
            raise UserInteractionError(
                f"{named}: a custom answer (of {len(text)} characters) to a question that "
                "allows none",
                ErrorCode.INVALID_ANSWER,
            )
    picked = tuple(question.choices[i] for i in sorted(chosen))
    typed = custom if isinstance(custom, str) else None
    normalized = QuestionAnswer(question.id, answer_text(picked, typed), picked, typed)
    return _check_count(question, named, normalized)


def _skipped(question: Question, named: str, fields: dict[str, object]) -> QuestionAnswer:
    assert question.id is not None
    reason = fields["skipped"]
    if reason not in SKIP_REASONS:
        raise UserInteractionError(
            f"{named}: skipped must be one of {', '.join(map(repr, SKIP_REASONS))} or None",
            ErrorCode.INVALID_ANSWER,
        )
    if not question.allow_skip:
        raise UserInteractionError(
            f"{named}: was skipped, but the question does not allow skipping (allow_skip)",
            ErrorCode.INVALID_ANSWER,
        )
    if fields["options"] or fields["custom"] is not None or fields["answer"] is not None:
        raise UserInteractionError(
            f"{named}: is skipped and answered at once (a skipped question has no answer, "
            "options or custom text)",
            ErrorCode.INVALID_ANSWER,
        )
    return QuestionAnswer(question.id, None, skipped=reason)  # type: ignore[arg-type]


def _check_count(question: Question, named: str, entry: QuestionAnswer) -> QuestionAnswer:
    count = len(entry.values)
    least, most = question.selection_range
    if not question.is_multi_select:
        if count != 1:
            raise UserInteractionError(
                f"{named}: {count} selections, but the question takes exactly one",
                ErrorCode.INVALID_ANSWER,
            )
    elif not least <= count <= most:
        bounds = f"{least}" if least == most else f"{least} to {most}"
        raise UserInteractionError(
            f"{named}: {count} selections, but the question takes {bounds}",
            ErrorCode.INVALID_ANSWER,
        )
    return entry


def check_partial_answer(
    request: AskUserQuestionRequest, entries: Sequence[QuestionAnswer]
) -> tuple[QuestionAnswer, ...]:
    """Check the answers given so far (any subset of the questions, each at most once)
    against the request (validated), as :func:`check_answer` checks a whole one; returns
    them normalized, in question order. For a surface that takes answers one by one.

    Raises:
        UserInteractionError: ``INVALID_ANSWER`` naming the question or the entry.
    """
    return _check_entries(request, entries, complete=False)


def _check_entries(
    request: AskUserQuestionRequest, entries: object, *, complete: bool
) -> tuple[QuestionAnswer, ...]:
    if not isinstance(entries, list | tuple):
        raise UserInteractionError(
            f"answers {wrong_type('a list of QuestionAnswer', entries)}", ErrorCode.INVALID_ANSWER
        )
    position = {item.id: index for index, item in enumerate(request.questions)}
    found: dict[int, QuestionAnswer] = {}
    for number, entry in enumerate(entries):
        entry_id = getattr(entry, "id", None) if isinstance(entry, QuestionAnswer) else None
        if not isinstance(entry, QuestionAnswer):
            raise UserInteractionError(
                f"answers[{number}] {wrong_type('a QuestionAnswer', entry)}",
                ErrorCode.INVALID_ANSWER,
            )
        if entry_id not in position:
            known = ", ".join(repr(item.id) for item in request.questions)
            raise UserInteractionError(
                f"answers[{number}].id names no question of the ask (its ids: {known})",
                ErrorCode.INVALID_ANSWER,
            )
        index = position[entry_id]
        item = request.questions[index]
        if index in found:
            raise UserInteractionError(
                f"answers[{number}] answers {where(item, index)} a second time",
                ErrorCode.INVALID_ANSWER,
            )
        found[index] = check_question_answer(item, entry, index=index)
    if complete:
        for index, item in enumerate(request.questions):
            if index not in found:
                raise UserInteractionError(
                    f"{where(item, index)} has no answer (one entry per question; a question "
                    "that allows skipping takes QuestionAnswer.skip)",
                    ErrorCode.INVALID_ANSWER,
                )
    return tuple(found[index] for index in sorted(found))
