"""One question's part of an elicitation form: its properties, and its answer read back.

A form carries one question (the seed's shape: the fixed property names ``answer`` and
``custom``, the header as the form's title) or several (one property per question, named
by the question's id, and ``ID_custom`` beside each that takes custom answers). Each
question maps onto the ACP v1 schema subset:

* one choice: a ``string`` with a titled ``oneOf`` (``const`` = the option's model value),
  the recommended option as ``default``;
* several choices (``multi_select``): an ``array`` whose ``items.anyOf`` are the options,
  ``minItems``/``maxItems`` from :attr:`~hotseam.interaction.Question.selection_range`,
  the recommended options as ``default``;
* free text: a ``string`` with ``minLength: 1``.

Custom answers: one more choice, "Other (type it below)", and an optional ``string``
property after the question. A filled-in custom text is the answer of a one-choice
question (it wins over the choice) and one more selection of a multi-select question;
"Other" among the array's items is what lets ``minItems``/``maxItems`` count it, as the
model does. A question the human may skip (``allow_skip``) is left out of ``required``:
leaving it out skips it. Reading never quotes what the human sent: a value that does not
fit is described by its length.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from acp.schema import (
    ElicitationMultiSelectPropertySchema,
    ElicitationStringPropertySchema,
    EnumOption,
    TitledMultiSelectItems,
)

from ...interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    QuestionAnswer,
)

__all__ = [
    "ANSWER_FIELD",
    "CUSTOM_FIELD",
    "OTHER_TITLE",
    "Problems",
    "PropertySchema",
    "QuestionField",
    "RECOMMENDED_SUFFIX",
    "assemble",
    "fields_of",
    "type_name",
]

ANSWER_FIELD = "answer"
"""The property of a one-question form that holds the choice (or the free-form answer)."""
CUSTOM_FIELD = "custom"
"""The optional free-text property of a one-question form that takes custom answers."""
RECOMMENDED_SUFFIX = " (Recommended)"
OTHER_TITLE = "Other (type it below)"
_OTHER_VALUE = "_other"
_CUSTOM_SUFFIX = "_custom"
_CUSTOM_INSTEAD = "Your own answer instead of a choice; when filled in, it is used."
_CUSTOM_MORE = "Your own answer; when filled in, it counts as one more choice."

PropertySchema: TypeAlias = ElicitationStringPropertySchema | ElicitationMultiSelectPropertySchema
Problems: TypeAlias = list[tuple[str, str]]
"""``(field, problem)`` pairs: every part of a reply that does not fit, named together."""


@dataclass(frozen=True, slots=True)
class QuestionField:
    """One question as form properties: ``name`` holds the choice(s) or the text,
    ``custom`` (when custom answers are allowed) the human's own text."""

    question: Question
    index: int
    name: str
    custom: str | None
    other: str | None
    """The ``const`` of the "Other" choice, when custom answers are allowed."""
    title: str
    description: str | None

    @property
    def names(self) -> tuple[str, ...]:
        """The properties of the question, in order."""
        return (self.name,) if self.custom is None else (self.name, self.custom)

    @property
    def required(self) -> bool:
        """Whether the form must carry the question's property: not when it may be skipped,
        nor when an empty selection is an answer (``min_selections=0``)."""
        question = self.question
        if question.allow_skip:
            return False
        return not (question.is_multi_select and question.selection_range[0] == 0)

    def properties(self, given: Mapping[str, Any]) -> dict[str, PropertySchema]:
        """The question's property schemas; ``given`` (what the human already sent, when
        the form is asked again) pre-fills them instead of the recommendation."""
        question = self.question
        schemas: dict[str, PropertySchema] = {}
        if question.is_free_form:
            schemas[self.name] = ElicitationStringPropertySchema(
                type="string",
                title=self.title,
                description=self.description,
                min_length=1,
                default=_given_text(given, self.name),
            )
            return schemas
        choices = [_enum_option(option) for option in question.choices]
        if self.other is not None:
            choices.append(EnumOption(const=self.other, title=OTHER_TITLE))
        if question.is_multi_select:
            least, most = question.selection_range
            chosen = given.get(self.name)
            defaults = (
                [str(value) for value in chosen]
                if isinstance(chosen, list)
                else [option.model_value for option in question.recommended_options]
            )
            schemas[self.name] = ElicitationMultiSelectPropertySchema(
                type="array",
                title=self.title,
                description=self.description,
                min_items=least,
                max_items=most,
                items=TitledMultiSelectItems(any_of=choices),
                default=defaults or None,
            )
        else:
            recommended = question.recommended
            chosen_text = _given_text(given, self.name)
            schemas[self.name] = ElicitationStringPropertySchema(
                type="string",
                title=self.title,
                description=self.description,
                one_of=choices,
                default=chosen_text
                if chosen_text is not None
                else (recommended.model_value if recommended is not None else None),
            )
        if self.custom is not None:
            described = _CUSTOM_MORE if question.is_multi_select else _CUSTOM_INSTEAD
            if self.custom != CUSTOM_FIELD:  # one of several questions: say which
                described = f"“{self.title}”: {described[:1].lower()}{described[1:]}"
            schemas[self.custom] = ElicitationStringPropertySchema(
                type="string",
                title="Other",
                description=described,
                default=_given_text(given, self.custom),
            )
        return schemas

    def read(self, content: Mapping[str, Any], problems: Problems) -> QuestionAnswer | None:
        """The question's answer in ``content`` (selections not yet counted against the
        question's bounds), or ``None`` when nothing was chosen or typed. What does not fit
        (a wrong type, a value that is none of the options) is added to ``problems``."""
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
        # What the human sent is described, never quoted: errors reach the logs.
        return f"is none of the options ({offered}) (a value of {len(value)} characters)"


def fields_of(request: AskUserQuestionRequest) -> tuple[QuestionField, ...]:
    """The fields of a (validated) request: one question keeps the seed's property names;
    several are named by their ids, each custom text ``ID_custom`` (made unique)."""
    if not request.is_multi_question:
        question = request.questions[0]
        title = "Answer" if question.is_free_form else "Choice"
        if question.is_multi_select:
            title = "Choices"
        plain = not (question.is_multi_select or question.allow_skip)
        custom = CUSTOM_FIELD if question.allow_custom and not question.is_free_form else None
        return (
            QuestionField(
                question,
                0,
                ANSWER_FIELD,
                custom,
                _other_value(question) if custom else None,
                title,
                None if plain else _capitalized(question.hint),
            ),
        )
    taken = {str(item.id) for item in request.questions}
    fields = []
    for index, question in enumerate(request.questions):
        custom = None
        if question.allow_custom and not question.is_free_form:
            custom = str(question.id) + _CUSTOM_SUFFIX
            while custom in taken:
                custom += "_"
            taken.add(custom)
        hint = question.hint
        fields.append(
            QuestionField(
                question,
                index,
                str(question.id),
                custom,
                _other_value(question) if custom else None,
                " ".join(question.question.split()),
                f"{question.header}: {hint}" if question.header else _capitalized(hint),
            )
        )
    return tuple(fields)


def assemble(
    request: AskUserQuestionRequest, entries: Sequence[QuestionAnswer]
) -> AskUserQuestionAnswer:
    """The answer of the ask: for one question with one value, the seed's
    ``AskUserQuestionAnswer(answer, option)``; otherwise one entry per question."""
    if not request.is_multi_question and len(entries) == 1:
        (entry,) = entries
        if entry.skipped is None and not request.questions[0].is_multi_select:
            option = entry.options[0] if entry.options else None
            return AskUserQuestionAnswer(entry.answer or "", option)
    return AskUserQuestionAnswer.of(entries, request)


def _other_value(question: Question) -> str:
    """A ``const`` for "Other" that no option of the question uses."""
    taken = {option.model_value for option in question.choices}
    value = _OTHER_VALUE
    while value in taken:
        value += "_"
    return value


def _enum_option(option: AskUserQuestionOption) -> EnumOption:
    title = option.label + (RECOMMENDED_SUFFIX if option.recommended else "")
    return EnumOption(const=option.model_value, title=title, description=option.description)


def _capitalized(text: str) -> str:
    return text[:1].upper() + text[1:]


def _given_text(given: Mapping[str, Any], key: str) -> str | None:
    value = given.get(key)
    return value if isinstance(value, str) and value.strip() else None


def _text(problems: Problems, content: Mapping[str, Any], key: str) -> str | None:
    value = content.get(key)
    if value is None or isinstance(value, str):
        return value
    problems.append((f"content.{key}", f"must be a string, got {type_name(value)}"))
    return None


def type_name(value: object) -> str:
    """The JSON name of a value's type, for error messages about wire data."""
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
