"""One question on screen at a time; the others wait their turn in arrival order.

Two prompts on one terminal overdraw each other and split the keystrokes, so asks are
serialized. The turn is handed to the next waiter directly (no barging), and listeners hear
every change so the open prompt can say how many questions wait.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio


class AskQueue:
    """A first-in-first-out turn for asks; idle, it holds no event-loop objects, so one
    queue may serve several event loops one after another."""

    __slots__ = ("_busy", "_listeners", "_waiters")

    def __init__(self) -> None:
        self._busy = False
        self._waiters: deque[anyio.Event] = deque()
        self._listeners: list[Callable[[], None]] = []

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    @property
    def busy(self) -> bool:
        return self._busy

    def listen(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` whenever ``waiting`` may have changed; return the unsubscriber."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Wait until it is this ask's turn, and hold the turn for the block."""
        if self._busy:
            waiter = anyio.Event()
            self._waiters.append(waiter)
            self._changed()
            try:
                await waiter.wait()
            except BaseException:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                    self._changed()
                else:
                    # The turn was handed over as the wait was cancelled: pass it on.
                    self._release()
                raise
        else:
            self._busy = True
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        if self._waiters:
            self._waiters.popleft().set()
        else:
            self._busy = False
        self._changed()

    def _changed(self) -> None:
        for listener in list(self._listeners):
            listener()
