"""hotseam: seams served by one provider at a time, effects owned by scopes, hot reload.

The core lives here; the user-interaction seam is :mod:`hotseam.interaction`, the hot
reloader :mod:`hotseam.reload`, and the UI surfaces :mod:`hotseam.providers`.
"""

from __future__ import annotations

from ._abort import AbortController, AbortSignal
from ._agent import Agent
from ._carry import CarriedEffect
from ._context import (
    Context,
    Registration,
    RegistrationState,
    current_context,
    use_context,
)
from ._effects import CloseReason, Effect, EnteredEffect, ScopeExit, TaskEffect
from ._errors import (
    AbortError,
    DisposalError,
    DisposerTimeoutError,
    HarnessError,
    NoProviderError,
    ProviderConflictError,
    ScopeClosedError,
    ScopeError,
    ToolError,
)
from ._lease import Lease, Swap
from ._public import present_as
from ._scope import Scope, ScopeState
from ._seam import Seam
from ._tools import Tool, ToolCall, ToolFormat, ToolRegistration, ToolRegistry, ToolResult, tool
from ._tracking import mark_long_lived

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
