"""The answer side of the user-interaction seam: one answer per question, and the answer
an ask returns, with their JSON forms.

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
from ._request import AskUserQuestionOption, AskUserQuestionRequest, Question, SkipReason

__all__ = [
    "AskUserQuestionAnswer",
    "QuestionAnswer",
    "answer_text",
    "answered_in_text",
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
        if question.id is None:
            raise ValueError("the question has no id: use the questions of a validated request")
        picked: set[int] = set()
        for choice in choices:
            value = choice.model_value if isinstance(choice, AskUserQuestionOption) else choice
            index = next(
                (i for i, option in enumerate(question.choices) if option.model_value == value),
                None,
            )
            if index is None:
                raise UserInteractionError(
                    f"{where(question)}: a choice that is none of its options",
                    ErrorCode.INVALID_ANSWER,
                )
            picked.add(index)
        options = tuple(question.choices[i] for i in sorted(picked))
        text = custom if custom is not None and custom.strip() else None
        return cls(question.id, answer_text(options, text), options, text)

    @classmethod
    def skip(cls, question: Question, reason: SkipReason = "skipped") -> QuestionAnswer:
        """The entry for a question the human left unanswered (``check_answer`` accepts it
        only when the question has ``allow_skip``)."""
        if question.id is None:
            raise ValueError("the question has no id: use the questions of a validated request")
        return cls(question.id, None, skipped=reason)

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
            raise UserInteractionError(
                f"invalid answer: expected an object, got {type(given).__name__}",
                ErrorCode.INVALID_ANSWER,
            )
        answer = given.get("answer")
        if not isinstance(answer, str):
            raise UserInteractionError(
                f"invalid answer: 'answer' must be a string, got {type(answer).__name__}",
                ErrorCode.INVALID_ANSWER,
            )
        entries = _entries_from(given.get("answers"))
        option_data = data.get("option")
        if option_data is None:
            return cls(answer, answers=entries)
        if not isinstance(option_data, Mapping):
            raise UserInteractionError(
                "invalid answer: 'option' must be an object or null", ErrorCode.INVALID_ANSWER
            )
        try:
            option = AskUserQuestionOption.from_dict(option_data)
        except UserInteractionError as error:
            raise UserInteractionError(
                error.message.replace("invalid option", "invalid answer option"),
                ErrorCode.INVALID_ANSWER,
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


def _shown(entry: QuestionAnswer) -> str:
    if entry.skipped is not None:
        return f"({entry.skipped})"
    return entry.answer or "(none)"


def _entries_from(data: object) -> tuple[QuestionAnswer, ...]:
    if data is None:
        return ()
    if not isinstance(data, list) or not data:
        raise UserInteractionError(
            "invalid answer: 'answers' must be a non-empty list of answers",
            ErrorCode.INVALID_ANSWER,
        )
    entries = []
    for index, item in enumerate(data):
        try:
            entries.append(QuestionAnswer.from_dict(item))
        except UserInteractionError as error:
            detail = error.message.removeprefix("invalid answer: ")
            raise UserInteractionError(
                f"invalid answer: answers[{index}]: {detail}", ErrorCode.INVALID_ANSWER
            ) from None
    return tuple(entries)
