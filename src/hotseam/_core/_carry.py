"""Handover: a value one generation carries to its successor (``scope.carry``).

A hot-reloaded module gets a fresh scope per generation, so a counter restarts and an
exclusive resource (a port, a lock file) cannot be made again while the old generation
holds it. ``scope.carry(key, factory)`` creates the value once; the next generation that
carries ``key`` receives the same object.

Each generation carrying a value (a :class:`_Slot`) holds a :class:`CarriedEffect`; only
the owning one disposes it. A staged generation borrows it until its reload commits
(:func:`hand_over`), so a failed prepare disposes nothing, and the old generation disposes
it only if its successor dropped or refused it."""

from __future__ import annotations

import collections
import functools
import inspect
import itertools
import sys
import weakref
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, Generic, Protocol, TypeVar, cast, overload

from ._effects import Effect, EffectOwner, ScopeExit, run_undo
from ._errors import ScopeClosedError, ScopeError

T = TypeVar("T")
V = TypeVar("V")

_sequence = itertools.count(1)
_live: weakref.WeakSet[_Slot] = weakref.WeakSet()
_dropped: collections.deque[tuple[int, str, str]] = collections.deque(maxlen=256)
"""Closable values let go with nothing to close them (no ``dispose=``, no context manager)."""


class _Slot:
    """One carried value, across the generations that carry it."""

    __slots__ = ("__weakref__", "_undo", "key", "owner", "sequence", "value", "version", "where")

    def __init__(
        self,
        key: str,
        value: object,
        undo: Callable[[], object] | None,
        version: object,
        where: str,
    ) -> None:
        self.key = key
        self.value = value
        self.version = version
        self.where = where
        """``file:line`` of the ``carry`` call that created the value (for strict mode)."""
        self._undo = undo
        self.owner: CarriedEffect[Any] | None = None
        self.sequence = next(_sequence)
        _live.add(self)

    @property
    def label(self) -> str:
        return f"carried value {self.key!r} ({type(self.value).__qualname__})"


class Handover:
    """What one generation carries (by key), and the generation it may take values from."""

    __slots__ = ("carried", "previous")

    def __init__(self, previous: Handover | None = None) -> None:
        self.previous = previous
        self.carried: dict[str, CarriedEffect[Any]] = {}

    def offered(self, key: str) -> _Slot | None:
        """The predecessor's value for ``key``, if it still owns one."""
        if self.previous is None:
            return None
        effect = self.previous.carried.get(key)
        if effect is None or effect._done or effect._slot.owner is not effect:
            return None
        return effect._slot


class CarryHost(EffectOwner, Protocol):
    """What carrying needs of a scope (:class:`~hotseam.Scope`, which mixes
    :class:`Carrying` in): its place in the tree and its generation's handover."""

    _handover: Handover | None

    @property
    def _parent(self) -> CarryHost | None: ...

    @property
    def closed(self) -> bool: ...

    def _check_open(self) -> None: ...


class CarriedEffect(Effect, Generic[T]):
    """A generation's hold on a carried value; only the owning hold disposes it."""

    __slots__ = ("_slot",)

    def __init__(self, scope: EffectOwner, slot: _Slot) -> None:
        super().__init__(scope)
        self._slot = slot

    @property
    def label(self) -> str:
        return self._slot.label

    @property
    def key(self) -> str:
        """The key the value is carried under."""
        return self._slot.key

    @property
    def value(self) -> T:
        """The carried value."""
        return cast("T", self._slot.value)

    @property
    def owned(self) -> bool:
        """True while this generation owns the value (its close disposes it)."""
        return self._slot.owner is self

    def _undo(self, exit_: ScopeExit) -> object:
        slot = self._slot
        if slot.owner is not self:
            return None  # borrowed, or handed over to a successor: not ours to dispose
        slot.owner = None
        _live.discard(slot)
        undo, slot._undo = slot._undo, None
        if undo is None:
            if _closable(slot.value):  # a resource nothing will close: strict mode says so
                _dropped.append((slot.sequence, slot.label, slot.where))
            return None
        return undo()


def follow(scope: CarryHost, predecessor: CarryHost | None) -> None:
    """Let the (staged) generation ``scope`` take over what ``predecessor`` carries."""
    previous = predecessor._handover if predecessor is not None else None
    if previous is not None and previous.carried:
        scope._handover = Handover(previous)
    # else: nothing to take over; a first carry() makes the scope's handover then


def hand_over(scope: CarryHost) -> None:
    """Commit: ``scope``'s generation now owns every value it took over (called before its
    predecessor closes, which then disposes only what was not taken)."""
    handover = scope._handover
    if handover is None:
        return
    for effect in handover.carried.values():
        if not effect._done and effect._slot.owner is not None:
            effect._slot.owner = effect
    handover.previous = None  # the predecessor is closing: do not keep every generation alive


def carry_mark() -> int:
    """A mark for :func:`carried_since` (strict mode takes one before a setup)."""
    return next(_sequence)


def carried_since(mark: int) -> list[str]:
    """Values carried after ``mark`` that are still live, or that nothing could dispose."""
    found = [
        f"{slot.label} is still live (not disposed; carried at {slot.where})"
        for slot in sorted(_live, key=lambda slot: slot.sequence)
        if slot.sequence > mark
    ]
    found.extend(
        f"{label} was let go without being closed (carried at {where}; give carry() a "
        "dispose=, or carry a context manager)"
        for sequence, label, where in _dropped
        if sequence > mark
    )
    return found


class Carrying:
    """``Scope.carry`` and ``Scope.acarry``; a mixin so :mod:`._scope` stays about scopes."""

    __slots__ = ()

    @overload
    def carry(
        self,
        key: str,
        factory: Callable[[], AbstractContextManager[V]],
        *,
        version: object = None,
        accept: Callable[[V], bool] | None = None,
    ) -> V: ...

    @overload
    def carry(
        self,
        key: str,
        factory: Callable[[], T],
        *,
        dispose: Callable[[T], object] | None = None,
        version: object = None,
        accept: Callable[[T], bool] | None = None,
    ) -> T: ...

    def carry(
        self,
        key: str,
        factory: Callable[[], Any],
        *,
        dispose: Callable[[Any], object] | None = None,
        version: object = None,
        accept: Callable[[Any], bool] | None = None,
    ) -> Any:
        """Return the value carried under ``key``: the predecessor's, or ``factory()``'s.

        The value moves to a new generation when that generation commits, and is disposed
        once none carries it (an unload, or a commit that did not carry ``key``): with
        ``dispose(value)`` (sync or async) or, when ``factory`` returned a context manager
        (entered by carry, its entered value returned), by exiting it. The predecessor's
        value is refused, and a fresh one made, unless ``version`` equals its own and
        ``accept(value)`` (if given) is true. Outside a reloader it lives with the scope.
        ``factory`` is synchronous; an async setup uses :meth:`acarry`. See
        ``docs/providers.md``.

        Raises:
            ScopeError: ``key`` is already carried by this generation (``CARRY_TWICE``),
                or ``factory`` returned an awaitable (use ``acarry``).
        """
        scope, handover, slot = self._carry_start(key, version, accept)
        if slot is None:
            where = _caller()
            value = factory()
            if inspect.isawaitable(value) or (
                dispose is None and _is_async_cm(value) and not _is_sync_cm(value)
            ):
                if inspect.iscoroutine(value):
                    value.close()  # not awaited here: no "never awaited" warning later
                raise ScopeError(
                    f"the factory of carried value {key!r} is asynchronous: use "
                    f"'await scope.acarry({key!r}, ...)' in an async setup",
                )
            value, undo = _entered(value, dispose)
            slot = _Slot(key, value, undo, version, where)
        return _hold(scope, handover, slot).value

    @overload
    async def acarry(
        self,
        key: str,
        factory: Callable[[], AbstractAsyncContextManager[V] | AbstractContextManager[V]],
        *,
        version: object = None,
        accept: Callable[[V], bool] | None = None,
    ) -> V: ...

    @overload
    async def acarry(
        self,
        key: str,
        factory: Callable[[], Awaitable[T]],
        *,
        dispose: Callable[[T], object] | None = None,
        version: object = None,
        accept: Callable[[T], bool] | None = None,
    ) -> T: ...

    @overload
    async def acarry(
        self,
        key: str,
        factory: Callable[[], T],
        *,
        dispose: Callable[[T], object] | None = None,
        version: object = None,
        accept: Callable[[T], bool] | None = None,
    ) -> T: ...

    async def acarry(
        self,
        key: str,
        factory: Callable[[], Any],
        *,
        dispose: Callable[[Any], object] | None = None,
        version: object = None,
        accept: Callable[[Any], bool] | None = None,
    ) -> Any:
        """Like :meth:`carry`, for an async setup: ``factory`` may be async, or return an
        async context manager (entered; exited at dispose)."""
        scope, handover, slot = self._carry_start(key, version, accept)
        if slot is not None:
            return _hold(scope, handover, slot).value
        where = _caller()  # before the first await: the frame below is the caller's
        value = factory()
        if inspect.isawaitable(value):
            value = await value
        undo: Callable[[], object] | None
        if dispose is None and _is_async_cm(value):
            acm = cast("AbstractAsyncContextManager[Any]", value)
            value = await acm.__aenter__()
            undo = functools.partial(acm.__aexit__, None, None, None)
        else:
            value, undo = _entered(value, dispose)
        slot = _Slot(key, value, undo, version, where)
        twice = key in handover.carried and not handover.carried[key]._done
        if scope.closed or twice:
            # The generation began closing (or carried the key) while the factory ran: the
            # fresh value has no owner to outlive, so it is disposed at once.
            orphan = CarriedEffect[Any](scope, slot)
            slot.owner = orphan
            orphan._done = True
            error = await run_undo(orphan, ScopeExit.from_exception(None), scope.dispose_timeout)
            if twice and not scope.closed:
                raise ScopeError(
                    f"{key!r} was carried twice at once by scope {scope.name!r}; the second "
                    "value was disposed",
                    "CARRY_TWICE",
                ) from error
            raise ScopeClosedError(
                f"scope {scope.name!r} closed while carried value {key!r} was being created; "
                "it was disposed"
            ) from error
        return _hold(scope, handover, slot).value

    def _carry_start(
        self, key: str, version: object, accept: Callable[[Any], bool] | None
    ) -> tuple[CarryHost, Handover, _Slot | None]:
        scope = cast("CarryHost", self)
        scope._check_open()
        if not isinstance(key, str) or not key:
            raise TypeError(f"a carried value's key is a non-empty str, got {key!r}")
        handover = _handover_of(scope)
        current = handover.carried.get(key)
        if current is not None and not current._done:
            raise ScopeError(
                f"{key!r} is already carried by this generation of scope {scope.name!r}: "
                "carry each key once per setup and pass the value around",
                "CARRY_TWICE",
            )
        slot = handover.offered(key)
        if slot is not None and (
            slot.version != version or (accept is not None and not accept(slot.value))
        ):
            slot = None  # refused: the predecessor keeps (and disposes) it
        return scope, handover, slot


def _caller() -> str:
    """``file:line`` of the code that called ``carry``/``acarry`` (the frame below them)."""
    frame = sys._getframe(2)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _handover_of(scope: CarryHost) -> Handover:
    """The handover of ``scope``'s generation: the nearest one up the tree, else the root's."""
    node: CarryHost | None = scope
    root = scope
    while node is not None:
        if node._handover is not None:
            return node._handover
        root = node
        node = node._parent
    root._handover = Handover()
    return root._handover


def _hold(scope: CarryHost, handover: Handover, slot: _Slot) -> CarriedEffect[Any]:
    effect = CarriedEffect[Any](scope, slot)
    if slot.owner is None:
        slot.owner = effect  # created here: owned from the start
    handover.carried[slot.key] = effect
    scope._adopt(effect)
    return effect


def _entered(
    value: object, dispose: Callable[[Any], object] | None
) -> tuple[Any, Callable[[], object] | None]:
    """The value carried, and its undo: ``dispose(value)``, or without ``dispose`` a
    context manager entered and exited at dispose (``None``: nothing to undo)."""
    if dispose is not None:
        return value, lambda: dispose(value)
    if _is_sync_cm(value):
        cm = cast("AbstractContextManager[Any]", value)
        return cm.__enter__(), lambda: cm.__exit__(None, None, None)
    return value, None


def _is_sync_cm(value: object) -> bool:
    return hasattr(value, "__enter__") and hasattr(value, "__exit__")


def _is_async_cm(value: object) -> bool:
    return hasattr(value, "__aenter__") and hasattr(value, "__aexit__")


def _closable(value: object) -> bool:
    return any(callable(getattr(value, name, None)) for name in ("close", "aclose"))
