"""The request side of the user-interaction seam (options, questions, the request) and its
JSON forms (the input models that parse them, pydantic, are :mod:`._inputs`, imported when
a dict is first parsed: see :class:`DictForms`).

Plain frozen dataclasses, so that they take positional arguments as the seed's shapes do and
cost little to build; :func:`~hotseam.interaction.validate_request` checks them (``ask()``
does so before any provider sees a request). Dict input accepts the seed's camelCase
(``allowCustom``) as well as snake_case.

A request holds one question or several (:class:`Question`, 1 to :data:`MAX_QUESTIONS`).
``request.questions`` is always the tuple of them: a request built the seed's way, with one
question in its top-level fields, has one item there, ``"q1"``, built from those fields. A
request of several questions (:meth:`AskUserQuestionRequest.of`) mirrors its first
question in the top-level fields, so code written for one question still reads one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, TypeAlias

from .._core import AbortSignal, Agent
from ._errors import INVALID_REQUEST, UserInteractionError

__all__ = [
    "MAX_QUESTIONS",
    "AskUserQuestionOption",
    "AskUserQuestionRequest",
    "DictForms",
    "Question",
    "RequestForm",
    "SkipReason",
    "dict_forms",
    "parse_dicts_with",
]

MAX_QUESTIONS = 8
"""The most questions one ask may hold (Claude Code's AskUserQuestion takes 4, Codex's 3)."""

SkipReason: TypeAlias = Literal["skipped", "dismissed"]
"""Why a question the request lets the human skip has no answer: the human chose to skip
it (``"skipped"``), or closed it without answering (``"dismissed"``)."""

FIRST_ID = "q1"
"""The id of the one question of a request built from its top-level fields."""


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
        return dict_forms().parse_option(data)


@dataclass(frozen=True, slots=True)
class Question:
    """One question of an ask.

    The first four fields are those of a one-question request. ``id`` names the question in
    the answer (validation gives ``"q1"``, ``"q2"``... to questions without one);
    ``multi_select`` lets the human pick several options, between ``min_selections``
    (default 1) and ``max_selections`` (default: all of them, a custom answer counting as
    one); ``allow_skip`` lets the human leave it unanswered (its answer then says why:
    :data:`SkipReason`). No options means free-form input, as for a request.
    """

    question: str
    header: str | None = None
    options: Sequence[AskUserQuestionOption] | None = None
    allow_custom: bool = True
    id: str | None = None
    multi_select: bool = False
    min_selections: int | None = None
    max_selections: int | None = None
    allow_skip: bool = False
    # True for the question a one-question request makes of its top-level fields: it
    # follows those fields (through dataclasses.replace too) instead of being the caller's.
    _derived: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", _tuple_or_none(self.options))

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
    def is_multi_select(self) -> bool:
        """True when the human may pick several options (``multi_select`` with options)."""
        return self.multi_select and not self.is_free_form

    @property
    def recommended(self) -> AskUserQuestionOption | None:
        """The (first) recommended option, if one is marked: preselect it."""
        return next((option for option in self.choices if option.recommended), None)

    @property
    def recommended_options(self) -> tuple[AskUserQuestionOption, ...]:
        """Every recommended option, in option order (a multi-select question may have
        several: preselect them all)."""
        return tuple(option for option in self.choices if option.recommended)

    @property
    def selection_range(self) -> tuple[int, int]:
        """How many selections an answer holds, at least and at most (a custom answer
        counts as one): ``(1, 1)`` unless the question is multi-select."""
        if not self.is_multi_select:
            return (1, 1)
        most = len(self.choices) + (1 if self.allow_custom else 0)
        least = 1 if self.min_selections is None else self.min_selections
        return (least, most if self.max_selections is None else self.max_selections)

    @property
    def hint(self) -> str:
        """What the human is to do, for a one-line UI: ``"pick one, or type your own"``,
        ``"pick 1 to 3"``, ``"type your answer; optional"``..."""
        if self.is_free_form:
            text = "type your answer"
        elif not self.is_multi_select:
            text = "pick one"
        else:
            least, most = self.selection_range
            everything = len(self.choices) + (1 if self.allow_custom else 0)
            if least == most:
                text = f"pick {least}"
            elif most >= everything:
                text = {0: "pick any", 1: "pick one or more"}.get(least, f"pick {least} or more")
            else:
                text = f"pick up to {most}" if least == 0 else f"pick {least} to {most}"
        if self.allow_custom and not self.is_free_form:
            text += ", or type your own"
        return text + ("; optional" if self.allow_skip else "")

    def describe(self) -> str:
        """The question on one line, with its header and :attr:`hint`:
        ``"Storage: Which database? (pick one)"``."""
        header = f"{self.header}: " if self.header else ""
        return f"{header}{' '.join(self.question.split())} ({self.hint})"

    def option_for(self, value: str) -> AskUserQuestionOption | None:
        """Return the option whose model-facing value is ``value``, if any."""
        return next((option for option in self.choices if option.model_value == value), None)

    def to_dict(self, *, camel_case: bool = False) -> dict[str, Any]:
        """A JSON-ready dict; fields at their defaults are left out (``allow_custom`` is
        always there, as in a request's dict)."""
        data: dict[str, Any] = {"question": self.question}
        if self.id is not None:
            data["id"] = self.id
        if self.header is not None:
            data["header"] = self.header
        if self.options:
            data["options"] = [option.to_dict() for option in self.options]
        data["allowCustom" if camel_case else "allow_custom"] = self.allow_custom
        if self.multi_select:
            data["multiSelect" if camel_case else "multi_select"] = True
        if self.min_selections is not None:
            data["minSelections" if camel_case else "min_selections"] = self.min_selections
        if self.max_selections is not None:
            data["maxSelections" if camel_case else "max_selections"] = self.max_selections
        if self.allow_skip:
            data["allowSkip" if camel_case else "allow_skip"] = True
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Question:
        """Build a question from a dict in camelCase or snake_case (raises
        ``INVALID_REQUEST`` naming bad fields)."""
        return dict_forms().parse_question(data)


@dataclass(frozen=True, slots=True)
class AskUserQuestionRequest:
    """A question for the human, or several (``questions``).

    No options (``None`` or empty) means free-form input, even when ``allow_custom`` is
    false: there is nothing to constrain the answer to.

    ``questions`` is always the tuple of the questions asked: left out, it holds the one
    question of the top-level fields (id ``"q1"``). Build a request of several questions
    with :meth:`of`; its top-level fields then mirror the first question (validation
    refuses a request whose top-level fields say otherwise).
    """

    question: str
    header: str | None = None
    options: Sequence[AskUserQuestionOption] | None = None
    allow_custom: bool = True
    agent: Agent | None = None
    signal: AbortSignal | None = None
    questions: Sequence[Question] = field(default=(), kw_only=True)

    def __post_init__(self) -> None:
        given: object = self.questions
        if isinstance(given, list):
            given = tuple(given)
        if given == () or (_is_one_question(given) and _only(given)._derived):
            given = (self._derived_question(),)
        elif _is_one_question(given) and _is_plain_copy(_only(given), self):
            given = (self._derived_question(),)  # one way to say one plain question
        object.__setattr__(self, "questions", given)

    def _derived_question(self) -> Question:
        item = Question(self.question, self.header, self.options, self.allow_custom, FIRST_ID)
        object.__setattr__(item, "_derived", True)
        return item

    @classmethod
    def of(
        cls,
        questions: Sequence[Question],
        *,
        agent: Agent | None = None,
        signal: AbortSignal | None = None,
    ) -> AskUserQuestionRequest:
        """A request of ``questions`` (1 to :data:`MAX_QUESTIONS`), asked together; its
        top-level fields mirror the first one.

        Raises:
            UserInteractionError: ``INVALID_REQUEST`` when there is no first question to
                mirror (the other rules are checked by ``validate_request``).
        """
        items: object = questions
        if not isinstance(items, list | tuple) or not items:
            raise UserInteractionError(
                f"invalid request: questions must be a list of 1 to {MAX_QUESTIONS} "
                f"questions, got {_describe_value(items)}",
                INVALID_REQUEST,
            )
        first = items[0]
        if not isinstance(first, Question):
            raise UserInteractionError(
                f"invalid request: questions[0] must be a Question, got {type(first).__name__}",
                INVALID_REQUEST,
            )
        return cls(
            first.question,
            first.header,
            first.options,
            first.allow_custom,
            agent,
            signal,
            questions=tuple(items),
        )

    @property
    def is_multi_question(self) -> bool:
        """True when the request holds more than one question."""
        return len(self.questions) > 1

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

    def question_for(self, question_id: str) -> Question | None:
        """The question whose id is ``question_id``, if any."""
        return next((item for item in self.questions if item.id == question_id), None)

    def split(self) -> tuple[AskUserQuestionRequest, ...]:
        """One single-question request per question (same agent and signal): what a
        surface that shows one question at a time asks, one after the other."""
        return tuple(
            AskUserQuestionRequest.of([item], agent=self.agent, signal=self.signal)
            for item in self.questions
        )

    def with_signal(self, signal: AbortSignal | None) -> AskUserQuestionRequest:
        """Return a copy with another abort signal."""
        return replace(self, signal=signal)

    def to_dict(self, *, camel_case: bool = False) -> dict[str, Any]:
        """A JSON-ready dict of the request (the signal is not serializable and is left
        out). ``questions`` is there when the request is more than one plain question."""
        data: dict[str, Any] = {"question": self.question}
        if self.header is not None:
            data["header"] = self.header
        if self.options:
            data["options"] = [option.to_dict() for option in self.options]
        data["allowCustom" if camel_case else "allow_custom"] = self.allow_custom
        if not (_is_one_question(self.questions) and _only(self.questions)._derived):
            data["questions"] = [item.to_dict(camel_case=camel_case) for item in self.questions]
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
        parsed = dict_forms().parse_request(raw)
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


def _tuple_or_none(options: object) -> Any:
    """Options as validation gives them: a tuple, or ``None`` when there are none (anything
    else is left for validation to name)."""
    if isinstance(options, list | tuple):
        return tuple(options) or None
    return options


def _is_one_question(items: object) -> bool:
    return isinstance(items, tuple) and len(items) == 1 and isinstance(items[0], Question)


def _only(items: object) -> Question:
    assert isinstance(items, tuple)
    item: Question = items[0]
    return item


def _is_plain_copy(item: Question, request: AskUserQuestionRequest) -> bool:
    """Whether ``item`` says nothing the top-level fields of ``request`` do not."""
    return (
        item.id in (None, FIRST_ID)
        and item.multi_select is False
        and item.min_selections is None
        and item.max_selections is None
        and item.allow_skip is False
        and item.question == request.question
        and item.header == request.header
        and item.options == _tuple_or_none(request.options)
        and item.allow_custom == request.allow_custom
    )


def _describe_value(value: object) -> str:
    return "an empty list" if isinstance(value, list | tuple) else type(value).__name__


# -- the dict forms ----------------------------------------------------------------------------


class RequestForm(Protocol):
    """A request's dict form, checked (an ``AskUserQuestionInput``)."""

    def to_request(
        self, *, agent: Agent | None = None, signal: AbortSignal | None = None
    ) -> AskUserQuestionRequest:
        """The request it describes."""
        ...


class DictForms(Protocol):
    """What parses the dict forms of the request side: the pydantic input models.

    They build this module's dataclasses, so they sit above it, and this module owns the
    protocol they implement; ``hotseam.interaction`` installs them (:func:`parse_dicts_with`)
    to be imported at the first dict parsed. Building a request in code never imports
    pydantic (about a third of ``hotseam run``'s start).
    """

    def parse_option(self, data: Mapping[str, Any]) -> AskUserQuestionOption:
        """An option from its dict form (``INVALID_REQUEST`` naming each bad field)."""
        ...

    def parse_question(self, data: Mapping[str, Any]) -> Question:
        """A question from its dict form (``INVALID_REQUEST`` naming each bad field)."""
        ...

    def parse_request(self, data: Mapping[str, Any]) -> RequestForm:
        """A request's dict form, checked (``INVALID_REQUEST`` naming each bad field)."""
        ...


_load_dict_forms: Callable[[], DictForms] | None = None


def parse_dicts_with(load: Callable[[], DictForms]) -> None:
    """Parse dict forms with what ``load()`` returns (called at each parse: it imports the
    input models the first time, then returns them)."""
    global _load_dict_forms
    _load_dict_forms = load


def dict_forms() -> DictForms:
    """The installed parsers of the dict forms."""
    if _load_dict_forms is None:  # never: importing this module runs the package's first
        raise RuntimeError("hotseam.interaction has not installed its input models")
    return _load_dict_forms()
