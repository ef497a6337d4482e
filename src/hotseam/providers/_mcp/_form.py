"""An ask as an MCP form elicitation: the surface kit's form, on MCP's wire.

The mapping and its per-revision variants (option descriptions in the property's; titled
single-select as ``enum`` + ``enumNames`` on 2025-06-18) are the kit's
(:mod:`hotseam.providers._kit`); here is only what MCP says around them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...interaction import INVALID_ANSWER, AskUserQuestionAnswer, UserInteractionError
from .._kit import Form, mcp_variant, type_name

__all__ = ["ELICIT_METHOD", "mcp_schema", "read_result"]

ELICIT_METHOD = "elicitation/create"


def mcp_schema(form: Form, protocol_version: str) -> dict[str, Any]:
    """The ``requestedSchema`` of ``form`` for a client speaking ``protocol_version``."""
    return form.schema(mcp_variant(protocol_version))


def read_result(
    form: Form, result: Mapping[str, Any] | object, protocol_version: str = "2025-11-25"
) -> AskUserQuestionAnswer:
    """The answer in an ``ElicitResult`` (as a dict), read by the form's rules.

    Raises:
        UserInteractionError: ``ASK_DECLINED``, ``ASK_CANCELLED``, or ``INVALID_ANSWER``
            naming each field that does not fit.
        EmptyAnswerError, IncompleteAnswerError: as :meth:`Form.read` (ask again).
    """
    if not isinstance(result, Mapping):
        raise UserInteractionError(
            f"the MCP client's answer must be an object, got {type_name(result)}", INVALID_ANSWER
        )
    return form.read(result, mcp_variant(protocol_version))
