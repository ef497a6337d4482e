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

Nothing is imported here until it is asked for: ``hotseam._core.Scope`` (or ``from
hotseam._core import Scope``) imports the module that defines it, through the table below
(PEP 562), so that a process needing only the error tree (``hotseam status``) never imports
anyio. Under ``TYPE_CHECKING`` the same names are imported for type checkers. A package that
re-exports core names registers them with :func:`present_when_loaded`: each is presented
as that package's (``hotseam.Scope``) the moment its module is loaded here.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable

from ._public import lazy_exports, present_as

# typing.TYPE_CHECKING without importing typing (the clients of the control socket load
# this module): type checkers take any constant of this name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

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
    from ._tracking import Tracker, get_tracker, is_long_lived, mark_long_lived, set_tracker

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
    "Tracker",
    "abort_exception",
    "carried_since",
    "carry_mark",
    "current_context",
    "executing",
    "exit_task_group",
    "follow",
    "format_validation_error",
    "get_logger",
    "get_tracker",
    "hand_over",
    "is_long_lived",
    "lazy_exports",
    "lookup_current_context",
    "mark_long_lived",
    "present_as",
    "present_when_loaded",
    "set_tracker",
    "tool",
    "use_context",
]

_DEFINED_IN: dict[str, str] = {
    "AbortController": "_abort",
    "AbortSignal": "_abort",
    "abort_exception": "_abort",
    "Agent": "_agent",
    "CarriedEffect": "_carry",
    "carried_since": "_carry",
    "carry_mark": "_carry",
    "follow": "_carry",
    "hand_over": "_carry",
    "Context": "_context",
    "current_context": "_context",
    "lookup_current_context": "_context",
    "use_context": "_context",
    "CloseReason": "_effects",
    "Effect": "_effects",
    "EnteredEffect": "_effects",
    "ScopeExit": "_effects",
    "TaskEffect": "_effects",
    "AbortError": "_errors",
    "DisposalError": "_errors",
    "DisposerTimeoutError": "_errors",
    "HarnessError": "_errors",
    "NoProviderError": "_errors",
    "ProviderConflictError": "_errors",
    "ScopeClosedError": "_errors",
    "ScopeError": "_errors",
    "ToolError": "_errors",
    "EventLogger": "_log",
    "get_logger": "_log",
    "executing": "_module_body",
    "BaseContext": "_registry",
    "DEFAULT_SWAP_WAIT": "_registry",
    "Lease": "_registry",
    "Registration": "_registry",
    "RegistrationState": "_registry",
    "Scope": "_scope",
    "ScopeState": "_scope",
    "exit_task_group": "_scope",
    "Seam": "_seam",
    "Swap": "_swap",
    "Tool": "_tools",
    "ToolCall": "_tools",
    "ToolContext": "_tools",
    "ToolFormat": "_tools",
    "ToolRegistration": "_tools",
    "ToolRegistry": "_tools",
    "ToolResult": "_tools",
    "format_validation_error": "_tools",
    "tool": "_tools",
    "Tracker": "_tracking",
    "get_tracker": "_tracking",
    "is_long_lived": "_tracking",
    "mark_long_lived": "_tracking",
    "set_tracker": "_tracking",
}
"""Where each name of ``__all__`` is defined (a module's own name: the module itself)."""

_presenting: list[tuple[str, set[str]]] = []
"""The packages that re-export core names, with the names not yet presented as theirs."""


def present_when_loaded(package: str, names: Iterable[str]) -> None:
    """Present each core name of ``names`` as ``package``'s (its ``__module__``, which
    reprs, tracebacks and pickles show) as soon as its module is loaded, and at once for
    those loaded already. The first package to present a name keeps it."""
    _presenting.append((package, {name for name in names if name in _DEFINED_IN}))
    _present_loaded()


def _present_loaded() -> None:
    for package, waiting in _presenting:
        loaded = {}
        for name in waiting:
            module = sys.modules.get(f"{__name__}.{_DEFINED_IN[name]}")
            # A module still being imported (by another thread) is presented next time.
            value = module if _DEFINED_IN[name] == name else getattr(module, name, None)
            if value is not None:
                loaded[name] = value
        if loaded:
            waiting.difference_update(loaded)
            present_as(package, loaded, loaded)


def _load(name: str) -> Any:
    module = importlib.import_module(f"{__name__}.{_DEFINED_IN[name]}")
    return module if _DEFINED_IN[name] == name else getattr(module, name)


if not TYPE_CHECKING:  # type checkers read the imports above

    def __getattr__(name: str) -> Any:
        if name not in _DEFINED_IN:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = _load(name)
        globals()[name] = value
        _present_loaded()
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
