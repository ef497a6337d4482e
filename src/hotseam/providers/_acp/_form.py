"""An ask as an ACP ``elicitation/create`` form, and the client's result read back.

Pure functions of the request, with no connection and no event loop, so every rule is
testable on its own. The form of one question with options and custom answers allowed::

    {"sessionId": "sess_1", "toolCallId": "tc_1", "mode": "form",
     "message": "Which database?",                        # the question
     "requestedSchema": {"type": "object", "title": "Storage",           # the header
       "properties": {
         "answer": {"type": "string", "title": "Choice", "default": "pg",   # recommended
                    "oneOf": [{"const": "pg", "title": "Postgres (Recommended)",
                               "description": "Server database"},
                              {"const": "SQLite", "title": "SQLite"},
                              {"const": "_other", "title": "Other (type it below)"}]},
         "custom": {"type": "string", "title": "Other", "description": "..."}},
       "required": ["answer"]}}

``answer`` is required, so a client that honours ``required`` cannot submit an empty
form; with custom answers allowed, one more choice ("Other") stands for "my own text
below". Without custom answers ``custom`` and "Other" are absent; a free-form question has
a single required string ``answer`` (``minLength: 1``). An ask of several questions is
one form with a property per question, named by its id (:mod:`._fields` has the mapping
of each kind of question). Reading the result back, filled custom text wins over the
selected option; a schema-valid result that carries no answer at all (a client that
ignores ``required``) is :class:`EmptyAnswerError`, and one that leaves a question
unanswered or outside its bounds :class:`IncompleteAnswerError`: the provider asks again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from acp.schema import CreateFormSessionElicitationRequest, ElicitationSchema

from ...interaction import (
    ASK_CANCELLED,
    ASK_DECLINED,
    INVALID_ANSWER,
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    Question,
    QuestionAnswer,
    UserInteractionError,
    check_question_answer,
)
from ._fields import (
    ANSWER_FIELD,
    CUSTOM_FIELD,
    RECOMMENDED_SUFFIX,
    Problems,
    PropertySchema,
    QuestionField,
    assemble,
    fields_of,
    type_name,
)

__all__ = [
    "ANSWER_FIELD",
    "CUSTOM_FIELD",
    "ELICITATION_CREATE",
    "EmptyAnswerError",
    "Form",
    "IncompleteAnswerError",
    "RECOMMENDED_SUFFIX",
    "build_form",
    "type_name",
]

ELICITATION_CREATE = "elicitation/create"
_ACTIONS = "accept, decline or cancel"


class EmptyAnswerError(Exception):
    """The client accepted the question with no answer at all (schema-valid, but empty).

    Not an error of the human's: a client that does not enforce ``required`` lets them
    submit an untouched form. The provider asks again, with a note, a bounded number of
    times.
    """


class IncompleteAnswerError(Exception):
    """The client accepted a form of several answers with some of them missing, or with
    more or fewer choices than a question takes (a client that does not enforce
    ``required``, ``minItems`` or ``maxItems``).

    ``note`` says which, for the form asked again; ``given`` is what fitted, to pre-fill
    it; ``problems`` name each question (never the human's text), for the error once the
    provider stops asking.
    """

    def __init__(self, note: str, given: Mapping[str, Any], problems: list[str]) -> None:
        super().__init__(note)
        self.note = note
        self.given = dict(given)
        self.problems = problems


@dataclass(frozen=True, slots=True)
class Form:
    """An ask as an elicitation form: the schema to send and how to read the reply."""

    request: AskUserQuestionRequest
    schema: ElicitationSchema
    fields: tuple[QuestionField, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The property names the form asks for, in order."""
        return tuple(self.schema.properties or ())

    def message(self) -> str:
        """The question; for several, each on a numbered line (a client that shows only
        the message still shows them all)."""
        request = self.request
        if not request.is_multi_question:
            return request.question
        lines = [f"Please answer these {len(request.questions)} questions:"]
        for number, question in enumerate(request.questions, start=1):
            text = " ".join(question.question.split())
            header = f"{question.header}: " if question.header else ""
            lines.append(f"{number}. {header}{text}")
        return "\n".join(lines)

    def requested_schema(self) -> dict[str, Any]:
        """The ``requestedSchema`` as sent: always with ``"type": "object"``.

        The SDK serializes with ``exclude_defaults``, which drops ``type`` (its default);
        the RFD says senders MUST include it, so this dump leaves defaults in.
        """
        data = self.schema.model_dump(mode="json", by_alias=True, exclude_none=True)
        data["type"] = "object"
        return data

    def params(
        self, session_id: str, tool_call_id: str | None = None, *, note: str | None = None
    ) -> dict[str, Any]:
        """The ``elicitation/create`` params, scoped to a session (and tool call).

        ``note`` (one line) goes before the question when it is asked again.
        """
        message = self.message() if note is None else f"{note}\n\n{self.message()}"
        request = CreateFormSessionElicitationRequest(
            session_id=session_id,
            tool_call_id=tool_call_id,
            message=message,
            mode="form",
            requested_schema=self.schema,
        )
        data = request.model_dump(mode="json", by_alias=True, exclude_none=True)
        data["requestedSchema"] = self.requested_schema()
        return data

    def read(self, result: object) -> AskUserQuestionAnswer:
        """Turn the client's ``elicitation/create`` result into an answer.

        Raises:
            UserInteractionError: ``ASK_DECLINED`` (action ``decline``), ``ASK_CANCELLED``
                (action ``cancel``), or ``INVALID_ANSWER`` naming every field that does not
                fit (wrong type, unknown action, a field that was not asked, a value that is
                none of the options).
            EmptyAnswerError: accepted, and everything fits, but there is no answer in it.
            IncompleteAnswerError: accepted, but a question is unanswered or out of bounds.
        """
        if not isinstance(result, Mapping):
            raise _invalid([("result", f"must be an object, got {type_name(result)}")])
        if "action" not in result:
            raise _invalid([("action", f"is missing (expected {_ACTIONS})")])
        action = result["action"]
        if not isinstance(action, str):
            raise _invalid([("action", f"must be a string, got {type_name(action)}")])
        if action == "decline":
            raise UserInteractionError(
                "the human declined to answer (the ACP client answered action 'decline')",
                ASK_DECLINED,
            )
        if action == "cancel":
            raise UserInteractionError(
                "the human dismissed the question (the ACP client answered action 'cancel')",
                ASK_CANCELLED,
            )
        if action != "accept":
            kind = "custom action" if action.startswith("_") else "unknown action"
            raise _invalid(
                [("action", f"{kind} {action!r} is not understood (expected {_ACTIONS})")]
            )
        return self._read_content(result.get("content"))

    def _read_content(self, content: object) -> AskUserQuestionAnswer:
        if content is None:  # omitted and null mean the same
            content = {}
        if not isinstance(content, Mapping):
            raise _invalid([("content", f"must be an object, got {type_name(content)}")])
        problems: Problems = []
        asked = self.names
        for key in content:
            if key not in asked:
                listed = ", ".join(repr(name) for name in asked)
                problems.append(
                    (f"content.{key}", f"was not asked for (the form asks for {listed})")
                )
        read = [(item, item.read(content, problems)) for item in self.fields]
        if problems:
            raise _invalid(problems)
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
        return assemble(self.request, entries)


def build_form(request: AskUserQuestionRequest, given: Mapping[str, Any] | None = None) -> Form:
    """Map a (validated) request onto an elicitation form schema; ``given`` (an
    :class:`IncompleteAnswerError`'s) pre-fills what the human already answered."""
    fields = fields_of(request)
    properties: dict[str, PropertySchema] = {}
    for item in fields:
        properties.update(item.properties(given or {}))
    schema = ElicitationSchema(
        type="object",
        title=None if request.is_multi_question else request.header,
        properties=dict(properties),
        required=[item.name for item in fields if item.required],
    )
    return Form(request, schema, fields)


def _bounds(question: Question) -> str:
    least, most = question.selection_range
    return f"{least}" if least == most else f"{least} to {most}"


def _invalid(problems: Problems) -> UserInteractionError:
    message = "; ".join(f"{field} {problem}" for field, problem in problems)
    return UserInteractionError(
        f"the ACP client's answer does not fit the question: {message}",
        INVALID_ANSWER,
        details={"errors": [{"field": f, "message": p} for f, p in problems]},
    )
