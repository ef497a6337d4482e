"""The tools of a context as MCP sees them: listed in a fixed order, called through
``ctx.tools.execute``, their results and failures as ``CallToolResult``.

Pure functions of a :class:`~hotseam.ToolRegistry` and a :class:`~hotseam.ToolResult`:
the server (:mod:`._server`) adds the protocol around them. A tool's failure keeps the
seam's ``{name, code, message}`` as ``structuredContent`` of an ``isError`` result, so a
model reads what went wrong as it would from ``ctx.tools.execute``; only a tool that does
not exist (after waiting for a swap that might bring it back) is a protocol error,
``-32602``, as the specification asks.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from ..._core import Tool, ToolRegistry, ToolResult

__all__ = ["TOOL_NOT_FOUND", "Definitions", "call_result"]

TOOL_NOT_FOUND = "TOOL_NOT_FOUND"


class Definitions:
    """The MCP definitions of a registry's tools, each built once per :class:`Tool` object.

    A definition's input schema is pydantic's ``model_json_schema``, milliseconds per tool:
    rebuilt for every tool after every commit, a hundred tool modules would hold the event
    loop (and the host's next call) for tens of milliseconds. A tool object never changes;
    a reload makes a new one, so only the committed module's tools are built again.
    """

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry
        self._built: dict[int, tuple[Tool[Any], dict[str, Any]]] = {}

    def current(self) -> list[dict[str, Any]]:
        """The visible tools' definitions, sorted by name (a deterministic order, as
        2026-07-28 asks)."""
        tools = sorted(self.registry, key=lambda tool: tool.name)
        built: dict[int, tuple[Tool[Any], dict[str, Any]]] = {}
        for tool in tools:
            known = self._built.get(id(tool))
            if known is None or known[0] is not tool:
                known = (tool, tool.definition("mcp"))
            built[id(tool)] = known
        self._built = built  # the tools gone are forgotten (their ids may be reused)
        return [built[id(tool)][1] for tool in tools]

    def listed(self) -> list[types.Tool]:
        """The ``tools/list`` entries."""
        return [
            types.Tool(
                name=definition["name"],
                description=definition["description"] or None,
                input_schema=definition["inputSchema"],
            )
            for definition in self.current()
        ]

    def signature(self) -> str:
        """What a client sees of the tools (names, descriptions, input schemas), as one
        string: a change of it is what ``tools/list_changed`` announces."""
        return json.dumps(self.current(), sort_keys=True, default=str)


def call_result(result: ToolResult) -> types.CallToolResult:
    """The ``tools/call`` result of a tool's :class:`ToolResult`.

    Success: the output as text (a string as is, anything else as JSON), and as
    ``structuredContent`` when it is an object (the older revisions allow only objects
    there). Failure: ``isError`` with the error's text and its ``{name, code, message}``.
    """
    if result.error is not None:
        error = result.error
        text = f"{error.get('name')} {error.get('code')}: {error.get('message', '')}"
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=dict(error),
            is_error=True,
        )
    output: Any = result.output
    text = output if isinstance(output, str) else json.dumps(output, default=str)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=output if isinstance(output, dict) else None,
        is_error=False,
    )
