"""UI surfaces of the user-interaction seam.

* :mod:`hotseam.providers.scripted`: answers from a script (tests, CI, automation);
* :mod:`hotseam.providers.terminal`: asks in the terminal (prompt_toolkit, or plain lines);
* :mod:`hotseam.providers.acp`: asks through Agent Client Protocol form elicitations.

Each is imported on its own (``from hotseam.providers.scripted import ScriptedProvider``),
so using one never imports the others' dependencies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._core import lazy_exports

if TYPE_CHECKING:  # for hotseam's CLI, not public (not in __all__): imported when first used
    from ._accept import accept_connections as accept_connections
    from ._kit import JsonLines as JsonLines
    from ._kit import Refusal as Refusal
    from ._kit import decode_bytes as decode_bytes
    from ._mcp import DEFAULT_MAX_SESSIONS as DEFAULT_MAX_SESSIONS
    from ._mcp import DEFAULT_SESSION_IDLE_TIMEOUT as DEFAULT_SESSION_IDLE_TIMEOUT
    from ._mcp import load_forms as load_forms
    from ._mcp import serve_http as serve_http
    from ._web import DEFAULT_FLEET_PORT as DEFAULT_FLEET_PORT
    from ._web import is_loopback as is_loopback
    from ._web import load_token as load_token
    from ._web import serve_journal_inbox as serve_journal_inbox
    from ._web import stored_token_path as stored_token_path

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_exports(
        globals(),
        {
            "accept_connections": "._accept",
            "JsonLines": "._kit",
            "Refusal": "._kit",
            "decode_bytes": "._kit",
            "DEFAULT_MAX_SESSIONS": "._mcp",
            "DEFAULT_SESSION_IDLE_TIMEOUT": "._mcp",
            "load_forms": "._mcp",
            "serve_http": "._mcp",
            "DEFAULT_FLEET_PORT": "._web",
            "is_loopback": "._web",
            "load_token": "._web",
            "serve_journal_inbox": "._web",
            "stored_token_path": "._web",
        },
    )

__all__: list[str] = []
