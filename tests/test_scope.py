"""Scope semantics: LIFO, exactly once, grouped failures, shielding, time bounds, reasons."""

from __future__ import annotations

import gc
import math
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio
import pytest

from hotseam import (
    CloseReason,
    Context,
    DisposalError,
    DisposerTimeoutError,
    Scope,
    ScopeClosedError,
    ScopeError,
    ScopeExit,
    ScopeState,
    Seam,
)

pytestmark = pytest.mark.anyio


class TestOrder:
    async def test_effects_are_undone_last_in_first_out(self) -> None:
        """Sync and async callbacks and context managers unwind in reverse order of adding."""
        order: list[str] = []

        @contextmanager
        def sync_cm() -> Iterator[str]:
            yield "sync"
            order.append("sync-cm")

        @asynccontextmanager
        async def async_cm() -> AsyncIterator[str]:
            yield "async"
            order.append("async-cm")

        async def async_callback() -> None:
            await anyio.sleep(0)
            order.append("async-callback")

        async with Scope("lifo") as scope:
            scope.defer(lambda: order.append("first"))
            assert await scope.enter(sync_cm()) == "sync"
            scope.defer(async_callback)
            assert await scope.enter(async_cm()) == "async"
            scope.defer(lambda: order.append("last"))
        assert order == ["last", "async-cm", "async-callback", "sync-cm", "first"]

    async def test_each_effect_runs_exactly_once_even_when_closed_twice(self) -> None:
        """A second aclose (and disposing a handle after close) does nothing."""
        calls: list[str] = []
        scope = Scope("twice")
        handle = scope.defer(lambda: calls.append("a"))
        await scope.aclose()
        await scope.aclose()
        await handle.dispose()
        assert calls == ["a"]
        assert scope.closed and scope.state is ScopeState.CLOSED

    async def test_a_disposed_handle_is_not_undone_again_by_its_scope(self) -> None:
        """Disposing one effect early runs it now and removes it from the scope."""
        calls: list[str] = []
        scope = Scope("early")
        scope.defer(lambda: calls.append("kept"))
        handle = scope.defer(lambda: calls.append("early"))
        await handle.dispose()
        assert calls == ["early"] and handle.disposed
        assert len(scope.effects()) == 1
        await scope.aclose()
        assert calls == ["early", "kept"]

    async def test_an_entered_context_manager_can_be_exited_early_by_its_handle(self) -> None:
        """enter_effect's handle exits the context manager now, and the scope not again."""
        exits: list[str] = []

        @asynccontextmanager
        async def resource() -> AsyncIterator[str]:
            yield "connection"
            exits.append("exited")

        async with Scope("early-exit") as scope:
            handle = await scope.enter_effect(resource())
            assert handle.value == "connection"
            await handle.dispose()
            assert exits == ["exited"]
            assert scope.effects() == []
        assert exits == ["exited"]

    async def test_child_scopes_close_before_the_parent_own_effects(self) -> None:
        """Children (newest first) close before any of the parent's own effects."""
        order: list[str] = []
        async with Scope("parent") as parent:
            parent.defer(lambda: order.append("parent-1"))
            first = parent.child("first")
            first.defer(lambda: order.append("first"))
            parent.defer(lambda: order.append("parent-2"))
            second = parent.child("second")
            second.defer(lambda: order.append("second"))
        assert order == ["second", "first", "parent-2", "parent-1"]
        assert first.closed and second.closed

    async def test_a_closed_child_detaches_from_its_parent(self) -> None:
        """A long-lived parent that opened and closed 100,000 children holds none of them."""
        parent = Scope("long-lived")
        probe = parent.child("probe")
        probe_ref = weakref.ref(probe)
        await probe.aclose()
        del probe
        for _ in range(100_000):
            child = parent.child("c")
            child.defer(lambda: None)
            await child.aclose()
        del child
        gc.collect()
        assert parent.children() == []
        assert probe_ref() is None
        await parent.aclose()


class TestFailures:
    async def test_every_effect_runs_and_all_failures_are_raised_together(self) -> None:
        """Three failing disposers among five: all five run, all three failures are raised."""
        ran: list[int] = []

        def failing(index: int) -> None:
            ran.append(index)
            raise ValueError(f"disposer {index}")

        async def failing_async() -> None:
            ran.append(3)
            raise KeyError("async disposer")

        scope = Scope("failing")
        scope.defer(lambda: failing(0))
        scope.defer(lambda: ran.append(1))
        scope.defer(lambda: failing(2))
        scope.defer(failing_async)
        scope.defer(lambda: ran.append(4))
        with pytest.raises(DisposalError) as caught:
            await scope.aclose()
        assert ran == [4, 3, 2, 1, 0]
        messages = [str(error) for error in caught.value.exceptions]
        assert messages == ["'async disposer'", "disposer 2", "disposer 0"]
        assert caught.value.scope_name == "failing"
        assert caught.value.code == "DISPOSAL_FAILED"
        assert isinstance(caught.value, ExceptionGroup)

    async def test_except_star_can_pick_failures(self) -> None:
        """DisposalError is an exception group, so except* works and keeps the class."""
        scope = Scope("star")
        scope.defer(lambda: (_ for _ in ()).throw(KeyError("k")))
        scope.defer(lambda: (_ for _ in ()).throw(ValueError("v")))
        caught: list[BaseException] = []
        try:
            await scope.aclose()
        except* ValueError as group:
            caught.extend(group.exceptions)
            assert isinstance(group, DisposalError)
        except* KeyError as group:
            caught.extend(group.exceptions)
        assert sorted(type(e).__name__ for e in caught) == ["KeyError", "ValueError"]

    async def test_failure_notes_name_the_effect(self) -> None:
        """Each failure carries a note saying which effect it came from."""

        def close_database() -> None:
            raise RuntimeError("connection lost")

        scope = Scope("notes")
        scope.defer(close_database)
        with pytest.raises(DisposalError) as caught:
            await scope.aclose()
        (failure,) = caught.value.exceptions
        assert any("close_database" in note for note in failure.__notes__)

    async def test_child_failures_are_nested_and_parent_effects_still_run(self) -> None:
        """A failing child's group is one of the parent's failures; the parent keeps going."""
        ran: list[str] = []
        parent = Scope("parent")
        parent.defer(lambda: ran.append("parent"))
        child = parent.child("child")
        child.defer(lambda: (_ for _ in ()).throw(OSError("child broke")))
        with pytest.raises(DisposalError) as caught:
            await parent.aclose()
        assert ran == ["parent"]
        (nested,) = caught.value.exceptions
        assert isinstance(nested, DisposalError) and nested.scope_name == "child"

    async def test_body_error_propagates_as_is_when_disposal_succeeds(self) -> None:
        """A plain body error is not wrapped in a group by the scope's task group."""
        with pytest.raises(LookupError, match="body"):
            async with Scope("body"):
                raise LookupError("body")

    async def test_disposal_error_chains_the_body_error(self) -> None:
        """When both the body and a disposer fail, the body error is the group's context."""
        with pytest.raises(DisposalError) as caught:
            async with Scope("both") as scope:
                scope.defer(lambda: (_ for _ in ()).throw(ValueError("cleanup")))
                raise LookupError("body")
        assert isinstance(caught.value.__context__, LookupError)


class TestCancellation:
    async def test_closing_from_a_cancelled_task_still_undoes_everything(self) -> None:
        """Async disposers complete even when the closing task is cancelled."""
        done: list[str] = []

        async def slow_cleanup(name: str) -> None:
            await anyio.sleep(0.01)
            done.append(name)

        scope = Scope("cancelled-closer")
        scope.defer(lambda: slow_cleanup("a"))
        scope.defer(lambda: slow_cleanup("b"))
        with anyio.CancelScope() as cancel_scope:
            cancel_scope.cancel()
            await scope.aclose()
        assert done == ["b", "a"]
        assert scope.state is ScopeState.CLOSED

    async def test_a_cancelled_body_closes_with_reason_cancelled(self) -> None:
        """Cancellation of the body reaches disposers as CANCELLED and still propagates."""
        seen: list[ScopeExit] = []
        with anyio.CancelScope() as cancel_scope:
            async with Scope("body-cancelled") as scope:
                scope.defer_exit(seen.append)
                cancel_scope.cancel()
                await anyio.sleep(1)
            pytest.fail("the cancellation must propagate out of the scope")
        assert cancel_scope.cancelled_caught
        assert seen[0].reason is CloseReason.CANCELLED

    async def test_an_overrunning_disposer_is_cancelled_reported_and_the_rest_run(self) -> None:
        """A disposer past its time bound is cancelled; the others still run."""
        ran: list[str] = []
        cancelled: list[bool] = []

        async def hangs() -> None:
            try:
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                cancelled.append(True)
                raise

        scope = Scope("bounded", dispose_timeout=0.05)
        scope.defer(lambda: ran.append("first"))
        scope.defer(hangs)
        scope.defer(lambda: ran.append("last"))
        with pytest.raises(DisposalError) as caught:
            await scope.aclose()
        assert ran == ["last", "first"]
        assert cancelled == [True]
        (timeout,) = caught.value.exceptions
        assert isinstance(timeout, DisposerTimeoutError)
        assert timeout.code == "DISPOSE_TIMEOUT"
        assert "hangs" in str(timeout) and "0.05" in str(timeout)

    async def test_dispose_timeout_must_be_positive(self) -> None:
        """A zero, negative or NaN time bound is refused at once."""
        for bad in (0, -1, math.nan):
            with pytest.raises(ValueError, match="dispose_timeout"):
                Scope("bad", dispose_timeout=bad)


class TestClosedScope:
    async def test_adding_to_a_closed_scope_raises(self) -> None:
        """Every kind of effect is refused once the scope closed."""
        context = Context("closed")
        scope = Scope("closed", context=context)
        await scope.aclose()
        seam: Seam[object] = Seam("s")
        attempts = [
            lambda: scope.defer(lambda: None),
            lambda: scope.defer_exit(lambda _exit: None),
            lambda: scope.child("late"),
            lambda: scope.provide(seam, object()),
            lambda: scope.spawn(anyio.sleep, 1),
        ]
        for attempt in attempts:
            with pytest.raises(ScopeClosedError, match="closed"):
                attempt()
        with pytest.raises(ScopeClosedError):
            await scope.enter(_null_cm())

    async def test_adding_while_closing_raises(self) -> None:
        """A disposer that tries to add an effect to its closing scope gets ScopeClosedError."""
        errors: list[BaseException] = []
        scope = Scope("closing")

        def adds_more() -> None:
            try:
                scope.defer(lambda: None)
            except ScopeClosedError as error:
                errors.append(error)

        scope.defer(adds_more)
        await scope.aclose()
        assert len(errors) == 1 and "closing" in str(errors[0])

    async def test_concurrent_close_waits_for_the_first(self) -> None:
        """A second aclose returns only after the first finished undoing."""
        finished = anyio.Event()
        observed: list[bool] = []

        async def slow() -> None:
            await anyio.sleep(0.01)
            finished.set()

        scope = Scope("concurrent")
        scope.defer(slow)

        async def second_close() -> None:
            await scope.aclose()
            observed.append(finished.is_set())

        async with anyio.create_task_group() as tg:
            tg.start_soon(scope.aclose)
            await anyio.sleep(0)
            tg.start_soon(second_close)
        assert observed == [True]


class TestReasons:
    @pytest.mark.parametrize(
        "reason",
        [CloseReason.EXIT, CloseReason.RELOAD, CloseReason.SHUTDOWN],
    )
    async def test_disposers_learn_the_reason_given_to_aclose(self, reason: CloseReason) -> None:
        """defer_exit callbacks, children and context managers all see the same exit."""
        seen: list[ScopeExit] = []
        exits: list[object] = []

        @contextmanager
        def cm() -> Iterator[None]:
            try:
                yield
            finally:
                exits.append("exited")

        scope = Scope("reasons")
        scope.defer_exit(seen.append)
        scope.child("child").defer_exit(seen.append)
        await scope.enter(cm())
        await scope.aclose(reason)
        assert [item.reason for item in seen] == [reason, reason]
        assert scope.exit is not None and scope.exit.reason is reason
        assert exits == ["exited"]

    async def test_an_error_exit_passes_the_error_to_disposers_and_exit_methods(self) -> None:
        """The body error reaches defer_exit and a context manager's __exit__."""
        seen: list[ScopeExit] = []
        cm_saw: list[BaseException | None] = []

        @contextmanager
        def cm() -> Iterator[None]:
            try:
                yield
            except BaseException as error:
                cm_saw.append(error)
                raise

        with pytest.raises(RuntimeError):
            async with Scope("error") as scope:
                scope.defer_exit(seen.append)
                await scope.enter(cm())
                raise RuntimeError("body failed")
        assert seen[0].reason is CloseReason.ERROR
        assert isinstance(seen[0].error, RuntimeError)
        assert isinstance(cm_saw[0], RuntimeError)


class TestTasks:
    async def test_spawned_tasks_are_cancelled_on_close(self) -> None:
        """A background task sees cancellation when its scope closes, and is awaited."""
        events: list[str] = []
        started = anyio.Event()

        async def worker(tag: str) -> None:
            started.set()
            try:
                await anyio.sleep_forever()
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.sleep(0)
                events.append(f"{tag} stopped")

        async with Scope("tasks") as scope:
            task = scope.spawn(worker, "w")
            await started.wait()
            assert task.running
        assert events == ["w stopped"]
        assert not task.running

    async def test_a_task_that_ends_on_its_own_leaves_its_scope(self) -> None:
        """Finished tasks do not pile up as effects of a long-lived scope."""
        async with Scope("short") as scope:
            done = anyio.Event()

            async def short() -> None:
                done.set()

            scope.spawn(short)
            await done.wait()
            await anyio.sleep(0)
            assert scope.effects() == []

    async def test_child_scopes_spawn_into_the_nearest_task_host(self) -> None:
        """A child scope (never entered itself) runs tasks in its parent's task group."""
        stopped: list[str] = []
        async with Scope("host") as host:
            child = host.child("worker-scope")

            async def worker() -> None:
                try:
                    await anyio.sleep_forever()
                finally:
                    stopped.append("stopped")

            child.spawn(worker)
            await anyio.sleep(0)
            await child.aclose()
            assert stopped == ["stopped"]

    async def test_spawn_without_a_task_host_is_a_clear_error(self) -> None:
        """A scope that was never entered has nothing to run tasks in."""
        scope = Scope("hostless")
        with pytest.raises(ScopeError, match="async with"):
            scope.spawn(anyio.sleep, 1)
        assert scope.effects() == []
        await scope.aclose()


class TestGarbageCollection:
    @pytest.mark.hotseam_leak_check(False)  # leaking a scope is the point of this test
    def test_an_open_scope_collected_warns_with_its_name(self) -> None:
        """A scope dropped while open emits a ResourceWarning naming it."""
        scope = Scope("forgotten-scope")
        scope.defer(lambda: None)
        with pytest.warns(ResourceWarning, match="forgotten-scope"):
            del scope
            gc.collect()

    async def test_a_closed_scope_collected_is_silent(self) -> None:
        """No warning for a scope that was closed."""
        scope = Scope("tidy")
        await scope.aclose()
        del scope
        gc.collect()  # filterwarnings=error turns any warning into a failure


@contextmanager
def _null_cm() -> Iterator[None]:
    yield
