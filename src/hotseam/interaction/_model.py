"""The ask's model: the request (options, questions) and its answer (one entry per
question), with their rules and their dict forms.

A request *is* its questions (:class:`Question`, 1 to :data:`MAX_QUESTIONS`): it stores
them, its agent and its signal, nothing else. The seed's one-question vocabulary
(``AskUserQuestionRequest(question, header, options, allow_custom, agent, signal)``,
``request.question``...) builds a request of one question and reads its first question,
never a second state. Likewise ``AskUserQuestionAnswer(answer, option)`` stays the seed's
answer to one question: ``answers`` then holds the one entry those two say
(:func:`implied_entry`, which follows them, through ``dataclasses.replace`` too), and such
an answer is read as text (:func:`answered_in_text`), as a one-question UI answers.

Plain frozen dataclasses: positional arguments as the seed's shapes, cheap to build. Their
rules (:func:`validate_request`, which ``ask()`` runs before any provider sees a request;
:func:`check_answer`) raise errors that name the field and never quote the human. Their
dict forms are the pydantic models of :mod:`._inputs`, imported at the first dict parsed.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, NoReturn, get_args

from .._core import AbortSignal, Agent
from ._approval import Approval
from ._errors import ErrorCode, UserInteractionError
from ._limits import MAX_QUESTIONS, SkipReason

if TYPE_CHECKING:
    from ._inputs import AskUserQuestionInput, AskUserQuestionOptionInput, QuestionInput

_NUMBER = re.compile(r"(\d{1,6})[.)]?")
_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
Problems = list[tuple[str, str]]


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
        return {"label": self.label, **_set_fields(self, ("value", "description", "recommended"))}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AskUserQuestionOption:
        """Build an option from a dict (raises ``INVALID_REQUEST`` naming bad fields)."""
        from ._inputs import AskUserQuestionOptionInput, parse_input

        return cls.from_input(parse_input(AskUserQuestionOptionInput, data, "option"))

    @classmethod
    def from_input(cls, given: AskUserQuestionOptionInput) -> AskUserQuestionOption:
        """The option a checked dict form describes."""
        return cls(given.label, given.value, given.description, given.recommended)


@dataclass(frozen=True, slots=True)
class Question:
    """One question of an ask; the first four fields are a one-question request's.

    ``id`` names it in the answer (validation gives ``"q1"``, ``"q2"``... to those without);
    ``multi_select`` takes between ``min_selections`` (default 1) and ``max_selections``
    (default all, a custom answer counting as one); ``allow_skip`` lets the human leave it
    unanswered (:data:`SkipReason` says why). No options means free-form input.
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

    def __post_init__(self) -> None:
        options: object = self.options  # a tuple, or None when there are none
        if isinstance(options, list | tuple):  # anything else is validation's to name
            object.__setattr__(self, "options", tuple(options) or None)

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
        """Every recommended option, in order (preselect them all)."""
        return tuple(option for option in self.choices if option.recommended)

    @property
    def selection_range(self) -> tuple[int, int]:
        """How many selections an answer holds, at least and at most (custom text is one)."""
        if not self.is_multi_select:
            return (1, 1)
        most = len(self.choices) + (1 if self.allow_custom else 0)
        least = 1 if self.min_selections is None else self.min_selections
        return (least, most if self.max_selections is None else self.max_selections)

    @property
    def how_many(self) -> str:
        """How many to pick, in words (``"pick one"``, ``"pick 1 to 3"``, ``"pick any"``...),
        the start of :attr:`hint`, for a UI that words the rest its own way."""
        if not self.is_multi_select:
            return "pick one"
        least, most = self.selection_range
        everything = len(self.choices) + (1 if self.allow_custom else 0)
        if least == most:
            return f"pick {least}"
        if most >= everything:
            return {0: "pick any", 1: "pick one or more"}.get(least, f"pick {least} or more")
        return f"pick up to {most}" if least == 0 else f"pick {least} to {most}"

    @property
    def hint(self) -> str:
        """What the human is to do, for a one-line UI (``"pick 1 to 3"``...)."""
        text = "type your answer" if self.is_free_form else self.how_many
        if self.allow_custom and not self.is_free_form:
            text += ", or type your own"
        return text + ("; optional" if self.allow_skip else "")

    def describe(self) -> str:
        """One line: ``"Storage: Which database? (pick one)"`` (header, text, :attr:`hint`)."""
        header = f"{self.header}: " if self.header else ""
        return f"{header}{' '.join(self.question.split())} ({self.hint})"

    def option_for(self, value: str) -> AskUserQuestionOption | None:
        """The option whose model value is exactly ``value``: how a text answer is read."""
        return next((option for option in self.choices if option.model_value == value), None)

    def option_named(self, text: str) -> AskUserQuestionOption | None:
        """The option a typed reply names, if exactly one (every surface that reads typed
        text matches with this).

        By label or model value, ignoring case, spacing and a trailing ``(Recommended)``;
        else by number (``2``, ``2.``, ``2)``), tried after names (an option may be called
        ``"2"``). Text naming two options names none: it is never read as either.
        """
        wanted = _folded(text)
        if not wanted:
            return None
        choices = self.choices
        named = [option for option in choices if wanted in _names(option)]
        if not named:
            stripped = _folded(_drop_suffix(text))
            if stripped != wanted:
                named = [option for option in choices if stripped in _names(option)]
        if len(named) == 1:
            return named[0]
        if named:
            return None  # ambiguous
        number = _NUMBER.fullmatch(text.strip())
        if number is not None and 1 <= int(number.group(1)) <= len(choices):
            return choices[int(number.group(1)) - 1]
        return None

    def to_dict(self, *, camel_case: bool = False) -> dict[str, Any]:
        """A JSON-ready dict without the fields at their defaults (but ``allow_custom``)."""
        data: dict[str, Any] = {"question": self.question, **_set_fields(self, ("id", "header"))}
        if self.options:
            data["options"] = [option.to_dict() for option in self.options]
        flags = _set_fields(self, _CAMEL) | {"allow_custom": self.allow_custom}
        for name, camel in _CAMEL.items():
            if name in flags:
                data[camel if camel_case else name] = flags[name]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Question:
        """Build a question from a dict, camelCase or snake_case (or ``INVALID_REQUEST``)."""
        from ._inputs import QuestionInput, parse_input

        return cls.from_input(parse_input(QuestionInput, data, "question"))

    @classmethod
    def from_input(cls, given: QuestionInput) -> Question:
        """The question a checked dict form describes."""
        return cls(
            given.question,
            given.header,
            _options_of(given.options),
            given.allow_custom,
            given.id,
            given.multi_select,
            given.min_selections,
            given.max_selections,
            given.allow_skip,
        )


_CAMEL = {
    "allow_custom": "allowCustom",
    "multi_select": "multiSelect",
    "min_selections": "minSelections",
    "max_selections": "maxSelections",
    "allow_skip": "allowSkip",
}
"""The flags of a question's dict form, in order, with their camelCase names."""

_SEED = ("question", "header", "options", "allow_custom")
"""The fields of a one-question request, as the seed has them."""

_UNSET: Any = type("_Unset", (), {"__repr__": lambda self: "<unset>", "__slots__": ()})()
"""A seed field not given (``None`` is a value: no header, no options)."""


@dataclass(frozen=True, slots=True, init=False)
class AskUserQuestionRequest:
    """A question for the human, or several: a request is its ``questions``.

    Build one the seed's way, ``AskUserQuestionRequest(question, header, options,
    allow_custom, agent, signal)``, or several with :meth:`of` (or ``questions=``; the
    seed's fields given beside it set the first question's). A lone question is ``"q1"``
    unless it has an id; the seed's names (``request.question``...) read the first one.

    No options (``None`` or empty) means free-form input, even when ``allow_custom`` is
    false: there is nothing to constrain the answer to.
    """

    questions: tuple[Question, ...]
    agent: Agent | None = None
    signal: AbortSignal | None = None
    approval: Approval | None = None
    """Set when the request asks to approve a tool call (see ``approval_request``): the
    questions ask it in the seed's vocabulary, and a provider may render this instead."""

    def __init__(
        self,
        question: str = _UNSET,
        header: str | None = _UNSET,
        options: Sequence[AskUserQuestionOption] | None = _UNSET,
        allow_custom: bool = _UNSET,
        agent: Agent | None = None,
        signal: AbortSignal | None = None,
        *,
        questions: Sequence[Question] = (),
        approval: Approval | None = None,
    ) -> None:
        items: object = tuple(questions) if isinstance(questions, list | tuple) else questions
        if items == ():  # the seed's way: one question of these fields
            if question is _UNSET:
                raise TypeError("AskUserQuestionRequest() needs a question (or questions=)")
            items = (
                Question(
                    question,
                    None if header is _UNSET else header,
                    None if options is _UNSET else options,
                    True if allow_custom is _UNSET else allow_custom,
                    "q1",
                ),
            )
        elif isinstance(items, tuple) and isinstance(items[0], Question):
            values: tuple[Any, ...] = (question, header, options, allow_custom)
            given = {n: v for n, v in zip(_SEED, values, strict=True) if v is not _UNSET}
            if given:
                items = (replace(items[0], **given), *items[1:])
            if len(items) == 1 and items[0].id is None:
                items = (replace(items[0], id="q1"),)  # as validation names it
        object.__setattr__(self, "questions", items)
        object.__setattr__(self, "agent", agent)
        object.__setattr__(self, "signal", signal)
        object.__setattr__(self, "approval", approval)

    @classmethod
    def of(
        cls,
        questions: Sequence[Question],
        *,
        agent: Agent | None = None,
        signal: AbortSignal | None = None,
        approval: Approval | None = None,
    ) -> AskUserQuestionRequest:
        """A request of ``questions`` (1 to :data:`MAX_QUESTIONS`), asked together.

        Raises:
            UserInteractionError: ``INVALID_REQUEST`` when there is no question (the other
                rules are checked by ``validate_request``).
        """
        items: object = questions
        if not isinstance(items, list | tuple) or not items:
            raise _invalid(
                f"invalid request: questions must be a list of 1 to {MAX_QUESTIONS} "
                f"questions, got {_describe_value(items)}"
            )
        first = items[0]
        if not isinstance(first, Question):
            raise _invalid(
                f"invalid request: questions[0] must be a Question, got {type(first).__name__}"
            )
        return cls(agent=agent, signal=signal, questions=tuple(items), approval=approval)

    # -- the seed's names, read from the first question --

    @property
    def first(self) -> Question:
        """The first question (the only one, for a one-question request)."""
        return self.questions[0]

    @property
    def question(self) -> str:
        """The first question's text."""
        return self.first.question

    @property
    def header(self) -> str | None:
        """The first question's header."""
        return self.first.header

    @property
    def options(self) -> Sequence[AskUserQuestionOption] | None:
        """The first question's options (``None`` for a free-form question)."""
        return self.first.options

    @property
    def allow_custom(self) -> bool:
        """Whether the first question takes an answer of the human's own."""
        return self.first.allow_custom

    @property
    def choices(self) -> tuple[AskUserQuestionOption, ...]:
        """The first question's options as a tuple (empty for a free-form question)."""
        return self.first.choices

    @property
    def is_free_form(self) -> bool:
        """True when the first question has no options to choose from."""
        return self.first.is_free_form

    @property
    def accepts_custom(self) -> bool:
        """True when free text answers the first question (always, when free-form)."""
        return self.first.accepts_custom

    @property
    def recommended(self) -> AskUserQuestionOption | None:
        """The first question's recommended option, if one is marked."""
        return self.first.recommended

    def option_for(self, value: str) -> AskUserQuestionOption | None:
        """The first question's option whose model-facing value is ``value``, if any."""
        return self.first.option_for(value)

    def option_named(self, text: str) -> AskUserQuestionOption | None:
        """The first question's option a reply names (see :meth:`Question.option_named`)."""
        return self.first.option_named(text)

    # -- the questions --

    def question_for(self, question_id: str) -> Question | None:
        """The question whose id is ``question_id``, if any."""
        return next((item for item in self.questions if item.id == question_id), None)

    def parts(
        self, answered: Container[str] = (), *, together: bool = False
    ) -> tuple[AskUserQuestionRequest, ...]:
        """What a provider is asked of this request, the ids in ``answered`` left out: one
        request per question (same agent and signal), for a surface showing one at a time;
        or, with ``together``, the rest in one. A part holding every question is this
        request itself, so that its answer is the whole request's.
        """
        if not answered and (together or len(self.questions) == 1):
            return (self,)
        rest = [item for item in self.questions if item.id not in answered]
        if together:
            return (self._of(rest),) if rest else ()
        return tuple(self._of([item]) for item in rest)

    def _of(self, questions: list[Question]) -> AskUserQuestionRequest:
        return AskUserQuestionRequest(
            agent=self.agent, signal=self.signal, questions=questions, approval=self.approval
        )

    def with_signal(self, signal: AbortSignal | None) -> AskUserQuestionRequest:
        """Return a copy with another abort signal."""
        return AskUserQuestionRequest(
            agent=self.agent, signal=signal, questions=self.questions, approval=self.approval
        )

    def to_dict(self, *, camel_case: bool = False) -> dict[str, Any]:
        """A JSON-ready dict (without the signal): the first question's fields at the top,
        and ``questions`` unless the request is in the seed's form."""
        top = ("question", "header", "options", "allowCustom" if camel_case else "allow_custom")
        first = self.first.to_dict(camel_case=camel_case)
        data = {name: value for name, value in first.items() if name in top}
        if not in_seed_form(self.questions):
            data["questions"] = [item.to_dict(camel_case=camel_case) for item in self.questions]
        if self.agent is not None:
            data["agent"] = self.agent.to_dict()
        if self.approval is not None:
            data["approval"] = self.approval.to_dict()
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
            raise _invalid(f"invalid request: expected an object, got {type(given).__name__}")
        from ._inputs import AskUserQuestionInput, parse_input

        raw = dict(given)
        agent_data = raw.pop("agent", None)
        approval_data = raw.pop("approval", None)
        parsed = parse_input(AskUserQuestionInput, raw, "request")
        agent = None
        if agent_data is not None:
            if isinstance(agent_data, str):
                agent = Agent(agent_data)
            elif isinstance(agent_data, Mapping) and isinstance(agent_data.get("id"), str):
                agent = Agent.from_dict(agent_data)
            else:
                raise _invalid(
                    "invalid request: agent must be a string id or {'id': ..., 'name': ...}"
                )
        request = cls.from_input(parsed, agent=agent, signal=signal)
        if approval_data is None:
            return request
        return request.with_approval(Approval.from_dict(approval_data))

    def with_approval(self, approval: Approval | None) -> AskUserQuestionRequest:
        """Return a copy asking to approve ``approval`` (or, None, a plain question)."""
        return AskUserQuestionRequest(
            agent=self.agent, signal=self.signal, questions=self.questions, approval=approval
        )

    @classmethod
    def from_input(
        cls,
        given: AskUserQuestionInput,
        *,
        agent: Agent | None = None,
        signal: AbortSignal | None = None,
    ) -> AskUserQuestionRequest:
        """The request (not yet validated) a checked dict form describes. With
        ``questions``, the top-level fields left out or at their defaults say nothing;
        given, they must agree with the first question.

        Raises:
            UserInteractionError: ``INVALID_REQUEST`` when neither ``question`` nor
                ``questions`` is given, or a top-level field differs from the first question.
        """
        options = _options_of(given.options)
        if given.questions is None:
            if "question" not in given.model_fields_set:
                raise _invalid(
                    "invalid request: question: Field required (or give questions: a list "
                    f"of 1 to {MAX_QUESTIONS} questions)"
                )
            return cls(given.question, given.header, options, given.allow_custom, agent, signal)
        items = [Question.from_input(item) for item in given.questions]
        first = items[0]
        top: dict[str, object] = {"question": given.question}
        if given.header is not None:
            top["header"] = given.header
        if options is not None:
            top["options"] = tuple(options) or None
        if not given.allow_custom:
            top["allow_custom"] = False
        differing = [name for name, value in top.items() if value != getattr(first, name)]
        if differing:
            _raise(
                [
                    (
                        name,
                        f"differs from questions[0].{name} (the top-level fields mirror the "
                        "first question: build the request with "
                        "AskUserQuestionRequest.of(questions))",
                    )
                    for name in differing
                ]
            )
        return cls.of(items, agent=agent, signal=signal)


def in_seed_form(questions: object) -> bool:
    """Whether ``questions`` is one question the seed's fields can say: such a request keeps
    the seed's dict form and field names in errors."""
    if not (isinstance(questions, tuple) and len(questions) == 1):
        return False
    item = questions[0]
    return (
        isinstance(item, Question)
        and item.id in (None, "q1")
        and item.multi_select is False
        and item.min_selections is None
        and item.max_selections is None
        and item.allow_skip is False
    )


def _folded(text: str) -> str:
    return " ".join(text.split()).casefold()


def _names(option: AskUserQuestionOption) -> tuple[str, str]:
    label: object = option.label
    return (_folded(label) if isinstance(label, str) else "", _folded(option.model_value))


_SUFFIX = "(recommended)"


def _drop_suffix(text: str) -> str:
    stripped = text.rstrip()
    if stripped.casefold().endswith(_SUFFIX):
        return stripped[: -len(_SUFFIX)]
    return text


def _set_fields(item: object, names: Iterable[str]) -> dict[str, Any]:
    """The fields of ``names`` not at their default (``None``, ``False``), for a dict form."""
    return {
        name: value
        for name in names
        if (value := getattr(item, name)) is not None and value is not False
    }


def _describe_value(value: object) -> str:
    return "an empty list" if isinstance(value, list | tuple) else type(value).__name__


def _options_of(
    given: Sequence[AskUserQuestionOptionInput] | None,
) -> list[AskUserQuestionOption] | None:
    return None if given is None else [AskUserQuestionOption.from_input(o) for o in given]


# -- the request's rules --


def validate_request(request: object) -> AskUserQuestionRequest:
    """Check every rule of the seam; return the request with options as tuples (empty:
    ``None``, free-form) and every id given (``"q1"``...). A request in the seed's form is
    named in the seed's vocabulary (``options[2].value``), any other by its questions'.

    Raises:
        UserInteractionError: ``INVALID_REQUEST``, naming every broken rule, for example
            ``options[2].value duplicates options[0].value`` or
            ``questions[1].id duplicates questions[0].id``.
    """
    if not isinstance(request, AskUserQuestionRequest):
        raise _invalid(
            f"invalid request: expected an AskUserQuestionRequest, got {type(request).__name__}"
        )
    problems: Problems = []
    # Callers may ignore the type hints; every field is checked as the object it really is.
    agent: object = request.agent
    signal: object = request.signal
    if agent is not None and not isinstance(agent, Agent):
        problems.append(("agent", wrong_type("an Agent", agent)))
    if signal is not None and not isinstance(signal, AbortSignal):
        problems.append(("signal", wrong_type("an AbortSignal", signal)))
    approval: object = request.approval
    if approval is not None and not isinstance(approval, Approval):
        problems.append(("approval", wrong_type("an Approval", approval)))
    items: object = request.questions
    questions = _check_questions(problems, items)
    if problems:
        _raise(problems)
    assert questions is not None
    if all(map(operator.is_, questions, request.questions)):
        return request
    return AskUserQuestionRequest(
        agent=request.agent, signal=request.signal, questions=questions, approval=request.approval
    )


def _check_questions(problems: Problems, items: object) -> tuple[Question, ...] | None:
    """Each question's rules; the questions with their ids given, or ``None``."""
    if not isinstance(items, tuple):
        problems.append(("questions", wrong_type("a list of questions", items)))
        return None
    if not 1 <= len(items) <= MAX_QUESTIONS:
        problems.append(("questions", f"holds {len(items)} questions; give 1 to {MAX_QUESTIONS}"))
        return None
    if in_seed_form(items):
        return (_check_question(problems, "", items[0], 0, {}),)
    ids: dict[str, int] = {}
    texts: dict[str, int] = {}
    for index, item in enumerate(items):
        if isinstance(item, Question) and isinstance(item.id, str):
            ids.setdefault(item.id, index)
    checked: list[Question] = []
    for index, item in enumerate(items):
        path = f"questions[{index}]"
        if not isinstance(item, Question):
            problems.append((path, wrong_type("a Question", item)))
            continue
        checked.append(_check_question(problems, path + ".", item, index, ids))
        if _check_text([], "", item.question, required=True):
            key = " ".join(item.question.split()).casefold()
            if key in texts:
                problems.append(
                    (f"{path}.question", f"duplicates questions[{texts[key]}].question")
                )
            else:
                texts[key] = index
    return tuple(checked)


def _check_question(
    problems: Problems, path: str, item: Question, index: int, ids: dict[str, int]
) -> Question:
    """The rules of one question, its fields named ``{path}question``... (``path`` is
    ``""`` for the seed's one question); returns it with its id and options normalized."""
    seed = not path  # its other flags are False (see in_seed_form)
    flags: dict[str, object] = {"allow_custom": item.allow_custom}
    if not seed:
        flags.update(multi_select=item.multi_select, allow_skip=item.allow_skip)
    _check_text(problems, f"{path}question", item.question, required=True)
    _check_text(problems, f"{path}header", item.header, required=False)
    for name, flag in flags.items():
        if not isinstance(flag, bool):
            problems.append((f"{path}{name}", wrong_type("a bool", flag)))
    question_id = "q1" if seed else _check_id(problems, path[:-1], item.id, index, ids)
    raw_options: object = item.options
    options: tuple[AskUserQuestionOption, ...] | None = None
    multi = item.multi_select is True
    # A single-select question recommends at most one option.
    one = "" if seed else None if multi else " (or make the question multi_select)"
    if raw_options is not None:
        if isinstance(raw_options, tuple):
            options = raw_options or None
            _check_options(problems, options or (), f"{path}options", one)
        else:
            problems.append((f"{path}options", wrong_type("a list of options", raw_options)))
    if not seed:
        if multi and raw_options is None:
            problems.append((f"{path}multi_select", "needs options to choose from"))
        _check_selections(problems, path[:-1], item, options, multi=multi)
    if question_id == item.id and options is raw_options:
        return item
    return replace(item, id=question_id, options=options)


def _check_id(problems: Problems, path: str, given: object, index: int, ids: dict[str, int]) -> str:
    if given is None:
        default = f"q{index + 1}"
        if default in ids:
            problems.append(
                (
                    f"{path}.id",
                    f"is missing, and its default {default!r} is questions[{ids[default]}].id; "
                    "give it an id",
                )
            )
        return default
    if not isinstance(given, str):
        problems.append((f"{path}.id", wrong_type("a string", given)))
        return f"q{index + 1}"
    if not _ID.fullmatch(given):
        problems.append((f"{path}.id", "must be 1-64 letters, digits, '_', '-' or '.'"))
    elif ids[given] != index:
        problems.append((f"{path}.id", f"duplicates questions[{ids[given]}].id"))
    return given


def _check_selections(
    problems: Problems,
    path: str,
    item: Question,
    options: tuple[AskUserQuestionOption, ...] | None,
    *,
    multi: bool,
) -> None:
    """min/max selections, and how many options may be recommended."""
    bounds: dict[str, object] = {
        "min_selections": item.min_selections,
        "max_selections": item.max_selections,
    }
    least_allowed = {"min_selections": 0, "max_selections": 1}
    numbers: dict[str, int] = {}
    for name, value in bounds.items():
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            problems.append((f"{path}.{name}", wrong_type("an int", value)))
        elif not multi:
            problems.append((f"{path}.{name}", "is only for a multi_select question"))
        elif value < least_allowed[name]:
            problems.append((f"{path}.{name}", f"is {value}; it must be >= {least_allowed[name]}"))
        else:
            numbers[name] = value
    if not multi or options is None:
        return
    possible = len(options) + (1 if item.allow_custom is True else 0)
    what = f"{len(options)} options" + (" and a custom answer" if item.allow_custom else "")
    least = numbers.get("min_selections")
    most = numbers.get("max_selections")
    if least is not None and most is not None and least > most:
        problems.append((f"{path}.min_selections", f"is {least}, more than max_selections {most}"))
    for name, value in (("min_selections", least), ("max_selections", most)):
        if value is not None and value > possible:
            problems.append(
                (f"{path}.{name}", f"is {value}, but at most {possible} can be chosen ({what})")
            )
    limit = possible if most is None else most
    recommended = [
        i
        for i, option in enumerate(options)
        if isinstance(option, AskUserQuestionOption) and option.recommended is True
    ]
    if len(recommended) > limit:
        problems.append(
            (
                f"{path}.options[{recommended[limit]}].recommended",
                f"is recommended option {limit + 1}, but at most {limit} can be chosen "
                "(max_selections)",
            )
        )


def _invalid(message: str) -> UserInteractionError:
    return UserInteractionError(message, ErrorCode.INVALID_REQUEST)


def _raise(problems: Problems) -> NoReturn:
    message = "; ".join(f"{field} {problem}" for field, problem in problems)
    raise UserInteractionError(
        f"invalid request: {message}",
        ErrorCode.INVALID_REQUEST,
        details={"errors": [{"field": f, "message": p} for f, p in problems]},
    )


def _check_options(
    problems: Problems, options: tuple[AskUserQuestionOption, ...], prefix: str, one: str | None
) -> None:
    """The options' own rules; ``one``: at most one recommended (said with this hint)."""
    labels: dict[str, int] = {}
    values: dict[str, int] = {}
    recommended: int | None = None
    items: tuple[object, ...] = options
    for index, item in enumerate(items):
        where = f"{prefix}[{index}]"
        if not isinstance(item, AskUserQuestionOption):
            problems.append((where, wrong_type("an AskUserQuestionOption", item)))
            continue
        option = item
        recommended_flag: object = option.recommended
        label_ok = _check_text(problems, f"{where}.label", option.label, required=True)
        value_ok = _check_text(problems, f"{where}.value", option.value, required=False)
        _check_text(problems, f"{where}.description", option.description, required=False)
        if not isinstance(recommended_flag, bool):
            problems.append((f"{where}.recommended", wrong_type("a bool", recommended_flag)))
        elif recommended_flag and one is not None:
            if recommended is None:
                recommended = index
            else:
                problems.append(
                    (
                        f"{where}.recommended",
                        f"is a second recommended option (options[{recommended}] already is); "
                        f"mark at most one{one}",
                    )
                )
        if label_ok:
            key = option.label.strip().casefold()
            if key in labels:
                problems.append(
                    (
                        f"{where}.label",
                        f"duplicates {prefix}[{labels[key]}].label (labels are matched "
                        "case-insensitively)",
                    )
                )
            else:
                labels[key] = index
        if label_ok and value_ok:
            value = option.model_value
            if value in values:
                first = values[value]
                problems.append(
                    (
                        f"{where}.value",
                        f"duplicates {prefix}[{first}].value (the model could not tell them apart)",
                    )
                )
            else:
                values[value] = index


def _check_text(problems: Problems, field: str, value: object, *, required: bool) -> bool:
    if value is None:
        if required:
            problems.append((field, "is required"))
            return False
        return True
    if not isinstance(value, str):
        problems.append((field, wrong_type("a string", value)))
        return False
    if not value.strip():
        problems.append((field, "is blank" if required else "is blank (leave it out instead)"))
        return False
    return True


def wrong_type(expected: str, value: Any) -> str:
    return f"must be {expected}, got {type(value).__name__}"


SKIP_REASONS: tuple[str, ...] = get_args(SkipReason)


@dataclass(frozen=True, slots=True)
class QuestionAnswer:
    """The answer to one question of an ask.

    Attributes:
        id: The question's id.
        answer: What the model reads: the chosen options' model values in option order
            joined by ``", "``, then the custom text; ``""`` for an empty selection
            (``min_selections=0``); ``None`` when skipped.
        options: The options chosen, in option order.
        custom: The human's own text, if they typed one.
        skipped: Why there is no answer (:data:`~hotseam.interaction.SkipReason`), or
            ``None``.

    Build one with :meth:`chosen` or :meth:`skip`. ``check_answer`` recomputes ``answer``
    (the structured part counts); an entry of ``answer`` text alone is read as text.
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
        """The entry for what the human selected: ``choices`` (options of ``question`` or
        their model values, any order) and ``custom`` text (blank is none); ``check_answer``
        checks how many.

        Raises:
            UserInteractionError: ``INVALID_ANSWER`` when a choice is none of the options.
            ValueError: ``question`` has no id (validate the request first).
        """
        question_id = _id_of(question)
        picked: set[int] = set()
        for choice in choices:
            index = _index_of(question, choice)
            if index is None:
                raise _refused(f"{where(question)}: a choice that is none of its options")
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
        """A JSON-ready dict (``custom`` and ``skipped`` only when set)."""
        options = [option.to_dict() for option in self.options]
        data: dict[str, Any] = {"id": self.id, "answer": self.answer, "options": options}
        return data | _set_fields(self, ("custom", "skipped"))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QuestionAnswer:
        """Build an entry from :meth:`to_dict`'s form (or ``INVALID_ANSWER``)."""
        from ._inputs import AnswerEntryInput, parse_input  # pydantic: at the first dict

        given = parse_input(AnswerEntryInput, data, "answer", ErrorCode.INVALID_ANSWER)
        options = tuple(AskUserQuestionOption.from_input(option) for option in given.options)
        return cls(given.id, given.answer, options, given.custom, given.skipped)


@dataclass(frozen=True, slots=True)
class AskUserQuestionAnswer:
    """The human's answer: ``answer`` is what the model reads; ``option`` is metadata.

    ``answers`` holds one :class:`QuestionAnswer` per question; for several (:meth:`of`),
    ``answer`` is a summary, a line per question (``"Which database? pg"``), and ``option``
    is ``None``.
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
        """The answer of one entry per question; with ``request``, in question order and
        the summary naming each question by its text (else by its id)."""
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
        """``{"answer": ..., "option": {...} | None}`` (the tool's output for one question),
        plus ``"answers"`` when it says more than the seed's answer."""
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
            raise _refused(f"invalid answer: expected an object, got {type(given).__name__}")
        answer = given.get("answer")
        if not isinstance(answer, str):
            raise _refused(
                f"invalid answer: 'answer' must be a string, got {type(answer).__name__}"
            )
        entries = _entries_from(given.get("answers"))
        option_data = data.get("option")
        if option_data is None:
            return cls(answer, answers=entries)
        if not isinstance(option_data, Mapping):
            raise _refused("invalid answer: 'option' must be an object or null")
        try:
            option = AskUserQuestionOption.from_dict(option_data)
        except UserInteractionError as error:
            raise _refused(
                error.message.replace("invalid option", "invalid answer option")
            ) from error
        return cls(answer, option, answers=entries)


def implied_entry(answer: AskUserQuestionAnswer) -> QuestionAnswer:
    """The entry ``"q1"`` that ``answer``'s text and option say (the option, or own text)."""
    if answer.option is None:
        return QuestionAnswer("q1", answer.answer, (), answer.answer)
    return QuestionAnswer("q1", answer.answer, (answer.option,))


def answered_in_text(answer: AskUserQuestionAnswer) -> bool:
    """Whether ``answer`` is the seed's (its entries say nothing more than its text and
    option): the seam reads its text and completes the option."""
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


def _refused(message: str) -> UserInteractionError:
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
        raise _refused("invalid answer: 'answers' must be a non-empty list of answers")
    entries = []
    for index, item in enumerate(data):
        try:
            entries.append(QuestionAnswer.from_dict(item))
        except UserInteractionError as error:
            detail = error.message.removeprefix("invalid answer: ")
            raise _refused(f"invalid answer: answers[{index}]: {detail}") from None
    return tuple(entries)


# -- the answer's rules --


def check_answer(request: AskUserQuestionRequest, answer: object) -> AskUserQuestionAnswer:
    """Check a provider's answer against the (validated) request and complete it.

    A text answer (the seed's ``AskUserQuestionAnswer(answer, option)``) to one question gets
    the option whose model value is the text (else none); text that is no option of a
    question without custom answers breaks the provider's contract. Otherwise ``answers``
    holds one checked entry per question (:func:`check_question_answer`), in order.

    Raises:
        UserInteractionError: ``INVALID_ANSWER`` saying what is wrong, naming the question
            (``questions[1] (Which features?)``) and never quoting what the human typed.
    """
    if not isinstance(answer, AskUserQuestionAnswer):
        raise _refused(
            f"the provider returned {type(answer).__name__}, not an AskUserQuestionAnswer"
        )
    items = request.questions
    seed = in_seed_form(items)
    in_text = answered_in_text(answer)
    if in_text and len(items) > 1:
        raise _refused(
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
    """``answer``'s entries for the questions ``asked`` (a text answer to one question is
    its answer, whatever id it was given)."""
    if len(asked) == 1 and answered_in_text(answer):
        return (QuestionAnswer(str(asked[0].id), answer.answer),)
    return tuple(answer.answers)


def _text_of(text: object, named: str, what: str = "the answer") -> str:
    """The text of an answer, checked (``named`` ``""``: the seed's one question)."""
    if not isinstance(text, str):
        subject = f"{named}: {what}" if named else "the provider's answer"
        raise _refused(f"{subject} must be a string, got {type(text).__name__}")
    if not text.strip():
        if not named:
            raise _refused(
                "the provider returned a blank answer (a UI should re-prompt, or decline/cancel)"
            )
        raise _refused(f"{named}: {what} is blank (a UI should re-prompt, or decline/cancel)")
    return text


def _from_text(question: Question, text: object, named: str) -> QuestionAnswer:
    """The entry of a question answered with text: an option's model value, else (multi-
    select) option values joined by ``","``, else the human's own text."""
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
    """Refuse text that is no option unless custom answers are accepted (described, never
    quoted: errors reach the logs)."""
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
    """Check one question's answer (``question`` validated; ``index`` names it in errors)
    and return it normalized: the question's own options, in order, ``answer`` computed.

    Skipped only with ``allow_skip`` (and no selection); every option the question's; custom
    text only when accepted, never blank; exactly one value unless multi-select, which takes
    ``min_selections`` to ``max_selections`` (custom text counts as one). An entry of
    ``answer`` text alone is read as text.

    Raises:
        UserInteractionError: ``INVALID_ANSWER`` naming the question.
    """
    named = where(question, index)
    if not isinstance(entry, QuestionAnswer):
        raise _refused(f"{named}: the answer must be a QuestionAnswer, got {type(entry).__name__}")
    assert question.id is not None
    if entry.skipped is not None:
        return _skipped(question, named, entry)
    options: object = entry.options
    if not isinstance(options, tuple):
        raise _refused(f"{named}: options {wrong_type('a tuple of options', options)}")
    custom: object = entry.custom
    if not options and custom is None and entry.answer:  # text, as a one-question UI gives
        return _check_count(question, named, _from_text(question, entry.answer, named))
    chosen: set[int] = set()
    for position, option in enumerate(options):
        index_of = (
            _index_of(question, option) if isinstance(option, AskUserQuestionOption) else None
        )
        if index_of is None:
            raise _refused(f"{named}: options[{position}] is none of the question's options")
        if index_of in chosen:
            raise _refused(f"{named}: options[{position}] chooses an option a second time")
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
        raise _refused(
            f"{named}: was skipped, but the question does not allow skipping (allow_skip)"
        )
    if entry.options or entry.custom is not None or entry.answer is not None:
        raise _refused(
            f"{named}: is skipped and answered at once (a skipped question has no answer, "
            "options or custom text)"
        )
    return QuestionAnswer(question.id, None, skipped=reason)  # type: ignore[arg-type]


def _check_count(question: Question, named: str, entry: QuestionAnswer) -> QuestionAnswer:
    count = len(entry.values)
    least, most = question.selection_range
    if not question.is_multi_select:
        if count != 1:
            raise _refused(f"{named}: {count} selections, but the question takes exactly one")
    elif not least <= count <= most:
        bounds = f"{least}" if least == most else f"{least} to {most}"
        raise _refused(f"{named}: {count} selections, but the question takes {bounds}")
    return entry


def check_partial_answer(
    request: AskUserQuestionRequest, entries: Sequence[QuestionAnswer]
) -> tuple[QuestionAnswer, ...]:
    """Check the answers given so far (any questions, each once) as :func:`check_answer`
    checks a whole one; normalized, in question order. For surfaces answering one by one.

    Raises:
        UserInteractionError: ``INVALID_ANSWER`` naming the question or the entry.
    """
    return _check_entries(request, entries, complete=False)


def _check_entries(
    request: AskUserQuestionRequest, entries: object, *, complete: bool
) -> tuple[QuestionAnswer, ...]:
    if not isinstance(entries, list | tuple):
        raise _refused(f"answers {wrong_type('a list of QuestionAnswer', entries)}")
    position = {item.id: index for index, item in enumerate(request.questions)}
    found: dict[int, QuestionAnswer] = {}
    for number, entry in enumerate(entries):
        entry_id = getattr(entry, "id", None) if isinstance(entry, QuestionAnswer) else None
        if not isinstance(entry, QuestionAnswer):
            raise _refused(f"answers[{number}] {wrong_type('a QuestionAnswer', entry)}")
        if entry_id not in position:
            known = ", ".join(repr(item.id) for item in request.questions)
            raise _refused(f"answers[{number}].id names no question of the ask (its ids: {known})")
        index = position[entry_id]
        item = request.questions[index]
        if index in found:
            raise _refused(f"answers[{number}] answers {where(item, index)} a second time")
        found[index] = check_question_answer(item, entry, index=index)
    if complete:
        for index, item in enumerate(request.questions):
            if index not in found:
                raise _refused(
                    f"{where(item, index)} has no answer (one entry per question; a question "
                    "that allows skipping takes QuestionAnswer.skip)"
                )
    return tuple(found[index] for index in sorted(found))
