"""Conflict checks of a reload: would a new generation's registrations collide?

A seam has one active provider per context and a tool name one tool per registry. The core
refuses a collision when a scope activates; the reloader checks before its commit, against
what stays active and what this reload registers, so that a colliding module fails alone
(its old generation serving on) instead of failing the whole swap half way.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from .._core import Registration, Scope, Seam, ToolRegistration
from ._errors import LoadError
from ._loader import Batch, Blocker, ModuleRecord
from ._planner import Plan

__all__ = ["check_conflicts"]


def check_conflicts(
    records: dict[str, ModuleRecord],
    batch: Batch,
    plan: Plan,
    order: Sequence[str],
    scopes: dict[str, Scope],
    aborted: dict[str, LoadError],
    blockers: dict[str, Blocker],
) -> bool:
    """Fail the first new generation whose registrations would collide; True if one did.

    A registration collides with an active one that this reload does not remove (the
    old generations of committing or unloading modules are removed), or with one made
    earlier in this reload; modules retried only because what refused them left come
    last, so an edited incumbent keeps its seam. ``blockers`` gets, for each module
    refused, the registration it collided with (to retry it once that one goes).
    """
    # Only the generations this reload replaces or unloads are walked: the cost follows
    # what changed, not how many modules serve.
    leaving: set[Any] = set()
    for name in {*batch.staged, *plan.unload}:
        record = records.get(name)
        if record is None or record.scope is None:
            continue
        if (name in batch.staged and name not in aborted) or name in plan.unload:
            leaving.update(record.scope.registrations())
    owners: dict[Any, str] = {}
    ignoring = frozenset(leaving)
    seams: dict[Seam[Any], Registration[Any]] = {}
    tools: dict[str, ToolRegistration] = {}
    for name in sorted(order, key=lambda n: n in plan.retries):
        scope = scopes.get(name)
        if scope is None or name in aborted:
            continue
        conflict: tuple[LoadError, Registration[Any] | ToolRegistration] | None = None
        for registration in scope.registrations():
            if isinstance(registration, Registration):
                conflict = _seam_conflict(registration, ignoring, seams.get(registration.seam))
            else:
                earlier_tool = tools.get(registration.tool.name)
                where = str(batch.sources[name].path)
                conflict = _tool_conflict(registration, leaving, earlier_tool, where)
            if conflict is not None:
                break
        if conflict is not None:
            aborted[name], blocking = conflict
            owner = owners.get(blocking) or _live_owner(records, blocking)
            blockers[name] = Blocker(weakref.ref(blocking), owner)
            # Its old generation now stays: check everything again with that known.
            return True
        for registration in scope.registrations():
            owners[registration] = name
            if isinstance(registration, Registration):
                seams[registration.seam] = registration
            else:
                tools[registration.tool.name] = registration
    return False


def _live_owner(records: dict[str, ModuleRecord], registration: object) -> str | None:
    """The module whose serving generation made ``registration`` (a conflict is rare: this
    walks every generation only then)."""
    for name, record in records.items():
        if record.scope is not None and registration in record.scope.registrations():
            return name
    return None


def _seam_conflict(
    registration: Registration[Any],
    ignoring: frozenset[Any],
    earlier: Registration[Any] | None,
) -> tuple[LoadError, Registration[Any]] | None:
    """The error refusing ``registration``, and the registration it collides with."""
    seam = registration.seam.name
    refused = f"{_describe(registration.provider)} from {registration.location} was refused"
    if earlier is not None:
        return LoadError.at(
            "conflict",
            "ProviderConflictError",
            f"seam {seam!r} is also provided by {_describe(earlier.provider)} registered at "
            f"{earlier.location} in the same reload; {refused}",
            registration.location,
        ), earlier
    active = registration.conflict(ignoring=ignoring)
    if active is None:
        return None
    return LoadError.at(
        "conflict",
        "ProviderConflictError",
        f"seam {seam!r} already has an active provider in context {active.context.name!r}: "
        f"{_describe(active.provider)} registered at {active.location}; {refused}",
        registration.location,
    ), active


def _tool_conflict(
    registration: ToolRegistration,
    leaving: set[Any],
    earlier: ToolRegistration | None,
    where: str,
) -> tuple[LoadError, ToolRegistration] | None:
    """The error refusing ``registration``, and the registration it collides with."""
    name = registration.tool.name
    if earlier is not None:
        message = f"a tool named {name!r} is registered twice in this reload"
        return LoadError.at("conflict", "ToolError", message, where), earlier
    active = registration.registry._own.get(name)
    if active is None or active in leaving:
        return None
    message = (
        f"a tool named {name!r} is already registered in context "
        f"{registration.registry.context.name!r}"
    )
    return LoadError.at("conflict", "ToolError", message, where), active


def _describe(provider: object) -> str:
    return f"{type(provider).__module__}.{type(provider).__qualname__}"
