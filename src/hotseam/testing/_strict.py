"""Strict mode, as in React StrictMode: set up, dispose, set up again, and look for leftovers.

A component whose disposal forgets something (a registration made around its scope, a task
it started itself, a global it did not restore) works the first time and breaks the second.
:func:`strict_setup` runs the setup twice with a disposal in between and fails with a
:class:`StrictModeError` naming the leftovers.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio

from .._core import BaseContext, HarnessError, Scope, carried_since, carry_mark

Setup = Callable[[Scope], object]

_told: set[str] = set()
"""Carried values strict mode has named in a :class:`StrictModeError` (the leak check does
not report them a second time)."""


def told_carried() -> set[str]:
    """The carried values strict mode has named since :func:`forget_told`."""
    return _told


def forget_told() -> None:
    """Start a new test: nothing named yet."""
    _told.clear()


class StrictModeError(HarnessError, AssertionError):
    """The second setup found leftovers of the first (or could not run because of them)."""

    default_code = "STRICT_MODE"


@dataclass(frozen=True, slots=True)
class _Snapshot:
    providers: frozenset[tuple[str, str]]
    tools: frozenset[tuple[str, str]]
    tasks: frozenset[int]
    task_names: dict[int, str]
    probe: Any
    carried: int
    locations: dict[tuple[str, str], str]  # (context, seam) -> file:line that provided it


def snapshot(context: BaseContext, probe: Callable[[], object] | None) -> _Snapshot:
    """Picture what is live: providers and tools (here and inherited), tasks, probed state,
    and a mark after which carried values must all be disposed."""
    providers: set[tuple[str, str]] = set()
    tools: set[tuple[str, str]] = set()
    locations: dict[tuple[str, str], str] = {}
    ctx: BaseContext | None = context
    while ctx is not None:
        for seam, registration in ctx.providers().items():
            providers.add((ctx.name, seam.name))
            locations[ctx.name, seam.name] = registration.location
        tools.update((ctx.name, name) for name in ctx.tools._own)
        ctx = ctx.parent
    running = anyio.get_running_tasks()
    return _Snapshot(
        providers=frozenset(providers),
        tools=frozenset(tools),
        tasks=frozenset(task.id for task in running),
        task_names={task.id: task.name or f"task {task.id}" for task in running},
        probe=probe() if probe is not None else None,
        carried=carry_mark(),
        locations=locations,
    )


def leftovers(before: _Snapshot, after: _Snapshot) -> list[str]:
    """Describe what ``after`` has that ``before`` had not (a setup that was not undone)."""
    found: list[str] = []
    found.extend(
        f"provider for seam {seam!r} still active in context {ctx!r} (registered at "
        f"{after.locations.get((ctx, seam), 'an unknown place')})"
        for ctx, seam in sorted(after.providers - before.providers)
    )
    found.extend(
        f"tool {tool!r} still registered in context {ctx!r}"
        for ctx, tool in sorted(after.tools - before.tools)
    )
    found.extend(
        f"task {after.task_names[task]!r} started by the first setup is still running"
        for task in sorted(after.tasks - before.tasks)
    )
    carried = carried_since(before.carried)
    _told.update(carried)
    found.extend(carried)
    if after.probe != before.probe:
        found.append(
            f"probed state changed: before setup {before.probe!r}, after disposal {after.probe!r}"
        )
    return found


async def _run_setup(setup: Setup, scope: Scope) -> None:
    outcome = setup(scope)
    if inspect.isawaitable(outcome):
        await outcome


async def strict_setup(
    setup: Setup,
    *,
    parent: Scope,
    name: str = "component",
    probe: Callable[[], object] | None = None,
    strict: bool = True,
) -> Scope:
    """Run ``setup(scope)`` in a child of ``parent``; in strict mode, twice with a dispose between.

    Args:
        setup: The component's setup, sync or async, registering everything on the scope.
        parent: The scope that owns the result (and hosts its background tasks).
        name: Names the child scopes in errors and logs.
        probe: Returns a picture of state outside hotseam (a registry, a global); it must be
            equal before the first setup and after its disposal.
        strict: When false, set up once (what the ``hotseam_setup`` fixture does outside
            strict mode).

    Returns:
        The scope of the (last) setup, still open; it closes with ``parent``.

    Raises:
        StrictModeError: after the first disposal a provider or tool registered during the
            first setup is still active, a task it started still runs, or ``probe`` differs;
            or the second setup failed.
    """
    __tracebackhide__ = True
    context = parent.context
    if context is None:
        raise StrictModeError(f"strict setup of {name!r} needs a parent scope with a context")
    if not strict:
        scope = parent.child(name)
        await _run_setup(setup, scope)
        return scope
    before = snapshot(context, probe)
    first = parent.child(f"{name} (strict mode: first setup)")
    await _run_setup(setup, first)
    await first.aclose()
    await anyio.lowlevel.checkpoint()  # let cancelled tasks that were never awaited finish
    found = leftovers(before, snapshot(context, probe))
    if found:
        raise StrictModeError(
            f"strict mode: disposing {name!r} did not undo everything its setup did: "
            + "; ".join(found),
            details={"leftovers": found},
        )
    second = parent.child(name)
    try:
        await _run_setup(setup, second)
    except Exception as error:
        await second.aclose()
        raise StrictModeError(
            f"strict mode: the second setup of {name!r} failed after the first was disposed "
            f"(leftovers of the first?): {type(error).__name__}: {error}",
            cause=error,
        ) from error
    return second
