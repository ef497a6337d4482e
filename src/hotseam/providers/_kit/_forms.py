"""An ask as a JSON-schema elicitation form, and the client's result read back as its answer.

One pure mapping for every surface whose client shows such a form (ACP's and MCP's
``elicitation/create``). One question with options and custom answers allowed::

    message: "Which database?"                                  # the question
    {"type": "object", "title": "Storage",                      # the header
     "properties": {
       "answer": {"title": "Choice", "default": "pg",           # the recommended option
                  "oneOf": [{"const": "pg", "title": "Postgres (Recommended)",
                             "description": "Server database"},
                            {"const": "SQLite", "title": "SQLite"},
                            {"const": "_other", "title": "Other (type it below)"}],
                  "type": "string"},
       "custom": {"title": "Other", "description": "...", "type": "string"}},
     "required": ["answer"]}

Several choices are an ``array`` of ``items.anyOf`` with ``minItems``/``maxItems``; free
text a ``string`` with ``minLength: 1``; typed custom text wins over a single choice and
is one more of several; a question that may be skipped is not ``required``. One question
keeps the fixed shape clients and interop tests know; several are a property per question
id and a numbered message. The protocols' differences are each one's :class:`Variant`.
Nothing the human sent is quoted in an error.

An empty or incomplete result (:class:`EmptyAnswerError`, :class:`IncompleteAnswerError`)
or a surface's :class:`Unfit` one is not the human's final word: :func:`ask_until_answered`,
one loop for every surface, asks again with a note (what fitted pre-filled), at most
:data:`ASKED_AGAIN_AT_MOST` times, then fails with ``ASK_CANCELLED`` or ``INVALID_ANSWER``.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias, TypeVar, cast

from ...interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ErrorCode,
    Question,
    QuestionAnswer,
    UserInteractionError,
    check_question_answer,
)

ANSWER_FIELD = "answer"
"""The property of a one-question form that holds the choice (or the free-form answer)."""
CUSTOM_FIELD = "custom"
"""The property of a one-question form that holds the human's own answer."""
RECOMMENDED_SUFFIX = " (Recommended)"
OTHER_TITLE = "Other (type it below)"
_OTHER_VALUE = "_other"
_CUSTOM_SUFFIX = "_custom"
_CUSTOM_INSTEAD = "Your own answer instead of a choice; when filled in, it is used."
_CUSTOM_MORE = "Your own answer; when filled in, it counts as one more choice."
_ACTIONS = "accept, decline or cancel"

Problems: TypeAlias = list[tuple[str, str]]
"""``(field, problem)`` pairs: every part of a reply that does not fit, named together."""


@dataclass(frozen=True, slots=True)
class Variant:
    """What one protocol (revision) makes of the shared form: ``peer`` names the client;
    without ``option_descriptions`` they join the property's (``Label: description``);
    ``enum_names`` adds ``enum`` + ``enumNames`` to a one-choice property."""

    peer: str
    option_descriptions: bool = True
    enum_names: bool = False


ACP = Variant("ACP client")
"""ACP v1 (the elicitation RFD): the schema as built."""
MCP_2025_06_18 = Variant("MCP client", option_descriptions=False, enum_names=True)
"""MCP 2025-06-18: no option descriptions; titled single-select as ``enum`` + ``enumNames``."""
MCP_2025_11_25 = Variant("MCP client", option_descriptions=False)
"""MCP 2025-11-25: no option descriptions; ``oneOf`` is titled single-select."""
MCP_2026_07_28 = Variant("MCP client", option_descriptions=False)
"""MCP 2026-07-28 (the form travels in the call's result): as 2025-11-25."""
_MCP = {"2025-06-18": MCP_2025_06_18, "2025-11-25": MCP_2025_11_25, "2026-07-28": MCP_2026_07_28}


def mcp_variant(protocol_version: str) -> Variant:
    """The variant of an MCP revision (a newer one than these: the newest's)."""
    return _MCP.get(protocol_version, MCP_2026_07_28)


class EmptyAnswerError(Exception):
    """Accepted with no answer at all (a client not enforcing ``required``): asked again."""


class IncompleteAnswerError(Exception):
    """Accepted with answers missing or out of bounds (a client not enforcing ``required``,
    ``minItems`` or ``maxItems``): ``note`` for the form asked again, ``given`` (what
    fitted) to pre-fill it, ``problems`` (never the human's text) for the final error."""

    def __init__(self, note: str, given: Mapping[str, Any], problems: list[str]) -> None:
        super().__init__(note)
        self.note = note
        self.given = dict(given)
        self.problems = problems


@dataclass(frozen=True, slots=True)
class _Field:
    """One question as form properties: ``name`` the choice(s) or text, ``custom`` typed."""

    question: Question
    index: int
    name: str
    custom: str | None
    title: str
    description: str | None

    @property
    def other(self) -> str | None:  # the const of the "Other" choice
        return None if self.custom is None else unused_value(self.question, _OTHER_VALUE)

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name,) if self.custom is None else (self.name, self.custom)

    @property
    def required(self) -> bool:
        """Not when the question may be skipped, nor when an empty selection answers it."""
        question = self.question
        if question.allow_skip:
            return False
        return not (question.is_multi_select and question.selection_range[0] == 0)

    def properties(self, given: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """The property schemas (keys in the ACP SDK's order), ``given`` pre-filling them."""
        question = self.question
        head = _dropping_none(title=self.title, description=self.description)
        if question.is_free_form:
            text = {**head, "minLength": 1, **_dropping_none(default=_text_in(given, self.name))}
            return {self.name: {**text, "type": "string"}}
        choices = [_choice(option) for option in question.choices]
        if self.other is not None:
            choices.append({"const": self.other, "title": OTHER_TITLE})
        schemas: dict[str, dict[str, Any]] = {}
        if question.is_multi_select:
            least, most = question.selection_range
            chosen = given.get(self.name)
            defaults = (
                [str(value) for value in chosen]
                if isinstance(chosen, list)
                else [option.model_value for option in question.recommended_options]
            )
            schemas[self.name] = {
                **head,
                "minItems": least,
                "maxItems": most,
                "items": {"anyOf": choices},
                **_dropping_none(default=defaults or None),
                "type": "array",
            }
        else:
            recommended = question.recommended
            default = _text_in(given, self.name)
            if default is None and recommended is not None:
                default = recommended.model_value
            schemas[self.name] = {**head, **_dropping_none(default=default), "oneOf": choices}
            schemas[self.name]["type"] = "string"
        if self.custom is not None:
            described = _CUSTOM_MORE if question.is_multi_select else _CUSTOM_INSTEAD
            if self.custom != CUSTOM_FIELD:  # one of several questions: say which
                described = f"“{self.title}”: {described[:1].lower()}{described[1:]}"
            schemas[self.custom] = {
                "title": "Other",
                "description": described,
                **_dropping_none(default=_text_in(given, self.custom)),
                "type": "string",
            }
        return schemas

    def read(self, content: Mapping[str, Any], problems: Problems) -> QuestionAnswer | None:
        """The answer in ``content`` (bounds not yet checked), ``None`` when nothing was
        given; what does not fit goes in ``problems``."""
        question = self.question
        if question.is_free_form:
            text = _text(problems, content, self.name)
            if text is None or not text.strip():
                return None
            return QuestionAnswer.chosen(question, (), text.strip())
        if question.is_multi_select:
            return self._read_several(content, problems)
        chosen = _text(problems, content, self.name)
        typed = self._typed(content, problems)
        option: AskUserQuestionOption | None = None
        if chosen is not None and chosen != "" and chosen != self.other:
            option = question.option_for(chosen)
            if option is None:
                problems.append((f"content.{self.name}", self._not_an_option(chosen)))
        if typed is not None:  # filled-in custom text wins over the choice
            return QuestionAnswer.chosen(question, (), typed)
        if option is not None:
            return QuestionAnswer.chosen(question, (option,))
        return None

    def _read_several(
        self, content: Mapping[str, Any], problems: Problems
    ) -> QuestionAnswer | None:
        question = self.question
        given = content.get(self.name)
        picked: list[AskUserQuestionOption] = []
        if given is not None and not isinstance(given, list):
            problems.append(
                (f"content.{self.name}", f"must be an array of strings, got {type_name(given)}")
            )
        for position, value in enumerate(given if isinstance(given, list) else ()):
            where = f"content.{self.name}[{position}]"
            if not isinstance(value, str):
                problems.append((where, f"must be a string, got {type_name(value)}"))
            elif value != self.other:  # "Other" ticked: the typed text is the selection
                option = question.option_for(value)
                if option is None:
                    problems.append((where, self._not_an_option(value)))
                else:
                    picked.append(option)
        typed = self._typed(content, problems)
        if picked or typed is not None:
            return QuestionAnswer.chosen(question, picked, typed)
        if question.selection_range[0] == 0 and (given is not None or not question.allow_skip):
            return QuestionAnswer.chosen(question, ())  # an empty selection is an answer
        return None

    def _typed(self, content: Mapping[str, Any], problems: Problems) -> str | None:
        if self.custom is None:
            return None
        text = _text(problems, content, self.custom)
        return text.strip() if text is not None and text.strip() else None

    def _not_an_option(self, value: str) -> str:
        offered = ", ".join(repr(option.model_value) for option in self.question.choices)
        # described, never quoted: errors reach the logs
        return f"is none of the options ({offered}) (a value of {len(value)} characters)"


@dataclass(frozen=True, slots=True)
class Form:
    """An ask as an elicitation form: the schema to send and how to read the reply."""

    request: AskUserQuestionRequest
    fields: tuple[_Field, ...]
    given: Mapping[str, Any]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for item in self.fields for name in item.names)

    def message(self, note: str | None = None) -> str:
        """The question; several numbered (a client showing only the message shows them
        all); ``note`` before it when asked again."""
        questions = self.request.questions
        if len(questions) == 1:
            text = questions[0].question
        else:
            lines = [f"Please answer these {len(questions)} questions:"]
            for number, question in enumerate(questions, start=1):
                header = f"{question.header}: " if question.header else ""
                lines.append(f"{number}. {header}{' '.join(question.question.split())}")
            text = "\n".join(lines)
        return text if note is None else f"{note}\n\n{text}"

    def schema(self, variant: Variant = ACP) -> dict[str, Any]:
        """The ``requestedSchema`` as ``variant`` takes it (with ``"type": "object"``: a MUST)."""
        properties: dict[str, dict[str, Any]] = {}
        for item in self.fields:
            properties.update(item.properties(self.given))
        questions = self.request.questions
        title = questions[0].header if len(questions) == 1 else None
        schema = {
            "type": "object",
            **_dropping_none(title=title),
            "properties": properties,
            "required": [item.name for item in self.fields if item.required],
        }
        return schema if variant == ACP else _fitted(schema, variant)

    def read(self, result: object, variant: Variant = ACP) -> AskUserQuestionAnswer:
        """Turn the client's elicitation result into an answer.

        Raises:
            UserInteractionError: ``ASK_DECLINED``, ``ASK_CANCELLED``, or ``INVALID_ANSWER``
                naming every field that does not fit.
            EmptyAnswerError: accepted, but with no answer in it.
            IncompleteAnswerError: accepted, but a question is unanswered or out of bounds.
        """
        peer = variant.peer
        if not isinstance(result, Mapping):
            raise _invalid(peer, [("result", f"must be an object, got {type_name(result)}")])
        if "action" not in result:
            raise _invalid(peer, [("action", f"is missing (expected {_ACTIONS})")])
        action = result["action"]
        if not isinstance(action, str):
            raise _invalid(peer, [("action", f"must be a string, got {type_name(action)}")])
        if action == "decline":
            raise UserInteractionError(
                f"the human declined to answer (the {peer} answered action 'decline')",
                ErrorCode.ASK_DECLINED,
            )
        if action == "cancel":
            raise UserInteractionError(
                f"the human dismissed the question (the {peer} answered action 'cancel')",
                ErrorCode.ASK_CANCELLED,
            )
        if action != "accept":
            kind = "custom action" if action.startswith("_") else "unknown action"
            problem = f"{kind} {action!r} is not understood (expected {_ACTIONS})"
            raise _invalid(peer, [("action", problem)])
        return self._read_content(result.get("content"), peer)

    def _read_content(self, content: object, peer: str) -> AskUserQuestionAnswer:
        if content is None:  # omitted and null mean the same
            content = {}
        if not isinstance(content, Mapping):
            raise _invalid(peer, [("content", f"must be an object, got {type_name(content)}")])
        problems: Problems = []
        asked = self.names
        listed = ", ".join(repr(name) for name in asked)
        for key in content:
            if key not in asked:
                problem = f"was not asked for (the form asks for {listed})"
                problems.append((f"content.{key}", problem))
        read = [(item, item.read(content, problems)) for item in self.fields]
        if problems:
            raise _invalid(peer, problems)
        entries: list[QuestionAnswer] = []
        given: dict[str, Any] = {}
        notes: list[str] = []
        errors: list[str] = []
        answered = False
        for item, entry in read:
            question = item.question
            if entry is None and question.allow_skip:
                entries.append(QuestionAnswer.skip(question))
                continue
            text = " ".join(question.question.split())
            if entry is None:
                notes.append(f"“{text}” has no answer ({question.hint})")
                errors.append(f"questions[{item.index}] ({text}) has no answer")
                continue
            answered = True
            try:
                entries.append(check_question_answer(question, entry, index=item.index))
            except UserInteractionError as unfit:  # a client that ignores minItems/maxItems
                count = len(entry.values)
                notes.append(f"“{text}” has {count} selected, but takes {_bounds(question)}")
                errors.append(unfit.message)
                continue
            given.update((name, content[name]) for name in item.names if name in content)
        if notes:
            if not answered:
                raise EmptyAnswerError()
            raise IncompleteAnswerError(
                "Please answer every question: " + "; ".join(notes) + ".", given, errors
            )
        return AskUserQuestionAnswer.of(entries, self.request)


def build_form(request: AskUserQuestionRequest, given: Mapping[str, Any] | None = None) -> Form:
    """Map a (validated) request onto a form, ``given`` pre-filling it; several questions
    are named by their ids, each custom text ``ID_custom`` (made unique)."""
    questions = request.questions
    if len(questions) == 1:
        question = questions[0]
        title = "Answer" if question.is_free_form else "Choice"
        if question.is_multi_select:
            title = "Choices"
        plain = not (question.is_multi_select or question.allow_skip)
        custom = CUSTOM_FIELD if question.allow_custom and not question.is_free_form else None
        hint = None if plain else _capitalized(question.hint)
        only = _Field(question, 0, ANSWER_FIELD, custom, title, hint)
        return Form(request, (only,), given or {})
    taken = {str(item.id) for item in questions}
    fields = []
    for index, question in enumerate(questions):
        custom = None
        if question.allow_custom and not question.is_free_form:
            custom = str(question.id) + _CUSTOM_SUFFIX
            while custom in taken:
                custom += "_"
            taken.add(custom)
        hint = question.hint
        fields.append(
            _Field(
                question,
                index,
                str(question.id),
                custom,
                " ".join(question.question.split()),
                f"{question.header}: {hint}" if question.header else _capitalized(hint),
            )
        )
    return Form(request, tuple(fields), given or {})


def type_name(value: object) -> str:
    """The JSON name of a value's type, for errors about wire data."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _fitted(schema: dict[str, Any], variant: Variant) -> dict[str, Any]:
    schema = copy.deepcopy(schema)
    for prop in schema["properties"].values():
        options = prop.get("oneOf") or prop.get("items", {}).get("anyOf") or []
        if not variant.option_descriptions:
            described = [
                f"{option['title']}: {option.pop('description')}"
                for option in options
                if option.get("description")
            ]
            if described:
                prop["description"] = "\n".join(filter(None, [prop.get("description"), *described]))
        if "oneOf" in prop and variant.enum_names:
            prop["enum"] = [option["const"] for option in prop["oneOf"]]
            prop["enumNames"] = [option["title"] for option in prop["oneOf"]]
    return schema


def unused_value(question: Question, value: str) -> str:
    """``value``, made one that no option of ``question`` has (for "Other", "Skip")."""
    taken = {option.model_value for option in question.choices}
    while value in taken:
        value += "_"
    return value


def _choice(option: AskUserQuestionOption) -> dict[str, Any]:
    title = option.label + (RECOMMENDED_SUFFIX if option.recommended else "")
    return {
        "const": option.model_value,
        "title": title,
        **_dropping_none(description=option.description),
    }


def _dropping_none(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def _bounds(question: Question) -> str:
    least, most = question.selection_range
    return f"{least}" if least == most else f"{least} to {most}"


def _capitalized(text: str) -> str:
    return text[:1].upper() + text[1:]


def _text_in(given: Mapping[str, Any], key: str) -> str | None:
    value = given.get(key)
    return value if isinstance(value, str) and value.strip() else None


def _text(problems: Problems, content: Mapping[str, Any], key: str) -> str | None:
    value = content.get(key)
    if value is None or isinstance(value, str):
        return value
    problems.append((f"content.{key}", f"must be a string, got {type_name(value)}"))
    return None


def _invalid(peer: str, problems: Problems) -> UserInteractionError:
    message = "; ".join(f"{field} {problem}" for field, problem in problems)
    return UserInteractionError(
        f"the {peer}'s answer does not fit the question: {message}",
        ErrorCode.INVALID_ANSWER,
        details={"errors": [{"field": f, "message": p} for f, p in problems]},
    )


# -- asked again --

ASKED_AGAIN_AT_MOST = 2
EMPTY_ANSWER_NOTE = "That answer was empty: please choose an option or type an answer."

T = TypeVar("T")
AskedAgain: TypeAlias = Literal["empty", "incomplete", "unfit"]


class Unfit(Protocol):
    """An answer a surface cannot take: ``note`` before the question asked again,
    ``describe(times)`` the final error."""

    note: str

    def describe(self, times: int) -> str: ...


async def ask_until_answered(
    attempt: Callable[[str | None, dict[str, Any] | None], Awaitable[T]],
    *,
    peer: str,
    unfit: tuple[type[Exception], ...] = (),
    asked_again: Callable[[AskedAgain, int], None] = lambda why, attempt: None,
) -> T:
    """Run ``attempt(note, given)`` until it returns, asking again after an empty,
    incomplete or ``unfit`` answer; ``asked_again(why, n)`` hears of the n-th time."""
    note: str | None = None
    given: dict[str, Any] | None = None
    times = 0
    why: AskedAgain
    while True:
        last = times >= ASKED_AGAIN_AT_MOST
        try:
            return await attempt(note, given)
        except EmptyAnswerError:
            if last:
                raise UserInteractionError(
                    f"the {peer} sent an empty answer {times + 1} times (nothing chosen or "
                    "typed); the question is taken as dismissed",
                    ErrorCode.ASK_CANCELLED,
                ) from None
            note, given, why = EMPTY_ANSWER_NOTE, None, "empty"
        except IncompleteAnswerError as incomplete:
            if last:
                raise UserInteractionError(
                    f"the {peer}'s answer left questions unanswered or out of bounds "
                    f"{times + 1} times: {'; '.join(incomplete.problems)}",
                    ErrorCode.INVALID_ANSWER,
                ) from None
            note, given, why = incomplete.note, incomplete.given, "incomplete"
        except unfit as error:
            reason = cast(Unfit, error)
            if last:
                raise UserInteractionError(
                    reason.describe(times + 1), ErrorCode.INVALID_ANSWER
                ) from None
            note, given, why = reason.note, None, "unfit"
        times += 1
        asked_again(why, times)
