"""Sessions kept in order of last use, so that the idle ones are found from the front.

A client that never says goodbye (an ACP client that never sends ``session/close``, an MCP
host that crashes without ``DELETE``) leaves its session behind: a long-lived server holds
a bounded number of them only if the ones idle past a timeout, and the least recent one
to close at a bound, are found without scanning or sorting them all.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Generic, Protocol, TypeVar


class _Used(Protocol):
    last_used: float


T = TypeVar("T", bound=_Used)


class LastUse(Generic[T]):
    """Items by key, the least recently used first; ``busy`` ones are never idle."""

    def __init__(
        self,
        clock: Callable[[], float],
        idle_timeout: float | None,
        busy: Callable[[T], bool],
    ) -> None:
        self.clock = clock
        self.idle_timeout = idle_timeout
        self._busy = busy
        self._order: OrderedDict[str, T] = OrderedDict()

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._order.values()))

    def get(self, key: str) -> T | None:
        return self._order.get(key)

    def add(self, key: str, item: T) -> None:
        item.last_used = self.clock()
        self._order[key] = item

    def use(self, key: str, item: T | None = None) -> T | None:
        """The item of ``key`` (only ``item``, when given), marked as used now."""
        found = self._order.get(key)
        if found is None or (item is not None and found is not item):
            return None
        found.last_used = self.clock()
        self._order.move_to_end(key)
        return found

    def release(self, key: str) -> T | None:
        return self._order.pop(key, None)

    def release_idle(self) -> list[T]:
        """The items idle past the timeout (never a busy one), forgotten."""
        if self.idle_timeout is None:
            return []
        deadline = self.clock() - self.idle_timeout
        found: list[T] = []
        for key, item in list(self._order.items()):
            if item.last_used > deadline:
                break  # the rest were used later
            if not self._busy(item):
                del self._order[key]
                found.append(item)
        return found

    def least_recent_idle(self) -> T | None:
        """The idle item used least recently, forgotten; ``None`` when all are busy."""
        for key, item in self._order.items():
            if not self._busy(item):
                del self._order[key]
                return item
        return None
