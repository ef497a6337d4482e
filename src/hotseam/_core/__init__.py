"""hotseam's core: scopes and effects, contexts and seams, tools, carried values.

Each module imports only those before it: ``_errors``; ``_log``, ``_tracking``,
``_module_body``; ``_abort``, ``_agent``, ``_public``, ``_seam``; ``_callbacks``, ``_swap``;
``_effects``; ``_tools``; ``_registry``; ``_carry``; ``_scope``; ``_context``. A lower module
reaches a higher concept through a small protocol the higher one implements (a scope is an
``EffectOwner``, a context a ``ToolContext``); ``tests/test_layers.py`` fails on a circle.

A name is imported when first asked for (PEP 562), so that a process needing only the
error tree (``hotseam status``) never imports anyio. A package re-exporting core names
registers them with :func:`present_when_loaded`, so each presents itself as that package's."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable

from ._public import lazy_exports, present_as

# Not typing.TYPE_CHECKING: see _errors.py.
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
    name: module
    for module, names in {
        "_abort": ("AbortController", "AbortSignal", "abort_exception"),
        "_agent": ("Agent",),
        "_carry": ("CarriedEffect", "carried_since", "carry_mark", "follow", "hand_over"),
        "_context": ("Context", "current_context", "lookup_current_context", "use_context"),
        "_effects": ("CloseReason", "Effect", "EnteredEffect", "ScopeExit", "TaskEffect"),
        "_errors": (
            "AbortError",
            "DisposalError",
            "DisposerTimeoutError",
            "HarnessError",
            "NoProviderError",
            "ProviderConflictError",
            "ScopeClosedError",
            "ScopeError",
            "ToolError",
        ),
        "_log": ("EventLogger", "get_logger"),
        "_module_body": ("executing",),
        "_registry": (
            "BaseContext",
            "DEFAULT_SWAP_WAIT",
            "Lease",
            "Registration",
            "RegistrationState",
        ),
        "_scope": ("Scope", "ScopeState", "exit_task_group"),
        "_seam": ("Seam",),
        "_swap": ("Swap",),
        "_tools": (
            "Tool",
            "ToolCall",
            "ToolContext",
            "ToolFormat",
            "ToolRegistration",
            "ToolRegistry",
            "ToolResult",
            "format_validation_error",
            "tool",
        ),
        "_tracking": ("Tracker", "get_tracker", "is_long_lived", "mark_long_lived", "set_tracker"),
    }.items()
    for name in names
}
"""Where each name of ``__all__`` is defined."""

_presenting: list[tuple[str, set[str]]] = []
"""The packages that re-export core names, with the names not yet presented as theirs."""


def present_when_loaded(package: str, names: Iterable[str]) -> None:
    """Present each core name of ``names`` as ``package``'s (its ``__module__``: reprs,
    tracebacks, pickles) once its module is loaded; the first package to do so keeps it."""
    _presenting.append((package, {name for name in names if name in _DEFINED_IN}))
    _present_loaded()


def _present_loaded() -> None:
    for package, waiting in _presenting:
        loaded = {}
        for name in waiting:
            module = sys.modules.get(f"{__name__}.{_DEFINED_IN[name]}")
            # A module still being imported (by another thread) is presented next time.
            value = getattr(module, name, None)
            if value is not None:
                loaded[name] = value
        if loaded:
            waiting.difference_update(loaded)
            present_as(package, loaded, loaded)


if not TYPE_CHECKING:  # type checkers read the imports above

    def __getattr__(name: str) -> Any:
        if name not in _DEFINED_IN:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{__name__}.{_DEFINED_IN[name]}"), name)
        globals()[name] = value
        _present_loaded()
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
