"""The Reloader: watch → plan → prepare → commit, serialized, with bursts coalesced.

One reload (a *batch*) goes through three phases:

1. **plan** — list the watched modules, hash the files that may have changed, and take
   the changed modules plus every loaded module that imported one of them;
2. **prepare** — execute each in a fresh module object and run its ``setup(scope)`` against
   a *staged* scope (registrations recorded, not live; tasks not started). A module fails
   here on a syntax error, an exception while executing, an exception (or a time-out) in
   ``setup``, or a registration that would conflict with a provider that stays active. A
   failed module — and every module of the batch that imported it — is dropped: its staged
   scope is disposed and its serving generation is left exactly as it was;
3. **commit** — inside ``context.swap(...)``, dispose the replaced generations' scopes
   (reason ``RELOAD``: providers removed, in-flight asks withdrawn and re-asked on the new
   provider, tasks cancelled, disposers run), then activate the new staged scopes. Asks
   arriving meanwhile wait for the swap. A disposer that fails or overruns is reported and
   the commit goes on. The commit is shielded from cancellation: it never stops half way.

Reloads never overlap. Changes seen while one runs are gathered, and after a reload the
next one waits ``coalesce`` seconds, so a burst of saves becomes a few reloads whose last one
loads the last content saved; a lone save is applied at once.

A file whose content did not change is skipped, unless its module's last load failed: what
failed may lie outside the file (a package installed since, a service back, an environment
variable set), so a save or a touch retries it. A module refused for a conflict remembers
the registration that refused it, and is retried once that registration goes: in the same
reload when it belongs to a module this reload replaces or unloads (the seam passes from the
old provider to the new one inside one swap), otherwise at once after it goes: the
registration's ``on_inactive`` callback wakes the worker.

Background tasks spawned by a provider's ``setup`` run in the reloader's task group. A task
that crashes is reported (``TaskFailed`` event, ``reload.task_failed`` error log, the
module's status error) and its generation stays active: the crash neither vanishes nor takes
the process down. Saving the module starts a fresh generation with fresh tasks.
"""

from __future__ import annotations

import inspect
import os
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import anyio
import anyio.abc

from .._context import Context, Registration, use_context
from .._errors import DisposalError, DisposerTimeoutError
from .._log import get_logger
from .._scope import CloseReason, Scope, ScopeExit, exit_task_group
from .._seam import Seam
from .._tools import ToolRegistration
from ._errors import LoadError, ReloaderClosedError, ReloadError, ReloadPathError
from ._events import (
    DisposeFailed,
    Emitter,
    EventStream,
    ModuleUnloaded,
    ReloadAborted,
    ReloadCommitted,
    ReloadEvent,
    ReloadPlanned,
    TaskFailed,
    display_path,
)
from ._guard import Detached, is_fatal, start_detached
from ._loader import Batch, Blocker, Loader, ModuleRecord
from ._planner import ModuleIndex, Plan, Root, Source, dependency_order, dependents, read_source
from ._status import ModuleKind, ModuleState, ModuleStatus
from ._watcher import FileChange, PollingWatcher, Watcher, WatchfilesWatcher

__all__ = ["ReloadResult", "Reloader"]

_log = get_logger("hotseam.reload")

_CLOSE_MARGIN = 0.5
"""Seconds the reloader waits for a generation's close beyond ``dispose_timeout``."""


@dataclass(frozen=True, slots=True)
class ReloadResult:
    """What one :meth:`Reloader.reload` did (``batch`` is ``None`` when nothing changed)."""

    batch: int | None
    events: tuple[ReloadEvent, ...]
    duration_ms: float

    @property
    def committed(self) -> tuple[ReloadCommitted, ...]:
        """The modules whose new generation is now active."""
        return tuple(e for e in self.events if isinstance(e, ReloadCommitted))

    @property
    def aborted(self) -> tuple[ReloadAborted, ...]:
        """The modules that failed to load (their previous generation, if any, serves on)."""
        return tuple(e for e in self.events if isinstance(e, ReloadAborted))

    @property
    def unloaded(self) -> tuple[ModuleUnloaded, ...]:
        """The modules whose file is gone."""
        return tuple(e for e in self.events if isinstance(e, ModuleUnloaded))

    @property
    def ok(self) -> bool:
        """True when no module failed to load."""
        return not self.aborted

    def raise_for_errors(self) -> None:
        """Raise :class:`ReloadError` listing every module that failed to load, if any."""
        if self.aborted:
            listed = "; ".join(f"{display_path(e.path)}: {e.error}" for e in self.aborted)
            raise ReloadError(
                f"{len(self.aborted)} module(s) failed to load: {listed}",
                details={"errors": [e.log_fields() for e in self.aborted]},
            )


class _TaskHost:
    """Runs a generation's background tasks in the reloader's task group; reports crashes.

    The core only ever calls ``start_soon`` on a scope's task host.
    """

    __slots__ = ("_report", "_task_group")

    def __init__(
        self, task_group: anyio.abc.TaskGroup, report: Callable[[str, BaseException], None]
    ) -> None:
        self._task_group = task_group
        self._report = report

    def start_soon(
        self, func: Callable[..., Awaitable[object]], *args: object, name: object = None
    ) -> None:
        label = str(name) if name is not None else getattr(func, "__qualname__", repr(func))
        report = self._report

        async def guarded() -> None:
            try:
                await func(*args)
            except BaseException as error:  # SystemExit and friends from provider code too
                if is_fatal(error):
                    raise
                report(label, error)

        self._task_group.start_soon(guarded, name=name)


class Reloader:
    """Loads provider modules from ``paths``, sets them up, and hot-reloads them on change.

    Use it as ``async with Reloader(ctx, ["providers/"]) as reloader:``. Entering loads
    every module under the paths (a failure is reported, not raised) and starts watching;
    leaving stops watching and disposes every generation.

    Args:
        context: Where the providers register (each ``setup`` gets a scope on it).
        paths: ``.py`` files, folders of modules, or packages.
        watch: Watch the paths for changes (``False``: reload only through :meth:`reload`).
        watcher: A custom :class:`Watcher` (overrides ``polling`` and the timings below).
        polling: Scan the folders instead of using native notifications (network mounts,
            containers); changes are still decided by content hash.
        debounce_ms: Native watching: the longest a batch of changes is held open.
        step_ms: Native watching: how long changes must pause before a batch is reported.
        poll_interval: Polling: seconds between scans.
        coalesce: Seconds after a reload during which further changes are gathered into
            the next one (a lone change is applied at once).
        dispose_timeout: Time bound, in seconds, of each async disposer of a generation; the
            reloader waits at most this (plus a margin) for a whole generation to close.
        setup_timeout: Time bound, in seconds, of one module's ``setup``; past it the setup
            is abandoned (see :meth:`still_running`) and the module fails.
        import_timeout: Time bound, in seconds, of executing one module body (it runs in a
            thread of its own); past it the body is abandoned and the module fails.
        on_event: Called with every :class:`ReloadEvent` (errors it raises are logged).

    Without a watcher (``watch=False``) the reloader is fully deterministic, which is what a
    test needs: write a file, then ``result = await reloader.reload(path)``; ``result``
    lists what was committed, aborted and unloaded, and the new provider serves by the time
    ``reload`` returns. ``reload()`` with no path rescans everything.
    """

    def __init__(
        self,
        context: Context,
        paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        watch: bool = True,
        watcher: Watcher | None = None,
        polling: bool = False,
        debounce_ms: int = 50,
        step_ms: int = 10,
        poll_interval: float = 0.3,
        coalesce: float = 0.1,
        dispose_timeout: float = 5.0,
        setup_timeout: float = 30.0,
        import_timeout: float = 10.0,
        on_event: Callable[[ReloadEvent], object] | None = None,
    ) -> None:
        if isinstance(paths, str | os.PathLike):
            paths = [paths]
        if not paths:
            raise ReloadPathError("the reloader needs at least one path to load modules from")
        roots: list[Root] = []
        for given in paths:
            root = Root.from_path(given)
            if root not in roots:
                roots.append(root)
        if not coalesce >= 0 or coalesce == float("inf"):
            raise ValueError(f"coalesce must be a finite number of seconds >= 0, got {coalesce!r}")
        for option, value in (
            ("dispose_timeout", dispose_timeout),
            ("setup_timeout", setup_timeout),
            ("import_timeout", import_timeout),
        ):
            if not value > 0:
                raise ValueError(f"{option} must be a number of seconds > 0, got {value!r}")
        if watcher is not None and not watch:
            raise ValueError("watcher= was given with watch=False; drop one of them")
        if watch and watcher is None:
            watcher = (
                PollingWatcher(interval=poll_interval)
                if polling
                else WatchfilesWatcher(debounce_ms=debounce_ms, step_ms=step_ms)
            )
        self.context = context
        self.paths: tuple[Path, ...] = tuple(root.path for root in roots)
        self.watcher = watcher
        self._index = ModuleIndex(tuple(roots))
        self._loader = Loader(self._index)
        self._emitter = Emitter(on_event)
        self._coalesce = coalesce
        self._dispose_timeout = dispose_timeout
        self._setup_timeout = setup_timeout
        self._import_timeout = import_timeout
        self._abandoned: list[Detached] = []
        self._state = "new"
        self._batches = 0
        self._pending: set[Path] = set()
        self._last_reload = -float("inf")
        self._reported_skips: set[Path] = set()
        self._task_group: anyio.abc.TaskGroup | None = None
        self._lock: anyio.Lock | None = None
        self._wakeup: anyio.Event | None = None
        self._services: anyio.CancelScope | None = None
        self._services_done: anyio.Event | None = None
        self._closed: anyio.Event | None = None

    def __repr__(self) -> str:
        paths = ", ".join(display_path(p) for p in self.paths)
        return f"<Reloader [{paths}] {self._state} modules={len(self._loader.records)}>"

    # -- lifecycle ------------------------------------------------------------------------------

    async def __aenter__(self) -> Reloader:
        if self._state != "new":
            raise ReloaderClosedError("a Reloader can be entered only once")
        self._state = "open"
        self._lock = anyio.Lock()
        self._wakeup = anyio.Event()
        self._closed = anyio.Event()
        self._services = anyio.CancelScope()
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        self._task_group = task_group
        try:
            if self.watcher is not None:
                self._services_done = anyio.Event()
                await task_group.start(self._run_services)
            await self._apply(None, force=False)
        except BaseException as error:
            with anyio.CancelScope(shield=True):
                try:
                    await self.aclose(CloseReason.ERROR, error)
                except DisposalError as failure:
                    _log.error(
                        "reload.disposal_failed_during_start",
                        failures=[repr(error) for error in failure.exceptions],
                    )
                finally:
                    self._task_group = None
                    await exit_task_group(task_group, error)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        exit_ = ScopeExit.from_exception(exc)
        cancelled = exit_.cancelled
        task_group, self._task_group = self._task_group, None
        try:
            await self.aclose(exit_.reason, exc)
        except DisposalError as failure:
            if not cancelled:
                raise
            _log.error(
                "reload.disposal_failed_during_cancellation",
                failures=[repr(error) for error in failure.exceptions],
            )
        finally:
            if task_group is not None:
                await exit_task_group(task_group, exc)

    @property
    def closed(self) -> bool:
        """True once :meth:`aclose` started."""
        return self._state in ("closing", "closed")

    async def aclose(
        self, reason: CloseReason = CloseReason.EXIT, error: BaseException | None = None
    ) -> None:
        """Stop watching and dispose every generation, importers before what they import.

        Idempotent. Each generation's scope closes with ``reason`` (the CLI passes
        ``SHUTDOWN``); every disposer runs even when some fail.

        Raises:
            DisposalError: after everything was disposed, if any disposer failed.
        """
        if self._state in ("closing", "closed"):
            if self._closed is not None:
                with anyio.CancelScope(shield=True):
                    await self._closed.wait()
            return
        self._state = "closing"
        failures: list[Exception] = []
        with anyio.CancelScope(shield=True):
            try:
                if self._services is not None:
                    self._services.cancel()
                if self._services_done is not None:
                    await self._services_done.wait()
                if self._lock is not None:
                    await self._lock.acquire()
                records = self._loader.records
                live = [name for name, record in records.items() if record.scope is not None]
                imports = {name: record.imports for name, record in records.items()}
                for name in reversed(dependency_order(live, imports)):
                    record = records[name]
                    scope, record.scope = record.scope, None
                    assert scope is not None
                    closing = await self._close_scope(scope, reason, error)
                    if closing:
                        failures.extend(_as_exception(failure) for failure in closing)
                        self._emitter.emit(_dispose_failed(None, record, closing))
                    record.generation = None
                self._loader.close()
            finally:
                self._state = "closed"
                self._emitter.close()
                if self._lock is not None and self._lock.locked():
                    self._lock.release()
                if self._closed is not None:
                    self._closed.set()
        if failures:
            raise DisposalError(
                f"{len(failures)} disposer(s) failed while the reloader closed",
                failures,
                scope_name="reloader",
            )

    # -- public operations ----------------------------------------------------------------------

    async def reload(
        self, path: str | os.PathLike[str] | None = None, *, force: bool = False
    ) -> ReloadResult:
        """Reload by hand: ``path`` (a file or folder under the watched paths), or everything.

        Files whose content hash did not change are skipped unless ``force`` is true, or
        their module's last load failed (it is retried). Modules refused for a conflict whose
        blocking registration is gone are retried too. A deleted file is unloaded. Returns
        once the reload is committed (or aborted).

        Raises:
            ReloadPathError: ``path`` is not under a watched path.
            ReloaderClosedError: the reloader is not open.
        """
        self._check_open()
        candidates: list[Path] | None = None
        if path is not None:
            resolved = Path(path).resolve()  # noqa: ASYNC240 - no I/O for an absolute path
            if not any(
                resolved == root.path or resolved.is_relative_to(root.base)
                for root in self._index.roots
            ):
                raise ReloadPathError(f"{os.fspath(path)!r} is not under a watched path")
            candidates = [resolved]
        return await self._apply(candidates, force=force, retry_failed=True)

    def still_running(self) -> list[str]:
        """What was abandoned at its time bound and still runs: module bodies (in their
        threads), setups and generation closes, each as ``"<what> (at file:line)"``.

        hotseam cannot stop such code; ``hotseam dev`` and ``hotseam run`` exit without
        waiting for it.
        """
        watched = self._loader.watched_files()
        self._abandoned = [handle for handle in self._abandoned if not handle.done.is_set()]
        loader = self._loader
        loader.abandoned = [run for run in loader.abandoned if run.running]
        running: list[tuple[str, str | None]] = [
            (item.label, item.location(watched)) for item in loader.abandoned
        ]
        running += [(item.label, item.location(watched)) for item in self._abandoned]
        return [f"{label} (at {where})" if where else label for label, where in running]

    def status(self) -> list[ModuleStatus]:
        """Every module seen so far (including failed and unloaded ones), by path."""
        return sorted(
            (record.status() for record in self._loader.records.values()),
            key=lambda status: str(status.path),
        )

    def status_of(self, path: str | os.PathLike[str]) -> ModuleStatus:
        """The status of the module in ``path``.

        Raises:
            KeyError: no module was ever loaded from ``path``.
        """
        resolved = Path(path).resolve()
        name = self._index.name_of(resolved)  # a symbolic link resolves to its target
        for record in self._loader.records.values():
            if record.path == resolved or record.name == name:
                return record.status()
        raise KeyError(f"no watched module was loaded from {os.fspath(path)!r}")

    def events(self, *, max_buffer: int = 1000) -> EventStream:
        """A stream of reload events from now on (create it before causing the change)."""
        if self._state == "closed":
            raise ReloaderClosedError("the reloader is closed; it sends no more events")
        return self._emitter.stream(max_buffer)

    def _check_open(self) -> None:
        if self._state != "open":
            raise ReloaderClosedError(
                "the reloader is not open: use 'async with Reloader(...) as reloader:'"
                if self._state == "new"
                else "the reloader is closed"
            )

    # -- watching -------------------------------------------------------------------------------

    async def _run_services(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        assert self.watcher is not None
        assert self._services_done is not None
        assert self._services is not None
        try:
            with self._services:
                async with (
                    self.watcher.open(self._index.watch_roots()) as batches,
                    anyio.create_task_group() as tg,
                ):
                    tg.start_soon(self._work)
                    task_status.started()
                    async for batch in batches:
                        self._note(batch)
                    # Only cancellation may end watching; anything else would leave the
                    # reloader looking alive while it no longer sees a single save.
                    raise RuntimeError(
                        f"the watcher stopped reporting changes ({self.watcher!r} ended)"
                    )
        finally:
            self._services_done.set()

    def _note(self, batch: Collection[FileChange]) -> None:
        assert self._wakeup is not None
        for change in batch:
            self._pending.add(change.path)
        self._wakeup.set()

    async def _work(self) -> None:
        """Apply gathered changes, one reload at a time, at most one per ``coalesce``."""
        while True:
            await self._wait_for_work()
            wait = self._last_reload + self._coalesce - anyio.current_time()
            if wait > 0:
                await anyio.sleep(wait)
            changed, self._pending = self._pending, set()
            if not changed and not self._unblocked():
                continue
            try:
                # A report of a failed module's file retries it only if the file was saved or
                # touched since: the polling watcher re-reports recently written files.
                result = await self._apply(changed, force=False, retry_failed=False)
            except ReloaderClosedError:
                return  # closing won the race for the lock; it cancels this task anyway
            if result.batch is not None:
                self._last_reload = anyio.current_time()

    async def _wait_for_work(self) -> None:
        """Until the watcher reports changes, or a registration that refused a module is gone
        (each blocking registration wakes the worker through ``on_inactive``)."""
        assert self._wakeup is not None
        await self._wakeup.wait()
        self._wakeup = anyio.Event()

    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    def _unblocked(self) -> bool:
        """True when a module refused for a conflict may load now (the registration left)."""
        return any(
            record.blocker is not None and record.blocker.gone
            for record in self._loader.records.values()
        )

    # -- one reload ------------------------------------------------------------------------------

    async def _apply(
        self, candidates: Collection[Path] | None, *, force: bool, retry_failed: bool = True
    ) -> ReloadResult:
        assert self._lock is not None
        async with self._lock:
            self._check_open()
            started = time.perf_counter()
            plan = await self._plan(candidates, force, retry_failed)
            self._report_skipped()
            if plan.empty:
                return ReloadResult(None, (), (time.perf_counter() - started) * 1000)
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
                prepared = await self._prepare(batch, plan, scopes)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    for scope in scopes.values():
                        await self._discard(scope)
                    self._loader.end(batch, committed=set(), unloaded=set())
                raise
            with anyio.CancelScope(shield=True):
                await self._commit(batch, plan, prepared, scopes, started, emit)
            return ReloadResult(batch_id, tuple(events), (time.perf_counter() - started) * 1000)

    async def _plan(
        self, candidates: Collection[Path] | None, force: bool, retry_failed: bool
    ) -> Plan:
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

    def _report_skipped(self) -> None:
        skipped = dict(self._index.skipped)
        for path, earlier in self._index.clashes.items():
            skipped[path] = f"module name already taken by {earlier}"
        for path, why in skipped.items():
            if path not in self._reported_skips:
                self._reported_skips.add(path)
                _log.warning(
                    "reload.skipped", path=str(path), reason=why, summary=f"skipped {path}: {why}"
                )

    async def _prepare(self, batch: Batch, plan: Plan, scopes: dict[str, Scope]) -> _Prepared:
        loader = self._loader
        with use_context(self.context):
            await loader.execute(batch, plan.order, self._import_timeout)
        for name, source in batch.sources.items():
            loader.record(name, source.path)
        aborted: dict[str, LoadError] = dict(batch.failed)
        for name, (path, error) in plan.unreadable.items():
            loader.record(name, path)
            aborted[name] = error
        load_ms = dict(batch.load_ms)
        imports = {name: batch.imports_of(name) for name in batch.staged}
        order = dependency_order(batch.staged, imports)
        kinds: dict[str, ModuleKind] = {}
        blockers: dict[str, Blocker] = {}
        for name in order:
            if name in aborted or self._propagate(batch, aborted, only=name):
                continue
            module = batch.staged[name]
            try:
                kind, setup = loader.kind_of(module)
            except TypeError as error:
                where = str(batch.sources[name].path)
                aborted[name] = LoadError.from_exception("setup", error, (), where)
                continue
            kinds[name] = kind
            if setup is None:
                continue
            started = time.perf_counter()
            scope = scopes[name] = self._staged_scope(name)
            failure = await self._set_up(name, setup, scope)
            load_ms[name] = load_ms.get(name, 0.0) + (time.perf_counter() - started) * 1000
            if failure is not None:
                aborted[name] = failure
                await self._discard(scopes.pop(name))
        while self._propagate(batch, aborted) | self._check_conflicts(
            batch, plan, order, scopes, aborted, blockers
        ):
            pass
        for name in list(scopes):
            if name in aborted:
                await self._discard(scopes.pop(name))
        return _Prepared(order, kinds, aborted, load_ms, blockers)

    def _staged_scope(self, name: str) -> Scope:
        record = self._loader.records[name]
        generation = record.last_generation + 1
        assert self._task_group is not None

        def report(task: str, error: BaseException) -> None:
            self._task_failed(name, generation, task, error)

        host = cast("anyio.abc.TaskGroup", _TaskHost(self._task_group, report))
        return Scope(
            f"{display_path(record.path)}#{generation}",
            context=self.context,
            staged=True,
            task_group=host,
            dispose_timeout=self._dispose_timeout,
        )

    async def _set_up(self, name: str, setup: Callable[..., Any], scope: Scope) -> LoadError | None:
        """Run ``setup(scope)`` in a task of its own; return what went wrong, if anything.

        Past ``setup_timeout`` the setup is abandoned — reported as stuck at the line it is
        waiting at, even in a worker thread or under a shielded cancel scope — and its
        staged scope is discarded by the caller.
        """
        watched = self._loader.watched_files()
        path = self._loader.records[name].path
        context = self.context

        async def call() -> None:
            with use_context(context):
                outcome = setup(scope)
                if inspect.isawaitable(outcome):
                    await outcome

        handle = start_detached(f"setup of {display_path(path)}", call)
        try:
            with anyio.move_on_after(self._setup_timeout):
                await handle.done.wait()
        finally:
            if not handle.done.is_set():
                location = handle.location(watched)
                handle.cancel_scope.cancel()  # a setup that can be cancelled ends now
                self._abandoned.append(handle)
        if not handle.done.is_set() or handle.cancel_scope.cancel_called:
            if location is None:
                code = getattr(setup, "__code__", None)
                location = f"{code.co_filename}:{code.co_firstlineno}" if code else str(path)
            return LoadError.at(
                "setup",
                "TimeoutError",
                f"setup() of {display_path(path)} did not finish within {self._setup_timeout} s "
                f"(stuck at {location}); abandoned",
                location,
            )
        error = handle.error
        if error is None:
            return None
        if _interrupted(error):
            raise error
        return LoadError.from_exception("setup", error, watched, str(path))

    def _propagate(
        self, batch: Batch, aborted: dict[str, LoadError], *, only: str | None = None
    ) -> bool:
        """Fail modules that imported a module of this batch that failed; True if any."""
        changed = False
        again = True
        while again:
            again = False
            for name in [only] if only is not None else list(batch.staged):
                if name in aborted:
                    continue
                for dependency in sorted(batch.imports_of(name)):
                    failure = aborted.get(dependency)
                    if failure is not None and dependency in batch.sources:
                        path = display_path(batch.sources[dependency].path)
                        aborted[name] = LoadError(
                            "dependency",
                            failure.type,
                            f"{failure.message} (in {path}, which it imports)",
                            failure.location,
                            failure.traceback,
                        )
                        changed = again = True
                        break
            if only is not None:
                break
        return changed

    def _check_conflicts(
        self,
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
        records = self._loader.records
        leaving: set[Any] = set()
        owners: dict[Any, str] = {}
        for name, record in records.items():
            if record.scope is None:
                continue
            registrations = record.scope.registrations()
            owners.update(dict.fromkeys(registrations, name))
            replaced = name in batch.staged and name not in aborted
            if replaced or name in plan.unload:
                leaving.update(registrations)
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
                blockers[name] = Blocker(weakref.ref(blocking), owners.get(blocking))
                # Its old generation now stays: check everything again with that known.
                return True
            for registration in scope.registrations():
                owners[registration] = name
                if isinstance(registration, Registration):
                    seams[registration.seam] = registration
                else:
                    tools[registration.tool.name] = registration
        return False

    async def _commit(
        self,
        batch: Batch,
        plan: Plan,
        prepared: _Prepared,
        scopes: dict[str, Scope],
        started: float,
        emit: Callable[[ReloadEvent], None],
    ) -> None:
        loader = self._loader
        records = loader.records
        committing = [name for name in prepared.order if name not in prepared.aborted]
        graph = {name: record.imports for name, record in records.items()}
        leaving = [
            records[name]
            for name in reversed(dependency_order({*committing, *plan.unload}, graph))
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
            for record in leaving:
                scope, record.scope = record.scope, None
                assert scope is not None
                failures = await self._close_scope(scope, CloseReason.RELOAD)
                if failures:
                    dispose_failures.append(_dispose_failed(batch.id, record, failures))
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
            await self._discard(scopes.pop(name))
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
            record.stat = batch.sources[name].stat
            record.blocker = None
            record.load_ms = prepared.load_ms.get(name)
            record.missing = frozenset(batch.attempts[name].missing)
            lost = activation_failures.get(name)
            if lost is not None:
                record.state = ModuleState.FAILED
                record.generation = None
                record.error = lost
                emit(ReloadAborted(batch.id, record.path, name, lost, None))
                continue
            record.kind = prepared.kinds[name]
            record.last_generation += 1
            record.generation = record.last_generation
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
                record.attempt_imports = frozenset(attempt.imports)
                record.missing = frozenset(attempt.missing)
            record.state = ModuleState.FAILED
            record.error = load_error
            emit(ReloadAborted(batch.id, record.path, name, load_error, record.generation))

    @asynccontextmanager
    async def _swap(self, seams: set[Seam[Any]], tools: set[str]) -> AsyncIterator[None]:
        """``context.swap(*seams, tools=...)``, or nothing when nothing changes hands."""
        if not seams and not tools:
            yield
            return
        async with self.context.swap(*seams, tools=tools):
            yield

    async def _discard(self, scope: Scope) -> None:
        """Dispose a staged scope that will never be activated."""
        failures = await self._close_scope(scope, CloseReason.ERROR)
        if failures:
            _log.warning(
                "reload.discard_failed",
                scope=scope.name,
                failures=[repr(error) for error in failures],
            )

    async def _close_scope(
        self, scope: Scope, reason: CloseReason, error: BaseException | None = None
    ) -> list[BaseException]:
        """Close a generation's scope; return its disposers' failures (never raised).

        The close runs in a task of its own, and the reloader waits for it at most
        ``dispose_timeout`` plus a margin: a disposer stuck where cancellation cannot reach
        it (a worker thread, a shielded scope) is abandoned and reported as a
        :class:`DisposerTimeoutError` naming the line it is stuck at. Its registrations
        were withdrawn when the close began, so what replaces it can be activated.
        """

        async def close() -> None:
            await scope.aclose(reason, error)

        handle = start_detached(f"closing {scope.name}", close)
        limit = self._dispose_timeout + _CLOSE_MARGIN
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(limit):
                await handle.done.wait()
            if not handle.done.is_set():
                self._abandoned.append(handle)
                location = handle.location(self._loader.watched_files())
                where = f" (stuck at {location})" if location else ""
                timeout = DisposerTimeoutError(
                    f"closing {scope.name} did not finish within {limit:g} s{where}; abandoned",
                    details={"scope": scope.name, "location": location},
                )
                timeout.location = location  # type: ignore[attr-defined]
                return [timeout]
        failure = handle.error
        if failure is None:
            return []
        if isinstance(failure, DisposalError):
            return list(failure.exceptions)
        if _interrupted(failure):
            raise failure
        return [failure]

    def _task_failed(self, name: str, generation: int, task: str, error: BaseException) -> None:
        record = self._loader.records.get(name)
        if record is None:
            return
        failure = LoadError.from_exception(
            "task", error, self._loader.watched_files(), str(record.path)
        )
        if record.generation == generation:
            record.error = failure
        self._emitter.emit(TaskFailed(None, record.path, name, generation, task, failure))


@dataclass(slots=True)
class _Prepared:
    order: list[str]
    kinds: dict[str, ModuleKind]
    aborted: dict[str, LoadError]
    load_ms: dict[str, float]
    blockers: dict[str, Blocker]


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


def _dispose_failed(
    batch: int | None, record: ModuleRecord, failures: Sequence[BaseException]
) -> DisposeFailed:
    where = str(record.path)
    errors: list[LoadError] = []
    for error in failures:
        location = getattr(error, "location", None)
        if isinstance(error, DisposerTimeoutError) and isinstance(location, str):
            errors.append(LoadError.at("dispose", type(error).__name__, str(error), location))
        else:
            errors.append(LoadError.from_exception("dispose", error, (where,), where))
    return DisposeFailed(
        batch, record.path, record.name, record.generation or record.last_generation, tuple(errors)
    )


def _as_exception(error: BaseException) -> Exception:
    """``error`` as an ``Exception`` (a DisposalError holds only those)."""
    if isinstance(error, Exception):
        return error
    wrapped = RuntimeError(f"a disposer raised {type(error).__name__}: {error}")
    wrapped.__cause__ = error
    return wrapped


def _interrupted(error: BaseException) -> bool:
    """A KeyboardInterrupt that may be the user's Ctrl-C (see :func:`is_fatal`)."""
    return isinstance(error, KeyboardInterrupt) and is_fatal(error)
