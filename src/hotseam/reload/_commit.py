"""Committing a reload: swap the prepared generations in for the ones they replace.

The last of a reload's three phases (plan → prepare → commit). Inside ``context.swap`` (asks
in flight are withdrawn and re-asked on the new provider; asks arriving meanwhile wait) the
replaced and unloaded generations close, importers first, and the staged scopes activate;
then every module's record and status is brought up to date and the events are sent.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from .._core import CloseReason, Context, Registration, Scope, Seam, hand_over
from ._errors import LoadError
from ._events import DisposeFailed, ModuleUnloaded, ReloadAborted, ReloadCommitted, ReloadEvent
from ._loader import NOTHING, Batch, Loader
from ._planner import Plan, dependency_order
from ._prepare import Prepared
from ._status import ModuleState
from ._teardown import Closer, dispose_failed

__all__ = ["Committer"]


class Committer:
    """Runs the commit phase for one reloader (its context, loader and closer)."""

    __slots__ = ("_closer", "_context", "_loader", "_wake")

    def __init__(
        self, context: Context, loader: Loader, closer: Closer, wake: Callable[[], None]
    ) -> None:
        self._context = context
        self._loader = loader
        self._closer = closer
        self._wake = wake  # a refused module's blocker calls it once it goes

    async def commit(
        self,
        batch: Batch,
        plan: Plan,
        prepared: Prepared,
        scopes: dict[str, Scope],
        started: float,
        emit: Callable[[ReloadEvent], None],
    ) -> None:
        """Swap the prepared generations in for the ones they replace; record and report it.

        Called shielded from cancellation: a commit never stops half way.
        """
        loader = self._loader
        records = loader.records
        committing = [name for name in prepared.order if name not in prepared.aborted]
        moving = {*committing, *plan.unload}
        graph = {name: records[name].imports for name in moving}  # all the ordering reads
        leaving = [
            records[name]
            for name in reversed(dependency_order(moving, graph))
            if records[name].scope is not None
        ]
        seams: set[Seam[Any]] = set()
        tools: set[str] = set()
        for scope in [record.scope for record in leaving] + list(scopes.values()):
            assert scope is not None
            for registration in scope.registrations():
                if isinstance(registration, Registration):
                    seams.add(registration.seam)
                else:
                    tools.add(registration.tool.name)
        dispose_failures: list[DisposeFailed] = []
        activation_failures: dict[str, LoadError] = {}
        disposed_generation = {name: records[name].generation for name in plan.unload}
        swap_started = time.perf_counter()
        async with self._swap(seams, tools):
            for name in committing:
                staged = scopes.get(name)
                if staged is not None:
                    hand_over(staged)  # carried values change owner now, before the old close
            for record in leaving:
                scope, record.scope = record.scope, None
                assert scope is not None
                failures = await self._closer.close(scope, CloseReason.RELOAD)
                if failures:
                    dispose_failures.append(dispose_failed(batch.id, record, failures))
            loader.end(batch, committed=set(committing), unloaded=set(plan.unload))
            for name in committing:
                scope = scopes.get(name)
                if scope is None:
                    continue
                try:
                    scope.activate()
                except Exception as error:
                    activation_failures[name] = LoadError.from_exception("activate", error)
                else:
                    records[name].scope = scope
        swap_ms = (time.perf_counter() - swap_started) * 1000
        for name in activation_failures:
            await self._closer.discard(scopes.pop(name))
        duration_ms = (time.perf_counter() - started) * 1000
        for name in plan.unload:
            record = records[name]
            record.state = ModuleState.UNLOADED
            record.generation = None
            record.error = None
            record.digest = record.stat = record.blocker = None
            emit(ModuleUnloaded(batch.id, record.path, name, disposed_generation.get(name)))
        for event in dispose_failures:
            emit(event)
        for name in committing:
            record = records[name]
            record.digest = batch.sources[name].digest
            record.stat = None  # only a failed module's stat is asked for (is it saved since?)
            record.blocker = None
            record.load_ms = prepared.load_ms.get(name)
            record.missing = _names(batch.attempts[name].missing)
            lost = activation_failures.get(name)
            if lost is not None:
                record.stat = batch.sources[name].stat
                record.state = ModuleState.FAILED
                record.generation = None
                record.error = lost
                record.failed_at = batch.id
                emit(ReloadAborted(batch.id, record.path, name, lost, None))
                continue
            record.kind = prepared.kinds[name]
            record.last_generation += 1
            record.generation = record.last_generation
            record.since = batch.id
            record.state = ModuleState.ACTIVE
            record.error = None
            emit(
                ReloadCommitted(
                    batch.id,
                    record.path,
                    name,
                    record.kind,
                    record.generation,
                    duration_ms,
                    record.load_ms or 0.0,
                    swap_ms,
                )
            )
        ranked = {name: rank for rank, name in enumerate(plan.order)}
        for name in sorted(prepared.aborted, key=lambda n: (ranked.get(n, len(ranked)), n)):
            load_error = prepared.aborted[name]
            record = records[name]
            source = batch.sources.get(name)
            record.digest = source.digest if source is not None else None
            record.stat = source.stat if source is not None else None
            record.blocker = prepared.blockers.get(name)
            blocking = record.blocker.registration() if record.blocker is not None else None
            if blocking is not None:
                blocking.on_inactive(self._wake)  # retried once the blocker goes
            record.load_ms = prepared.load_ms.get(name)
            attempt = batch.attempts.get(name)
            if attempt is not None:
                record.attempt_imports = _names(attempt.imports)
                record.missing = _names(attempt.missing)
            record.state = ModuleState.FAILED
            record.error = load_error
            record.failed_at = batch.id
            emit(ReloadAborted(batch.id, record.path, name, load_error, record.generation))

    @asynccontextmanager
    async def _swap(self, seams: set[Seam[Any]], tools: set[str]) -> AsyncIterator[None]:
        """``context.swap(*seams, tools=...)``, or nothing when nothing changes hands."""
        if not seams and not tools:
            yield
            return
        async with self._context.swap(*seams, tools=tools):
            yield


def _names(names: set[str]) -> frozenset[str]:
    return frozenset(names) if names else NOTHING
