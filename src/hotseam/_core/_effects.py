"""Effects: what a scope owns, each a handle that undoes one thing exactly once.

A deferred callback, an entered context manager, a background task (registrations and
carried values subclass :class:`Effect` in their own modules). Every undo learns why its
scope closed (:class:`ScopeExit`) and runs shielded, bounded in time when async."""

from __future__ import annotations

import abc
import enum
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import anyio
import anyio.abc

from . import _tracking
from ._errors import DisposerTimeoutError

T = TypeVar("T")

DEFAULT_DISPOSE_TIMEOUT = 5.0


class CloseReason(enum.Enum):
    """Why a scope closed; every disposer can read it from :class:`ScopeExit`."""

    EXIT = "exit"
    """The owner finished normally (the ``async with`` body returned, or ``aclose()``)."""
    ERROR = "error"
    """The owner's body raised."""
    CANCELLED = "cancelled"
    """The owner's body was cancelled."""
    RELOAD = "reload"
    """A hot reload replaced the generation that owns the scope."""
    SHUTDOWN = "shutdown"
    """The process is shutting down (SIGTERM, Ctrl-C, the end of ``hotseam run``)."""


@dataclass(frozen=True, slots=True)
class ScopeExit:
    """How a scope ended: the reason, and the error that ended it (if any)."""

    reason: CloseReason
    error: BaseException | None = None

    @classmethod
    def from_exception(cls, error: BaseException | None) -> ScopeExit:
        """The exit of a block that ended with ``error``: exit, cancelled or error."""
        if error is None:
            return cls(CloseReason.EXIT)
        if isinstance(error, anyio.get_cancelled_exc_class()):
            return cls(CloseReason.CANCELLED, error)
        return cls(CloseReason.ERROR, error)

    @property
    def cancelled(self) -> bool:
        """True when the block was cancelled."""
        return self.reason is CloseReason.CANCELLED


class EffectOwner(Protocol):
    """What an effect needs of the scope that owns it (:class:`~hotseam.Scope` is the one
    implementation; effects sit below it, so they know it by this shape only)."""

    @property
    def name(self) -> str: ...

    @property
    def dispose_timeout(self) -> float: ...

    @property
    def staged(self) -> bool: ...

    def _adopt(self, effect: Effect) -> None: ...

    def _release(self, effect: Effect) -> None: ...

    def _task_host(self) -> anyio.abc.TaskGroup: ...


class Effect(abc.ABC):
    """A handle to one thing a scope owns; ``await effect.dispose()`` undoes it early
    (exactly once, whether through the handle or the scope's close)."""

    __slots__ = ("__weakref__", "_done", "_scope")

    serves: ClassVar[bool] = False
    """True for effects that hand something out (registrations): withdrawn at close start."""

    def __init__(self, scope: EffectOwner | None) -> None:
        self._scope = scope
        self._done = False

    def __repr__(self) -> str:
        state = "disposed" if self._done else "live"
        owner = f" scope={self._scope.name!r}" if self._scope is not None else ""
        return f"<{type(self).__name__} {self.label}{owner} {state}>"

    @property
    def label(self) -> str:
        """What this effect is, for logs and leak reports."""
        return type(self).__name__

    @property
    def scope(self) -> EffectOwner | None:
        """The scope that owns this effect (``None`` for an unowned registration)."""
        return self._scope

    @property
    def disposed(self) -> bool:
        """True once the effect was undone (or is being undone)."""
        return self._done

    async def dispose(self) -> None:
        """Undo the effect now, once (a failure is raised as is); later calls do nothing."""
        if self._done:
            return
        self._done = True
        if self._scope is not None:
            self._scope._release(self)
        exit_ = ScopeExit(CloseReason.EXIT)
        timeout = (
            self._scope.dispose_timeout if self._scope is not None else DEFAULT_DISPOSE_TIMEOUT
        )
        error = await run_undo(self, exit_, timeout)
        tracker = _tracking._tracker
        if tracker is not None:
            tracker.disposed(self)
        if error is not None:
            raise error

    def _place(self) -> None:
        """A new registration: live unless its owner is staged, then adopted by its owner
        (or, unowned, shown to the leak tracker)."""
        owner = self._scope
        if owner is None or not owner.staged:
            self._start()
        if owner is not None:
            owner._adopt(self)
        elif (tracker := _tracking._tracker) is not None:
            tracker.track(self, None)

    @abc.abstractmethod
    def _undo(self, exit_: ScopeExit) -> object:
        """Undo the effect; may return an awaitable, which the caller awaits (bounded)."""

    def _start(self) -> None:  # noqa: B027 - a hook: most effects are live from the start
        """Make a staged effect live (registrations activate)."""

    def _rollback_start(self) -> None:  # noqa: B027 - a hook, like _start
        """Undo a ``_start`` whose batch failed, before the effect is disposed."""

    def _withdraw(self) -> None:  # noqa: B027 - a hook: registrations stop being served
        """Stop being handed to anyone: the owning scope began closing. Idempotent."""


class Deferred(Effect):
    """A callback run at close (``scope.defer``; with ``pass_exit``, ``scope.defer_exit``)."""

    __slots__ = ("_callback", "_pass_exit")

    def __init__(
        self, scope: EffectOwner, callback: Callable[..., object], pass_exit: bool
    ) -> None:
        self._scope = scope
        self._done = False
        self._callback = callback
        self._pass_exit = pass_exit

    @property
    def label(self) -> str:
        return callable_label(self._callback)

    def _undo(self, exit_: ScopeExit) -> object:
        if self._pass_exit:
            return self._callback(exit_)
        return self._callback()


class EnteredEffect(Effect, Generic[T]):
    """An entered context manager; ``value`` is what its ``__enter__`` returned."""

    __slots__ = ("_exit", "_label", "value")

    def __init__(
        self,
        scope: EffectOwner,
        exit_method: Callable[
            [type[BaseException] | None, BaseException | None, TracebackType | None], object
        ],
        value: T,
        label: str,
    ) -> None:
        super().__init__(scope)
        self._label = label
        self._exit = exit_method
        self.value = value

    @property
    def label(self) -> str:
        return self._label

    def _undo(self, exit_: ScopeExit) -> object:
        error = exit_.error
        if error is None:
            return self._exit(None, None, None)
        return self._exit(type(error), error, error.__traceback__)


class TaskEffect(Effect):
    """A background task; disposing it cancels the task and waits for it to finish."""

    __slots__ = ("_args", "_cancel_scope", "_finished", "_func", "_label", "_started")

    def __init__(
        self,
        scope: EffectOwner,
        func: Callable[..., Awaitable[object]],
        args: tuple[Any, ...],
        label: str,
    ) -> None:
        super().__init__(scope)
        self._label = label
        self._func = func
        self._args = args
        self._cancel_scope = anyio.CancelScope()
        self._finished = anyio.Event()
        self._started = False

    @property
    def label(self) -> str:
        return self._label

    @property
    def running(self) -> bool:
        """True while the task runs."""
        return self._started and not self._finished.is_set()

    def _launch(self) -> None:
        if self._started or self._done:
            return
        assert self._scope is not None
        self._started = True
        self._scope._task_host().start_soon(self._run, name=self._label)

    async def _run(self) -> None:
        try:
            with self._cancel_scope:
                await self._func(*self._args)
        finally:
            self._finished.set()
            # A task that ended on its own is no longer an effect of its scope.
            if not self._done and self._scope is not None:
                self._done = True
                self._scope._release(self)
                tracker = _tracking._tracker
                if tracker is not None:
                    tracker.disposed(self)

    def _undo(self, exit_: ScopeExit) -> object:
        self._cancel_scope.cancel()
        if not self._started or self._finished.is_set():
            return None
        return self._finished.wait()


async def run_undo(effect: Effect, exit_: ScopeExit, timeout: float | None) -> Exception | None:
    """Run one undo; return its failure (an overrun is a DisposerTimeoutError) or None.
    An awaitable undo is awaited shielded, bounded by ``timeout``."""
    try:
        outcome = effect._undo(exit_)
        if outcome is None or not inspect.isawaitable(outcome):
            return None
        with anyio.CancelScope(shield=True) as shield:
            if timeout is not None:
                shield.deadline = anyio.current_time() + timeout
            await outcome
        if shield.cancelled_caught:
            return DisposerTimeoutError(
                f"disposing {effect.label} took longer than {timeout} s and was cancelled",
                details={"effect": effect.label, "timeout": timeout},
            )
    except Exception as failure:
        note = f"while disposing {effect.label}"
        if note not in getattr(failure, "__notes__", ()):
            failure.add_note(note)
        return failure
    return None


def callable_label(func: Callable[..., object]) -> str:
    """A short name for ``func`` in labels: qualified by its module unless hotseam's own."""
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None)
    if name is None:
        return type(func).__qualname__
    module = getattr(func, "__module__", None)
    if module and module not in ("builtins", "__main__") and not module.startswith("hotseam."):
        return f"{module}.{name}"
    return str(name)
