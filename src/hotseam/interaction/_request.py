"""The request side of the user-interaction seam: options, questions, the request.

A request *is* its questions (:class:`Question`, 1 to :data:`MAX_QUESTIONS`): it stores
them, its agent and its signal, nothing else. The seed's one-question vocabulary
(``AskUserQuestionRequest(question, header, options, allow_custom, agent, signal)``,
``request.question``, ``request.options``...) is a way to build a request of one question
and to read its first question, never a second state.

Plain frozen dataclasses, so that they take positional arguments as the seed's shapes do and
cost little to build. Their rules are here too (:func:`validate_request`, which ``ask()``
runs before any provider sees a request), with errors that name the field; their dict forms
are :mod:`._inputs`' (imported at the first dict parsed: see there why).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NoReturn

from .._core import AbortSignal, Agent
from ._errors import ErrorCode, UserInteractionError
from ._limits import MAX_QUESTIONS, SkipReason

if TYPE_CHECKING:
    from ._inputs import AskUserQuestionInput, AskUserQuestionOptionInput, QuestionInput

__all__ = [
    "MAX_QUESTIONS",
    "AskUserQuestionOption",
    "AskUserQuestionRequest",
    "Question",
    "SkipReason",
    "in_seed_form",
    "validate_request",
    "wrong_type",
]

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
        from ._inputs import AskUserQuestionOptionInput, parse_input

        return cls.from_input(parse_input(AskUserQuestionOptionInput, data, "option"))

    @classmethod
    def from_input(cls, given: AskUserQuestionOptionInput) -> AskUserQuestionOption:
        """The option a checked dict form describes."""
        return cls(given.label, given.value, given.description, given.recommended)


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
        """Return the option whose model-facing value is exactly ``value``, if any: how the
        seam reads a provider's text answer."""
        return next((option for option in self.choices if option.model_value == value), None)

    def option_named(self, text: str) -> AskUserQuestionOption | None:
        """The option a human's reply names, if exactly one: what every surface that reads
        typed text (a terminal, a chat, a script) matches with.

        The reply names an option by its label or its model-facing value, with case, the
        spaces around and between words and a trailing ``(Recommended)`` ignored; else by
        its number in the list (``2``, ``2.``, ``2)``). A name is tried before a number (an
        option may be called ``"2"``). Text that names two options (one's label is
        another's value, say) names none: it is never read as either.
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
        """A JSON-ready dict; fields at their defaults are left out (``allow_custom`` is
        always there, as in a request's dict)."""
        data: dict[str, Any] = {"question": self.question}
        if self.id is not None:
            data["id"] = self.id
        if self.header is not None:
            data["header"] = self.header
        if self.options:
            data["options"] = [option.to_dict() for option in self.options]
        for name, camel in _CAMEL.items():
            value = getattr(self, name)
            if name == "allow_custom" or (value is not None and value is not False):
                data[camel if camel_case else name] = value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Question:
        """Build a question from a dict in camelCase or snake_case (raises
        ``INVALID_REQUEST`` naming bad fields)."""
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

    Build one question the seed's way, ``AskUserQuestionRequest(question, header, options,
    allow_custom, agent, signal)``, or several with :meth:`of` (or ``questions=``); the
    seed's fields, given beside ``questions``, set the first question's; the one question
    of a request is ``"q1"`` unless it has an id. Read the first question through the
    seed's names too (``request.question``, ``request.options``...).

    No options (``None`` or empty) means free-form input, even when ``allow_custom`` is
    false: there is nothing to constrain the answer to.
    """

    questions: tuple[Question, ...]
    agent: Agent | None = None
    signal: AbortSignal | None = None

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

    @classmethod
    def of(
        cls,
        questions: Sequence[Question],
        *,
        agent: Agent | None = None,
        signal: AbortSignal | None = None,
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
        return cls(agent=agent, signal=signal, questions=tuple(items))

    # -- the seed's names, read from the first question --

    @property
    def first(self) -> Question:
        """The first question (the only one, for a one-question request)."""
        first: Question = self.questions[0]
        return first

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
        """What a provider is asked of this request, the questions whose ids are in
        ``answered`` left out: one request per question (same agent and signal), what a
        surface that shows one question at a time asks one after the other; or, with
        ``together``, the rest in one request.

        A part that holds every question is this request itself (a request of one
        question is its own only part), so that its answer is the whole request's.
        """
        if not answered and (together or len(self.questions) == 1):
            return (self,)
        rest = [item for item in self.questions if item.id not in answered]
        if together:
            return (self._of(rest),) if rest else ()
        return tuple(self._of([item]) for item in rest)

    def _of(self, questions: list[Question]) -> AskUserQuestionRequest:
        return AskUserQuestionRequest(agent=self.agent, signal=self.signal, questions=questions)

    def with_signal(self, signal: AbortSignal | None) -> AskUserQuestionRequest:
        """Return a copy with another abort signal."""
        return AskUserQuestionRequest(agent=self.agent, signal=signal, questions=self.questions)

    def to_dict(self, *, camel_case: bool = False) -> dict[str, Any]:
        """A JSON-ready dict of the request (the signal is not serializable and is left
        out): the first question's fields at the top level, and ``questions`` unless the
        request is one question of nothing but those fields (the seed's form)."""
        top = ("question", "header", "options", "allowCustom" if camel_case else "allow_custom")
        first = self.first.to_dict(camel_case=camel_case)
        data = {name: value for name, value in first.items() if name in top}
        if not in_seed_form(self.questions):
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
            raise _invalid(f"invalid request: expected an object, got {type(given).__name__}")
        from ._inputs import AskUserQuestionInput, parse_input

        raw = dict(given)
        agent_data = raw.pop("agent", None)
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
        return cls.from_input(parsed, agent=agent, signal=signal)

    @classmethod
    def from_input(
        cls,
        given: AskUserQuestionInput,
        *,
        agent: Agent | None = None,
        signal: AbortSignal | None = None,
    ) -> AskUserQuestionRequest:
        """The request a checked dict form (the ask tool's input) describes, not yet
        validated.

        With ``questions``, the top-level fields are the first question's: left out (or at
        their defaults, as in a dump of the input) they say nothing; given, they must agree.

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
    """Whether ``questions`` is one question saying nothing the seed's one-question fields
    cannot: such a request keeps the seed's dict form and the seed's field names in errors."""
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


def _tuple_or_none(options: object) -> Any:
    """Options as validation gives them: a tuple, or ``None`` when there are none (anything
    else is left for validation to name)."""
    if isinstance(options, list | tuple):
        return tuple(options) or None
    return options


def _describe_value(value: object) -> str:
    return "an empty list" if isinstance(value, list | tuple) else type(value).__name__


def _options_of(
    given: Sequence[AskUserQuestionOptionInput] | None,
) -> list[AskUserQuestionOption] | None:
    return None if given is None else [AskUserQuestionOption.from_input(o) for o in given]


# -- the rules --


def validate_request(request: object) -> AskUserQuestionRequest:
    """Check every rule of the seam and return the request with each question's options
    as a tuple (an empty list becomes ``None``: free-form) and its id given (``"q1"``,
    ``"q2"``...).

    A request of one question with nothing but the seed's fields is named in the seed's
    vocabulary (``options[2].value``); any other in its questions' (``questions[1].id``).

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
    items: object = request.questions
    questions = _check_questions(problems, items)
    if problems:
        _raise(problems)
    assert questions is not None
    if all(map(operator.is_, questions, request.questions)):
        return request
    return AskUserQuestionRequest(agent=request.agent, signal=request.signal, questions=questions)


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
