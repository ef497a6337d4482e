"""The request/answer model of the user-interaction seam, and its JSON forms.

Plain frozen dataclasses, so that they take positional arguments as the seed's shapes do and
cost little to build; :func:`~hotseam.interaction.validate_request` checks them (``ask()``
does so before any provider sees a request). Dict input accepts the seed's camelCase
(``allowCustom``) as well as snake_case.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from .._core import AbortSignal, Agent, format_validation_error
from ._errors import INVALID_ANSWER, INVALID_REQUEST, UserInteractionError

__all__ = [
    "AskUserQuestionAnswer",
    "AskUserQuestionInput",
    "AskUserQuestionOption",
    "AskUserQuestionOptionInput",
    "AskUserQuestionRequest",
]

_M = TypeVar("_M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class AskUserQuestionOption:
    """A selectable choice: ``label`` is shown, ``value`` (default: the label) is returned."""

    label: str
    value: str | None = None
    description: str | None = None
    recommended: bool = False

    @property
    def model_value(self) -> str:
        """What the model reads when this option is chosen: ``value``, else ``label``."""
        return self.value if self.value is not None else self.label

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; absent fields are left out."""
        data: dict[str, Any] = {"label": self.label}
        if self.value is not None:
            data["value"] = self.value
        if self.description is not None:
            data["description"] = self.description
        if self.recommended:
            data["recommended"] = True
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AskUserQuestionOption:
        """Build an option from a dict (raises ``INVALID_REQUEST`` naming bad fields)."""
        return _parse(AskUserQuestionOptionInput, data, "option").to_option()


@dataclass(frozen=True, slots=True)
class AskUserQuestionRequest:
    """A question for the human.

    No options (``None`` or empty) means free-form input, even when ``allow_custom`` is
    false: there is nothing to constrain the answer to.
    """

    question: str
    header: str | None = None
    options: Sequence[AskUserQuestionOption] | None = None
    allow_custom: bool = True
    agent: Agent | None = None
    signal: AbortSignal | None = None

    @property
    def choices(self) -> tuple[AskUserQuestionOption, ...]:
        """The options as a tuple (empty for a free-form question)."""
        return tuple(self.options or ())

    @property
    def is_free_form(self) -> bool:
        """True when there are no options to choose from."""
        return not self.options

    @property
    def accepts_custom(self) -> bool:
        """True when free text is an acceptable answer (always, for a free-form question)."""
        return self.allow_custom or self.is_free_form

    @property
    def recommended(self) -> AskUserQuestionOption | None:
        """The recommended option, if one is marked."""
        return next((option for option in self.choices if option.recommended), None)

    def option_for(self, value: str) -> AskUserQuestionOption | None:
        """Return the option whose model-facing value is ``value``, if any."""
        return next((option for option in self.choices if option.model_value == value), None)

    def with_signal(self, signal: AbortSignal | None) -> AskUserQuestionRequest:
        """Return a copy with another abort signal."""
        return replace(self, signal=signal)

    def to_dict(self, *, camel_case: bool = False) -> dict[str, Any]:
        """A JSON-ready dict of the question (the signal is not serializable and is left out)."""
        data: dict[str, Any] = {"question": self.question}
        if self.header is not None:
            data["header"] = self.header
        if self.options:
            data["options"] = [option.to_dict() for option in self.options]
        data["allowCustom" if camel_case else "allow_custom"] = self.allow_custom
        if self.agent is not None:
            data["agent"] = self.agent.to_dict()
        return data

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, signal: AbortSignal | None = None
    ) -> AskUserQuestionRequest:
        """Build a request from a dict in camelCase or snake_case.

        Raises:
            UserInteractionError: ``INVALID_REQUEST`` naming each field of the wrong type.
        """
        given: object = data  # from the wire: anything at all
        if not isinstance(given, Mapping):
            raise UserInteractionError(
                f"invalid request: expected an object, got {type(given).__name__}",
                INVALID_REQUEST,
            )
        raw = dict(given)
        agent_data = raw.pop("agent", None)
        parsed = _parse(AskUserQuestionInput, raw, "request")
        agent = None
        if agent_data is not None:
            if isinstance(agent_data, str):
                agent = Agent(agent_data)
            elif isinstance(agent_data, Mapping) and isinstance(agent_data.get("id"), str):
                agent = Agent.from_dict(agent_data)
            else:
                raise UserInteractionError(
                    "invalid request: agent must be a string id or {'id': ..., 'name': ...}",
                    INVALID_REQUEST,
                )
        return parsed.to_request(agent=agent, signal=signal)


@dataclass(frozen=True, slots=True)
class AskUserQuestionAnswer:
    """The human's answer: ``answer`` is what the model reads; ``option`` is metadata."""

    answer: str
    option: AskUserQuestionOption | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"answer": ..., "option": {...} | None}``, the ``ask_user_question`` output."""
        return {
            "answer": self.answer,
            "option": None if self.option is None else self.option.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AskUserQuestionAnswer:
        """Build an answer from :meth:`to_dict`'s form (raises ``INVALID_ANSWER``)."""
        given: object = data  # from the wire: anything at all
        if not isinstance(given, Mapping):
            raise UserInteractionError(
                f"invalid answer: expected an object, got {type(given).__name__}", INVALID_ANSWER
            )
        answer = given.get("answer")
        if not isinstance(answer, str):
            raise UserInteractionError(
                f"invalid answer: 'answer' must be a string, got {type(answer).__name__}",
                INVALID_ANSWER,
            )
        option_data = data.get("option")
        if option_data is None:
            return cls(answer)
        if not isinstance(option_data, Mapping):
            raise UserInteractionError(
                "invalid answer: 'option' must be an object or null", INVALID_ANSWER
            )
        try:
            option = AskUserQuestionOption.from_dict(option_data)
        except UserInteractionError as error:
            raise UserInteractionError(
                error.message.replace("invalid option", "invalid answer option"), INVALID_ANSWER
            ) from error
        return cls(answer, option)


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
        description="Marks the option you recommend; it is pre-selected. At most one.",
    )

    def to_option(self) -> AskUserQuestionOption:
        """Return the seam's dataclass."""
        return AskUserQuestionOption(self.label, self.value, self.description, self.recommended)


class AskUserQuestionInput(_Input):
    """The input of the ``ask_user_question`` tool (and the dict form of a request)."""

    question: str = Field(description="The question, complete and specific, ending with '?'.")
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

    def to_request(
        self, *, agent: Agent | None = None, signal: AbortSignal | None = None
    ) -> AskUserQuestionRequest:
        """Return the seam's request dataclass (not yet validated)."""
        options = None if self.options is None else [o.to_option() for o in self.options]
        return AskUserQuestionRequest(
            self.question, self.header, options, self.allow_custom, agent, signal
        )


def _parse(model: type[_M], data: Mapping[str, Any], what: str) -> _M:
    given: object = data
    if not isinstance(given, Mapping):
        raise UserInteractionError(
            f"invalid {what}: expected an object, got {type(given).__name__}", INVALID_REQUEST
        )
    try:
        return model.model_validate(dict(given))
    except ValidationError as invalid:
        raise UserInteractionError(
            f"invalid {what}: {format_validation_error(invalid)}", INVALID_REQUEST
        ) from None
