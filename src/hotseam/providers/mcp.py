"""The MCP provider: hotseam's tools served over the Model Context Protocol.

``hotseam mcp tools/`` serves the tools the watched modules register to an MCP host
(Claude Code, VS Code, Cursor...), hot-reloading them as they are saved. :class:`McpServer`
is built on the ``mcp`` SDK's low-level server (the 2025 ``initialize`` eras and
2026-07-28). Inside a tool, ``await ask(...)`` reaches the human through the host's UI:
:class:`McpProvider` makes the question a form elicitation of the calling client, with the
ACP provider's mapping; a client without elicitation gets the fallback (the web inbox, or
an error telling the model to ask in the conversation). See ``docs/mcp.md``.
"""

from __future__ import annotations

from .._core import present_as
from .._extras import raise_if_missing

try:
    from ._mcp import (
        DEFAULT_INPUT_TTL,
        DEFAULT_MAX_LINE_BYTES,
        McpCall,
        McpProvider,
        McpServer,
        current_call,
        in_call,
        stdio_streams,
    )
except ModuleNotFoundError as error:  # installed without the mcp extra
    raise_if_missing(error, "mcp", __name__)
    raise

__all__ = [
    "DEFAULT_INPUT_TTL",
    "DEFAULT_MAX_LINE_BYTES",
    "McpCall",
    "McpProvider",
    "McpServer",
    "current_call",
    "in_call",
    "stdio_streams",
]

present_as(__name__, globals(), __all__)
