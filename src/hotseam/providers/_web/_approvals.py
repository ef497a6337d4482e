"""An approval answered in the web inbox: checked before it is taken, as the page checks it.

The page renders an ask carrying ``request.approval`` as an approval card and answers it
with the two ordinary questions (``decision``, ``text``), so the API takes it as any ask.
Before an answer is taken it is read with :func:`~hotseam.interaction.approvals.read_decision`
(a decision offered, the text it needs, an edit that is a JSON object), and an edit is
checked against the tool's ``input_schema`` as far as a schema is simple: required fields,
unknown fields when the schema forbids them, and each top-level field's JSON type, enum or
const. The inbox has no input model, so what the schema does not say simply (a field of a
nested model, a pattern, a bound) is left to the gate, which asks again saying why.

:data:`_TYPES` and the messages are the page's too (``inbox.js``, ``schemaProblem``): the
page refuses an edit before sending it with the same words the server would use.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ...interaction import AskUserQuestionAnswer, AskUserQuestionRequest
from ...interaction.approvals import ApprovalAnswerError, Decision, read_decision

_TYPES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}


def approval_problem(request: AskUserQuestionRequest, answer: AskUserQuestionAnswer) -> str | None:
    """Why ``answer`` makes no decision the gate would take (the inbox refuses it, 422),
    or ``None``; always ``None`` for a request that is not an approval."""
    approval = request.approval
    if approval is None:
        return None
    try:
        decided = read_decision(approval, answer)
    except ApprovalAnswerError as error:
        return str(error)
    schema = approval.input_schema
    if decided.decision is not Decision.EDIT or schema is None or decided.arguments is None:
        return None
    problem = schema_problem(schema, decided.arguments)
    if problem is None:
        return None
    return f"the edited arguments are not valid input for {approval.tool}: {problem}"


def schema_problem(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> str | None:
    """The first thing ``arguments`` break of what ``schema`` says simply, or ``None``."""
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = schema.get("required")
    for name in required if isinstance(required, list) else []:
        if isinstance(name, str) and name not in arguments:
            return f"missing required field {name!r}"
    if schema.get("additionalProperties") is False:
        for name in arguments:
            if name not in properties:
                return f"unknown field {name!r}"
    for name, value in arguments.items():
        field = properties.get(name)
        if isinstance(field, Mapping):
            problem = _field_problem(field, value)
            if problem is not None:
                return f"field {name!r} {problem}"
    return None


def _field_problem(field: Mapping[str, Any], value: object) -> str | None:
    if "enum" in field and isinstance(field["enum"], list) and value not in field["enum"]:
        return "must be one of " + ", ".join(_json(item) for item in field["enum"])
    if "const" in field and value != field["const"]:
        return f"must be {_json(field['const'])}"
    types = _types(field)
    if types is None or any(_is(kind, value) for kind in types):
        return None
    return "must be " + " or ".join(_TYPES[kind] for kind in types) + f" (got {_kind(value)})"


def _types(field: Mapping[str, Any]) -> list[str] | None:
    """The JSON types a field takes, or ``None`` when the schema does not say simply (no
    type, a ``$ref``, a union of something else than plain types)."""
    given = field.get("type")
    if isinstance(given, str):
        given = [given]
    if isinstance(given, list):
        return [kind for kind in given if kind in _TYPES] or None
    union = field.get("anyOf", field.get("oneOf"))
    if isinstance(union, list):
        kinds = []
        for branch in union:
            inner = (
                _types(branch) if isinstance(branch, Mapping) and set(branch) <= {"type"} else None
            )
            if inner is None:
                return None
            kinds.extend(inner)
        return kinds or None
    return None


def _is(kind: str, value: object) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    checks: dict[str, type | tuple[type, ...]] = {
        "number": (int, float),
        "string": str,
        "array": list,
        "object": dict,
    }
    return isinstance(value, checks[kind])


def _kind(value: object) -> str:
    for kind in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _is(kind, value):
            return _TYPES[kind]
    return type(value).__name__


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)
