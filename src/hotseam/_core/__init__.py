"""hotseam's core: scopes and effects, contexts and seams, tools, carried values.

Each module imports only those before it: ``_errors``; ``_log``, ``_tracking``,
``_module_body``; ``_abort``, ``_agent``, ``_public``, ``_seam``; ``_callbacks``, ``_swap``;
``_effects``; ``_gate``; ``_tools``; ``_registry``; ``_carry``; ``_scope``; ``_context``. A
lower module reaches a higher concept through a small protocol the higher one implements (a
scope is an ``EffectOwner``, a context a ``ToolContext``); ``tests/test_layers.py`` fails on a
circle.

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
if TYPE_CHECKING:  # ``X as X``: re-exported for type checkers (``__all__`` is the table's)
    from typing import Any

    from ._abort import AbortController as AbortController
    from ._abort import AbortSignal as AbortSignal
    from ._abort import abort_exception as abort_exception
    from ._agent import Agent as Agent
    from ._carry import CarriedEffect as CarriedEffect
    from ._carry import carried_since as carried_since
    from ._carry import carry_mark as carry_mark
    from ._carry import follow as follow
    from ._carry import hand_over as hand_over
    from ._context import Context as Context
    from ._context import current_context as current_context
    from ._context import lookup_current_context as lookup_current_context
    from ._context import use_context as use_context
    from ._effects import CloseReason as CloseReason
    from ._effects import Effect as Effect
    from ._effects import EnteredEffect as EnteredEffect
    from ._effects import ScopeExit as ScopeExit
    from ._effects import TaskEffect as TaskEffect
    from ._errors import AbortError as AbortError
    from ._errors import DisposalError as DisposalError
    from ._errors import DisposerTimeoutError as DisposerTimeoutError
    from ._errors import HarnessError as HarnessError
    from ._errors import NoProviderError as NoProviderError
    from ._errors import ProviderConflictError as ProviderConflictError
    from ._errors import ScopeClosedError as ScopeClosedError
    from ._errors import ScopeError as ScopeError
    from ._errors import ToolError as ToolError
    from ._gate import TOOL_GATE as TOOL_GATE
    from ._gate import GateVerdict as GateVerdict
    from ._gate import ToolGate as ToolGate
    from ._log import EventLogger as EventLogger
    from ._log import get_logger as get_logger
    from ._module_body import executing as executing
    from ._registry import BaseContext as BaseContext
    from ._registry import Lease as Lease
    from ._registry import Registration as Registration
    from ._registry import RegistrationState as RegistrationState
    from ._scope import Scope as Scope
    from ._scope import ScopeState as ScopeState
    from ._scope import exit_task_group as exit_task_group
    from ._seam import Seam as Seam
    from ._swap import DEFAULT_SWAP_WAIT as DEFAULT_SWAP_WAIT
    from ._swap import Swap as Swap
    from ._tools import Tool as Tool
    from ._tools import ToolCall as ToolCall
    from ._tools import ToolContext as ToolContext
    from ._tools import ToolFormat as ToolFormat
    from ._tools import ToolRegistration as ToolRegistration
    from ._tools import ToolRegistry as ToolRegistry
    from ._tools import ToolResult as ToolResult
    from ._tools import format_validation_error as format_validation_error
    from ._tools import tool as tool
    from ._tracking import Tracker as Tracker
    from ._tracking import get_tracker as get_tracker
    from ._tracking import is_long_lived as is_long_lived
    from ._tracking import mark_long_lived as mark_long_lived
    from ._tracking import set_tracker as set_tracker


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
        "_gate": ("TOOL_GATE", "GateVerdict", "ToolGate"),
        "_log": ("EventLogger", "get_logger"),
        "_module_body": ("executing",),
        "_registry": (
            "BaseContext",
            "Lease",
            "Registration",
            "RegistrationState",
        ),
        "_scope": ("Scope", "ScopeState", "exit_task_group"),
        "_seam": ("Seam",),
        "_swap": ("DEFAULT_SWAP_WAIT", "Swap"),
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
"""Where each name the core exports is defined."""

__all__ = [*_DEFINED_IN, "lazy_exports", "present_as", "present_when_loaded"]

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
