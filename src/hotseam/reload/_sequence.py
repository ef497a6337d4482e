"""The steps of one reload: plan → prepare → commit, then the retries an unload makes due.

One call of :meth:`Steps.run` is what the reloader's ``reload()`` (and each batch of
changes its watcher gathers) does, under the reloader's lock: a batch of the changed
modules, and — when that batch unloaded provider generations — a batch of the modules
that failed while those were alive (see :mod:`._heir`), until no unload makes more due.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from pathlib import Path

import anyio

from .._core import Scope, get_logger
from ._commit import Closer, Committer, Preparer
from ._events import Emitter, ModuleUnloaded, ReloadEvent, ReloadPlanned, display_path
from ._loader import Loader
from ._plan_builder import Deferrals, PlanBuilder, due_after_unload
from ._result import ReloadResult

__all__ = ["Steps"]

_log = get_logger("hotseam.reload")


class Steps:
    """Runs the reloads of one reloader, numbering their batches."""

    __slots__ = (
        "_batches",
        "_closer",
        "_committer",
        "_deferrals",
        "_emitter",
        "_loader",
        "_planner",
        "_preparer",
    )

    def __init__(
        self,
        planner: PlanBuilder,
        preparer: Preparer,
        committer: Committer,
        loader: Loader,
        closer: Closer,
        emitter: Emitter,
        deferrals: Deferrals,
    ) -> None:
        self._planner = planner
        self._deferrals = deferrals
        self._preparer = preparer
        self._committer = committer
        self._loader = loader
        self._closer = closer
        self._emitter = emitter
        self._batches = 0

    async def run(
        self, candidates: Collection[Path] | None, force: bool, retry_failed: bool
    ) -> ReloadResult:
        """Reload ``candidates`` (``None``: everything), then the retries unloads make due.
        The result holds the events of every batch; ``batch`` is the first one's."""
        started = time.perf_counter()
        deferred: list[Path] = []
        first, events = await self._batch(candidates, force, retry_failed, (), deferred)
        due = self._due(events)
        while due:
            batch_id, more = await self._batch([], False, True, due, deferred)
            first = first if first is not None else batch_id
            events += more
            due = self._due(more)
        return ReloadResult(
            first,
            tuple(events),
            (time.perf_counter() - started) * 1000,
            tuple(dict.fromkeys(deferred)),
        )

    def _due(self, events: list[ReloadEvent]) -> list[str]:
        """The failed modules to load again after the unloads among ``events``."""
        records = self._loader.records
        unloaded = {
            event.module: records[event.module].since
            for event in events
            if isinstance(event, ModuleUnloaded) and event.generation is not None
        }
        due = due_after_unload(unloaded, records)
        for name, alive in due.items():
            _log.info(
                "reload.retry",
                path=str(records[name].path),
                module=name,
                unloaded=[str(records[gone].path) for gone in alive],
                summary=f"retrying {display_path(records[name].path)}: it failed while "
                + ", ".join(display_path(records[gone].path) for gone in alive)
                + " was loaded, now unloaded",
            )
        return sorted(due)

    async def _batch(
        self,
        candidates: Collection[Path] | None,
        force: bool,
        retry_failed: bool,
        retry: Collection[str],
        deferred: list[Path],
    ) -> tuple[int | None, list[ReloadEvent]]:
        """Plan, prepare and commit one batch; its number (``None``: nothing to do) and
        events. What could not be read for a passing reason is added to ``deferred`` (and
        retried later: see :func:`~._errors.is_transient`)."""
        self._deferrals.begin()
        try:
            return await self._plan_and_apply(candidates, force, retry_failed, retry, deferred)
        finally:
            self._deferrals.end()

    async def _plan_and_apply(
        self,
        candidates: Collection[Path] | None,
        force: bool,
        retry_failed: bool,
        retry: Collection[str],
        deferred: list[Path],
    ) -> tuple[int | None, list[ReloadEvent]]:
        started = time.perf_counter()
        plan = await self._planner.build(candidates, force, retry_failed, retry)
        deferred += plan.deferred
        self._planner.report_skipped()
        if plan.empty:
            return None, []
        self._batches += 1
        batch_id = self._batches
        events: list[ReloadEvent] = []

        def emit(event: ReloadEvent) -> None:
            events.append(event)
            self._emitter.emit(event)

        records = self._loader.records
        emit(
            ReloadPlanned(
                batch_id,
                changed=tuple(plan.changed),
                modules=tuple(plan.sources[name].path for name in plan.order),
                unloading=tuple(records[name].path for name in plan.unload),
            )
        )
        batch = self._loader.begin(batch_id, plan.sources)
        scopes: dict[str, Scope] = {}
        try:
            prepared = await self._preparer.prepare(batch, plan, scopes)
        except BaseException:
            self._planner.batch_done(None)
            with anyio.CancelScope(shield=True):
                for scope in scopes.values():
                    await self._closer.discard(scope)
                self._loader.end(batch, committed=set(), unloaded=set())
            raise
        with anyio.CancelScope(shield=True):
            try:
                await self._committer.commit(batch, plan, prepared, scopes, started, emit)
            except BaseException:
                self._planner.batch_done(None)
                raise
            self._planner.batch_done({*batch.sources, *prepared.aborted})
        for name, error in batch.transient.items():
            if name in prepared.aborted:  # it imports a module that could not be read now
                self._deferrals.deferred(records[name].path, error, "import")
                deferred.append(records[name].path)
        return batch_id, events
