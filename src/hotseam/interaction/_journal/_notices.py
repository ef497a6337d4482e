"""Wake-ups inside one process: the tasks waiting for an ask to settle, and the change feed.

Every engine feeds the same hub, each from what it can see: SQLite wakes local waiters on
its own writes and learns of other processes' writes by polling ``PRAGMA data_version`` (in
memory there are none: its feed reads back its own writes, when nudged); PostgreSQL wakes
local waiters on its own writes and hears everyone's through ``LISTEN/NOTIFY``. A waiter
only ever re-reads its ask, so a wake-up too many costs a read and never a wrong answer.
The hub lives in the event loop that opened the journal; other threads reach it through
``anyio.from_thread``.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence

import anyio

from ._records import AskRecord, JournalEvent

_FEED_BUFFER = 10_000


class Watch:
    """One task's wait for one ask: fired by any change that may concern it.

    ``settled`` is the ask as this process settled it, when that is what fired the watch:
    the waiter need not read it back."""

    __slots__ = ("_event", "settled")

    def __init__(self) -> None:
        self._event = anyio.Event()
        self.settled: AskRecord | None = None

    def fire(self, settled: AskRecord | None = None) -> None:
        if settled is not None and not settled.pending:
            self.settled = settled
        self._event.set()

    async def wait(self) -> None:
        """Until fired since the last wait returned (at once if it already was)."""
        await self._event.wait()
        self._event = anyio.Event()


class Subscription:
    """A change feed reader: an async iterator of :class:`JournalEvent`.

    Events wait in a buffer; a reader that falls more than 10,000 events behind loses them
    and is told ``resync`` instead (list again), so a stuck page never holds the daemon's
    memory.
    """

    __slots__ = ("_buffer", "_closed", "_ready", "armed")

    def __init__(self) -> None:
        self._buffer: deque[JournalEvent] = deque()
        self._ready = anyio.Event()
        self._closed = False
        self.armed = anyio.Event()

    def arm(self) -> None:
        """Deliver the events published from now on (until now they were not its own)."""
        self.armed.set()

    def push(self, event: JournalEvent) -> None:
        if not self.armed.is_set():
            return
        if len(self._buffer) >= _FEED_BUFFER:
            self._buffer.clear()
            event = JournalEvent("resync")
        self._buffer.append(event)
        self._ready.set()

    def close(self) -> None:
        self._closed = True
        self._ready.set()

    def __aiter__(self) -> AsyncIterator[JournalEvent]:
        return self

    async def __anext__(self) -> JournalEvent:
        while not self._buffer:
            if self._closed:
                raise StopAsyncIteration
            await self._ready.wait()
            self._ready = anyio.Event()
        return self._buffer.popleft()


class Notices:
    """The waiters and feed readers of one open journal."""

    def __init__(self) -> None:
        self._waiters: dict[str, set[Watch]] = {}
        self._subscribers: set[Subscription] = set()
        self._interest = anyio.Event()

    @property
    def interested(self) -> bool:
        """True while someone waits for an ask or reads the feed."""
        return bool(self._waiters or self._subscribers)

    @property
    def has_subscribers(self) -> bool:
        """True while someone reads the change feed."""
        return bool(self._subscribers)

    async def wait_interest(self) -> None:
        """Until someone waits or reads (at once when someone does)."""
        if not self.interested:
            await self._interest.wait()

    @contextlib.contextmanager
    def watch(self, ask_id: str) -> Iterator[Watch]:
        """Within the block, changes that may concern ``ask_id`` fire the watch."""
        watch = Watch()
        self._waiters.setdefault(ask_id, set()).add(watch)
        self._interest.set()
        try:
            yield watch
        finally:
            watchers = self._waiters.get(ask_id)
            if watchers is not None:
                watchers.discard(watch)
                if not watchers:
                    del self._waiters[ask_id]
            self._lost_interest()

    @contextlib.contextmanager
    def subscribe(self) -> Iterator[Subscription]:
        """Within the block, every event published once it is armed reaches it."""
        subscription = Subscription()
        self._subscribers.add(subscription)
        self._interest.set()
        try:
            yield subscription
        finally:
            self._subscribers.discard(subscription)
            subscription.close()
            self._lost_interest()

    def wake(self, ask_ids: Iterable[str]) -> None:
        """Fire the watches of these asks (the feed is not told)."""
        for ask_id in ask_ids:
            for watch in self._waiters.get(ask_id, ()):
                watch.fire()

    def wake_with(self, asks: Iterable[AskRecord]) -> None:
        """Fire the watches of these asks, handing them the records (this process's own
        changes: a settled one need not be read back)."""
        for ask in asks:
            for watch in self._waiters.get(ask.id, ()):
                watch.fire(ask)

    def publish(self, events: Sequence[JournalEvent]) -> None:
        """Fire the watches these events concern and hand the events to every reader."""
        for event in events:
            if event.kind == "resync":
                self.wake(list(self._waiters))
            elif event.ask_id is not None:
                self.wake((event.ask_id,))
            for subscription in self._subscribers:
                subscription.push(event)

    def close(self) -> None:
        """End every feed (readers' loops stop) and fire every watch."""
        for subscription in list(self._subscribers):
            subscription.close()
        for watchers in self._waiters.values():
            for watch in watchers:
                watch.fire()

    def _lost_interest(self) -> None:
        if not self.interested and self._interest.is_set():
            self._interest = anyio.Event()
