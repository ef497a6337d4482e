"""Handing a seam from one provider to the next: leases, swaps, and waiting for a provider to go.

The provider registry itself is :mod:`._context`; these are the primitives for code that
must survive the provider it uses being replaced (the hot reloader and ``ask()``):

* a :class:`Lease` borrows the active provider for one block and is revoked (the block
  cancelled) when the registration's scope starts closing;
* a :class:`Swap` marks seams as changing hands, so callers that find no provider wait for
  the swap instead of failing;
* :class:`InactiveCallbacks` tell code waiting to take a registration's place that it went.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anyio

from ._log import get_logger

if TYPE_CHECKING:
    from ._context import Context, Registration
    from ._seam import Seam

__all__ = ["InactiveCallbacks", "Lease", "Swap"]

T = TypeVar("T")
_log = get_logger("hotseam.context")

# Lease order: the arrival order of callers, kept by leases that rejoin after a swap.
_lease_order = itertools.count()
_callback_keys = itertools.count()


class InactiveCallbacks:
    """Callbacks to run once when a registration stops being active (see ``on_inactive``)."""

    __slots__ = ("_callbacks", "_fired")

    def __init__(self) -> None:
        self._callbacks: dict[int, Callable[[], object]] = {}
        self._fired = False

    def add(self, callback: Callable[[], object], done: bool) -> Callable[[], None]:
        if done or self._fired:
            callback()
            return _noop
        key = next(_callback_keys)
        self._callbacks[key] = callback

        def remove() -> None:
            self._callbacks.pop(key, None)

        return remove

    def fire(self) -> None:
        self._fired = True
        if not self._callbacks:
            return
        callbacks, self._callbacks = self._callbacks, {}
        for callback in callbacks.values():
            try:
                callback()
            except Exception:  # a listener's bug must not stop a close
                _log.error("registration.inactive_callback_failed", exc_info=True)


def _noop() -> None:
    return None


class Lease(Generic[T]):
    """A provider borrowed for one block: ``async with ctx.lease(seam) as lease:``.

    If the registration's scope starts closing while the block runs, the block is cancelled
    (the provider's coroutine sees cancellation) and exits quietly; ``revoked`` is then true
    and ``replaced`` tells whether a swap was under way, so a replacement is coming.

    A lease taken with ``rejoin=True`` may be entered again after a revocation, and keeps
    its holder's place in line: callers that rejoin after a swap reach the replacement in
    the order they first arrived, ahead of callers that came later. Its holder must call
    :meth:`close` once it will not enter it again, or later callers wait for its turn.
    """

    __slots__ = (
        "_cancel_scope",
        "_context",
        "_registration",
        "_rejoin",
        "_released",
        "_seam",
        "_timeout",
        "order",
        "replaced",
        "revoked",
    )

    def __init__(
        self, context: Context, seam: Seam[T], timeout: float, *, rejoin: bool = False
    ) -> None:
        self._context = context
        self._seam = seam
        self._timeout = timeout
        self._rejoin = rejoin
        self.order = next(_lease_order)
        self._registration: Registration[T] | None = None
        self._cancel_scope: anyio.CancelScope | None = None
        self._released: anyio.Event | None = None
        self.revoked = False
        self.replaced = False

    @property
    def provider(self) -> T:
        """The borrowed provider."""
        if self._registration is None:
            raise RuntimeError("lease.provider is only available inside 'async with'")
        return self._registration.provider

    @property
    def registration(self) -> Registration[T]:
        """The registration the provider came from."""
        if self._registration is None:
            raise RuntimeError("lease.registration is only available inside 'async with'")
        return self._registration

    async def __aenter__(self) -> Lease[T]:
        if self._released is not None and not self._released.is_set():
            raise RuntimeError("this lease is already entered")
        if self._released is not None and not self._rejoin:
            raise RuntimeError("a lease is entered once; take it with rejoin=True to re-enter")
        context = self._context
        seam = self._seam
        # The common case, nobody in line and a provider serving, costs no await.
        registration = None if context._rejoining else context._serving(seam)
        if registration is None:
            try:
                await context._rejoin_turn(seam, self.order)
                registration = await context._wait_registration(seam, self._timeout)
            finally:
                # Leaving the line before the caller reaches the provider: the next one in
                # line runs only once this task suspends, inside the provider.
                context._rejoin_leave(seam, self.order)
        self._registration = registration
        self._released = anyio.Event()
        self.revoked = self.replaced = False
        self._cancel_scope = anyio.CancelScope()
        registration._leases[self] = None
        self._cancel_scope.__enter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        assert self._cancel_scope is not None
        try:
            suppressed = self._cancel_scope.__exit__(exc_type, exc, tb)
        finally:
            assert self._registration is not None
            assert self._released is not None
            self._registration._leases.pop(self, None)
            self._released.set()
        return bool(suppressed) and self.revoked

    def close(self) -> None:
        """Give up this lease's place in line (a rejoining lease that will not re-enter)."""
        self._context._rejoin_leave(self._seam, self.order)

    def _revoke(self, replaced: bool) -> None:
        self.revoked = True
        self.replaced = replaced
        if replaced and self._rejoin:
            self._context._rejoin_hold(self._seam, self.order)
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()


class Swap:
    """A provider swap in progress; see :meth:`Context.swap`."""

    __slots__ = ("_finished", "context", "error", "seams", "tools")

    def __init__(
        self,
        context: Context,
        seams: frozenset[Seam[Any]] | None,
        tools: frozenset[str] = frozenset(),
    ) -> None:
        self.context = context
        self.seams = seams
        self.tools = tools
        self.error: BaseException | None = None
        self._finished = anyio.Event()

    def __repr__(self) -> str:
        names = "all seams" if self.seams is None else sorted(s.name for s in self.seams)
        return f"<Swap {self.context.name!r} {names}>"

    def covers(self, seam: Seam[Any]) -> bool:
        """True if callers looking for ``seam`` should wait for this swap."""
        return self.seams is None or seam in self.seams

    def covers_tool(self, name: str) -> bool:
        """True if callers of the tool ``name`` should wait for this swap."""
        return self.seams is None or name in self.tools

    @property
    def finished(self) -> bool:
        """True once the swap ended (with or without a new provider)."""
        return self._finished.is_set()

    def fail(self, error: BaseException) -> None:
        """Record why the swap could not install a replacement (waiters get it as cause)."""
        self.error = error
