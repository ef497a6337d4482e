"""Items arriving from callbacks, awaited in order by a test (the ACP harness's client
requests and log lines, the provider contract's shown questions)."""

from __future__ import annotations

from collections import deque
from typing import Any

import anyio
from tests._timing import scaled

WAIT = 5.0  # seconds on an idle machine, scaled where used
"""How long :meth:`Feed.get` waits by default: long enough never to fire when things work."""


class Feed:
    """Items put by callbacks, taken in order; :meth:`get` waits for the next one."""

    def __init__(self) -> None:
        self._items: deque[Any] = deque()
        self._arrived = anyio.Event()

    def put(self, item: Any) -> None:
        self._items.append(item)
        self._arrived.set()

    async def get(self, timeout: float = WAIT) -> Any:
        with anyio.fail_after(scaled(timeout)):
            while not self._items:
                self._arrived = anyio.Event()
                await self._arrived.wait()
        return self._items.popleft()

    def __len__(self) -> int:
        return len(self._items)
