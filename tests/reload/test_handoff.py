"""Handing a module body to its thread and taking it back (the module-body worker), and
closing the generation it replaces.

A body that finishes at once is taken back without a trip through the event loop: the loop
waits for it a moment with the interpreter lock released (``HANDOFF_WAIT``), so the thread
starts at once and says it is done through a lock, not the loop's wake-up. A body that
takes longer holds the loop up for that moment only, then is waited for on the loop as
before: the loop serves meanwhile.

A replaced generation that holds nothing but its registrations closes in place, without a
task of its own (nothing of it can be stuck); one with disposers of its own still closes
in a task the commit can abandon (``test_hardening.py``).
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import cast

import anyio
import pytest

from hotseam import CloseReason, Context, Scope, Seam
from hotseam.interaction import ask_user_question_tool
from hotseam.reload import _loader
from hotseam.reload._commit import Closer
from hotseam.reload._loader import Loader, Worker

pytestmark = pytest.mark.anyio


async def test_a_quick_body_is_taken_back_without_a_turn_of_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_loader, "HANDOFF_WAIT", 10.0)  # a slow machine: the thread is quick
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
    monkeypatch.setattr(_loader, "HANDOFF_WAIT", 0.0)
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
    monkeypatch.setattr(_loader, "HANDOFF_WAIT", 0.05)
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
    monkeypatch.setattr(_loader, "HANDOFF_WAIT", 0.05)
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


GREETING: Seam[str] = Seam("greeting", str)


def _closer() -> Closer:
    """A reloader's closer (its loader is asked only where an abandoned close is stuck)."""
    loader = cast(Loader, SimpleNamespace(watched_files=lambda: ()))
    return Closer(loader, dispose_timeout=1.0, abandoned=[])


async def test_a_generation_of_registrations_only_closes_without_a_turn_of_the_loop() -> None:
    context = Context("handoff")
    scope = Scope("ui.py#1", context=context)
    scope.provide(GREETING, "hello")
    scope.register_tool(ask_user_question_tool())
    ran: list[str] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_note, ran)  # runs at the loop's next turn
        failures = await _closer().close(scope, CloseReason.RELOAD)
        assert ran == []  # closed in place: nothing else ran meanwhile
    assert failures == [] and scope.closed
    assert context.lookup(GREETING) is None
    assert "ask_user_question" not in context.tools.names()


async def test_a_generation_with_a_disposer_of_its_own_closes_in_a_task() -> None:
    """A disposer of the provider's (even one that never waits) may be stuck where nothing
    can cancel it: its close runs in a task the commit can stop waiting for."""
    context = Context("handoff")
    scope = Scope("ui.py#1", context=context)
    scope.provide(GREETING, "hello")
    disposed: list[str] = []
    scope.defer(lambda: disposed.append("disposed"))
    ran: list[str] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_note, ran)
        failures = await _closer().close(scope, CloseReason.RELOAD)
        assert ran == ["ran"]  # the commit waited for the close's task: the loop turned
    assert failures == [] and disposed == ["disposed"] and scope.closed


async def test_a_swap_nobody_else_holds_begins_without_a_turn_of_the_loop() -> None:
    """A commit swaps once per save: an uncontended swap lock is taken at once (the turn of
    the loop it cost was a twentieth of a save's own work, measured interleaved)."""
    context = Context("handoff")
    ran: list[str] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_note, ran)
        async with context.swap(GREETING):
            assert ran == []
