"""An ask as an MCP form elicitation: the ACP provider's form, fitted to MCP's schema.

The mapping is the ACP provider's (:mod:`hotseam.providers._acp._form`): question →
``message``, header → the schema's ``title``, options → a titled ``oneOf`` (one choice) or
an ``array`` of titled ``anyOf`` items with ``minItems``/``maxItems`` (several), the
recommended option(s) → ``default``, custom answers → an optional text property. MCP
differs in two places, fixed here:

* an option has no ``description`` in MCP's schema, so the options' descriptions go into
  their property's ``description`` (one ``Label: description`` line each);
* 2025-06-18 knows titled single-select only as ``enum`` + ``enumNames`` (``oneOf`` came
  with 2025-11-25), so a one-choice property carries both on that revision.

The reply is read by the same form, so answers are validated by the same rules; only the
messages name MCP.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ...interaction import (
    ASK_CANCELLED,
    ASK_DECLINED,
    INVALID_ANSWER,
    AskUserQuestionAnswer,
    UserInteractionError,
)
from .._acp import Form, type_name

__all__ = ["ELICIT_METHOD", "mcp_schema", "read_result"]

ELICIT_METHOD = "elicitation/create"
_ENUM_NAMES_REVISION = "2025-06-18"


def mcp_schema(form: Form, protocol_version: str) -> dict[str, Any]:
    """The ``requestedSchema`` of ``form`` for a client speaking ``protocol_version``."""
    schema = copy.deepcopy(form.requested_schema())
    for prop in schema.get("properties", {}).values():
        options = prop.get("oneOf") or prop.get("items", {}).get("anyOf") or []
        described = [
            f"{option.get('title', option['const'])}: {option.pop('description')}"
            for option in options
            if option.get("description")
        ]
        if described:
            prop["description"] = "\n".join(filter(None, [prop.get("description"), *described]))
        if "oneOf" in prop and protocol_version == _ENUM_NAMES_REVISION:
            prop["enum"] = [option["const"] for option in prop["oneOf"]]
            prop["enumNames"] = [option.get("title", option["const"]) for option in prop["oneOf"]]
    return schema


def read_result(form: Form, result: Mapping[str, Any] | object) -> AskUserQuestionAnswer:
    """The answer in an ``ElicitResult`` (as a dict), read by the form's rules.

    Raises:
        UserInteractionError: ``ASK_DECLINED``, ``ASK_CANCELLED``, or ``INVALID_ANSWER``
            naming each field that does not fit.
        EmptyAnswerError, IncompleteAnswerError: as :meth:`Form.read` (ask again).
    """
    action = result.get("action") if isinstance(result, Mapping) else None
    if action == "decline":
        raise UserInteractionError(
            "the human declined to answer (the MCP client answered action 'decline')",
            ASK_DECLINED,
        )
    if action == "cancel":
        raise UserInteractionError(
            "the human dismissed the question (the MCP client answered action 'cancel')",
            ASK_CANCELLED,
        )
    if not isinstance(result, Mapping):
        raise UserInteractionError(
            f"the MCP client's answer must be an object, got {type_name(result)}", INVALID_ANSWER
        )
    try:
        return form.read(result)
    except UserInteractionError as error:
        if error.code != INVALID_ANSWER:
            raise
        raise UserInteractionError(
            error.message.replace("ACP client", "MCP client"),
            INVALID_ANSWER,
            details=error.details,
        ) from None
