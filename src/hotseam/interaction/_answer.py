"""The answer side of the user-interaction seam: one answer per question, and the answer
an ask returns, with their JSON forms and their rules (:func:`check_answer`: an answer
checked against its request, errors that name the question and never quote the human).

``AskUserQuestionAnswer(answer, option)`` stays the answer to one question as the seed has
it: ``answers`` then holds the one entry those two say (:func:`implied_entry`, which follows
them, through ``dataclasses.replace`` too), and such an answer is read as text
(:func:`answered_in_text`), as a one-question UI answers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

from ._errors import ErrorCode, UserInteractionError
from ._request import (
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    SkipReason,
    in_seed_form,
    wrong_type,
)

__all__ = [
    "AskUserQuestionAnswer",
    "QuestionAnswer",
    "answer_text",
    "answered_in_text",
    "check_answer",
    "check_partial_answer",
    "check_question_answer",
    "entries_of",
    "implied_entry",
    "where",
]

SKIP_REASONS: tuple[str, ...] = get_args(SkipReason)


@dataclass(frozen=True, slots=True)
class QuestionAnswer:
    """The answer to one question of an ask.

    Attributes:
        id: The question's id.
        answer: What the model reads: the chosen option's model value; for several
            choices their values in option order joined by ``", "`` (then the custom text);
            the custom text alone; ``""`` for an empty selection (``min_selections=0``);
            ``None`` when skipped.
        options: The options chosen, in option order.
        custom: The human's own text, if they typed one.
        skipped: Why there is no answer (:data:`~hotseam.interaction.SkipReason`), or
            ``None``.

    Build one with :meth:`chosen` or :meth:`skip`; ``check_answer`` recomputes ``answer``
    from ``options`` and ``custom`` (the structured part is what counts). An entry with
    only ``answer`` text is read as a one-question provider's text answer is.
    """

    id: str
    answer: str | None
    options: tuple[AskUserQuestionOption, ...] = ()
    custom: str | None = None
    skipped: SkipReason | None = None

    def __post_init__(self) -> None:
        given: object = self.options  # a list is fine too
        if isinstance(given, list):
            object.__setattr__(self, "options", tuple(given))

    @property
    def values(self) -> tuple[str, ...]:
        """The model values of the chosen options, then the custom text when given."""
        chosen = tuple(option.model_value for option in self.options)
        return chosen + (() if self.custom is None else (self.custom,))

    @classmethod
    def chosen(
        cls,
        question: Question,
        choices: Iterable[AskUserQuestionOption | str] = (),
        custom: str | None = None,
    ) -> QuestionAnswer:
        """The entry for what the human selected: ``choices`` are options of ``question``
        (or their model values) in any order; ``custom`` their own text (blank counts as
        none). How many a question takes is checked by ``check_answer``.

        Raises:
            UserInteractionError: ``INVALID_ANSWER`` when a choice is none of the options.
            ValueError: ``question`` has no id (validate the request first).
        """
        question_id = _id_of(question)
        picked: set[int] = set()
        for choice in choices:
            index = _index_of(question, choice)
            if index is None:
                raise _invalid(f"{where(question)}: a choice that is none of its options")
            picked.add(index)
        options = tuple(question.choices[i] for i in sorted(picked))
        text = custom if custom is not None and custom.strip() else None
        return cls(question_id, answer_text(options, text), options, text)

    @classmethod
    def skip(cls, question: Question, reason: SkipReason = "skipped") -> QuestionAnswer:
        """The entry for a question the human left unanswered (``check_answer`` accepts it
        only when the question has ``allow_skip``)."""
        return cls(_id_of(question), None, skipped=reason)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``id``, ``answer``, ``options``; ``custom`` and ``skipped``
        when set."""
        data: dict[str, Any] = {
            "id": self.id,
            "answer": self.answer,
            "options": [option.to_dict() for option in self.options],
        }
        if self.custom is not None:
            data["custom"] = self.custom
        if self.skipped is not None:
            data["skipped"] = self.skipped
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QuestionAnswer:
        """Build an entry from :meth:`to_dict`'s form (raises ``INVALID_ANSWER`` naming
        each bad field)."""
        from ._inputs import AnswerEntryInput, parse_input  # pydantic: at the first dict

        given = parse_input(AnswerEntryInput, data, "answer", ErrorCode.INVALID_ANSWER)
        options = tuple(AskUserQuestionOption.from_input(option) for option in given.options)
        return cls(given.id, given.answer, options, given.custom, given.skipped)


@dataclass(frozen=True, slots=True)
class AskUserQuestionAnswer:
    """The human's answer: ``answer`` is what the model reads; ``option`` is metadata.

    ``answers`` holds one :class:`QuestionAnswer` per question. For an ask of several
    questions ``answer`` is a readable summary (one line per question:
    ``"Which database? pg"``) and ``option`` is ``None``; build it with :meth:`of`.
    """

    answer: str
    option: AskUserQuestionOption | None = None
    answers: Sequence[QuestionAnswer] = field(default=(), kw_only=True)

    def __post_init__(self) -> None:
        given: object = self.answers
        if isinstance(given, list):
            given = tuple(given)
        if given == () or (
            isinstance(given, tuple) and len(given) == 1 and _says_only_text(given[0])
        ):
            given = (implied_entry(self),)  # the seed's fields are the truth: it follows them
        object.__setattr__(self, "answers", given)

    @classmethod
    def of(
        cls, answers: Iterable[QuestionAnswer], request: AskUserQuestionRequest | None = None
    ) -> AskUserQuestionAnswer:
        """The answer made of one entry per question. With ``request`` the entries are put
        in question order and the summary names each question by its text (else by its
        id; ``check_answer`` writes it with the texts)."""
        entries = tuple(answers)
        if request is not None:
            order = {item.id: index for index, item in enumerate(request.questions)}
            entries = tuple(sorted(entries, key=lambda entry: order.get(entry.id, len(order))))
        if len(entries) == 1:
            (entry,) = entries
            only = entry.options[0] if len(entry.options) == 1 and entry.custom is None else None
            return cls(entry.answer or "", only, answers=entries)
        texts = {} if request is None else {item.id: item.question for item in request.questions}
        lines = [f"{texts.get(e.id, e.id + ':')} {_shown(e)}" for e in entries]
        return cls("\n".join(lines), None, answers=entries)

    def for_question(self, question_id: str) -> QuestionAnswer | None:
        """The entry of the question whose id is ``question_id``, if any."""
        return next((entry for entry in self.answers if entry.id == question_id), None)

    def to_dict(self) -> dict[str, Any]:
        """``{"answer": ..., "option": {...} | None}``, the ``ask_user_question`` output of
        one question; ``"answers"`` (each entry's :meth:`QuestionAnswer.to_dict`) is added
        when the answer is more than one plain answer."""
        data: dict[str, Any] = {
            "answer": self.answer,
            "option": None if self.option is None else self.option.to_dict(),
        }
        if not answered_in_text(self):
            data["answers"] = [entry.to_dict() for entry in self.answers]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AskUserQuestionAnswer:
        """Build an answer from :meth:`to_dict`'s form (raises ``INVALID_ANSWER``)."""
        given: object = data  # from the wire: anything at all
        if not isinstance(given, Mapping):
            raise _invalid(f"invalid answer: expected an object, got {type(given).__name__}")
        answer = given.get("answer")
        if not isinstance(answer, str):
            raise _invalid(
                f"invalid answer: 'answer' must be a string, got {type(answer).__name__}"
            )
        entries = _entries_from(given.get("answers"))
        option_data = data.get("option")
        if option_data is None:
            return cls(answer, answers=entries)
        if not isinstance(option_data, Mapping):
            raise _invalid("invalid answer: 'option' must be an object or null")
        try:
            option = AskUserQuestionOption.from_dict(option_data)
        except UserInteractionError as error:
            raise _invalid(
                error.message.replace("invalid option", "invalid answer option")
            ) from error
        return cls(answer, option, answers=entries)


def implied_entry(answer: AskUserQuestionAnswer) -> QuestionAnswer:
    """The entry of the one question that ``answer``'s text and option say: the option
    chosen, or the text as the human's own (id ``"q1"``)."""
    if answer.option is None:
        return QuestionAnswer("q1", answer.answer, (), answer.answer)
    return QuestionAnswer("q1", answer.answer, (answer.option,))


def answered_in_text(answer: AskUserQuestionAnswer) -> bool:
    """Whether ``answer`` is the seed's, its text and option alone (its entries say nothing
    more): the seam reads its text, as a one-question UI's, and completes the option."""
    entries = answer.answers
    if len(entries) != 1:
        return False
    entry = entries[0]  # implied_entry(answer), compared field by field (on every ask)
    if entry.id != "q1" or entry.answer != answer.answer or entry.skipped is not None:
        return False
    if answer.option is None:
        return entry.options == () and entry.custom == answer.answer
    return entry.custom is None and entry.options == (answer.option,)


def _says_only_text(entry: object) -> bool:
    """An entry ``"q1"`` of what the seed's ``answer`` and ``option`` can say (one option
    or one text): such an answer's entry is the one its own fields imply."""
    if not isinstance(entry, QuestionAnswer) or entry.id != "q1" or entry.skipped is not None:
        return False
    options: object = entry.options
    if options == ():
        return entry.custom is not None and entry.custom == entry.answer
    return (
        isinstance(options, tuple)
        and len(options) == 1
        and isinstance(options[0], AskUserQuestionOption)
        and entry.custom is None
        and entry.answer == options[0].model_value
    )


def answer_text(options: Sequence[AskUserQuestionOption], custom: str | None) -> str:
    """What the model reads for a selection: the values joined by ``", "``, custom last."""
    return ", ".join([option.model_value for option in options] + ([custom] if custom else []))


def where(question: Question, index: int | None = None) -> str:
    """How an error names a question: ``questions[1] (Which features?)``."""
    text = " ".join(str(question.question).split())
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"questions[{index if index is not None else '?'}] ({text})"


def _invalid(message: str) -> UserInteractionError:
    return UserInteractionError(message, ErrorCode.INVALID_ANSWER)


def _id_of(question: Question) -> str:
    if question.id is None:
        raise ValueError("the question has no id: use the questions of a validated request")
    return question.id


def _index_of(question: Question, choice: AskUserQuestionOption | str) -> int | None:
    """The position of the question's option that ``choice`` (an option or its model
    value) is, if any."""
    value = choice.model_value if isinstance(choice, AskUserQuestionOption) else choice
    return next((i for i, o in enumerate(question.choices) if o.model_value == value), None)


def _shown(entry: QuestionAnswer) -> str:
    if entry.skipped is not None:
        return f"({entry.skipped})"
    return entry.answer or "(none)"


def _entries_from(data: object) -> tuple[QuestionAnswer, ...]:
    if data is None:
        return ()
    if not isinstance(data, list) or not data:
        raise _invalid("invalid answer: 'answers' must be a non-empty list of answers")
    entries = []
    for index, item in enumerate(data):
        try:
            entries.append(QuestionAnswer.from_dict(item))
        except UserInteractionError as error:
            detail = error.message.removeprefix("invalid answer: ")
            raise _invalid(f"invalid answer: answers[{index}]: {detail}") from None
    return tuple(entries)


# -- the rules --


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
        raise _invalid(
            f"the provider returned {type(answer).__name__}, not an AskUserQuestionAnswer"
        )
    items = request.questions
    seed = in_seed_form(items)
    in_text = answered_in_text(answer)
    if in_text and len(items) > 1:
        raise _invalid(
            f"the provider answered an ask of {len(items)} questions with one text; "
            "give one entry per question in answers (a provider that shows one question "
            "at a time leaves out multiple_questions and is asked them one by one)"
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
        raise _invalid(f"{subject} must be a string, got {type(text).__name__}")
    if not text.strip():
        if not named:
            raise _invalid(
                "the provider returned a blank answer (a UI should re-prompt, or decline/cancel)"
            )
        raise _invalid(f"{named}: {what} is blank (a UI should re-prompt, or decline/cancel)")
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
        raise _invalid(f"{named}: the answer must be a QuestionAnswer, got {type(entry).__name__}")
    assert question.id is not None
    if entry.skipped is not None:
        return _skipped(question, named, entry)
    options: object = entry.options
    if not isinstance(options, tuple):
        raise _invalid(f"{named}: options {wrong_type('a tuple of options', options)}")
    custom: object = entry.custom
    if not options and custom is None and entry.answer:  # text, as a one-question UI gives
        return _check_count(question, named, _from_text(question, entry.answer, named))
    chosen: set[int] = set()
    for position, option in enumerate(options):
        index_of = (
            _index_of(question, option) if isinstance(option, AskUserQuestionOption) else None
        )
        if index_of is None:
            raise _invalid(f"{named}: options[{position}] is none of the question's options")
        if index_of in chosen:
            raise _invalid(f"{named}: options[{position}] chooses an option a second time")
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


def _skipped(question: Question, named: str, entry: QuestionAnswer) -> QuestionAnswer:
    assert question.id is not None
    reason: object = entry.skipped
    if reason not in SKIP_REASONS:
        raise UserInteractionError(
            f"{named}: skipped must be one of {', '.join(map(repr, SKIP_REASONS))} or None",
            ErrorCode.INVALID_ANSWER,
        )
    if not question.allow_skip:
        raise _invalid(
            f"{named}: was skipped, but the question does not allow skipping (allow_skip)"
        )
    if entry.options or entry.custom is not None or entry.answer is not None:
        raise _invalid(
            f"{named}: is skipped and answered at once (a skipped question has no answer, "
            "options or custom text)"
        )
    return QuestionAnswer(question.id, None, skipped=reason)  # type: ignore[arg-type]


def _check_count(question: Question, named: str, entry: QuestionAnswer) -> QuestionAnswer:
    count = len(entry.values)
    least, most = question.selection_range
    if not question.is_multi_select:
        if count != 1:
            raise _invalid(f"{named}: {count} selections, but the question takes exactly one")
    elif not least <= count <= most:
        bounds = f"{least}" if least == most else f"{least} to {most}"
        raise _invalid(f"{named}: {count} selections, but the question takes {bounds}")
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
        raise _invalid(f"answers {wrong_type('a list of QuestionAnswer', entries)}")
    position = {item.id: index for index, item in enumerate(request.questions)}
    found: dict[int, QuestionAnswer] = {}
    for number, entry in enumerate(entries):
        entry_id = getattr(entry, "id", None) if isinstance(entry, QuestionAnswer) else None
        if not isinstance(entry, QuestionAnswer):
            raise _invalid(f"answers[{number}] {wrong_type('a QuestionAnswer', entry)}")
        if entry_id not in position:
            known = ", ".join(repr(item.id) for item in request.questions)
            raise _invalid(f"answers[{number}].id names no question of the ask (its ids: {known})")
        index = position[entry_id]
        item = request.questions[index]
        if index in found:
            raise _invalid(f"answers[{number}] answers {where(item, index)} a second time")
        found[index] = check_question_answer(item, entry, index=index)
    if complete:
        for index, item in enumerate(request.questions):
            if index not in found:
                raise _invalid(
                    f"{where(item, index)} has no answer (one entry per question; a question "
                    "that allows skipping takes QuestionAnswer.skip)"
                )
    return tuple(found[index] for index in sorted(found))
