"""Building a reload's plan: which modules it executes, retries and unloads.

The first of a reload's three phases (plan → prepare → commit). The module index and the
file reading live in :mod:`._planner`; this decides, against the module records, what one
reload must do: changed files, every loaded module importing one of them (or that failed to
import a module that appeared), and modules refused for a conflict whose blocker is going.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from .._log import get_logger
from ._errors import LoadError
from ._loader import Loader
from ._planner import ModuleIndex, Plan, Source, dependency_order, dependents, read_source
from ._status import ModuleState

__all__ = ["PlanBuilder"]

_log = get_logger("hotseam.reload")


class PlanBuilder:
    """Builds the plans of one reloader from its module index and module records."""

    __slots__ = ("_index", "_loader", "_reported_skips")

    def __init__(self, index: ModuleIndex, loader: Loader) -> None:
        self._index = index
        self._loader = loader
        self._reported_skips: set[Path] = set()

    async def build(
        self, candidates: Collection[Path] | None, force: bool, retry_failed: bool
    ) -> Plan:
        """The plan for ``candidates`` (paths that may have changed; ``None``: everything)."""
        index = self._index
        index.rescan()
        records = self._loader.records
        names: set[str] = set()
        if candidates is None:
            names = set(index.autoload) | set(records)
        else:
            for path in candidates:
                name = index.name_of(path)
                if name is not None:
                    names.add(name)
                directory = path.parent if path.name == "__init__.py" else path
                if name is None or path.name == "__init__.py":
                    names.update(index.under(directory))
                    names.update(n for n, r in records.items() if r.path.is_relative_to(directory))
        plan = Plan()
        appeared: set[str] = set()
        for name in sorted(names):
            await self._consider(name, plan, force, appeared, retry_failed=retry_failed)
        graph = {name: record.imports | record.attempt_imports for name, record in records.items()}
        await self._follow(plan, graph, appeared)
        while await self._retry_unblocked(plan, appeared):
            await self._follow(plan, graph, appeared)
        plan.order = dependency_order(plan.sources, graph)
        plan.unload = list(reversed(dependency_order(plan.unload, graph)))
        return plan

    async def _follow(
        self, plan: Plan, graph: dict[str, frozenset[str]], appeared: set[str]
    ) -> None:
        """Add every loaded module that imports a planned one, or failed to import one that
        appeared."""
        records = self._loader.records
        seeds = set(plan.sources) | set(plan.unload) | set(plan.unreadable)
        followers = dependents(seeds, graph)
        if appeared:
            tops = {name.partition(".")[0] for name in appeared}
            followers.update(
                name
                for name, record in records.items()
                if any(missing.partition(".")[0] in tops for missing in record.missing)
            )
        for name in sorted(followers - seeds):
            record = records[name]
            if record.state is ModuleState.UNLOADED:
                continue
            await self._consider(name, plan, True, appeared, dependent=True)

    async def _retry_unblocked(self, plan: Plan, appeared: set[str]) -> bool:
        """Add the modules refused for a conflict whose blocking registration is gone, or
        belongs to a module this plan re-executes or unloads; True if any was added."""
        moving = set(plan.sources) | set(plan.unload)
        added = False
        for name, record in sorted(self._loader.records.items()):
            blocker = record.blocker
            if blocker is None or name in moving or name in plan.unreadable:
                continue
            if blocker.gone or blocker.module in moving:
                await self._consider(name, plan, True, appeared, dependent=True)
                if name in plan.sources:
                    plan.retries.add(name)
                added = added or name in plan.sources or name in plan.unload
        return added

    async def _consider(
        self,
        name: str,
        plan: Plan,
        force: bool,
        appeared: set[str],
        *,
        dependent: bool = False,
        retry_failed: bool = True,
    ) -> None:
        """Put ``name`` in the plan if it must be executed (or unloaded).

        ``dependent``: it is executed because a module it imported changed (or it is retried
        because what refused it left), so its own file is not listed as changed (unless it
        is new or moved). Same content skips a healthy module, but not a failed one, which
        is retried (what failed may lie outside the file); ``retry_failed=False`` (a
        watcher's report) retries it only if the file was saved or touched since.
        """
        records = self._loader.records
        record = records.get(name)
        path = self._index.path_of(name)
        if path is None:
            if record is not None and record.state is not ModuleState.UNLOADED:
                plan.unload.append(name)
            return
        if record is None and name not in self._index.autoload:
            return  # a single file's sibling that nothing imported
        previous = record.digest if record is not None else None
        try:
            source: Source | None = await read_source(path, previous)
        except OSError as error:
            plan.unreadable[name] = (path, LoadError.from_exception("read", error, (), str(path)))
            return
        if source is None:
            if record is not None and record.state is not ModuleState.UNLOADED:
                plan.unload.append(name)
            return
        fresh = record is None or record.state is ModuleState.UNLOADED or record.path != path
        if not force and not fresh and record is not None and record.digest == source.digest:
            if record.state is not ModuleState.FAILED:
                return
            if not retry_failed and record.stat == source.stat:
                return
        if fresh:
            appeared.add(name)
        if fresh or not dependent or record is None or record.digest != source.digest:
            plan.changed.append(path)
        plan.sources[name] = source

    def report_skipped(self) -> None:
        """Log, once each, the files the index skipped (not importable, or a name clash)."""
        skipped = dict(self._index.skipped)
        for path, earlier in self._index.clashes.items():
            skipped[path] = f"module name already taken by {earlier}"
        for path, why in skipped.items():
            if path not in self._reported_skips:
                self._reported_skips.add(path)
                _log.warning(
                    "reload.skipped", path=str(path), reason=why, summary=f"skipped {path}: {why}"
                )
