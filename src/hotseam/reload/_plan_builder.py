"""Building a reload's plan: which modules it executes, retries, holds and unloads.

Against the module records (the index itself is :mod:`._planner`'s): the changed files,
every loaded module importing one of them (or that failed to import a module that
appeared), and modules refused for a conflict whose blocker is going.

**The deletion grace.** ``git checkout``, ``git stash``, an editor that deletes then writes:
a module file (or its folder) vanishes for a moment, and unloading would dispose its
provider only to load it again. So with ``WatchOptions(deletion_grace=...)`` a plan that
finds a loaded module's file gone, whatever asked for it, *holds* it: it keeps serving and
keeps its index entry (:meth:`~._planner.ModuleIndex.hold`), so its importers still get it;
a plan that would execute it marks it *stale*; once its file is back it is reloaded if
changed or stale; when the grace ends with the file still gone, it is unloaded.

**Heirs.** A module can fail because of a generation still alive (a rename: the new module
cannot bind the port the old one holds). Two rules, neither specific to ports:

* **retry after an unload** — once a reload unloaded a generation, every module whose last
  failure happened while that generation was alive is loaded again (:func:`due_after_unload`);
* **a renamed module takes over carried values** — when a reload unloads exactly one
  generation that carries values and sets up exactly one provider with no serving
  generation, a key the new one carries too is handed over at the commit instead of
  disposed (a listening socket keeps its port); one that failed while the carrier lived is
  retried in the reload that unloads it. With two of either, nothing is taken over (a guess).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import AsyncIterator, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import anyio

from .._core import CarriedEffect, Scope, get_logger
from ._errors import (
    FIRST_RETRY,
    LAST_RETRY,
    LoadError,
    ModuleTooLargeError,
    chain_of,
    describe_errno,
    is_transient,
)
from ._events import ModuleState, display_path
from ._loader import NOTHING, Loader, ModuleRecord, read_many, read_source
from ._planner import ModuleIndex, Plan, Source, dependency_order, dependents, importers_of

_log = get_logger("hotseam.reload")
_PREFETCH = 8  # plans of more modules read their files in one worker thread


@dataclass(eq=False, slots=True)
class PlanBuilder:
    """Builds the plans of one reloader from its module index and module records."""

    index: ModuleIndex
    loader: Loader
    deferrals: Deferrals
    holds: Holds
    _now: float = field(default=0.0, init=False)
    """When the plan being built started (``anyio.current_time()``): what the ends of the
    graces are compared with."""
    _reported_skips: set[Path] = field(default_factory=set, init=False)
    _graph: dict[str, frozenset[str]] = field(default_factory=dict, init=False)
    _importers: dict[str, set[str]] = field(default_factory=dict, init=False)
    _prefetched: dict[Path, Source | OSError] = field(default_factory=dict, init=False)
    _blocked: set[str] | None = field(default=None, init=False)
    _touched: set[str] = field(default_factory=set, init=False)
    _stale: set[str] | None = field(default=None, init=False)
    """Modules whose import edges may have changed since the graph was last brought up to
    date; ``None``: the graph must be built afresh."""

    async def build(
        self,
        candidates: Collection[Path] | None,
        force: bool,
        retry_failed: bool,
        retry: Collection[str] = (),
    ) -> Plan:
        """The plan for ``candidates`` (paths that may have changed; ``None``: everything),
        and the failed modules ``retry`` (their file unchanged: what failed them is gone).

        A listing or a read that fails for a passing reason (``is_transient``) leaves its
        paths out of the plan, deferred: the reloader tries them again a moment later.
        """
        index = self.index
        records = self.loader.records
        self._now = anyio.current_time()
        if candidates is not None:
            # A hold whose grace is over is decided here by what is on disk now, not by
            # what the index last heard: on a busy machine the report of a return within
            # the grace may still be on its way (DESIGN.md, invariant 12).
            over = [hold.path for hold in self.holds if hold.until <= self._now]
            if over:
                candidates = [*candidates, *over]
        # A listing of everything looks at every path waiting for a retry as well.
        looked = [EVERYTHING, *self.deferrals.paths()] if candidates is None else list(candidates)
        try:
            index.refresh(candidates)
        except OSError as error:
            if not is_transient(error):
                raise
            # Nothing is known of these paths: every one is looked at again later (and
            # the failed modules this plan was to retry with them).
            retried = [records[name].path for name in retry if name in records]
            for path in [EVERYTHING] if candidates is None else [*looked, *retried]:
                self.deferrals.deferred(path, error, "list")
            folder = getattr(error, "filename", None)
            unlisted = Path(os.fsdecode(folder)) if folder else index.roots[0].path
            return Plan(deferred=[unlisted])
        self.deferrals.looked_at(looked)
        names: set[str] = set()
        if candidates is None:
            names = set(index.autoload) | set(records)
        else:
            for path in candidates:
                name = index.name_of(path)
                if name is None:
                    name = index.former.get(path)  # a module file that went
                if name is not None:
                    names.add(name)
                directory = path.parent if path.name == "__init__.py" else path
                if (name is None or path.name == "__init__.py") and index.may_hold(directory):
                    names.update(index.under(directory))
                    names.update(n for n, r in records.items() if r.path.is_relative_to(directory))
            # Held modules whose file is back, whose name another file took, or whose grace
            # is over: each is looked at now, whatever was reported.
            names.update(
                hold.name
                for hold in self.holds
                if hold.path not in index.held
                or hold.path not in index.missing
                or hold.until <= self._now
            )
        plan = Plan()
        appeared: set[str] = set()
        if len(names) > _PREFETCH:
            # A start or a reload of everything: all files in one worker thread.
            paths = [file for name in names if (file := index.path_of(name)) is not None]
            self._prefetched = await anyio.to_thread.run_sync(read_many, paths, index.max_size)
        try:
            for name in sorted(names):
                await self._consider(name, plan, force, appeared, retry_failed=retry_failed)
        finally:
            self._prefetched = {}
        await self._retry(retry, plan, appeared)
        if plan.unload:
            carrier = plan.carrier = carrier_of(plan.unload, records)
            if carrier is not None:
                await self._retry(waiting_heirs(records[carrier], records), plan, appeared)
        if plan.empty and not self._any_blocked():
            self._report_holds(plan)
            return plan  # a save that changed nothing: the import graph is not even looked at
        graph = self._imports()
        await self._follow(plan, appeared)
        while await self._retry_unblocked(plan, appeared):
            await self._follow(plan, appeared)
        self._report_holds(plan)
        plan.order = dependency_order(plan.sources, graph)
        plan.unload = list(reversed(dependency_order(plan.unload, graph)))
        # Its batch may refuse these modules for a conflict, or clear them (and the modules
        # they import on demand: see ``batch_done``).
        self._touched.update(plan.sources, plan.unload, plan.unreadable)
        if self._stale is not None:
            self._stale.update(plan.sources, plan.unload, plan.unreadable)
        return plan

    def batch_done(self, names: Collection[str] | None) -> None:
        """A batch ended: the records of ``names`` may have been refused for a conflict, or
        cleared; ``None``: any may have."""
        if names is None:
            self._blocked = None
            self._stale = None
            self._touched.clear()
        else:
            self._touched.update(names)
            if self._stale is not None:
                self._stale.update(names)
                self._imports()  # now, so the names are not held until the next plan
            if self._blocked is not None:
                self._any_blocked()
            else:
                self._touched.clear()  # a full count comes first anyway

    def _any_blocked(self) -> bool:
        """True when a module record holds a blocker (it was refused for a conflict).

        Remembered between plans: only a batch's commit changes a blocker, and only for its
        modules (:meth:`batch_done`), so a save that changed nothing makes no pass over N."""
        records = self.loader.records
        blocked = self._blocked
        if blocked is None:
            blocked = self._blocked = {n for n, r in records.items() if r.blocker is not None}
            self._touched.clear()
        elif self._touched:
            for name in self._touched:
                record = records.get(name)
                if record is not None and record.blocker is not None:
                    blocked.add(name)
                else:
                    blocked.discard(name)
            self._touched.clear()
        return bool(blocked)

    def _imports(self) -> dict[str, frozenset[str]]:
        """Module → the watched modules it imported (or tried to), the reverse edges in
        ``_importers``. Built once, then brought up to date from the modules a batch touched
        (as :meth:`_any_blocked`): comparing the whole graph was a quarter of an edit at
        N = 1,000."""
        records = self.loader.records
        stale = self._stale
        if stale is None:
            self._graph = {name: _edges_of(record) for name, record in records.items()}
            self._importers = importers_of(self._graph)
            self._stale = set()
            return self._graph
        graph, importers = self._graph, self._importers
        for name in stale:
            record = records.get(name)
            new = _edges_of(record) if record is not None else NOTHING
            old = graph.get(name, NOTHING)
            if record is None:
                graph.pop(name, None)
            else:
                graph[name] = new
            if new == old:
                continue
            for dependency in old - new:
                users = importers.get(dependency)
                if users is not None:
                    users.discard(name)
                    if not users:
                        del importers[dependency]
            for dependency in new - old:
                importers.setdefault(dependency, set()).add(name)
        stale.clear()
        return graph

    async def _follow(self, plan: Plan, appeared: set[str]) -> None:
        """Add every loaded module that imports a planned one, or failed to import one that
        appeared."""
        records = self.loader.records
        seeds = set(plan.sources) | set(plan.unload) | set(plan.unreadable)
        followers = dependents(seeds, self._importers)
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

    async def _retry(self, names: Collection[str], plan: Plan, appeared: set[str]) -> None:
        """Add the failed modules ``names`` whatever their content (what failed them left)."""
        for name in sorted(names):
            if name in plan.sources or name in plan.unload or name in plan.unreadable:
                continue
            await self._consider(name, plan, True, appeared, dependent=True)
            if name in plan.sources:
                plan.retries.add(name)

    async def _retry_unblocked(self, plan: Plan, appeared: set[str]) -> bool:
        """Add the modules refused for a conflict whose blocking registration is gone, or
        belongs to a module this plan re-executes or unloads; True if any was added."""
        moving = set(plan.sources) | set(plan.unload)
        added = False
        records = self.loader.records
        if not self._any_blocked():  # no pass over N
            return False
        blocked = [(name, r) for name, r in records.items() if r.blocker is not None]
        for name, record in sorted(blocked):
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

        ``dependent``: executed for a module it imported (or because what refused it left),
        so its own file is not listed as changed unless new or moved. Same content skips a
        healthy module, not a failed one (what failed may lie outside the file);
        ``retry_failed=False`` (a watcher's report) retries it only if saved or touched.
        """
        records = self.loader.records
        record = records.get(name)
        index = self.index
        path = index.path_of(name)
        hold = self.holds.get(name)
        if hold is not None and path != hold.path:
            # Another file has its name now (a module turned package): that one is loaded.
            self._end_hold(hold)
            hold, path = None, index.path_of(name)
        if path is None:
            self._gone(name, None, plan, wanted=force or dependent)
            return
        if record is None and name not in index.autoload:
            return  # a single file's sibling that nothing imported
        previous = record.digest if record is not None else None
        try:
            if hold is not None and path in index.missing:
                source = None  # held, and still gone: nothing to read
            else:
                source = await self._read(path, previous)
        except ModuleTooLargeError as error:  # refused, not failed: no traceback to show
            self.deferrals.looked_at((path,))
            if hold is not None:
                self._end_hold(hold)  # back, but too big: refused as any other
            plan.unreadable[name] = (
                path,
                LoadError.at("read", "ModuleTooLargeError", str(error), str(path)),
            )
            return
        except OSError as error:
            if is_transient(error):  # neither a failed load nor a file gone: later
                self.deferrals.deferred(path, error)
                plan.deferred.append(path)
                return
            self.deferrals.looked_at((path,))
            if hold is not None:
                self._end_hold(hold)  # back, but unreadable: reported as any other
            plan.unreadable[name] = (path, LoadError.from_exception("read", error, (), str(path)))
            return
        self.deferrals.looked_at((path,))
        if source is None:
            self._gone(name, path, plan, wanted=force or dependent)
            return
        if hold is not None:  # back within the grace
            self._end_hold(hold)
            plan.back.append(path)
            force = force or hold.stale
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

    def _gone(self, name: str, path: Path | None, plan: Plan, *, wanted: bool) -> None:
        """Module ``name``'s file is gone (``path``: the file the index lists for it, if
        any): unload it, or hold it for the deletion grace. ``wanted``: the plan would have
        executed it (it is stale when it is back)."""
        record = self.loader.records.get(name)
        if record is None or record.state is ModuleState.UNLOADED:
            return
        hold = self.holds.get(name)
        if hold is None and self.holds.grace > 0:
            where = path if path is not None else record.path
            if self.index.hold(where, name):
                hold = self.holds.start(name, where, self._now)
                plan.held.append(where)
        if hold is not None:
            if self._now < hold.until:
                hold.stale = hold.stale or wanted
                return  # planned as there and unchanged: it keeps serving
            self._end_hold(hold)  # the grace is over, and it is still gone
        plan.unload.append(name)

    def _end_hold(self, hold: Hold) -> None:
        """End ``hold``: the index forgets its entry if its file is still gone."""
        self.holds.end(hold.name)
        self.index.release(hold.path)

    def _report_holds(self, plan: Plan) -> None:
        """Log the holds this plan began, and those it ended with the file back."""
        if plan.held:
            grace = self.holds.grace
            _log.info(
                "reload.held",
                paths=[str(path) for path in plan.held],
                grace=grace,
                summary=f"{_listed(plan.held)} {_is(plan.held)} gone: kept serving for the "
                f"deletion grace ({grace:g} s), unloaded then if still gone",
            )
        if plan.back:
            _log.info(
                "reload.back",
                paths=[str(path) for path in plan.back],
                summary=f"{_listed(plan.back)} {_is(plan.back)} back within the deletion "
                "grace: reloaded only if it changed, or if a reload meanwhile wanted it",
            )

    async def _read(self, path: Path, previous: str | None) -> Source | None:
        """The content of ``path`` (``None``: gone), read ahead when the plan is big."""
        found = self._prefetched.pop(path, None)
        if isinstance(found, FileNotFoundError):
            return None
        if isinstance(found, OSError):
            raise found
        if found is not None:
            return found
        index = self.index
        return await read_source(path, previous, index.seen.get(path), index.max_size)

    def report_skipped(self) -> None:
        """Log, once each, the files the index skipped (not importable, or a name clash)."""
        skipped = dict(self.index.skipped)
        for path, earlier in self.index.clashes.items():
            skipped[path] = f"module name already taken by {earlier}"
        for path, why in skipped.items():
            if path not in self._reported_skips:
                self._reported_skips.add(path)
                _log.warning(
                    "reload.skipped", path=str(path), reason=why, summary=f"skipped {path}: {why}"
                )


def _edges_of(record: ModuleRecord) -> frozenset[str]:
    """What ``record``'s module imported or tried to: its own set when it tried nothing
    else (a union makes a new set, even of two empty ones, for every module)."""
    if not record.attempt_imports:
        return record.imports
    return record.imports | record.attempt_imports


# -- the deletion grace ----------------------------------------------------------------------------


@dataclass(eq=False, slots=True)
class Hold:
    """One module kept serving while its file is gone."""

    name: str
    path: Path
    """The file that is gone (the module's entry in the index stays there)."""
    until: float
    """When the grace ends (``anyio.current_time()``)."""
    stale: bool = False
    """A plan wanted to execute it meanwhile: it is executed when its file is back."""
    handed: bool = False
    """Its end was handed to the reloader (:meth:`Holds.due`): not handed out again."""


class Holds:
    """The modules of one reloader held by the deletion grace, and when each grace ends."""

    __slots__ = ("_changed", "_holds", "grace")

    def __init__(self, grace: float) -> None:
        self.grace = float(grace)  # validated by WatchOptions
        self._holds: dict[str, Hold] = {}
        self._changed: anyio.Event | None = None
        """Set when a hold starts: :meth:`due` looks at the times again."""

    def __bool__(self) -> bool:
        return bool(self._holds)

    def __iter__(self) -> Iterator[Hold]:
        return iter(list(self._holds.values()))

    def get(self, name: str) -> Hold | None:
        """The hold of module ``name``, if it is held."""
        return self._holds.get(name)

    def start(self, name: str, path: Path, now: float) -> Hold:
        """Hold module ``name``, whose file ``path`` is gone, until ``now`` plus the grace."""
        hold = self._holds[name] = Hold(name, path, now + self.grace)
        if self._changed is not None:
            self._changed.set()
        return hold

    def end(self, name: str) -> Hold | None:
        """Stop holding ``name`` (its file is back, or the grace is over); its hold."""
        return self._holds.pop(name, None)

    async def due(self) -> AsyncIterator[list[Path]]:
        """Each time graces end, the files of the modules held until then: the consumer's
        plan of them ends each hold (an unload if the file is still gone)."""
        while True:
            self._changed = anyio.Event()
            pending = [hold.until for hold in self._holds.values() if not hold.handed]
            end = min(pending, default=math.inf)
            await _wait(self._changed, end - anyio.current_time())
            now = anyio.current_time()
            over = [h for h in self._holds.values() if not h.handed and h.until <= now]
            for hold in over:
                hold.handed = True
            if over:
                yield sorted(hold.path for hold in over)


async def _wait(event: anyio.Event, seconds: float) -> None:
    """Until ``event`` is set, for ``seconds`` at most (``math.inf``: no bound)."""
    with anyio.move_on_after(max(seconds, 0)):
        await event.wait()


def _is(paths: list[Path]) -> str:
    return "is" if len(paths) == 1 else "are"


def _listed(paths: list[Path], most: int = 5) -> str:
    shown = ["every watched path" if path == EVERYTHING else display_path(path) for path in paths]
    if len(shown) > most:
        return ", ".join(shown[:most]) + f" and {len(shown) - most} more"
    return ", ".join(shown)


# -- deferrals: reads that failed for a passing reason ---------------------------------------------

EVERYTHING: Final = Path("<every watched path>")
"""The key of a deferred listing of every watched path (a start, a reload of everything)."""


@dataclass(slots=True)
class _Episode:
    """One path that cannot be read, from its first failure until it is read again."""

    started: float
    attempts: int
    due: float


@dataclass(eq=False, slots=True)
class Deferrals:
    """The paths (module files, folders, :data:`EVERYTHING`) a reloader could not look at
    for a passing reason, and when to retry. Each plan is one round, :meth:`begin` to
    :meth:`end`, which logs each episode when it begins and when it ends."""

    _episodes: dict[Path, _Episode] = field(default_factory=dict, init=False)
    _failed: dict[Path, tuple[str, BaseException]] = field(default_factory=dict, init=False)
    _looked: set[Path] = field(default_factory=set, init=False)
    _scheduled: anyio.Event | None = field(default=None, init=False)
    """Set when a retry was scheduled: :meth:`due` looks at the times again."""

    def __bool__(self) -> bool:
        return bool(self._episodes)

    def __contains__(self, path: object) -> bool:
        return path in self._episodes

    def begin(self) -> None:
        """A plan starts: nothing deferred or looked at in it yet."""
        self._failed.clear()
        self._looked.clear()

    def deferred(self, path: Path, error: BaseException, what: str = "read") -> None:
        """``path`` could not be looked at now, ``error`` being transient; ``what`` failed
        (``read``, or ``list``: ``error.filename`` could not be listed)."""
        self._failed[path] = (what, error)

    def looked_at(self, paths: Iterable[Path]) -> None:
        """``paths`` were read or listed (whatever came of it): their episodes end."""
        self._looked.update(paths)

    def paths(self) -> list[Path]:
        """Every path waiting to be looked at again."""
        return list(self._episodes)

    def end(self) -> None:
        """The plan is over: log what began and ended, schedule the retries."""
        now = time.monotonic()
        began: dict[tuple[str | None, str, str], list[Path]] = {}
        for path, (what, error) in self._failed.items():
            episode = self._episodes.get(path)
            if episode is None:
                episode = self._episodes[path] = _Episode(now, 0, now)
                code, text = describe_errno(error)
                subject = _subject(what, error)
                began.setdefault((subject, code, text), []).append(path)
            episode.due = now + min(FIRST_RETRY * 2**episode.attempts, LAST_RETRY)
            episode.attempts += 1
        ended = sorted(self._looked.intersection(self._episodes) - self._failed.keys())
        recovered = {path: self._episodes.pop(path) for path in ended}
        self._failed.clear()
        self._looked.clear()
        for (subject, code, text), paths in began.items():
            _report_deferred(subject, code, text, paths)
        if recovered:
            _report_recovered(recovered, now)
        if self._episodes and self._scheduled is not None:
            self._scheduled.set()

    async def due(self) -> AsyncIterator[list[Path]]:
        """Each time retries are due, the paths to look at again (:meth:`take_due`); the
        consumer's plan of them settles them before the next is handed out."""
        while True:
            self._scheduled = anyio.Event()
            due = min((episode.due for episode in self._episodes.values()), default=math.inf)
            await _wait(self._scheduled, due - time.monotonic())
            paths = self.take_due(time.monotonic())
            if paths:
                yield paths

    def take_due(self, now: float) -> list[Path]:
        """The paths whose retry is due at ``now`` (:data:`EVERYTHING` among them: a
        listing of every watched path), to be looked at again by the next plan (which
        schedules them again, or ends their episodes)."""
        due = sorted(path for path, episode in self._episodes.items() if episode.due <= now)
        for path in due:
            self._episodes[path].due = math.inf
        return due


def _subject(what: str, error: BaseException) -> str | None:
    """What could not be done, when it is not reading the deferred file itself: listing a
    folder (``list``), or reading a module the deferred one imports (``import``)."""
    if what == "read":
        return None
    failed = next((e for e in chain_of(error) if isinstance(e, OSError) and e.filename), None)
    where = display_path(Path(os.fsdecode(failed.filename))) if failed is not None else "it"
    return f"list {where}" if what == "list" else f"read {where}"


def _report_deferred(subject: str | None, code: str, text: str, paths: list[Path]) -> None:
    shown = _listed(paths)
    doing = f"read {shown}" if subject is None else f"{subject} (for {shown})"
    _log.warning(
        "reload.deferred",
        paths=[str(path) for path in paths],
        errno=code,
        error=text,
        summary=f"cannot {doing} now ({code}: {text}): a passing failure, retried (every "
        f"{LAST_RETRY:g} s at most) until it works; what is loaded keeps serving",
    )


def _report_recovered(recovered: dict[Path, _Episode], now: float) -> None:
    longest = max(now - episode.started for episode in recovered.values())
    attempts = sum(episode.attempts for episode in recovered.values())
    _log.info(
        "reload.recovered",
        paths=[str(path) for path in recovered],
        seconds=round(longest, 3),
        attempts=attempts,
        summary=f"{_listed(list(recovered))} can be read again (after {longest:.1f} s, "
        f"{attempts} attempt(s))",
    )


# -- heirs -----------------------------------------------------------------------------------------

RETRY_PHASES = frozenset({"exec", "setup", "activate"})
"""Failures that may come from something another generation held (not a syntax error,
an unreadable or refused file, a conflict — conflicts have their own retry)."""


def carries(scope: Scope | None) -> bool:
    """True when ``scope``'s generation carries at least one value."""
    if scope is None:
        return False
    return any(
        isinstance(effect, CarriedEffect) for node in scope.walk() for effect in node.effects()
    )


def carrier_of(unloading: Iterable[str], records: Mapping[str, ModuleRecord]) -> str | None:
    """The one module of ``unloading`` whose serving generation carries values, if exactly
    one does."""
    found = [name for name in unloading if carries(records[name].scope)]
    return found[0] if len(found) == 1 else None


def waiting_heirs(carrier: ModuleRecord, records: Mapping[str, ModuleRecord]) -> list[str]:
    """Providers without a serving generation whose setup failed while ``carrier``'s
    generation was alive: they may take over what it carries in the reload unloading it."""
    return sorted(
        name
        for name, record in records.items()
        if record.state is ModuleState.FAILED
        and record.scope is None
        and record.error is not None
        and record.error.phase == "setup"
        and record.failed_at > carrier.since
    )


def heir_of(candidates: Collection[str], records: Mapping[str, ModuleRecord]) -> str | None:
    """The one provider of ``candidates`` (set up in a reload that unloads a carrier) with no
    serving generation, if exactly one."""
    fresh = [name for name in candidates if records[name].scope is None]
    return fresh[0] if len(fresh) == 1 else None


def due_after_unload(
    unloaded: Mapping[str, int], records: Mapping[str, ModuleRecord]
) -> dict[str, list[str]]:
    """Modules to load again now that the provider generations of ``unloaded`` (module →
    the batch that committed the generation just unloaded) are gone → those that were
    alive when the module last failed.

    Only a provider's generation holds what a scope disposes; a module that failed to
    import one of them is left to the rule that loads importers when it comes back."""
    unloaded = {name: since for name, since in unloaded.items() if records[name].kind == "provider"}
    if not unloaded:
        return {}
    oldest = min(unloaded.values())
    due: dict[str, list[str]] = {}
    for name, record in records.items():
        if (
            record.state is ModuleState.FAILED
            and record.error is not None
            and record.error.phase in RETRY_PHASES
            and record.failed_at > oldest
            and not any(missing in unloaded for missing in record.missing)
        ):
            due[name] = sorted(gone for gone, since in unloaded.items() if record.failed_at > since)
    return due
