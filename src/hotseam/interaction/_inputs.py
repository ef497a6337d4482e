"""The input models: the dict forms of the request and the answer as pydantic models.

They are the ``ask_user_question`` tool's input (and its JSON schema) and what parses a
request, a question, an option or an answer entry given as a dict (``from_dict``). Dict
input accepts the seed's camelCase (``allowCustom``) as well as snake_case.

They describe the JSON forms and check their types; each dataclass builds itself from its
checked form (``from_input``) and keeps the rules (:func:`~hotseam.interaction.validate_request`,
``check_answer``). The dataclasses import this module at the first dict parsed: pydantic
and the models cost about a third of ``hotseam run``'s start, and a request built in code
never needs them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from .._core import format_validation_error, present_as
from ._errors import ErrorCode, UserInteractionError
from ._limits import MAX_QUESTIONS, SkipReason

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


class AnswerEntryInput(_Input):
    """One entry of an answer's dict form (what ``QuestionAnswer.from_dict`` reads)."""

    id: str
    answer: str | None
    options: list[AskUserQuestionOptionInput] = Field(default_factory=list)
    custom: str | None = None
    skipped: SkipReason | None = None


def parse_input(
    model: type[_M], data: Mapping[str, Any], what: str, code: str = ErrorCode.INVALID_REQUEST
) -> _M:
    """``model`` from ``data``, or ``UserInteractionError(code)`` naming each bad field
    (``invalid request: questions.0.options.1.label: Field required``)."""
    given: object = data  # from the wire: anything at all
    if not isinstance(given, Mapping):
        raise UserInteractionError(
            f"invalid {what}: expected an object, got {type(given).__name__}", code
        )
    try:
        return model.model_validate(dict(given))
    except ValidationError as invalid:
        raise UserInteractionError(
            f"invalid {what}: {format_validation_error(invalid)}", code
        ) from None


# Defined here, public in hotseam.interaction (reprs and tracebacks say so).
present_as(
    "hotseam.interaction",
    globals(),
    ["AskUserQuestionInput", "AskUserQuestionOptionInput", "QuestionInput"],
)
