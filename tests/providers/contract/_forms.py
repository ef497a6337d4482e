"""A form elicitation's content as the human fills it in (ACP's and MCP's forms).

The form is read from its JSON schema as the client gets it: one question has the fixed
properties ``answer`` (the choice, or the free text) and ``custom`` (the human's own
text); several have a property per question id, and ``<id>_custom`` for typed text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._surface import Choose, Reply


def form_content(schema: Mapping[str, Any], replies: Sequence[Reply]) -> dict[str, Any]:
    """The content answering each question of the form ``schema`` with ``replies``."""
    properties: Mapping[str, Any] = schema["properties"]
    if "answer" in properties:
        fields = [("answer", "custom")]
    else:
        fields = [(key, f"{key}_custom") for key in properties if not key.endswith("_custom")]
    assert len(fields) == len(replies), (list(properties), replies)
    content: dict[str, Any] = {}
    for (choice, custom), reply in zip(fields, replies, strict=True):
        if isinstance(reply, Choose):
            content[choice] = _choices(properties[choice])[reply.index]
        elif custom in properties:
            content[custom] = reply.text
        else:
            content[choice] = reply.text
    return content


def _choices(prop: Mapping[str, Any]) -> list[Any]:
    """The option values of a choice property, in the request's order (not "Other")."""
    titled = prop.get("oneOf") or prop.get("anyOf") or prop.get("items", {}).get("anyOf", [])
    if titled:
        return [item["const"] for item in titled if item["const"] != "_other"]
    return [value for value in prop["enum"] if value != "_other"]


def questions_of(schema: Mapping[str, Any]) -> int | None:
    """How many questions the form shows (``None``: the one-question form)."""
    properties: Mapping[str, Any] = schema["properties"]
    if "answer" in properties:
        return None
    return len([key for key in properties if not key.endswith("_custom")])
