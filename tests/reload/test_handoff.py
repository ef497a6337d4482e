"""Handing a module body to its thread and taking it back (the module-body worker).

A body that finishes at once is taken back without a trip through the event loop: the loop
waits for it a moment with the interpreter lock released (``HANDOFF_WAIT``), so the thread
starts at once and says it is done through a lock, not the loop's wake-up. A body that
takes longer holds the loop up for that moment only, then is waited for on the loop as
before: the loop serves meanwhile.
"""

from __future__ import annotations

import threading
import time

import anyio
import pytest

from hotseam.reload import _guard
from hotseam.reload._guard import Worker

pytestmark = pytest.mark.anyio


async def test_a_quick_body_is_taken_back_without_a_turn_of_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_guard, "HANDOFF_WAIT", 10.0)  # a slow machine: the thread is quick
    worker = Worker()
    ran: list[str] = []
    threads: list[int] = []
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_note, ran)  # runs at the loop's next turn
            run, stuck = await worker.run(
                "quick", [lambda: threads.append(threading.get_ident())], 10.0
            )
            assert ran == []  # no turn of the loop: nothing else ran
        assert ran == ["ran"]
        assert stuck is None and run.error is None and not run.running
        assert threads and threads[0] != threading.get_ident()
    finally:
        worker.close()


async def test_without_the_blocking_wait_the_thread_tells_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``HANDOFF_WAIT = 0``: every run is taken back through the loop's wake-up, and a
    body's exception is reported the same way."""
    monkeypatch.setattr(_guard, "HANDOFF_WAIT", 0.0)
    worker = Worker()
    release = threading.Event()
    ran: list[str] = []

    async def releaser() -> None:
        release.set()

    def fail() -> None:
        raise ValueError("body failed")

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(releaser)  # only a turn of the loop lets the body end
            run, stuck = await worker.run("via the loop", [lambda: release.wait(30)], 10.0)
        assert stuck is None and run.error is None and not run.running
        run, stuck = await worker.run("fails", [fail, lambda: ran.append("never")], 10.0)
        assert stuck is None and isinstance(run.error, ValueError) and ran == []
    finally:
        worker.close()


async def test_a_body_that_waits_holds_the_loop_up_for_the_handoff_wait_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The body waits for a task of the loop: it is released (the loop serves while it
    waits) once the blocking wait is over."""
    monkeypatch.setattr(_guard, "HANDOFF_WAIT", 0.05)
    worker = Worker()
    release = threading.Event()
    released_at: list[float] = []

    async def releaser() -> None:
        released_at.append(time.monotonic())
        release.set()

    try:
        async with anyio.create_task_group() as tg:
            started = time.monotonic()
            tg.start_soon(releaser)
            run, stuck = await worker.run("waits", [lambda: release.wait(30)], 60.0)
        assert stuck is None and run.error is None and not run.running
        assert 0.05 <= released_at[0] - started < 20
    finally:
        worker.close()


async def test_a_body_that_overruns_is_still_abandoned_at_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_guard, "HANDOFF_WAIT", 0.05)
    worker = Worker()
    gate = threading.Event()
    try:
        run, stuck = await worker.run("stuck", [lambda: None, lambda: gate.wait(30)], 0.3)
        assert stuck == 1 and run.abandoned and run.running
    finally:
        gate.set()
        worker.close()


async def _note(ran: list[str]) -> None:
    ran.append("ran")
