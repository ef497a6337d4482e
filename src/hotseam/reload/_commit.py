"""Committing a reload, in two phases: prepare the new generations, then swap them in.

**Prepare** stages each changed module (executes it, sets it up against a staged scope that
records registrations without activating them) and changes nothing that serves: a module
that fails is dropped with everything that imported it. The core refuses a collision (two
providers of a seam, two tools of a name) when a scope activates, so the prepare checks
first, and a colliding module fails alone instead of failing the whole swap half way.

**Commit**, inside ``context.swap`` (asks in flight re-asked on the new provider, asks
arriving meanwhile wait): the replaced and unloaded generations close, importers first, the
staged scopes activate, then records, statuses and events are brought up to date.

Generations end through :class:`Closer`: in a detached task the reloader stops waiting for
past ``dispose_timeout``, so one stuck disposer can neither freeze a reload nor hide.
"""

from __future__ import annotations

import contextvars
import inspect
import time
import types
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.abc

from .._core import (
    CloseReason,
    Context,
    DisposalError,
    DisposerTimeoutError,
    Registration,
    Scope,
    Seam,
    ToolRegistration,
    follow,
    get_logger,
    hand_over,
    use_context,
)
from ._errors import LoadError
from ._events import (
    SLOW_NOTICE,
    DisposeFailed,
    ModuleKind,
    ModuleState,
    ModuleUnloaded,
    ReloadAborted,
    ReloadCommitted,
    ReloadEvent,
    display_path,
    report_slow,
)
from ._guard import Detached, interrupted, is_fatal, start_detached
from ._loader import NOTHING, Batch, Blocker, Loader, ModuleRecord
from ._plan_builder import heir_of
from ._planner import Plan, dependency_order

_log = get_logger("hotseam.reload")


# -- prepare ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class Prepared:
    """What :meth:`Preparer.prepare` leaves for the commit."""

    order: list[str]
    kinds: dict[str, ModuleKind]
    aborted: dict[str, LoadError]
    load_ms: dict[str, float]
    blockers: dict[str, Blocker]


@dataclass(eq=False, slots=True)
class _TaskHost:
    """Runs a generation's background tasks in the reloader's task group; reports crashes
    (the core only ever calls ``start_soon`` on a scope's task host)."""

    task_group: anyio.abc.TaskGroup
    report: Callable[[str, int, str, BaseException], None]
    module: str
    generation: int

    def start_soon(
        self, func: Callable[..., Awaitable[object]], *args: object, name: object = None
    ) -> None:
        label = str(name) if name is not None else getattr(func, "__qualname__", repr(func))
        report, module, generation = self.report, self.module, self.generation

        async def guarded() -> None:
            try:
                await func(*args)
            except BaseException as error:  # SystemExit and friends from provider code too
                if is_fatal(error):
                    raise
                report(module, generation, label, error)

        self.task_group.start_soon(guarded, name=name)


@dataclass(eq=False, slots=True)
class Preparer:
    """Runs the prepare phase for one reloader (its context, loader and time bounds)."""

    context: Context
    loader: Loader
    closer: Closer  # its dispose_timeout and list of abandoned work are the preparer's too
    _: KW_ONLY
    task_group: Callable[[], anyio.abc.TaskGroup | None]  # None once closing
    report_task: Callable[[str, int, str, BaseException], None]
    setup_timeout: float
    import_timeout: float

    async def prepare(self, batch: Batch, plan: Plan, scopes: dict[str, Scope]) -> Prepared:
        """Execute the batch and set up its modules; ``scopes`` gets the staged scopes of
        the modules that will commit (those of failed modules and their importers were
        discarded)."""
        loader = self.loader
        with use_context(self.context):
            await loader.execute(batch, plan.order, self.import_timeout)
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
        heir = self._heir(batch, plan, order, aborted)
        for name in order:
            if name in aborted or propagate(batch, aborted, only=name):
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
            scope = scopes[name] = self._staged_scope(name, plan.carrier if name == heir else None)
            failure = await self._set_up(name, setup, scope)
            load_ms[name] = load_ms.get(name, 0.0) + (time.perf_counter() - started) * 1000
            if failure is not None:
                aborted[name] = failure
                await self.closer.discard(scopes.pop(name))
        while propagate(batch, aborted) | check_conflicts(
            loader.records, batch, plan, order, scopes, aborted, blockers
        ):
            pass
        for name in list(scopes):
            if name in aborted:
                await self.closer.discard(scopes.pop(name))
        return Prepared(order, kinds, aborted, load_ms, blockers)

    def _heir(
        self, batch: Batch, plan: Plan, order: list[str], aborted: dict[str, LoadError]
    ) -> str | None:
        """The provider that takes over what the unloaded ``plan.carrier`` carries, if the
        choice is unambiguous (see :mod:`._plan_builder`)."""
        if plan.carrier is None:
            return None
        providers = [
            name
            for name in order
            if name not in aborted and callable(batch.staged[name].__dict__.get("setup"))
        ]
        records = self.loader.records
        heir = heir_of(providers, records)
        if heir is not None:
            _log.info(
                "reload.takeover",
                path=str(records[heir].path),
                module=heir,
                previous=str(records[plan.carrier].path),
                summary=f"{display_path(records[heir].path)} may take over what "
                f"{display_path(records[plan.carrier].path)} carries (it is unloaded in the "
                "same reload: a rename)",
            )
        return heir

    def _staged_scope(self, name: str, succeeding: str | None = None) -> Scope:
        """A staged scope for the next generation of ``name``, its tasks in the reloader's
        group; it may take over what ``name``'s serving generation carries, or, for a
        renamed module, what the unloaded module ``succeeding`` carries."""
        record = self.loader.records[name]
        generation = record.last_generation + 1
        task_group = self.task_group()
        assert task_group is not None
        host = cast(
            "anyio.abc.TaskGroup", _TaskHost(task_group, self.report_task, name, generation)
        )
        scope = Scope(
            f"{display_path(record.path)}#{generation}",
            context=self.context,
            staged=True,
            task_group=host,
            dispose_timeout=self.closer.dispose_timeout,
        )
        predecessor = self.loader.records[succeeding].scope if succeeding else record.scope
        follow(scope, predecessor)  # it may take over what the predecessor carries
        return scope

    async def _set_up(self, name: str, setup: Callable[..., Any], scope: Scope) -> LoadError | None:
        """Run ``setup(scope)`` in a task of its own; return what went wrong, if anything.
        Past ``setup_timeout`` it is abandoned, reported as stuck at the line it waits at."""
        watched = self.loader.watched_files()
        path = self.loader.records[name].path
        context = self.context
        wrong = _signature_problem(setup, path)
        if wrong is not None:
            return wrong
        outcome: object = None
        if not inspect.iscoroutinefunction(setup):
            # A plain function cannot be waited out (it holds the loop until it returns), so
            # a task of its own would only add cost; it runs here, in a copy of the context.
            try:
                outcome = contextvars.copy_context().run(_call_with, context, setup, scope)
            except BaseException as failure:  # provider code: reported, unless a Ctrl-C
                if interrupted(failure):
                    raise
                return LoadError.from_exception("setup", failure, watched, str(path))
            if not inspect.isawaitable(outcome):
                return None
        awaitable = outcome

        async def call() -> None:
            with use_context(context):
                pending = awaitable if awaitable is not None else setup(scope)
                if inspect.isawaitable(pending):
                    await pending

        handle = start_detached(f"setup of {display_path(path)}", call)
        try:
            with anyio.move_on_after(self.setup_timeout):
                with anyio.move_on_after(SLOW_NOTICE):
                    await handle.done.wait()
                if not handle.done.is_set():
                    report_slow("setting up", path, name, self.setup_timeout)
                    await handle.done.wait()
        finally:
            if not handle.done.is_set():
                location = handle.location(watched)
                handle.cancel_scope.cancel()  # a setup that can be cancelled ends now
                self.closer.abandoned.append(handle)
        if not handle.done.is_set() or handle.cancel_scope.cancel_called:
            if location is None:
                location = _defined_at(setup, path)
            return LoadError.at(
                "setup",
                "TimeoutError",
                f"setup() of {display_path(path)} did not finish within {self.setup_timeout} s "
                f"(stuck at {location}); abandoned",
                location,
            )
        error = handle.error
        if error is None:
            return None
        if interrupted(error):
            raise error
        return LoadError.from_exception("setup", error, watched, str(path))


def _call_with(context: Context, setup: Callable[..., Any], scope: Scope) -> object:
    with use_context(context):
        return setup(scope)


def _takes_one_argument(setup: Callable[..., Any]) -> bool:
    """True for a plain function that surely accepts one positional argument, read from its
    code object (``inspect.signature`` costs a start as much as the rest of a module)."""
    if not isinstance(setup, types.FunctionType):
        return False
    code = setup.__code__
    positional = code.co_argcount
    required = positional - len(setup.__defaults__ or ())
    required_keywords = code.co_kwonlyargcount - len(setup.__kwdefaults__ or ())
    takes_rest = bool(code.co_flags & inspect.CO_VARARGS)
    return required_keywords == 0 and required <= 1 and (positional >= 1 or takes_rest)


def _signature_problem(setup: Callable[..., Any], path: Path) -> LoadError | None:
    """A ``setup`` that cannot be called with the scope, as an error saying what it must
    accept and where it is defined (Python's own "takes 0 positional arguments" says
    neither)."""
    if _takes_one_argument(setup):
        return None
    try:
        signature = inspect.signature(setup)
    except (TypeError, ValueError):  # a builtin or an odd callable: let the call decide
        return None
    try:
        signature.bind(object())
    except TypeError:
        return LoadError.at(
            "setup",
            "TypeError",
            "setup must accept one argument, the scope: 'def setup(scope):' or 'async def "
            f"setup(scope):'; {display_path(path)} has 'setup{signature}'",
            _defined_at(setup, path),
        )
    return None


def _defined_at(setup: Callable[..., Any], path: Path) -> str:
    code = getattr(setup, "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code else str(path)


def propagate(batch: Batch, aborted: dict[str, LoadError], *, only: str | None = None) -> bool:
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


# -- conflict checks -------------------------------------------------------------------------------


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

    A registration collides with an active one this reload does not remove, or with one
    made earlier in it; modules retried only because what refused them left come last, so
    an edited incumbent keeps its seam. ``blockers`` gets, for each module refused, the
    registration it collided with (to retry it once that one goes).
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


# -- commit ----------------------------------------------------------------------------------------


@dataclass(eq=False, slots=True)
class Committer:
    """Runs the commit phase for one reloader (its context, loader and closer)."""

    context: Context
    loader: Loader
    closer: Closer
    wake: Callable[[], None]  # a refused module's blocker calls it once it goes

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
        loader = self.loader
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
                failures = await self.closer.close(scope, CloseReason.RELOAD)
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
            await self.closer.discard(scopes.pop(name))
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
                blocking.on_inactive(self.wake)  # retried once the blocker goes
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
        async with self.context.swap(*seams, tools=tools):
            yield


def _names(names: set[str]) -> frozenset[str]:
    return frozenset(names) if names else NOTHING


# -- closing a generation --------------------------------------------------------------------------

_CLOSE_MARGIN = 0.5
"""Seconds the reloader waits for a generation's close beyond ``dispose_timeout``."""


@dataclass(eq=False, slots=True)
class Closer:
    """Closes generations' scopes for one reloader; keeps the closes it had to abandon."""

    loader: Loader
    dispose_timeout: float
    abandoned: list[Detached]

    async def discard(self, scope: Scope) -> None:
        """Dispose a staged scope that will never be activated."""
        failures = await self.close(scope, CloseReason.ERROR)
        if failures:
            _log.warning(
                "reload.discard_failed",
                scope=scope.name,
                failures=[repr(error) for error in failures],
            )

    async def close(
        self, scope: Scope, reason: CloseReason, error: BaseException | None = None
    ) -> list[BaseException]:
        """Close a generation's scope; return its disposers' failures (never raised).

        Past ``dispose_timeout`` plus a margin a stuck close is abandoned, reported as a
        :class:`DisposerTimeoutError` naming its line. A scope of registrations only closes
        in place: their undo never waits, so the task (a turn of the event loop) is spared.
        """
        if _only_registrations(scope):
            try:
                await scope.aclose(reason, error)
            except BaseException as failure:  # as the task's would be: reported, not raised
                return _failures(failure)
            return []

        async def close() -> None:
            await scope.aclose(reason, error)

        handle = start_detached(f"closing {scope.name}", close)
        limit = self.dispose_timeout + _CLOSE_MARGIN
        with anyio.CancelScope(shield=True, deadline=anyio.current_time() + limit):
            await handle.done.wait()
        if not handle.done.is_set():
            self.abandoned.append(handle)
            location = handle.location(self.loader.watched_files())
            where = f" (stuck at {location})" if location else ""
            timeout = DisposerTimeoutError(
                f"closing {scope.name} did not finish within {limit:g} s{where}; abandoned",
                details={"scope": scope.name, "location": location},
            )
            timeout.location = location  # type: ignore[attr-defined]
            return [timeout]
        return [] if handle.error is None else _failures(handle.error)


def _failures(failure: BaseException) -> list[BaseException]:
    """What a close raised, as the disposers' failures (an interruption is raised)."""
    if isinstance(failure, DisposalError):
        return list(failure.exceptions)
    if interrupted(failure):
        raise failure
    return [failure]


_NEVER_WAITING = (Registration, ToolRegistration)
"""The effects whose undo never awaits (exactly these classes: a subclass may differ)."""


def _only_registrations(scope: Scope) -> bool:
    """True for an open scope without children whose effects are all registrations."""
    return (
        not scope.closed
        and not scope.children()
        and all(type(effect) in _NEVER_WAITING for effect in scope.effects())
    )


def dispose_failed(
    batch: int | None, record: ModuleRecord, failures: Sequence[BaseException]
) -> DisposeFailed:
    """The event reporting ``failures`` of the disposers of ``record``'s generation."""
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


def as_exception(error: BaseException) -> Exception:
    """``error`` as an ``Exception`` (a DisposalError holds only those)."""
    if isinstance(error, Exception):
        return error
    wrapped = RuntimeError(f"a disposer raised {type(error).__name__}: {error}")
    wrapped.__cause__ = error
    return wrapped
