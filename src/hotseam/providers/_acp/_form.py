"""An ask as an ACP ``elicitation/create`` request: the surface kit's form, on ACP's wire.

The mapping (question → message, header → title, options → ``oneOf``/``anyOf``...) and
the reading of the result are the kit's (:mod:`hotseam.providers._kit`); ACP adds the
session and the tool call the question belongs to::

    {"sessionId": "sess_1", "toolCallId": "tc_1", "message": "Which database?",
     "mode": "form", "requestedSchema": {"type": "object", ...}}
"""

from __future__ import annotations

from typing import Any

from .._kit import Form

__all__ = ["ELICITATION_CREATE", "form_params"]

ELICITATION_CREATE = "elicitation/create"


def form_params(
    form: Form, session_id: str, tool_call_id: str | None = None, *, note: str | None = None
) -> dict[str, Any]:
    """The ``elicitation/create`` params of ``form``, scoped to a session (and tool call);
    ``note`` (one line) goes before the question when it is asked again."""
    params: dict[str, Any] = {"sessionId": session_id}
    if tool_call_id is not None:
        params["toolCallId"] = tool_call_id
    params.update(message=form.message(note), mode="form", requestedSchema=form.schema())
    return params
