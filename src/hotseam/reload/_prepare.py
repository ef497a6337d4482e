"""Preparing a reload: execute the changed modules and set each up against a staged scope.

The second of a reload's three phases (plan → prepare → commit). Nothing here touches what
serves: a staged scope records its registrations without activating them and starts no
task, so a module that fails (to execute, to set up in time, or for a conflict) is dropped
with everything that imported it, and its serving generation is left exactly as it was.
"""

from __future__ import annotations

import contextvars
import inspect
import time
import types
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.abc

from .._core import Context, Scope, follow, get_logger, use_context
from ._conflicts import check_conflicts
from ._errors import LoadError
from ._events import SLOW_NOTICE, display_path, report_slow
from ._guard import Detached, interrupted, is_fatal, start_detached
from ._loader import Batch, Blocker, Loader
from ._plan_builder import heir_of
from ._planner import Plan, dependency_order
from ._status import ModuleKind
from ._teardown import Closer

__all__ = ["Prepared", "Preparer", "propagate"]

_log = get_logger("hotseam.reload")


@dataclass(slots=True)
class Prepared:
    """What :meth:`Preparer.prepare` leaves for the commit."""

    order: list[str]
    kinds: dict[str, ModuleKind]
    aborted: dict[str, LoadError]
    load_ms: dict[str, float]
    blockers: dict[str, Blocker]


class _TaskHost:
    """Runs a generation's background tasks in the reloader's task group; reports crashes.

    The core only ever calls ``start_soon`` on a scope's task host.
    """

    __slots__ = ("_generation", "_module", "_report", "_task_group")

    def __init__(
        self,
        task_group: anyio.abc.TaskGroup,
        report: Callable[[str, int, str, BaseException], None],
        module: str,
        generation: int,
    ) -> None:
        self._task_group = task_group
        self._report = report
        self._module = module
        self._generation = generation

    def start_soon(
        self, func: Callable[..., Awaitable[object]], *args: object, name: object = None
    ) -> None:
        label = str(name) if name is not None else getattr(func, "__qualname__", repr(func))
        report, module, generation = self._report, self._module, self._generation

        async def guarded() -> None:
            try:
                await func(*args)
            except BaseException as error:  # SystemExit and friends from provider code too
                if is_fatal(error):
                    raise
                report(module, generation, label, error)

        self._task_group.start_soon(guarded, name=name)


class Preparer:
    """Runs the prepare phase for one reloader (its context, loader and time bounds)."""

    __slots__ = (
        "_abandoned",
        "_closer",
        "_context",
        "_dispose_timeout",
        "_import_timeout",
        "_loader",
        "_report_task",
        "_setup_timeout",
        "_task_group",
    )

    def __init__(
        self,
        context: Context,
        loader: Loader,
        closer: Closer,
        abandoned: list[Detached],
        *,
        task_group: Callable[[], anyio.abc.TaskGroup | None],
        report_task: Callable[[str, int, str, BaseException], None],
        dispose_timeout: float,
        setup_timeout: float,
        import_timeout: float,
    ) -> None:
        self._context = context
        self._loader = loader
        self._closer = closer
        self._abandoned = abandoned
        self._task_group = task_group  # read when a generation needs it: None once closing
        self._report_task = report_task
        self._dispose_timeout = dispose_timeout
        self._setup_timeout = setup_timeout
        self._import_timeout = import_timeout

    async def prepare(self, batch: Batch, plan: Plan, scopes: dict[str, Scope]) -> Prepared:
        """Execute the batch and set up its modules; ``scopes`` gets the staged scopes.

        On return ``scopes`` holds only the modules that will commit: a failed module's
        staged scope was discarded, and so was that of every module that imported it.
        """
        loader = self._loader
        with use_context(self._context):
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
                await self._closer.discard(scopes.pop(name))
        while propagate(batch, aborted) | check_conflicts(
            loader.records, batch, plan, order, scopes, aborted, blockers
        ):
            pass
        for name in list(scopes):
            if name in aborted:
                await self._closer.discard(scopes.pop(name))
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
        records = self._loader.records
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
        record = self._loader.records[name]
        generation = record.last_generation + 1
        task_group = self._task_group()
        assert task_group is not None
        host = cast(
            "anyio.abc.TaskGroup", _TaskHost(task_group, self._report_task, name, generation)
        )
        scope = Scope(
            f"{display_path(record.path)}#{generation}",
            context=self._context,
            staged=True,
            task_group=host,
            dispose_timeout=self._dispose_timeout,
        )
        predecessor = self._loader.records[succeeding].scope if succeeding else record.scope
        follow(scope, predecessor)  # it may take over what the predecessor carries
        return scope

    async def _set_up(self, name: str, setup: Callable[..., Any], scope: Scope) -> LoadError | None:
        """Run ``setup(scope)`` in a task of its own; return what went wrong, if anything.

        Past ``setup_timeout`` the setup is abandoned — reported as stuck at the line it is
        waiting at, even in a worker thread or under a shielded cancel scope — and its
        staged scope is discarded by the caller.
        """
        watched = self._loader.watched_files()
        path = self._loader.records[name].path
        context = self._context
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
            with anyio.move_on_after(self._setup_timeout):
                with anyio.move_on_after(SLOW_NOTICE):
                    await handle.done.wait()
                if not handle.done.is_set():
                    report_slow("setting up", path, name, self._setup_timeout)
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
        code = getattr(setup, "__code__", None)
        location = f"{code.co_filename}:{code.co_firstlineno}" if code else str(path)
        return LoadError.at(
            "setup",
            "TypeError",
            "setup must accept one argument, the scope: 'def setup(scope):' or 'async def "
            f"setup(scope):'; {display_path(path)} has 'setup{signature}'",
            location,
        )
    return None


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
