"""The MCP surface: hotseam's tools behind the Model Context Protocol (``hotseam mcp``).

``_server`` (the SDK's server around a context), ``_provider`` (the user-interaction
provider), ``_input`` (2026-07-28 continuations), ``_tap`` (answers filed as read),
``_stdio`` and ``_http`` (the transports).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._core import lazy_exports
from .._kit import DEFAULT_MAX_LINE_BYTES as DEFAULT_MAX_LINE_BYTES

if TYPE_CHECKING:  # what hotseam.providers.mcp and the CLI use, imported when first used
    from ._http import DEFAULT_MAX_SESSIONS as DEFAULT_MAX_SESSIONS
    from ._http import DEFAULT_SESSION_IDLE_TIMEOUT as DEFAULT_SESSION_IDLE_TIMEOUT
    from ._http import serve_http as serve_http
    from ._input import DEFAULT_INPUT_TTL as DEFAULT_INPUT_TTL
    from ._provider import McpCall as McpCall
    from ._provider import McpProvider as McpProvider
    from ._provider import current_call as current_call
    from ._provider import in_call as in_call
    from ._provider import load_forms as load_forms
    from ._server import McpServer as McpServer
    from ._stdio import stdio_streams as stdio_streams

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_exports(
        globals(),
        {
            "McpCall": "._provider",
            "current_call": "._provider",
            "in_call": "._provider",
            "DEFAULT_INPUT_TTL": "._input",
            "McpProvider": "._provider",
            "load_forms": "._provider",
            "McpServer": "._server",
            "stdio_streams": "._stdio",
            "DEFAULT_MAX_SESSIONS": "._http",
            "DEFAULT_SESSION_IDLE_TIMEOUT": "._http",
            "serve_http": "._http",
        },
    )
