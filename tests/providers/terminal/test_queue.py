"""One question on screen at a time: asks take turns in arrival order."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest
from tests._timing import scaled

from hotseam.providers._terminal._queue import AskQueue

from .conftest import until

pytestmark = pytest.mark.anyio


class _Asker:
    """A task that takes a turn, records it, and holds it until released."""

    def __init__(self, queue: AskQueue, name: str, order: list[str]) -> None:
        self.queue, self.name, self.order = queue, name, order
        self.release = anyio.Event()
        self.cancel_scope = anyio.CancelScope()

    async def __call__(self) -> None:
        with self.cancel_scope:
            async with self.queue.turn():
                self.order.append(self.name)
                await self.release.wait()


def _holding_with(queue: AskQueue, waiting: int) -> Callable[[], bool]:
    return lambda: queue.busy and queue.waiting == waiting


def _length_is(order: list[str], length: int) -> Callable[[], bool]:
    return lambda: len(order) == length


async def test_turns_follow_arrival_order_and_count_the_waiting() -> None:
    """The first ask holds the turn; the others wait in order; ``waiting`` counts them."""
    queue = AskQueue()
    order: list[str] = []
    changes: list[int] = []
    unsubscribe = queue.listen(lambda: changes.append(queue.waiting))
    askers = [_Asker(queue, name, order) for name in "abc"]
    with anyio.fail_after(scaled(5)):
        async with anyio.create_task_group() as tg:
            for waiting, asker in enumerate(askers):
                tg.start_soon(asker)
                await until(_holding_with(queue, waiting))
            assert order == ["a"]
            for count, asker in enumerate(askers, start=1):
                await until(_length_is(order, count))
                asker.release.set()
    unsubscribe()
    assert order == ["a", "b", "c"]
    assert (queue.busy, queue.waiting) == (False, 0)
    assert changes == [1, 2, 1, 0, 0]  # b and c joined; b, c, nobody took the turn


async def test_a_cancelled_waiter_leaves_the_line() -> None:
    """Cancelling a waiting ask removes it; the one behind it moves up."""
    queue = AskQueue()
    order: list[str] = []
    a, b, c = (_Asker(queue, name, order) for name in "abc")
    with anyio.fail_after(scaled(5)):
        async with anyio.create_task_group() as tg:
            for waiting, asker in enumerate((a, b, c)):
                tg.start_soon(asker)
                await until(_holding_with(queue, waiting))
            b.cancel_scope.cancel()
            await until(lambda: queue.waiting == 1)
            a.release.set()
            await until(lambda: order == ["a", "c"])
            c.release.set()
    assert order == ["a", "c"]
    assert (queue.busy, queue.waiting) == (False, 0)


async def test_a_turn_handed_to_a_cancelled_waiter_is_passed_on() -> None:
    """If the waiter is cancelled just as the turn reaches it, the next waiter gets it."""
    queue = AskQueue()
    order: list[str] = []
    b, c = _Asker(queue, "b", order), _Asker(queue, "c", order)
    with anyio.fail_after(scaled(5)):
        async with anyio.create_task_group() as tg:
            async with queue.turn():
                for waiting, asker in enumerate((b, c), start=1):
                    tg.start_soon(asker)
                    await until(_holding_with(queue, waiting))
                b.cancel_scope.cancel()
                # Leaving the block hands the turn to b before b sees its cancellation.
            assert queue.waiting == 1
            await until(lambda: order == ["c"])
            c.release.set()
    assert order == ["c"]
    assert (queue.busy, queue.waiting) == (False, 0)
