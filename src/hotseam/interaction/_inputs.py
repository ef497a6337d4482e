"""The input models: the dict forms of the request and the answer as pydantic models.

They are the ``ask_user_question`` tool's input (and its JSON schema) and what parses a
request, a question, an option or an answer entry given as a dict (``from_dict``). Dict
input accepts the seed's camelCase (``allowCustom``) as well as snake_case.

They describe the JSON forms and check their types; the rules of a request and of an answer
are the dataclasses' (:func:`~hotseam.interaction.validate_request`, ``check_answer``).
Imported when first needed, not with the seam: pydantic and the models cost about a third
of ``hotseam run``'s start. The dataclasses they build (:mod:`._request`, :mod:`._answer`)
sit below them and reach them through the :class:`~._request.DictForms` protocol, which
``hotseam.interaction`` installs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from .._core import AbortSignal, Agent, format_validation_error, present_as
from ._answer import QuestionAnswer
from ._errors import ErrorCode, UserInteractionError
from ._request import (
    MAX_QUESTIONS,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    SkipReason,
)

__all__ = [
    "AskUserQuestionInput",
    "AskUserQuestionOptionInput",
    "QuestionInput",
    "parse_entry",
    "parse_input",
    "parse_option",
    "parse_question",
    "parse_request",
]

_M = TypeVar("_M", bound=BaseModel)


def _no_default(schema: dict[str, Any]) -> None:
    """Leave the default out of the JSON schema: a model gives `question` or `questions`."""
    schema.pop("default", None)


class _Input(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", strict=True
    )


class AskUserQuestionOptionInput(_Input):
    """One option as a model (or a JSON file) writes it."""

    label: str = Field(description="What the human sees, 1-5 words.")
    value: str | None = Field(
        default=None, description="What you receive when it is chosen; defaults to the label."
    )
    description: str | None = Field(
        default=None, description="One line of extra context shown under the label."
    )
    recommended: bool = Field(
        default=False,
        description=(
            "Marks the option you recommend; it is pre-selected. At most one "
            "(on a multiSelect question, at most maxSelections)."
        ),
    )

    def to_option(self) -> AskUserQuestionOption:
        """Return the seam's dataclass."""
        return AskUserQuestionOption(self.label, self.value, self.description, self.recommended)


class QuestionInput(_Input):
    """One question of ``questions``, as a model writes it: Claude Code's AskUserQuestion
    item (``question``, ``header``, ``options`` of ``label``/``description``,
    ``multiSelect``) plus hotseam's own fields."""

    question: str = Field(description="The question, complete and specific, ending with '?'.")
    header: str | None = Field(
        default=None, description="A very short label shown as a chip (max 12 characters)."
    )
    options: list[AskUserQuestionOptionInput] | None = Field(
        default=None,
        description="Choices to pick from (2-4 is best). Leave out for a free-form question.",
    )
    multi_select: bool = Field(
        default=False,
        description="Let the human pick several options; the answer lists each one chosen.",
    )
    id: str | None = Field(
        default=None,
        description="Names the question in the result (letters, digits, '_', '-', '.'); "
        "default q1, q2...",
    )
    allow_custom: bool = Field(
        default=True,
        description="Whether the human may type their own answer (an 'Other' choice). "
        "Set false only when the answer must be one of the options.",
    )
    min_selections: int | None = Field(
        default=None,
        description="With multiSelect: the fewest options to pick (default 1; 0 allows none).",
    )
    max_selections: int | None = Field(
        default=None, description="With multiSelect: the most options to pick (default all)."
    )
    allow_skip: bool = Field(
        default=False,
        description="Let the human leave this question unanswered (its result then says so).",
    )

    def to_question(self) -> Question:
        """Return the seam's dataclass."""
        options = None if self.options is None else [o.to_option() for o in self.options]
        return Question(
            self.question,
            self.header,
            options,
            self.allow_custom,
            self.id,
            self.multi_select,
            self.min_selections,
            self.max_selections,
            self.allow_skip,
        )


class AskUserQuestionInput(_Input):
    """The input of the ``ask_user_question`` tool (and the dict form of a request): one
    question in ``question``, ``header``, ``options``, ``allow_custom``, or several in
    ``questions``."""

    question: str = Field(
        default="",
        description="The question, complete and specific, ending with '?'. "
        "Leave out when you give `questions`.",
        json_schema_extra=_no_default,
    )
    header: str | None = Field(
        default=None, description="A very short label shown above the question (a topic)."
    )
    options: list[AskUserQuestionOptionInput] | None = Field(
        default=None,
        description="Choices to pick from. Leave out for a free-form question.",
    )
    allow_custom: bool = Field(
        default=True,
        description=(
            "Whether the human may type their own answer instead of picking an option. "
            "Ignored when there are no options (the answer is then always free text)."
        ),
    )
    questions: (
        Annotated[list[QuestionInput], Field(min_length=1, max_length=MAX_QUESTIONS)] | None
    ) = Field(
        default=None,
        description=(
            f"Instead of `question`: 1-{MAX_QUESTIONS} questions the human answers together "
            "(each may be multiSelect). The result then has one answer per question."
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _first_question_names_the_call(cls, data: Any) -> Any:
        """With ``questions`` and no ``question``, ``question`` is the first one's: what a
        UI showing the call (an ACP tool call's title) reads, in every dump of the input."""
        if isinstance(data, Mapping) and data.get("question") is None:
            items = data.get("questions")
            if isinstance(items, list) and items and isinstance(items[0], Mapping):
                first = items[0].get("question")
                if isinstance(first, str):
                    return {**data, "question": first}
        return data

    def to_request(
        self, *, agent: Agent | None = None, signal: AbortSignal | None = None
    ) -> AskUserQuestionRequest:
        """Return the seam's request dataclass (not yet validated).

        With ``questions``, the top-level fields are the first question's: left out (or at
        their defaults, as in a dump of the input) they say nothing; given, they must agree.

        Raises:
            UserInteractionError: ``INVALID_REQUEST`` when neither ``question`` nor
                ``questions`` is given, or a top-level field differs from the first question.
        """
        options = None if self.options is None else [o.to_option() for o in self.options]
        if self.questions is None:
            if "question" not in self.model_fields_set:
                raise UserInteractionError(
                    "invalid request: question: Field required (or give questions: a list "
                    f"of 1 to {MAX_QUESTIONS} questions)",
                    ErrorCode.INVALID_REQUEST,
                )
            return AskUserQuestionRequest(
                self.question, self.header, options, self.allow_custom, agent, signal
            )
        items = [item.to_question() for item in self.questions]
        first = items[0]
        given: dict[str, object] = {"question": self.question}
        if self.header is not None:
            given["header"] = self.header
        if options is not None:
            given["options"] = tuple(options) or None
        if not self.allow_custom:
            given["allow_custom"] = False
        differing = [name for name, value in given.items() if value != getattr(first, name)]
        if differing:
            problems = [
                (
                    name,
                    f"differs from questions[0].{name} (the top-level fields mirror the first "
                    "question: build the request with AskUserQuestionRequest.of(questions))",
                )
                for name in differing
            ]
            raise UserInteractionError(
                "invalid request: "
                + "; ".join(f"{field} {problem}" for field, problem in problems),
                ErrorCode.INVALID_REQUEST,
                details={"errors": [{"field": f, "message": p} for f, p in problems]},
            )
        return AskUserQuestionRequest.of(items, agent=agent, signal=signal)


def _parse(model: type[_M], data: Mapping[str, Any], what: str) -> _M:
    given: object = data
    if not isinstance(given, Mapping):
        raise UserInteractionError(
            f"invalid {what}: expected an object, got {type(given).__name__}",
            ErrorCode.INVALID_REQUEST,
        )
    try:
        return model.model_validate(dict(given))
    except ValidationError as invalid:
        raise UserInteractionError(
            f"invalid {what}: {format_validation_error(invalid)}", ErrorCode.INVALID_REQUEST
        ) from None


def parse_input(model: type[_M], data: Mapping[str, Any], what: str, code: str) -> _M:
    """``model`` from ``data``, or ``UserInteractionError(code)`` naming each bad field
    (``invalid answer: answers[0].id: Field required``)."""
    try:
        return _parse(model, data, what)
    except UserInteractionError as error:
        if code == ErrorCode.INVALID_REQUEST:
            raise
        raise UserInteractionError(error.message, code) from None


class _QuestionAnswerInput(_Input):
    """One entry of an answer's dict form."""

    id: str
    answer: str | None
    options: list[AskUserQuestionOptionInput] = Field(default_factory=list)
    custom: str | None = None
    skipped: SkipReason | None = None

    def to_entry(self) -> QuestionAnswer:
        options = tuple(option.to_option() for option in self.options)
        return QuestionAnswer(self.id, self.answer, options, self.custom, self.skipped)


def parse_option(data: Mapping[str, Any]) -> AskUserQuestionOption:
    """An option from its dict form (``INVALID_REQUEST`` naming each bad field)."""
    return _parse(AskUserQuestionOptionInput, data, "option").to_option()


def parse_question(data: Mapping[str, Any]) -> Question:
    """A question from its dict form (``INVALID_REQUEST`` naming each bad field)."""
    return _parse(QuestionInput, data, "question").to_question()


def parse_request(data: Mapping[str, Any]) -> AskUserQuestionInput:
    """A request's dict form, checked (``INVALID_REQUEST`` naming each bad field)."""
    return _parse(AskUserQuestionInput, data, "request")


def parse_entry(data: Mapping[str, Any]) -> QuestionAnswer:
    """An answer entry from its dict form (``INVALID_ANSWER`` naming each bad field)."""
    return parse_input(_QuestionAnswerInput, data, "answer", ErrorCode.INVALID_ANSWER).to_entry()


# Defined here, public in hotseam.interaction (reprs and tracebacks say so).
present_as(
    "hotseam.interaction",
    globals(),
    ["AskUserQuestionInput", "AskUserQuestionOptionInput", "QuestionInput"],
)
