"""Scope: owns effects and undoes each exactly once, last-in-first-out, when it closes.

Effect-TS's ``Scope`` on anyio. Closing marks the tree ``closing`` and withdraws all its
registrations at once (nothing is handed out while disposers run), closes children (last
first), then undoes its own effects LIFO, shielded, each async undo bounded in time. Every
effect is undone even when some fail; the failures are one :class:`~hotseam.DisposalError`.
A closed child leaves its parent, so a long-lived parent keeps no dead children. The
effects themselves are :mod:`._effects`'; this module is their owner."""

from __future__ import annotations

import enum
import math
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from types import TracebackType
from typing import Any, TypeVar, cast

import anyio
import anyio.abc

from . import _tracking
from ._carry import Carrying, Handover
from ._effects import (
    DEFAULT_DISPOSE_TIMEOUT,
    CloseReason,
    Deferred,
    Effect,
    EnteredEffect,
    ScopeExit,
    TaskEffect,
    callable_label,
    run_undo,
)
from ._errors import DisposalError, ScopeClosedError, ScopeError
from ._log import get_logger
from ._registry import BaseContext, Registration, current
from ._seam import Seam
from ._tools import Tool, ToolRegistration

T = TypeVar("T")
_log = get_logger("hotseam.scope")


class ScopeState(enum.Enum):
    """The life of a scope: ``open`` → ``closing`` → ``closed``."""

    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


class Scope(Carrying):
    """Owns effects; closing it undoes them all, last-in-first-out, each exactly once.

    Use it as ``async with Scope("name", context=ctx) as scope:`` or close it with
    ``await scope.aclose()``. ``scope.carry``/``scope.acarry`` keep a value across hot-reload
    generations. ``scope.spawn`` needs a task host: the scope (or an ancestor) entered with
    ``async with``, or ``task_group=``.

    Args:
        name: Shown in logs, warnings and leak reports.
        context: The :class:`~hotseam.Context` that ``provide`` and ``register_tool`` act
            on; defaults to the current context, if any.
        dispose_timeout: Time bound, in seconds, of each async undo (default 5 s).
        task_group: A task group that runs this scope's background tasks.
        staged: Record registrations and tasks without making them live until
            :meth:`activate` (used by the hot reloader to prepare a generation).
    """

    __slots__ = (
        "__weakref__",
        "_children",
        "_close_started",
        "_closed_event",
        "_context",
        "_effects",
        "_exit",
        "_handover",
        "_own_task_group",
        "_parent",
        "_serving",
        "_staged",
        "_state",
        "_task_group",
        "dispose_timeout",
        "name",
    )

    def __init__(
        self,
        name: str = "scope",
        *,
        context: BaseContext | None = None,
        dispose_timeout: float = DEFAULT_DISPOSE_TIMEOUT,
        task_group: anyio.abc.TaskGroup | None = None,
        staged: bool = False,
        _parent: Scope | None = None,
    ) -> None:
        if context is None:
            context = current.get()
        if dispose_timeout <= 0 or math.isnan(dispose_timeout):
            raise ValueError(f"dispose_timeout must be > 0 seconds, got {dispose_timeout!r}")
        self.name = name
        self.dispose_timeout = dispose_timeout
        self._context = context
        self._parent = _parent
        self._staged = staged
        self._state = ScopeState.OPEN
        self._exit: ScopeExit | None = None
        # dicts keep insertion order and pop by key in O(1): LIFO close plus early dispose.
        self._effects: dict[Effect, None] = {}
        self._children: dict[Scope, None] = {}
        self._task_group = task_group
        self._own_task_group: anyio.abc.TaskGroup | None = None
        self._closed_event: anyio.Event | None = None
        self._close_started = False
        self._serving = 0  # how many registrations were adopted: close start withdraws them
        self._handover: Handover | None = None  # what this generation carries (._carry)
        tracker = _tracking._tracker
        if tracker is not None:
            tracker.track(self, _parent)

    def __repr__(self) -> str:
        return (
            f"<Scope {self.name!r} {self._state.value} effects={len(self._effects)}"
            f" children={len(self._children)}>"
        )

    def __del__(self) -> None:
        if getattr(self, "_state", ScopeState.CLOSED) is ScopeState.OPEN:
            warnings.warn(
                f"hotseam scope {self.name!r} was garbage-collected while still open "
                f"({len(self._effects)} effects, {len(self._children)} child scopes never "
                "undone); close it with 'async with' or 'await scope.aclose()'; "
                + _creation_of(self),
                ResourceWarning,
                stacklevel=1,
            )

    # -- state --------------------------------------------------------------------------------

    @property
    def state(self) -> ScopeState:
        """``open``, ``closing`` or ``closed``."""
        return self._state

    @property
    def closed(self) -> bool:
        """True once the scope started closing (nothing can be added any more)."""
        return self._state is not ScopeState.OPEN

    @property
    def exit(self) -> ScopeExit | None:
        """Why the scope closed; ``None`` while it is open."""
        return self._exit

    @property
    def context(self) -> BaseContext | None:
        """The context this scope registers providers and tools on."""
        return self._context

    @property
    def parent(self) -> Scope | None:
        """The scope this one is a child of, ``None`` for a root."""
        return self._parent

    @property
    def staged(self) -> bool:
        """True while registrations are recorded but not live (see :meth:`activate`)."""
        return self._staged

    def effects(self) -> list[Effect]:
        """The live effects of this scope (not of its children), oldest first."""
        return list(self._effects)

    def children(self) -> list[Scope]:
        """The open child scopes, oldest first."""
        return list(self._children)

    def walk(self) -> Iterator[Scope]:
        """This scope and every open descendant, parents before children."""
        yield self
        for child in list(self._children):
            yield from child.walk()

    def registrations(self) -> list[Registration[Any] | ToolRegistration]:
        """Every provider and tool registration in this scope's tree, oldest first per scope."""
        return [
            effect
            for scope in self.walk()
            if scope._serving  # a scope that never adopted one is not searched
            for effect in scope._effects
            if isinstance(effect, Registration | ToolRegistration)
        ]

    # -- adding effects -----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._state is not ScopeState.OPEN:
            raise ScopeClosedError(
                f"scope {self.name!r} is {self._state.value}: no effect can be added to it"
            )

    def _adopt(self, effect: Effect) -> None:
        self._effects[effect] = None
        if effect.serves:
            self._serving += 1
        tracker = _tracking._tracker
        if tracker is not None:
            tracker.track(effect, self)

    def _release(self, effect: Effect) -> None:
        self._effects.pop(effect, None)

    def defer(self, callback: Callable[[], object]) -> Effect:
        """Run ``callback()`` (sync or async) when the scope closes; return its handle."""
        return self._defer(callback, False)

    def defer_exit(self, callback: Callable[[ScopeExit], object]) -> Effect:
        """Like :meth:`defer`, but ``callback(exit)`` learns why the scope closed."""
        return self._defer(callback, True)

    def _defer(self, callback: Callable[..., object], pass_exit: bool) -> Effect:
        self._check_open()
        effect = Deferred(self, callback, pass_exit)
        self._adopt(effect)
        return effect

    async def enter(self, cm: AbstractAsyncContextManager[T] | AbstractContextManager[T]) -> T:
        """Enter a sync or async context manager now and exit it when the scope closes;
        return the entered value (:meth:`enter_effect` also gives the handle)."""
        return (await self.enter_effect(cm)).value

    async def enter_effect(
        self, cm: AbstractAsyncContextManager[T] | AbstractContextManager[T]
    ) -> EnteredEffect[T]:
        """Enter a context manager and return the handle (``.value`` holds the entered value)."""
        self._check_open()
        label = type(cm).__qualname__
        if hasattr(cm, "__aenter__") and hasattr(cm, "__aexit__"):
            acm = cast("AbstractAsyncContextManager[T]", cm)
            value = await acm.__aenter__()
            exit_method: Callable[..., object] = acm.__aexit__
        elif hasattr(cm, "__enter__") and hasattr(cm, "__exit__"):
            scm = cm
            value = scm.__enter__()
            exit_method = scm.__exit__
        else:
            raise TypeError(f"scope.enter() needs a context manager, got {type(cm).__name__}")
        effect = EnteredEffect(self, exit_method, value, label)
        if self._state is not ScopeState.OPEN:
            # The scope began closing while __aenter__ ran: exit at once, never leak it.
            effect._done = True
            error = await run_undo(effect, self._exit or ScopeExit(CloseReason.EXIT), None)
            raise ScopeClosedError(
                f"scope {self.name!r} closed while {label} was being entered; it was exited"
            ) from error
        self._adopt(effect)
        return effect

    def spawn(
        self, func: Callable[..., Awaitable[object]], *args: object, name: str | None = None
    ) -> TaskEffect:
        """Run ``await func(*args)`` in the background until it ends or the scope closes."""
        self._check_open()
        effect = TaskEffect(self, func, args, name or callable_label(func))
        if not self._staged:
            self._task_host()  # fail before adopting when nothing can run the task
        self._adopt(effect)
        if not self._staged:
            effect._launch()
        return effect

    def child(self, name: str | None = None) -> Scope:
        """Open a nested scope; it is closed before this scope's own effects."""
        self._check_open()
        scope = Scope(
            name or f"{self.name}.child",
            context=self._context,
            dispose_timeout=self.dispose_timeout,
            staged=self._staged,
            _parent=self,
        )
        self._children[scope] = None
        return scope

    def provide(self, seam: Seam[T], provider: T) -> Registration[T]:
        """Make ``provider`` the provider of ``seam`` in this scope's context until it closes."""
        self._check_open()
        context = self._require_context("provide")
        return context._register_provider(seam, provider, owner=self, stacklevel=2)

    def register_tool(self, tool: Tool[Any]) -> ToolRegistration:
        """Offer ``tool`` through this scope's context until the scope closes."""
        self._check_open()
        context = self._require_context("register_tool")
        return context.tools._register(tool, owner=self, what="register_tool")

    def _require_context(self, what: str) -> BaseContext:
        if self._context is None:
            raise ScopeError(
                f"scope {self.name!r} has no context, so scope.{what}() has nowhere to "
                "register: pass context= or open the scope inside 'with hotseam.use_context(ctx)'"
            )
        return self._context

    def _task_host(self) -> anyio.abc.TaskGroup:
        scope: Scope | None = self
        while scope is not None:
            host = scope._task_group or scope._own_task_group
            if host is not None:
                return host
            scope = scope._parent
        raise ScopeError(
            f"scope {self.name!r} cannot spawn tasks: neither it nor a parent scope was "
            "entered with 'async with' or given task_group="
        )

    # -- staging ------------------------------------------------------------------------------

    def activate(self) -> None:
        """Make the recorded registrations and tasks of a staged scope tree live.

        All or nothing: when a registration cannot (a provider conflict), the others are
        rolled back and the scope stays staged. Tasks start once every registration is live.
        """
        if not self._staged:
            return
        self._check_open()
        effects = [effect for scope in self.walk() for effect in scope._effects]
        tasks = [effect for effect in effects if isinstance(effect, TaskEffect)]
        for task in tasks:
            assert task._scope is not None
            task._scope._task_host()  # fail before anything goes live
        activated: list[Effect] = []
        try:
            for effect in effects:
                if not isinstance(effect, TaskEffect):
                    effect._start()
                    activated.append(effect)
        except BaseException:
            for effect in reversed(activated):
                effect._rollback_start()
            raise
        for scope in self.walk():
            scope._staged = False
        for task in tasks:
            task._launch()

    # -- closing ------------------------------------------------------------------------------

    async def __aenter__(self) -> Scope:
        self._check_open()
        if self._task_group is None and self._own_task_group is None:
            task_group = anyio.create_task_group()
            await task_group.__aenter__()
            self._own_task_group = task_group
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        exit_ = ScopeExit.from_exception(exc)
        cancelled = exit_.cancelled
        try:
            await self.aclose(exit_.reason, exit_.error)
        except DisposalError as failure:
            if not cancelled:
                raise
            # Swallowing a cancellation would break the caller's structured concurrency;
            # the failures are logged instead (aclose() raises them when called directly).
            _log.error(
                "scope.disposal_failed_during_cancellation",
                scope=self.name,
                failures=[repr(error) for error in failure.exceptions],
            )
        finally:
            task_group, self._own_task_group = self._own_task_group, None
            if task_group is not None:
                await exit_task_group(task_group, exc)

    async def aclose(
        self, reason: CloseReason = CloseReason.EXIT, error: BaseException | None = None
    ) -> None:
        """Close the scope: undo child scopes, then own effects, last-in-first-out.

        Idempotent (a second call waits for the first); shielded from cancellation, each
        async undo bounded by ``dispose_timeout``.

        Raises:
            DisposalError: after every effect was undone, if any undo failed or overran.
        """
        if self._state is not ScopeState.OPEN:
            await self._wait_closed()
            return
        exit_ = ScopeExit(reason, error)
        # One synchronous step: from here on nothing in the tree is handed to anyone.
        tree = list(self.walk()) if self._children else [self]
        for scope in tree:
            if scope._state is ScopeState.OPEN:
                scope._state = ScopeState.CLOSING
                scope._exit = exit_
        for scope in tree:
            if scope._serving:  # only registrations hand anything out
                for effect in list(scope._effects):
                    if effect.serves:
                        effect._withdraw()
        await self._close(exit_)

    async def _wait_closed(self) -> None:
        if self._state is ScopeState.CLOSING:
            if self._closed_event is None:
                self._closed_event = anyio.Event()
            with anyio.CancelScope(shield=True):
                await self._closed_event.wait()

    async def _close(self, exit_: ScopeExit) -> None:
        """Undo children, then own effects; the tree is already marked closing."""
        self._close_started = True
        reason = exit_.reason
        started = time.perf_counter()
        failures: list[Exception] = []
        fatal: BaseException | None = None
        undone = 0
        while self._children:
            child = next(reversed(self._children))
            try:
                if child._close_started:  # closed on its own, concurrently: wait for it
                    await child._wait_closed()
                else:
                    await child._close(exit_)
            except Exception as failure:
                failures.append(failure)
            except BaseException as failure:  # KeyboardInterrupt and friends: re-raised last
                fatal = fatal or failure
            self._children.pop(child, None)
            undone += 1
        effects = self._effects
        while effects:
            effect, _ = effects.popitem()  # dicts pop their newest item: LIFO
            if effect._done:
                continue
            effect._done = True
            undone += 1
            try:
                outcome = await run_undo(effect, exit_, self.dispose_timeout)
            except BaseException as failure:
                fatal = fatal or failure
                continue
            finally:
                tracker = _tracking._tracker
                if tracker is not None:
                    tracker.disposed(effect)
            if outcome is not None:
                failures.append(outcome)
        self._state = ScopeState.CLOSED
        if self._parent is not None:
            self._parent._children.pop(self, None)
        if self._closed_event is not None:
            self._closed_event.set()
        tracker = _tracking._tracker
        if tracker is not None:
            tracker.disposed(self)
        if _log.enabled("debug"):
            _log.debug(
                "scope.closed",
                scope=self.name,
                reason=reason.value,
                effects=undone,
                failures=len(failures),
                duration_ms=round((time.perf_counter() - started) * 1000, 3),
            )
        if fatal is not None:
            raise fatal
        if failures:
            raise DisposalError(
                f"{len(failures)} effect(s) of scope {self.name!r} failed to dispose",
                failures,
                scope_name=self.name,
            )


async def exit_task_group(task_group: anyio.abc.TaskGroup, error: BaseException | None) -> None:
    """Exit a task group entered by hand after its block ended with ``error``: it is handed
    only a cancellation; a plain error must reach the caller as is, not in a group."""
    if error is not None and isinstance(error, anyio.get_cancelled_exc_class()):
        await task_group.__aexit__(type(error), error, error.__traceback__)
    else:
        await task_group.__aexit__(None, None, None)


def _creation_of(scope: Scope) -> str:
    """Where ``scope`` was created (for the open-scope warning): from the leak tracker,
    else from tracemalloc."""
    describe = getattr(_tracking._tracker, "describe", None)
    described = describe(scope) if describe is not None else None
    if isinstance(described, str):
        return described
    hint = (
        "run with python -X tracemalloc=20, or under hotseam's pytest plugin, to see where "
        "it was created"
    )
    try:  # at interpreter exit an import can fail: the warning keeps its hint then
        import tracemalloc  # here: only when a scope is collected open (the import costs ~5 ms)
    except ImportError:
        return hint
    traceback = tracemalloc.get_object_traceback(scope)
    if traceback is not None:
        return "created at (most recent call last):\n" + "".join(traceback.format())
    return hint
