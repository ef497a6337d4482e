"""The providers of a context: at most one active provider per seam, borrowed and swapped.

A second provider for a seam that has one is a :class:`~hotseam.ProviderConflictError`,
never a silent replacement. For code that must survive a provider replaced under it (the
reloader, ``ask()``): during a ``swap``, callers that find no provider wait for it to end;
a ``lease`` borrows the provider for a block, cancelled when the registration's scope
starts closing (``lease.revoked`` says to try the replacement).

A registration is withdrawn at the first instant of its scope's close: no caller is handed
it while the disposers registered after it run. Registrations, leases and the provider
table refer to each other, so they share this module."""

from __future__ import annotations

import enum
import itertools
import math
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from types import TracebackType
from typing import Any, Generic, TypeVar

import anyio

from ._callbacks import InactiveCallbacks
from ._effects import Effect, EffectOwner, ScopeExit
from ._errors import ProviderConflictError
from ._log import get_logger
from ._module_body import caller_location, refuse_registration
from ._seam import Seam
from ._swap import DEFAULT_SWAP_WAIT, Swap
from ._tools import ToolRegistry

T = TypeVar("T")
_log = get_logger("hotseam.context")

current: ContextVar[BaseContext | None] = ContextVar("hotseam_context", default=None)
"""The context set by ``use_context`` (read by scopes opened without ``context=``)."""

# Lease order: the arrival order of callers, kept by leases that rejoin after a swap.
_lease_order = itertools.count()


class RegistrationState(enum.Enum):
    """``staged`` (recorded, not live) → ``active`` → ``withdrawn`` (its scope began
    closing: handed to no one, its undo still to run) → ``removed``."""

    STAGED = "staged"
    ACTIVE = "active"
    WITHDRAWN = "withdrawn"
    REMOVED = "removed"


class Registration(Effect, Generic[T]):
    """The handle of one provider registration; disposing it removes the provider
    (``location``: the ``file:line`` that registered it, for conflict errors)."""

    serves = True

    __slots__ = ("_inactive", "_leases", "context", "location", "provider", "seam", "state")

    def __init__(
        self,
        context: BaseContext,
        seam: Seam[T],
        provider: T,
        owner: EffectOwner | None,
        location: str,
    ) -> None:
        super().__init__(owner)
        self.context = context
        self.seam = seam
        self.provider = provider
        self.location = location
        self.state = RegistrationState.STAGED
        # Insertion-ordered: leases are revoked in the order they were taken.
        self._leases: dict[Lease[T], None] = {}
        self._inactive = InactiveCallbacks()

    @property
    def label(self) -> str:
        return f"provider {_describe(self.provider)} for seam {self.seam.name!r}"

    @property
    def active(self) -> bool:
        """True while this is the seam's provider in its context."""
        return self.state is RegistrationState.ACTIVE

    def on_inactive(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call ``callback()`` once when this registration stops being active (withdrawn,
        disposed, or discarded while staged; at once if it did); return an unsubscriber."""
        done = self.state in (RegistrationState.WITHDRAWN, RegistrationState.REMOVED)
        return self._inactive.add(callback, done)

    def conflict(
        self, ignoring: frozenset[Registration[Any]] = frozenset()
    ) -> Registration[Any] | None:
        """Return the active registration this one would collide with, if any."""
        current = self.context._active.get(self.seam)
        if current is None or current is self or current in ignoring:
            return None
        return current

    def _start(self) -> None:
        if self.state is not RegistrationState.STAGED or self._done:
            return
        current = self.conflict()
        if current is not None:
            raise _conflict_error(self.seam, self.provider, current, self.location)
        self.context._active[self.seam] = self
        self.state = RegistrationState.ACTIVE
        if self.context._install_waiters:
            for waiter in list(self.context._install_waiters):
                waiter.set()
        if _log.enabled("info"):
            _log.info(
                "provider.installed",
                seam=self.seam.name,
                provider=_describe(self.provider),
                context=self.context.name,
                location=self.location,
            )

    def _rollback_start(self) -> None:
        if self.state is RegistrationState.ACTIVE:
            del self.context._active[self.seam]
            self.state = RegistrationState.STAGED

    def _withdraw(self) -> None:
        """Stop serving now: leave the context and revoke the leases, oldest first."""
        if self.state is not RegistrationState.ACTIVE:
            return
        self.state = RegistrationState.WITHDRAWN
        active = self.context._active
        if active.get(self.seam) is self:
            del active[self.seam]
        if self._leases:
            swapping = self.context._swap_covering(self.seam) is not None
            for lease in list(self._leases):
                lease._revoke(swapping)
        self._inactive.fire()

    def _undo(self, exit_: ScopeExit) -> object:
        was_live = self.state in (RegistrationState.ACTIVE, RegistrationState.WITHDRAWN)
        self._withdraw()
        self.state = RegistrationState.REMOVED
        self._inactive.fire()
        if not was_live:
            return None
        if _log.enabled("info"):
            _log.info(
                "provider.removed",
                seam=self.seam.name,
                provider=_describe(self.provider),
                context=self.context.name,
                reason=exit_.reason.value,
                swap=self.context._swap_covering(self.seam) is not None,
            )
        if not self._leases:
            return None
        # The releases of the leases held now, taken at once: while this close waits for one,
        # another revoked lease may leave and be entered again on another registration (a
        # child context's own provider); its next release is not this one's to wait for.
        return _released([lease._released for lease in self._leases])


class BaseContext:
    """A :class:`~hotseam.Context` without its factory of scopes (scopes sit above): the
    providers and the tools, a child's shadowing its parent's."""

    def __init__(self, name: str = "context", *, parent: BaseContext | None = None) -> None:
        self.name = name
        self.parent = parent
        self._active: dict[Seam[Any], Registration[Any]] = {}
        self._swaps: list[Swap] = []
        self._swap_lock: anyio.Lock | None = None
        # Places in line held by revoked leases that will rejoin after a swap, by seam.
        self._rejoining: dict[Seam[Any], set[int]] = {}
        self._rejoin_changed: anyio.Event | None = None
        # Callers of wait_provided() in this context or a child: woken when one installs.
        self._install_waiters: set[anyio.Event] = set()
        self.tools: ToolRegistry = ToolRegistry(self)

    def __repr__(self) -> str:
        seams = ", ".join(sorted(seam.name for seam in self._active))
        return f"<Context {self.name!r} providers=[{seams}]>"

    # -- providers ------------------------------------------------------------------------------

    def provide(self, seam: Seam[T], provider: T) -> Registration[T]:
        """Make ``provider`` the active provider of ``seam`` until the handle is disposed.

        Raises:
            ProviderConflictError: ``seam`` already has an active provider in this context.
            TypeError: ``provider`` does not satisfy the seam's runtime-checkable protocol.
        """
        return self._register_provider(seam, provider, owner=None, stacklevel=2)

    def _register_provider(
        self, seam: Seam[T], provider: T, *, owner: EffectOwner | None, stacklevel: int
    ) -> Registration[T]:
        location = caller_location(stacklevel + 1)
        refuse_registration(f"provide({seam.name!r})", location)
        seam.check(provider)
        registration = Registration(self, seam, provider, owner, location)
        registration._place()
        return registration

    def registration(self, seam: Seam[T]) -> Registration[T] | None:
        """Return the active registration for ``seam`` here or in a parent, or ``None``."""
        context: BaseContext | None = self
        while context is not None:
            registration = context._active.get(seam)
            if registration is not None:
                return registration
            context = context.parent
        return None

    def lookup(self, seam: Seam[T]) -> T | None:
        """Return the active provider of ``seam`` (here or inherited), or ``None``."""
        registration = self.registration(seam)
        return None if registration is None else registration.provider

    def get(self, seam: Seam[T]) -> T:
        """Return the active provider of ``seam``, or raise the seam's "no provider" error."""
        registration = self.registration(seam)
        if registration is None:
            raise seam.missing_error(self._missing_message(seam))
        return registration.provider

    async def wait_for(self, seam: Seam[T], *, timeout: float = DEFAULT_SWAP_WAIT) -> T:
        """Return the active provider, waiting out a swap of ``seam`` under way; else the
        seam's "no provider" error (the swap's error, if any, is the cause)."""
        return (await self._wait_registration(seam, timeout)).provider

    async def wait_provided(self, seam: Seam[T], *, timeout: float = math.inf) -> T:
        """Wait until ``seam`` has a provider here (or in an ancestor): any installation,
        where :meth:`wait_for` waits out a running swap only. Woken by it (no polling).

        Raises:
            NoProviderError: (or the seam's own error) none appeared within ``timeout``.
        """
        provider = self.lookup(seam)
        if provider is not None:
            return provider
        chain = list(self._chain())
        with anyio.move_on_after(timeout):
            while provider is None:
                installed = anyio.Event()
                for context in chain:
                    context._install_waiters.add(installed)
                try:
                    await installed.wait()
                finally:
                    for context in chain:
                        context._install_waiters.discard(installed)
                provider = self.lookup(seam)
            return provider
        raise seam.missing_error(
            f"no provider of {seam.name!r} appeared within {timeout:g} s in context {self.name!r}"
        )

    def lease(
        self, seam: Seam[T], *, timeout: float = DEFAULT_SWAP_WAIT, rejoin: bool = False
    ) -> Lease[T]:
        """Borrow the active provider of ``seam`` for one ``async with`` block.

        Entering waits like :meth:`wait_for`, and behind earlier callers rejoining after a
        swap; ``rejoin=True`` lets it be entered again, keeping its place (:class:`Lease`).
        """
        return Lease(self, seam, timeout, rejoin=rejoin)

    async def _rejoin_turn(self, seam: Seam[Any], order: int) -> None:
        """Wait while a caller that arrived before ``order`` still has to rejoin ``seam``."""
        while True:
            holding = self._rejoining.get(seam)
            if not holding or min(holding) >= order:
                return
            if self._rejoin_changed is None:
                self._rejoin_changed = anyio.Event()
            await self._rejoin_changed.wait()

    def _rejoin_leave(self, seam: Seam[Any], order: int) -> None:
        holding = self._rejoining.get(seam)
        if holding is None or order not in holding:
            return
        holding.discard(order)
        if not holding:
            del self._rejoining[seam]
        changed, self._rejoin_changed = self._rejoin_changed, None
        if changed is not None:
            changed.set()

    def _serving(self, seam: Seam[T]) -> Registration[T] | None:
        """The registration a caller gets now without waiting, or ``None``."""
        registration = self.registration(seam)
        if registration is not None and not self._shadow_swap(seam, registration):
            return registration
        return None

    async def _wait_registration(self, seam: Seam[T], timeout: float) -> Registration[T]:
        if (registration := self._serving(seam)) is not None:
            return registration
        deadline = time.monotonic() + timeout
        last_swap: Swap | None = None
        while (swap := self._swap_covering(seam)) is not None:
            last_swap = swap
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            with anyio.move_on_after(remaining):
                await swap._finished.wait()
            if (registration := self._serving(seam)) is not None:
                return registration
        if (registration := self._serving(seam)) is not None:
            return registration
        message = self._missing_message(seam)
        cause: BaseException | None = None
        if last_swap is not None:
            if last_swap.finished:
                message += f" (a provider swap of {self.name!r} ended without one)"
            else:
                message += f" (a provider swap did not finish within {timeout} s)"
            cause = last_swap.error
        error = seam.missing_error(message)
        if cause is not None:
            error.__cause__ = cause
        raise error

    def _shadow_swap(self, seam: Seam[Any], registration: Registration[Any]) -> bool:
        """True while a swap below ``registration``'s context may install a provider that
        shadows it: callers must wait for that one, not fall through to the inherited one."""
        context: BaseContext | None = self
        while context is not None and context is not registration.context:
            if any(swap.covers(seam) for swap in context._swaps):
                return True
            context = context.parent
        return False

    def _missing_message(self, seam: Seam[Any]) -> str:
        return f"no provider is active for seam {seam.name!r} in context {self.name!r}"

    # -- swaps ----------------------------------------------------------------------------------

    def _swap_covering(self, seam: Seam[Any]) -> Swap | None:
        return self._first_swap(lambda swap: swap.covers(seam))

    def _swap_covering_tool(self, name: str) -> Swap | None:
        return self._first_swap(lambda swap: swap.covers_tool(name))

    def _first_swap(self, covers: Callable[[Swap], bool]) -> Swap | None:
        """The first running swap, here or in an ancestor, that ``covers`` accepts."""
        swaps = (swap for context in self._chain() for swap in context._swaps)
        return next(filter(covers, swaps), None)

    def _chain(self) -> Iterator[BaseContext]:
        """This context, then its ancestors."""
        context: BaseContext | None = self
        while context is not None:
            yield context
            context = context.parent

    @asynccontextmanager
    async def swap(self, *seams: Seam[Any], tools: Iterable[str] = ()) -> AsyncIterator[Swap]:
        """Replace providers as one step: ``async with ctx.swap(seam): dispose old; add new``.

        While it runs, callers finding no provider for ``seams`` or no tool of ``tools``
        (everything when neither is given) wait for it, and a lease revoked inside it is
        ``replaced``. Swaps of one context are serialized; the block's error is the swap's.
        """
        if self._swap_lock is None:
            # Taken without a turn of the event loop when nobody holds it (cancellation is
            # still checked): a reload's commit swaps once per save.
            self._swap_lock = anyio.Lock(fast_acquire=True)
        async with self._swap_lock:
            tool_names = frozenset(tools)
            swap = Swap(self, frozenset(seams) if seams or tool_names else None, tool_names)
            self._swaps.append(swap)
            started = time.perf_counter()
            try:
                yield swap
            except BaseException as error:
                if swap.error is None:
                    swap.error = error
                raise
            finally:
                self._swaps.remove(swap)
                swap._finished.set()
                if _log.enabled("debug"):
                    _log.debug(
                        "provider.swapped",
                        context=self.name,
                        seams=None if swap.seams is None else sorted(s.name for s in swap.seams),
                        failed=swap.error is not None,
                        duration_ms=round((time.perf_counter() - started) * 1000, 3),
                    )

    # -- structure ------------------------------------------------------------------------------

    def providers(self) -> dict[Seam[Any], Registration[Any]]:
        """The registrations active in this context itself (not inherited ones)."""
        return dict(self._active)


class Lease(Generic[T]):
    """A provider borrowed for one block: ``async with ctx.lease(seam) as lease:``.

    When the registration's scope starts closing, the block is cancelled and exits quietly;
    ``revoked`` is then true, and ``replaced`` says a swap was under way (a replacement is
    coming). With ``rejoin=True`` it may be entered again and keeps its place in line:
    rejoining callers reach the replacement in arrival order, ahead of later ones. Its
    holder must :meth:`close` it once done, or later callers wait for its turn.
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
        self, context: BaseContext, seam: Seam[T], timeout: float, *, rejoin: bool = False
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
            self._context._rejoining.setdefault(self._seam, set()).add(self.order)
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()


async def _released(events: list[anyio.Event | None]) -> None:
    """Until each of these releases happened."""
    for event in events:
        if event is not None:
            await event.wait()


def _conflict_error(
    seam: Seam[Any], provider: object, current: Registration[Any], location: str
) -> ProviderConflictError:
    return ProviderConflictError(
        f"seam {seam.name!r} already has an active provider in context "
        f"{current.context.name!r}: {_describe(current.provider)} registered at "
        f"{current.location}; {_describe(provider)} from {location} was refused "
        "(dispose the active registration first, or use a child context to shadow it)",
        details={
            "seam": seam.name,
            "active_provider": _describe(current.provider),
            "active_location": current.location,
            "refused_location": location,
        },
    )


def _describe(provider: object) -> str:
    return f"{type(provider).__module__}.{type(provider).__qualname__}"
