"""The MCP surface: hotseam's tools behind the Model Context Protocol (``hotseam mcp``).

One concept a module: :mod:`._tools` (tools as MCP lists and results), :mod:`._server`
(the SDK's low-level server around a context), :mod:`._call` (which call a question comes
from), :mod:`._form` (the ACP form fitted to MCP's schema), :mod:`._provider` (the
user-interaction provider), :mod:`._input` (2026-07-28 continuations), :mod:`._tap`
(answers filed as they are read), :mod:`._stdio` (the bounded stdio transport),
:mod:`._http` (Streamable HTTP behind the web inbox's rules).
"""
