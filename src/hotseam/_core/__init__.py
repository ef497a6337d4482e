"""hotseam's core: scopes and effects, contexts and seams, tools, carried values.

Read it from the bottom up; each module imports only those above it in this list:

* ``_errors`` — the error tree (``HarnessError`` and its codes);
* ``_log``, ``_tracking``, ``_module_body`` — logging, the leak tracker's hooks, refusing
  registrations made while a hot-reloaded module's body runs;
* ``_abort``, ``_agent``, ``_public``, ``_seam`` — abort signals, who asks, how a class
  presents itself, the typed key of a capability;
* ``_callbacks``, ``_swap`` — "this registration went" callbacks, a swap in progress;
* ``_effects`` — what a scope owns (a scope is only an ``EffectOwner`` there);
* ``_tools`` — tools, their registrations and execution (a context is only a
  ``ToolContext`` there);
* ``_registry`` — a context's providers: registrations, leases, swaps (``BaseContext``);
* ``_carry`` — values a generation hands to its successor;
* ``_scope`` — the scope: its tree, order and close;
* ``_context`` — ``Context`` (``BaseContext`` plus the factory of scopes) and the current
  context.

Where a lower module needs a higher concept it owns a small protocol the higher one
implements (``EffectOwner``, ``ToolContext``, ``CarryHost``); ``tests/test_layers.py``
fails on any import circle. The layers above import the core through this package.
"""

from . import _tracking
from ._abort import AbortController, AbortSignal, abort_exception
from ._agent import Agent
from ._carry import CarriedEffect, carried_since, carry_mark, follow, hand_over
from ._context import Context, current_context, lookup_current_context, use_context
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
from ._log import EventLogger, get_logger
from ._module_body import executing
from ._public import present_as
from ._registry import DEFAULT_SWAP_WAIT, BaseContext, Lease, Registration, RegistrationState
from ._scope import Scope, ScopeState, exit_task_group
from ._seam import Seam
from ._swap import Swap
from ._tools import (
    Tool,
    ToolCall,
    ToolContext,
    ToolFormat,
    ToolRegistration,
    ToolRegistry,
    ToolResult,
    format_validation_error,
    tool,
)
from ._tracking import mark_long_lived

__all__ = [
    "DEFAULT_SWAP_WAIT",
    "AbortController",
    "AbortError",
    "AbortSignal",
    "Agent",
    "BaseContext",
    "CarriedEffect",
    "CloseReason",
    "Context",
    "DisposalError",
    "DisposerTimeoutError",
    "Effect",
    "EnteredEffect",
    "EventLogger",
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
    "ToolContext",
    "ToolError",
    "ToolFormat",
    "ToolRegistration",
    "ToolRegistry",
    "ToolResult",
    "_tracking",
    "abort_exception",
    "carried_since",
    "carry_mark",
    "current_context",
    "executing",
    "exit_task_group",
    "follow",
    "format_validation_error",
    "get_logger",
    "hand_over",
    "lookup_current_context",
    "mark_long_lived",
    "present_as",
    "tool",
    "use_context",
]
