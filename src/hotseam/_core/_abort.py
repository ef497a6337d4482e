"""AbortController and AbortSignal: the web platform's cancellation tokens, for anyio.

A signal is polled (``signal.aborted``), awaited (``await signal.wait()``) or bound to a
block cancelled when it fires (``with signal.cancel_scope():``). Timeouts are deadlines,
not timers (no background task): callbacks run at ``abort()`` or when an observer notices
the deadline passed. A reason is any value, as on the web (``abort(0)`` keeps ``0``);
``abort()`` uses an :class:`~hotseam.AbortError`, which also carries a non-exception
reason where the abort is raised. Not thread-safe: use signals from the loop's thread."""

from __future__ import annotations

import itertools
import math
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio

from ._errors import AbortError

_callback_keys = itertools.count()


class AbortSignal:
    """Tells whether an operation should stop, and why.

    Create one with :class:`AbortController`, :meth:`timeout`, :meth:`any` or :meth:`abort`.
    """

    __slots__ = ("__weakref__", "_aborted", "_callbacks", "_deadline", "_event", "_reason")

    def __init__(self) -> None:
        self._aborted = False
        self._reason: object = None
        self._deadline = math.inf  # time.monotonic() based
        self._callbacks: dict[int, Callable[[Any], object]] = {}
        self._event: anyio.Event | None = None

    def __repr__(self) -> str:
        state = f"aborted reason={self._reason!r}" if self.aborted else "pending"
        return f"<AbortSignal {state}>"

    # -- constructors -----------------------------------------------------------------------

    @classmethod
    def abort(cls, reason: object = None) -> AbortSignal:
        """Return a signal that is already aborted (``reason``: any value; see the module)."""
        signal = cls()
        signal._fire(reason if reason is not None else _default_reason())
        return signal

    @classmethod
    def timeout(cls, seconds: float) -> AbortSignal:
        """Return a signal that aborts ``seconds`` from now with an ``AbortError`` (``TIMEOUT``)."""
        if seconds < 0 or math.isnan(seconds):
            raise ValueError(f"timeout seconds must be >= 0, got {seconds!r}")
        signal = cls()
        signal._deadline = time.monotonic() + seconds
        return signal

    @classmethod
    def any(cls, signals: Iterable[AbortSignal]) -> AbortSignal:
        """Return a signal that aborts when the first of ``signals`` does, with its reason."""
        sources = list(signals)
        combined = cls()
        for source in sources:
            if source.aborted:
                combined._fire(source._reason)
                return combined
        combined._deadline = min((s._deadline for s in sources), default=math.inf)
        removers: list[Callable[[], None]] = []
        # The sources must not keep the combined signal (or their callbacks) alive: a
        # long-lived source combined many times would otherwise pile up dead callbacks.
        target = weakref.ref(combined)

        def remove_all() -> None:
            for remove in removers:
                remove()
            removers.clear()

        def on_source_abort(reason: object) -> None:
            remove_all()
            signal = target()
            if signal is not None:
                signal._fire(reason)

        removers.extend(source.add_callback(on_source_abort) for source in sources)
        weakref.finalize(combined, remove_all)
        return combined

    # -- observing --------------------------------------------------------------------------

    @property
    def aborted(self) -> bool:
        """True once the signal fired (or its deadline passed)."""
        if not self._aborted and self._deadline != math.inf and time.monotonic() >= self._deadline:
            self._fire(AbortError("The operation timed out", "TIMEOUT"))
        return self._aborted

    @property
    def reason(self) -> object:
        """Why the signal fired (any value given to ``abort``); ``None`` while it has not."""
        return self._reason if self.aborted else None

    @property
    def deadline(self) -> float:
        """The ``time.monotonic()`` deadline of this signal, ``inf`` when it has none."""
        return self._deadline

    def raise_if_aborted(self) -> None:
        """Raise the abort if the signal fired: its reason, or an AbortError carrying it."""
        if self.aborted:
            raise abort_exception(self._reason)

    def add_callback(self, callback: Callable[[Any], object]) -> Callable[[], None]:
        """Call ``callback(reason)`` once when the signal fires (at once if it did); return
        a function that removes it."""
        if self.aborted:
            callback(self._reason)
            return _noop
        key = next(_callback_keys)
        self._callbacks[key] = callback
        return lambda: self._callbacks.pop(key, None) and None

    async def wait(self) -> object:
        """Wait until the signal fires and return its reason."""
        if not self.aborted:
            if self._event is None:
                self._event = anyio.Event()
            with anyio.CancelScope(deadline=_loop_deadline(self._deadline)):
                await self._event.wait()
            self.aborted  # noqa: B018 - notices a passed deadline
        return self._reason

    @contextmanager
    def cancel_scope(self, *, raise_reason: bool = True) -> Iterator[anyio.CancelScope]:
        """Run a block that is cancelled promptly when this signal fires; the abort is then
        raised after it (as by :meth:`raise_if_aborted`) unless ``raise_reason`` is false
        (check ``scope.cancelled_caught``)."""
        scope = anyio.CancelScope(deadline=_loop_deadline(self._deadline))
        if self.aborted:
            scope.cancel()
        remove = self.add_callback(lambda _reason: scope.cancel())
        try:
            with scope:
                yield scope
        finally:
            remove()
        if scope.cancelled_caught and raise_reason and self.aborted:
            raise abort_exception(self._reason)

    # -- firing -----------------------------------------------------------------------------

    def _fire(self, reason: object) -> None:
        if self._aborted:
            return
        self._aborted = True
        self._reason = reason
        self._deadline = math.inf
        if self._event is not None:
            self._event.set()
        callbacks, self._callbacks = self._callbacks, {}
        errors: list[Exception] = []
        for callback in callbacks.values():
            try:
                callback(reason)
            except Exception as exc:  # a listener's bug must not stop the others
                errors.append(exc)
        if errors:
            raise ExceptionGroup("AbortSignal callbacks failed", errors)


class AbortController:
    """Owns an :class:`AbortSignal` and fires it with :meth:`abort`."""

    __slots__ = ("_signal",)

    def __init__(self) -> None:
        self._signal = AbortSignal()

    def __repr__(self) -> str:
        return f"<AbortController signal={self._signal!r}>"

    @property
    def signal(self) -> AbortSignal:
        """The signal this controller fires."""
        return self._signal

    def abort(self, reason: object = None) -> None:
        """Fire the signal (once; later calls do nothing) with any ``reason`` value;
        ``abort()`` and ``abort(None)`` use an :class:`~hotseam.AbortError`."""
        self._signal._fire(reason if reason is not None else _default_reason())


def _default_reason() -> AbortError:
    return AbortError("This operation was aborted")


def abort_exception(reason: object) -> BaseException:
    """The exception that stands for an abort: the reason itself, or an AbortError carrying it."""
    if isinstance(reason, BaseException):
        return reason
    if reason is None:
        return _default_reason()
    error = AbortError(f"This operation was aborted: {reason!r}", details={"reason": repr(reason)})
    error.reason = reason
    return error


def _loop_deadline(monotonic_deadline: float) -> float:
    if monotonic_deadline == math.inf:
        return math.inf
    return anyio.current_time() + (monotonic_deadline - time.monotonic())


def _noop(*_args: Any) -> None:
    return None
