"""A torture's own reads of the journal, tried again while it is out of reach (an outage, a
fault just made, a repair under way) rather than crashing the run."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from hotseam.interaction._journal import JournalError

T = TypeVar("T")


async def patient(
    read: Callable[[], Awaitable[T]], *, within: float = math.inf, pause: float = 0.05
) -> T:
    """``read()``, tried again every ``pause`` seconds while it fails
    ``JOURNAL_UNAVAILABLE``; after ``within`` seconds, ``TimeoutError`` naming the last
    error (a journal that never came back fails the run, it does not hang it)."""
    last: JournalError | None = None
    with anyio.move_on_after(within):
        while True:
            try:
                return await read()
            except JournalError as error:
                if error.code != "JOURNAL_UNAVAILABLE":
                    raise
                last = error
            await anyio.sleep(pause)
    raise TimeoutError(f"the journal stayed out of reach for {within} s: {last}")
