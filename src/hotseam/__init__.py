"""hotseam: seams served by one provider at a time, effects owned by scopes, hot reload.

The core is :mod:`hotseam._core` (its public names are re-exported here); the
user-interaction seam is :mod:`hotseam.interaction`, the hot reloader
:mod:`hotseam.reload`, and the UI surfaces :mod:`hotseam.providers`.
"""

from __future__ import annotations

from ._core import (
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
    ToolRegistration,
    ToolRegistry,
    ToolResult,
    current_context,
    mark_long_lived,
    present_as,
    tool,
    use_context,
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
    "TaskEffect",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolFormat",
    "ToolRegistration",
    "ToolRegistry",
    "ToolResult",
    "current_context",
    "mark_long_lived",
    "tool",
    "use_context",
]

__version__ = "0.1.0.dev0"

present_as(__name__, globals(), __all__)
