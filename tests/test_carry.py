"""Issue 13 in the core: ``scope.carry`` outside a reloader, strict mode, and the hand-over.

Outside a reloader nothing precedes a scope, so carry simply creates the value and the
scope's close disposes it, once, in its last-in-first-out place.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest

from hotseam import Context, DisposalError, Scope, ScopeClosedError, ScopeError
from hotseam._core import follow, hand_over
from hotseam.testing import ReloadDriver, StrictModeError

pytestmark = pytest.mark.anyio


class Closable:
    def __init__(self, log: list[str], name: str = "value") -> None:
        self.log = log
        self.name = name

    def close(self) -> None:
        self.log.append(f"close {self.name}")


async def test_a_plain_scope_creates_and_disposes_in_lifo_place() -> None:
    log: list[str] = []
    async with Context().scope("plain") as scope:
        scope.defer(lambda: log.append("deferred first"))
        value = scope.carry("v", lambda: Closable(log), dispose=Closable.close)
        scope.defer(lambda: log.append("deferred last"))
        assert isinstance(value, Closable)
    assert log == ["deferred last", "close value", "deferred first"]


async def test_a_context_manager_is_entered_and_exited() -> None:
    log: list[str] = []

    @contextlib.contextmanager
    def held() -> Iterator[str]:
        log.append("enter")
        yield "entered"
        log.append("exit")

    @contextlib.asynccontextmanager
    async def aheld() -> AsyncIterator[int]:
        log.append("aenter")
        yield 7
        log.append("aexit")

    async with Context().scope("plain") as scope:
        assert scope.carry("cm", held) == "entered"
        assert await scope.acarry("acm", aheld) == 7
    assert log == ["enter", "aenter", "aexit", "exit"]


async def test_a_carried_value_can_be_disposed_early_and_then_carried_again() -> None:
    log: list[str] = []
    async with Context().scope("plain") as scope:
        scope.carry("v", lambda: Closable(log, "one"), dispose=Closable.close)
        (effect,) = [e for e in scope.effects() if getattr(e, "key", None) == "v"]
        await effect.dispose()
        scope.carry("v", lambda: Closable(log, "two"), dispose=Closable.close)
    assert log == ["close one", "close two"]


async def test_a_failing_dispose_is_a_disposal_error() -> None:
    def boom(value: object) -> None:
        raise RuntimeError("dispose failed")

    with pytest.raises(DisposalError) as caught:
        async with Context().scope("plain") as scope:
            scope.carry("v", object, dispose=boom)
    assert "dispose failed" in str(caught.value.exceptions[0])


async def test_carry_on_a_closed_scope_raises() -> None:
    scope = Context().scope("plain")
    await scope.aclose()
    with pytest.raises(ScopeClosedError):
        scope.carry("v", list)


async def test_a_child_scope_carries_in_its_generation() -> None:
    made: list[object] = []

    def make() -> object:
        made.append(object())
        return made[-1]

    context = Context()
    old = context.scope("gen1")
    old.child("part").carry("v", make)
    new = context.scope("gen2", staged=True)
    follow(new, old)
    assert new.child("part").carry("v", make) is made[0]
    hand_over(new)
    await old.aclose()
    await new.aclose()
    assert len(made) == 1


async def test_the_scope_closing_while_an_async_factory_runs_disposes_the_fresh_value() -> None:
    log: list[str] = []
    started = anyio.Event()
    release = anyio.Event()

    async def make() -> Closable:
        started.set()
        await release.wait()
        return Closable(log)

    scope = Context().scope("plain")
    failure: list[BaseException] = []

    async def carry() -> None:
        try:
            await scope.acarry("v", make, dispose=Closable.close)
        except ScopeClosedError as error:
            failure.append(error)

    async with anyio.create_task_group() as group:
        group.start_soon(carry)
        await started.wait()
        await scope.aclose()
        release.set()
    assert log == ["close value"]
    assert failure


async def test_a_cancelled_async_factory_carries_nothing() -> None:
    async def never() -> object:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async with Context().scope("plain") as scope:
        with anyio.move_on_after(0.01):
            await scope.acarry("v", never)
        assert scope.effects() == []
        assert await scope.acarry("v", list) == []


async def test_hand_over_only_on_commit() -> None:
    """The model of a reload without the reloader: borrow, then own on hand_over."""
    log: list[str] = []
    context = Context()
    gen1 = context.scope("gen1")
    value = gen1.carry("v", lambda: Closable(log), dispose=Closable.close)
    failed = context.scope("gen2", staged=True)
    follow(failed, gen1)
    assert failed.carry("v", lambda: Closable(log, "wrong"), dispose=Closable.close) is value
    await failed.aclose()  # a failed prepare: nothing disposed
    assert log == []
    gen3 = context.scope("gen3", staged=True)
    follow(gen3, gen1)
    assert gen3.carry("v", lambda: Closable(log, "wrong"), dispose=Closable.close) is value
    hand_over(gen3)
    await gen1.aclose()
    assert log == []
    await gen3.aclose()
    assert log == ["close value"]


def test_carry_twice_in_one_generation_is_refused() -> None:
    async def main() -> None:
        async with Context().scope("plain") as scope:
            scope.carry("k", list)
            with pytest.raises(ScopeError) as caught:
                scope.carry("k", list)
            assert caught.value.code == "CARRY_TWICE"

    anyio.run(main)


# -- strict mode -----------------------------------------------------------------------------

CLOSABLE_WITHOUT_DISPOSE = """
class Buffer:
    def close(self):
        pass

def setup(scope):
    scope.carry("buffer", Buffer)  # closable, but nothing tells carry how to close it
"""

CLOSABLE_WITH_DISPOSE = """
class Buffer:
    def close(self):
        pass

def setup(scope):
    scope.carry("buffer", Buffer, dispose=Buffer.close)
"""


async def test_strict_mode_reports_a_carried_value_not_disposed_at_unload(
    tmp_path: Path,
) -> None:
    async with ReloadDriver(Context(), tmp_path, strict=True) as driver:
        with pytest.raises(StrictModeError) as caught:
            await driver.load("ui.py", CLOSABLE_WITHOUT_DISPOSE)
        assert "carried value 'buffer' (Buffer)" in str(caught.value)
        status = await driver.load("ok.py", CLOSABLE_WITH_DISPOSE)
        assert status.generation == 2


async def test_strict_mode_accepts_plain_data(tmp_path: Path) -> None:
    async with ReloadDriver(Context(), tmp_path, strict=True) as driver:
        await driver.load("ui.py", "def setup(scope):\n    scope.carry('state', dict)\n")


async def test_strict_setup_reports_it_too() -> None:
    from hotseam.testing import strict_setup

    async with Context().scope("root") as root:
        with pytest.raises(
            StrictModeError, match="carried value 'buffer' \\(Closable\\) was let go"
        ):
            await strict_setup(_leaky_setup, parent=root, name="leaky")


def _leaky_setup(scope: Scope) -> None:
    scope.carry("buffer", lambda: Closable([]))


async def test_a_committed_generation_lets_go_of_its_predecessor() -> None:
    """Generations must not chain: a long session would keep every old scope alive."""
    context = Context()
    old = context.scope("gen1")
    old.carry("v", list)
    new = context.scope("gen2", staged=True)
    follow(new, old)
    new.carry("v", list)
    assert new._handover is not None and new._handover.previous is old._handover
    hand_over(new)
    assert new._handover.previous is None
    await old.aclose()
    await new.aclose()
