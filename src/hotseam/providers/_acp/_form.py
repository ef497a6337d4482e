"""A question as an ACP ``elicitation/create`` form, and the client's result read back.

Pure functions of the request, with no connection and no event loop, so every rule is
testable on its own. The form of a question with options and custom answers allowed::

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

``answer`` is always required, so a client that honours ``required`` cannot submit an
empty form; with custom answers allowed, one more choice ("Other") stands for "my own text
below". Without custom answers ``custom`` and "Other" are absent; a free-form question has
a single required string ``answer`` (``minLength: 1``). Reading the result back, filled
custom text wins over the selected option; a schema-valid result that carries no answer at
all (a client that ignores ``required``) is :class:`EmptyAnswerError`, which the provider asks
again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from acp.schema import (
    CreateFormSessionElicitationRequest,
    ElicitationSchema,
    ElicitationStringPropertySchema,
    EnumOption,
)

from ...interaction import (
    ASK_CANCELLED,
    ASK_DECLINED,
    INVALID_ANSWER,
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    UserInteractionError,
)

__all__ = [
    "ANSWER_FIELD",
    "EmptyAnswerError",
    "CUSTOM_FIELD",
    "ELICITATION_CREATE",
    "RECOMMENDED_SUFFIX",
    "Form",
    "build_form",
    "type_name",
]

ELICITATION_CREATE = "elicitation/create"
ANSWER_FIELD = "answer"
"""The property that holds the chosen option's value (or the free-form answer)."""
CUSTOM_FIELD = "custom"
"""The optional free-text property offered when custom answers are allowed."""
RECOMMENDED_SUFFIX = " (Recommended)"
OTHER_TITLE = "Other (type it below)"
_OTHER_VALUE = "_other"
_ACTIONS = "accept, decline or cancel"


class EmptyAnswerError(Exception):
    """The client accepted the question with no answer at all (schema-valid, but empty).

    Not an error of the human's: a client that does not enforce ``required`` lets them
    submit an untouched form. The provider asks again, with a note, a bounded number of
    times.
    """


@dataclass(frozen=True, slots=True)
class Form:
    """One question as an elicitation form: the schema to send and how to read the reply."""

    request: AskUserQuestionRequest
    schema: ElicitationSchema
    other: str | None = None
    """The ``const`` of the "Other" choice (custom answers allowed), else ``None``."""

    @property
    def fields(self) -> tuple[str, ...]:
        """The property names the form asks for, in order."""
        return tuple(self.schema.properties or ())

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
        message = self.request.question if note is None else f"{note}\n\n{self.request.question}"
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
        problems: list[tuple[str, str]] = []
        asked = self.fields
        for key in content:
            if key not in asked:
                listed = ", ".join(repr(name) for name in asked)
                problems.append(
                    (f"content.{key}", f"was not asked for (the form asks for {listed})")
                )
        chosen = _text(problems, content, ANSWER_FIELD)
        custom = _text(problems, content, CUSTOM_FIELD) if CUSTOM_FIELD in asked else None
        request = self.request
        if request.is_free_form:
            if problems:
                raise _invalid(problems)
            if chosen is None or not chosen.strip():
                raise EmptyAnswerError()
            return AskUserQuestionAnswer(chosen.strip())
        option: AskUserQuestionOption | None = None
        if chosen is not None and chosen != "" and chosen != self.other:
            option = request.option_for(chosen)
            if option is None:
                allowed = ", ".join(repr(o.model_value) for o in request.choices)
                # What the human sent is described, never quoted: errors reach the logs.
                problems.append(
                    (
                        f"content.{ANSWER_FIELD}",
                        f"is none of the options ({allowed}) (a value of {len(chosen)} characters)",
                    )
                )
        if problems:
            raise _invalid(problems)
        if custom is not None and custom.strip():
            return AskUserQuestionAnswer(custom.strip())
        if option is not None:
            return AskUserQuestionAnswer(option.model_value, option)
        raise EmptyAnswerError()


def build_form(request: AskUserQuestionRequest) -> Form:
    """Map a (validated) question onto an elicitation form schema."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    other: str | None = None
    if request.is_free_form:
        properties[ANSWER_FIELD] = ElicitationStringPropertySchema(
            type="string", title="Answer", min_length=1
        )
        required.append(ANSWER_FIELD)
    else:
        recommended = request.recommended
        choices = [_enum_option(option) for option in request.choices]
        if request.allow_custom:
            other = _other_value(request)
            choices.append(EnumOption(const=other, title=OTHER_TITLE))
        properties[ANSWER_FIELD] = ElicitationStringPropertySchema(
            type="string",
            title="Choice",
            one_of=choices,
            default=recommended.model_value if recommended is not None else None,
        )
        if request.allow_custom:
            properties[CUSTOM_FIELD] = ElicitationStringPropertySchema(
                type="string",
                title="Other",
                description="Your own answer instead of a choice; when filled in, it is used.",
            )
        # Always required: a client that honours it cannot send an empty form (Zed checks).
        required.append(ANSWER_FIELD)
    schema = ElicitationSchema(
        type="object",
        title=request.header,
        properties=properties,
        required=required,
    )
    return Form(request, schema, other)


def _other_value(request: AskUserQuestionRequest) -> str:
    """A ``const`` for "Other" that no option of the question uses."""
    taken = {option.model_value for option in request.choices}
    value = _OTHER_VALUE
    while value in taken:
        value += "_"
    return value


def _enum_option(option: AskUserQuestionOption) -> EnumOption:
    title = option.label + (RECOMMENDED_SUFFIX if option.recommended else "")
    return EnumOption(const=option.model_value, title=title, description=option.description)


def _text(problems: list[tuple[str, str]], content: Mapping[str, Any], key: str) -> str | None:
    value = content.get(key)
    if value is None or isinstance(value, str):
        return value
    problems.append((f"content.{key}", f"must be a string, got {type_name(value)}"))
    return None


def _invalid(problems: list[tuple[str, str]]) -> UserInteractionError:
    message = "; ".join(f"{field} {problem}" for field, problem in problems)
    return UserInteractionError(
        f"the ACP client's answer does not fit the question: {message}",
        INVALID_ANSWER,
        details={"errors": [{"field": f, "message": p} for f, p in problems]},
    )


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
