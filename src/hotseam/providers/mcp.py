"""The MCP provider: hotseam's tools served over the Model Context Protocol.

``hotseam mcp tools/`` serves the tools the watched modules register
(``scope.register_tool`` in ``setup``) to an MCP host (Claude Code, VS Code, Cursor...),
hot-reloading them as they are saved. :class:`McpServer` is that server, built on the
official ``mcp`` SDK's low-level server (both protocol eras: the ``initialize`` handshake
of 2025-06-18/2025-11-25, and 2026-07-28). Inside a tool, ``await ask(...)`` reaches the
human through the host's own UI: :class:`McpProvider` turns the question into a form
elicitation of the client that made the call (an ``elicitation/create`` request on the
older revisions, an input-required result on 2026-07-28), with the ACP provider's mapping
(options as titled ``oneOf``, several choices as an ``array``, custom answers as a text
field). A client without elicitation gets the fallback (the web inbox, or an error that
tells the model to ask in the conversation). See ``docs/mcp.md``.
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
