"""hotseam: seams served by one provider at a time, effects owned by scopes, hot reload.

The core is :mod:`hotseam._core` (its public names are re-exported here); the
user-interaction seam is :mod:`hotseam.interaction`, the hot reloader
:mod:`hotseam.reload`, and the UI surfaces :mod:`hotseam.providers`.

``import hotseam`` imports none of them: each public name is imported from the core the
first time it is used (PEP 562), so that the ``hotseam`` command's lightest subcommands
(``status``, ``reload``, ``--help``) start without anyio, and every name still presents
itself as ``hotseam.Scope``.
"""

from __future__ import annotations

from . import _core

# typing.TYPE_CHECKING without importing typing (a tenth of what `hotseam status`
# imports): type checkers take any constant of this name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._core import (
        TOOL_GATE,
        AbortController,
        AbortError,
        AbortSignal,
        Agent,
        CarriedEffect,
        CloseReason,
        Context,
        DisposalError,
        DisposerTimeoutError,
        Effect,
        EnteredEffect,
        GateVerdict,
        HarnessError,
        Lease,
        NoProviderError,
        ProviderConflictError,
        Registration,
        RegistrationState,
        Scope,
        ScopeClosedError,
        ScopeError,
        ScopeExit,
        ScopeState,
        Seam,
        Swap,
        TaskEffect,
        Tool,
        ToolCall,
        ToolError,
        ToolFormat,
        ToolGate,
        ToolRegistration,
        ToolRegistry,
        ToolResult,
        current_context,
        mark_long_lived,
        tool,
        use_context,
    )
    from ._core import (
        present_as as present_as,
    )

__all__ = [
    "AbortController",
    "AbortError",
    "AbortSignal",
    "Agent",
    "CarriedEffect",
    "CloseReason",
    "Context",
    "DisposalError",
    "DisposerTimeoutError",
    "Effect",
    "EnteredEffect",
    "GateVerdict",
    "HarnessError",
    "Lease",
    "NoProviderError",
    "ProviderConflictError",
    "Registration",
    "RegistrationState",
    "Scope",
    "ScopeClosedError",
    "ScopeError",
    "ScopeExit",
    "ScopeState",
    "Seam",
    "Swap",
    "TOOL_GATE",
    "TaskEffect",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolFormat",
    "ToolGate",
    "ToolRegistration",
    "ToolRegistry",
    "ToolResult",
    "current_context",
    "mark_long_lived",
    "tool",
    "use_context",
]

__version__ = "0.1.0.dev0"

_core.present_when_loaded(__name__, __all__)

if not TYPE_CHECKING:  # type checkers read the imports above

    def __getattr__(name: str) -> Any:
        # present_as: not public, but importable from here since the first release.
        if name not in __all__ and name != "present_as":
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(_core, name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, "present_as"})
