"""The Reloader: watch → plan → prepare → commit, serialized, with bursts coalesced.

The phases are the package's (see its docstring): **plan** (:mod:`._plan_builder`),
**prepare** and **commit** (:mod:`._commit`; the commit is shielded from cancellation).
This module is the facade: the lifecycle, the worker that gathers changes, and the steps
of one reload (:meth:`Reloader._apply`).

Reloads never overlap. Changes seen while one runs are gathered, and after a reload the
next one waits ``coalesce`` seconds, so a burst of saves becomes a few reloads whose last
loads the last content saved; a lone save is applied at once.

A file whose content did not change is skipped, unless its module's last load failed (what
failed may lie outside the file). A module refused for a conflict is retried once the
registration that refused it goes: in the same reload when its owner is replaced or
unloaded there, otherwise when the registration's ``on_inactive`` wakes the worker.
A background task of ``setup`` that crashes is reported (``TaskFailed``) and its
generation stays active.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from pathlib import Path
from types import TracebackType

import anyio
import anyio.abc

from .._core import (
    CloseReason,
    Context,
    DisposalError,
    Scope,
    ScopeExit,
    exit_task_group,
    get_logger,
)
from ._commit import Closer, Committer, Preparer, as_exception, dispose_failed
from ._errors import LoadError, ReloaderClosedError, ReloadPathError
from ._events import (
    Emitter,
    EventStream,
    ModuleStatus,
    ModuleUnloaded,
    NotLoadedError,
    ReloadEvent,
    ReloadPlanned,
    ReloadResult,
    TaskFailed,
    display_path,
)
from ._guard import Detached
from ._loader import Loader
from ._plan_builder import EVERYTHING, Deferrals, Holds, PlanBuilder, due_after_unload
from ._planner import MAX_MODULE_SIZE, ModuleIndex, dependency_order
from ._roots import LinkedRoots, Root, refused_link
from ._watcher import FileChange, WatchOptions

_log = get_logger("hotseam.reload")


class Reloader:
    """Loads provider modules from ``paths``, sets them up, and hot-reloads them on change.

    Use it as ``async with Reloader(ctx, ["providers/"]) as reloader:``. Entering loads
    every module under the paths (a failure is reported, not raised) and starts watching;
    leaving stops watching and disposes every generation.

    Args:
        context: Where the providers register (each ``setup`` gets a scope on it).
        paths: ``.py`` files, folders of modules, or packages.
        watch: How to watch the paths for changes: a :class:`WatchOptions` (the watcher,
            polling or native, its timings, the coalescing window, the deletion grace),
            ``True`` for the default ones, ``False`` to reload only through :meth:`reload`.
        dispose_timeout: Time bound, in seconds, of each async disposer of a generation; the
            reloader waits at most this (plus a margin) for a whole generation to close.
        setup_timeout: Time bound, in seconds, of one module's ``setup``; past it the setup
            is abandoned (see :meth:`still_running`) and the module fails.
        import_timeout: Time bound, in seconds, of executing one module body (bodies run in
            the reloader's worker thread); past it the body is abandoned and the module
            fails.
        max_module_size: The largest module file loaded, in bytes (default 1 MiB; ``None``:
            no limit). Compiling holds the interpreter lock, so a module of many megabytes
            would stall the event loop for seconds; a larger file fails to load with an error
            naming it, its size and the limit, and the running generation keeps serving.
        on_event: Called with every :class:`ReloadEvent` (errors it raises are logged).

    With ``watch=False`` it is fully deterministic, but for files that cannot be read for a
    passing reason (see ``hotseam.reload``).
    """

    def __init__(
        self,
        context: Context,
        paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        watch: bool | WatchOptions = True,
        dispose_timeout: float = 5.0,
        setup_timeout: float = 30.0,
        import_timeout: float = 10.0,
        max_module_size: int | None = MAX_MODULE_SIZE,
        on_event: Callable[[ReloadEvent], object] | None = None,
    ) -> None:
        if isinstance(paths, str | os.PathLike):
            paths = [paths]
        if not paths:
            raise ReloadPathError("the reloader needs at least one path to load modules from")
        roots = tuple(dict.fromkeys(Root.from_path(given) for given in paths))
        if isinstance(watch, bool):
            options = WatchOptions()
        elif isinstance(watch, WatchOptions):
            options = watch
        else:
            raise TypeError(f"watch must be True, False or a WatchOptions, got {watch!r}")
        for option, value in (
            ("dispose_timeout", dispose_timeout),
            ("setup_timeout", setup_timeout),
            ("import_timeout", import_timeout),
        ):
            if not value > 0:
                raise ValueError(f"{option} must be a number of seconds > 0, got {value!r}")
        if max_module_size is not None and (
            isinstance(max_module_size, bool)
            or not isinstance(max_module_size, int)
            or max_module_size <= 0
        ):
            raise ValueError(
                f"max_module_size must be a number of bytes > 0 (or None), got {max_module_size!r}"
            )
        self.context = context
        self.paths: tuple[Path, ...] = tuple(root.path for root in roots)
        self.watcher = options.make_watcher() if watch is not False else None
        self.watch_options = options
        """The watch tuning (the defaults with ``watch=True`` or ``watch=False``)."""
        self._index = ModuleIndex(roots, max_size=max_module_size)
        self._loader = Loader(self._index)
        self._emitter = Emitter(on_event)
        self._linked = LinkedRoots()
        self._watching: anyio.CancelScope | None = None
        self._relinked: set[Path] = set()
        self._abandoned: list[Detached] = []
        self._state = "new"
        self._pending: set[Path] = set()
        self._last_reload = -float("inf")
        self._task_group: anyio.abc.TaskGroup | None = None
        self._lock: anyio.Lock | None = None
        self._wakeup: anyio.Event | None = None
        self._services: anyio.CancelScope | None = None
        self._services_done: anyio.Event | None = None
        self._closed: anyio.Event | None = None
        self._deferrals = Deferrals()
        self._holds = Holds(options.deletion_grace)
        self.deletion_grace = self._holds.grace
        self._planner = PlanBuilder(self._index, self._loader, self._deferrals, self._holds)
        self._closer = Closer(self._loader, dispose_timeout, self._abandoned)
        self._preparer = Preparer(
            context,
            self._loader,
            self._closer,
            task_group=lambda: self._task_group,
            report_task=self._task_failed,
            setup_timeout=setup_timeout,
            import_timeout=import_timeout,
        )
        self._committer = Committer(context, self._loader, self._closer, self._wake)
        self._batches = 0

    def __repr__(self) -> str:
        paths = ", ".join(display_path(p) for p in self.paths)
        return f"<Reloader [{paths}] {self._state} modules={len(self._loader.records)}>"

    # -- lifecycle ------------------------------------------------------------------------------

    async def __aenter__(self) -> Reloader:
        if self._state != "new":
            raise ReloaderClosedError("a Reloader can be entered only once")
        self._state = "open"
        # Uncontended (a lone save), taken without a trip through the event loop.
        self._lock = anyio.Lock(fast_acquire=True)
        self._wakeup = anyio.Event()
        self._closed = anyio.Event()
        self._services = anyio.CancelScope()
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        self._task_group = task_group
        try:
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
                    closing = await self._closer.close(scope, reason, error)
                    if closing:
                        failures.extend(as_exception(failure) for failure in closing)
                        self._emitter.emit(dispose_failed(None, record, closing))
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
        blocking registration is gone are retried too. A deleted file is unloaded, and the
        modules that failed while its generation was alive are retried right after. Returns
        once the reload (and those retries) is committed (or aborted).

        Raises:
            ReloadPathError: ``path`` is not under a watched path, or leads out of them
                through a symbolic link (refused: only code under them runs).
            ReloaderClosedError: the reloader is not open.
        """
        self._check_open()
        candidates: list[Path] | None = None
        if path is not None:
            resolved = self._known(path)
            if resolved is None:
                resolved = Path(path).resolve()  # noqa: ASYNC240 - symbolic links only
                if not any(
                    resolved == root.path or resolved.is_relative_to(root.base)
                    for root in self._index.roots
                ):
                    raise ReloadPathError(
                        refused_link(Path(path), self._index.roots)
                        or f"{os.fspath(path)!r} is not under a watched path"
                    )
            candidates = [resolved]
        return await self._apply(candidates, force=force, retry_failed=True)

    def still_running(self) -> list[str]:
        """What was abandoned at its time bound and still runs: module bodies (in their
        threads), setups and generation closes, each as ``"<what> (at file:line)"``.

        hotseam cannot stop such code; ``hotseam dev`` and ``hotseam run`` exit without
        waiting for it.
        """
        loader = self._loader
        watched = loader.watched_files()
        self._abandoned[:] = [handle for handle in self._abandoned if not handle.done.is_set()]
        loader.abandoned = [run for run in loader.abandoned if run.running]
        running = [(item.label, item.location(watched)) for item in loader.abandoned]
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
            KeyError: no module was ever loaded from ``path``; when it is a symbolic link
                refused because it leads out of the watched paths, the message says so
                and where it leads.
        """
        resolved = self._known(path) or Path(path).resolve()
        name = self._index.name_of(resolved)  # a symbolic link resolves to its target
        for record in self._loader.records.values():
            if record.path == resolved or record.name == name:
                return record.status()
        refused = refused_link(Path(path), self._index.roots)
        if refused is not None:
            raise NotLoadedError(f"{refused}; no watched module was loaded from it")
        raise NotLoadedError(f"no watched module was loaded from {os.fspath(path)!r}")

    def _known(self, path: str | os.PathLike[str]) -> Path | None:
        """``path`` itself when resolving it would give it back: a watched module file,
        folder or root, named as the index names it, while no symbolic link is under the
        watched paths; ``None``: it must be resolved (``Path.resolve`` costs about 50 µs,
        most of a save that changed nothing)."""
        index = self._index
        if index.has_links:
            return None
        given = path if isinstance(path, Path) else Path(path)
        name = index.names.get(given)
        if name is not None:
            return index.paths[name]  # the index's own object: later look-ups match by identity
        if given in index.folders:
            return given
        return next((root.path for root in index.roots if root.path == given), None)

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
        assert self._services_done is not None
        assert self._services is not None
        ready = task_status
        try:
            with self._services:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._replan, self._deferrals.due(), True)
                    tg.start_soon(self._replan, self._holds.due(), False)
                    if self.watcher is None:
                        ready.started()
                        return  # the retries run on; nothing else runs in the background
                    tg.start_soon(self._work)
                    if any(root.given is not None for root in self._index.roots):
                        tg.start_soon(self._follow_links)
                    while True:  # again after a linked root was pointed elsewhere
                        with anyio.CancelScope() as self._watching:
                            async with self.watcher.open(self._index.watch_roots()) as batches:
                                ready.started()
                                ready = anyio.TASK_STATUS_IGNORED
                                if self._relinked:  # watching the new roots: list them now
                                    self._pending.update(self._relinked)
                                    self._relinked = set()
                                    self._wake()
                                async for batch in batches:
                                    self._note(batch)
                                # Only cancellation may end watching; anything else would
                                # leave the reloader looking alive while it no longer sees a
                                # single save.
                                raise RuntimeError(
                                    f"the watcher stopped reporting changes ({self.watcher!r} "
                                    "ended)"
                                )
        finally:
            self._services_done.set()

    async def _replan(self, due: AsyncIterator[Collection[Path]], retry_failed: bool) -> None:
        """Plan again what comes due: a path that could not be read for a passing reason once
        its backoff is over, a module held by the deletion grace once it ends."""
        async for paths in due:
            try:
                await self._apply(
                    None if EVERYTHING in paths else paths, force=False, retry_failed=retry_failed
                )
            except ReloaderClosedError:
                return

    async def _follow_links(self) -> None:
        """Every ``root_check`` seconds: watch the new target of a path given through a
        symbolic link that was pointed elsewhere, and load what differs there."""
        while True:
            await anyio.sleep(self.watch_options.root_check)
            moved = self._linked.moved(self._index.roots)
            if not moved:
                continue
            assert self._lock is not None
            async with self._lock:  # never under a reload in progress
                index = self._index
                index.roots = tuple(moved.get(root, root) for root in index.roots)
                self.paths = tuple(root.path for root in index.roots)
                for old, new in moved.items():
                    self._relinked.update((old.path, new.path))
                if self._watching is not None:
                    self._watching.cancel()  # watch the new roots, then apply what differs

    def _note(self, batch: Collection[FileChange]) -> None:
        assert self._wakeup is not None
        for change in batch:
            self._pending.add(change.path)
        self._wakeup.set()

    async def _work(self) -> None:
        """Apply gathered changes, one reload at a time, at most one per ``coalesce``."""
        while True:
            await self._wait_for_work()
            wait = self._last_reload + self.watch_options.coalesce - anyio.current_time()
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
        """Reload ``candidates`` (``None``: everything), then the retries unloads make due,
        one batch at a time. The result holds the events of every batch; ``batch`` is the
        first one's."""
        assert self._lock is not None
        async with self._lock:
            self._check_open()
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
        events. What could not be read for a passing reason is added to ``deferred``."""
        self._deferrals.begin()
        try:
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
        finally:
            self._deferrals.end()

    def _task_failed(self, name: str, generation: int, task: str, error: BaseException) -> None:
        """Report a crash of a background task of ``name``'s generation ``generation``."""
        record = self._loader.records.get(name)
        if record is None:
            return
        failure = LoadError.from_exception(
            "task", error, self._loader.watched_files(), str(record.path)
        )
        if record.generation == generation:
            record.error = failure
        self._emitter.emit(TaskFailed(None, record.path, name, generation, task, failure))
