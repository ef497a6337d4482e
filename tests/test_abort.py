"""AbortController and AbortSignal, the web platform's cancellation tokens."""

from __future__ import annotations

import anyio
import pytest
from tests._timing import scaled

from hotseam import AbortController, AbortError, AbortSignal

pytestmark = pytest.mark.anyio


async def test_abort_sets_aborted_and_reason() -> None:
    """abort() fires once, with a default AbortError reason."""
    controller = AbortController()
    signal = controller.signal
    assert not signal.aborted and signal.reason is None
    controller.abort()
    controller.abort(ValueError("ignored: already aborted"))
    assert signal.aborted
    assert isinstance(signal.reason, AbortError) and signal.reason.code == "ABORTED"
    with pytest.raises(AbortError):
        signal.raise_if_aborted()


async def test_a_custom_reason_is_kept() -> None:
    """The reason is whatever abort() was given."""
    controller = AbortController()
    reason = KeyError("user left")
    controller.abort(reason)
    assert controller.signal.reason is reason


async def test_wait_returns_the_reason_when_aborted_from_another_task() -> None:
    """await signal.wait() wakes when the signal fires."""
    controller = AbortController()
    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.sleep, 0)
        tg.start_soon(_abort_soon, controller)
        reason = await controller.signal.wait()
    assert isinstance(reason, AbortError)


async def test_timeout_fires_by_deadline() -> None:
    """AbortSignal.timeout aborts with code TIMEOUT, observed by wait()."""
    signal = AbortSignal.timeout(0.01)
    assert not signal.aborted
    with anyio.fail_after(scaled(2)):
        reason = await signal.wait()
    assert isinstance(reason, AbortError) and reason.code == "TIMEOUT"
    assert signal.aborted


async def test_negative_timeout_is_refused() -> None:
    """A negative timeout is a clear error."""
    with pytest.raises(ValueError, match="timeout"):
        AbortSignal.timeout(-1)


async def test_any_follows_the_first_source() -> None:
    """AbortSignal.any aborts with the first source's reason."""
    first, second = AbortController(), AbortController()
    combined = AbortSignal.any([first.signal, second.signal])
    second.abort(KeyError("second"))
    first.abort(KeyError("first"))
    assert combined.aborted and str(combined.reason) == "'second'"


async def test_any_of_an_already_aborted_signal_is_aborted() -> None:
    """A source that already fired makes the combined signal fire at once."""
    combined = AbortSignal.any([AbortSignal(), AbortSignal.abort(KeyError("early"))])
    assert combined.aborted


async def test_any_carries_the_earliest_deadline() -> None:
    """A timeout among the sources bounds the combined signal."""
    combined = AbortSignal.any([AbortController().signal, AbortSignal.timeout(0.01)])
    with anyio.fail_after(scaled(2)):
        reason = await combined.wait()
    assert isinstance(reason, AbortError) and reason.code == "TIMEOUT"


async def test_cancel_scope_stops_a_block_promptly_and_raises_the_reason() -> None:
    """The block is cancelled when the signal fires; the reason is raised after it."""
    controller = AbortController()
    reached: list[str] = []
    with anyio.fail_after(scaled(2)):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_abort_soon, controller)
            with pytest.raises(AbortError), controller.signal.cancel_scope():
                await anyio.sleep_forever()
                reached.append("never")
    assert reached == []


async def test_cancel_scope_applies_a_timeout_deadline() -> None:
    """A timeout signal's deadline cancels the block without any task firing it."""
    signal = AbortSignal.timeout(0.01)
    with anyio.fail_after(scaled(2)):
        with signal.cancel_scope(raise_reason=False) as scope:
            await anyio.sleep_forever()
    assert scope.cancelled_caught


async def test_callbacks_run_once_and_can_be_removed() -> None:
    """add_callback returns a remover; callbacks added after firing run at once."""
    controller = AbortController()
    calls: list[str] = []
    remove = controller.signal.add_callback(lambda reason: calls.append("removed"))
    controller.signal.add_callback(lambda reason: calls.append("kept"))
    remove()
    controller.abort()
    controller.signal.add_callback(lambda reason: calls.append("late"))
    assert calls == ["kept", "late"]


async def _abort_soon(controller: AbortController) -> None:
    await anyio.sleep(0.01)
    controller.abort()


async def test_any_does_not_pile_up_callbacks_on_a_long_lived_source() -> None:
    """Combined signals that are dropped remove their callbacks from the sources."""
    import gc

    long_lived = AbortController()
    for _ in range(100):
        AbortSignal.any([long_lived.signal, AbortController().signal])
    gc.collect()
    assert long_lived.signal._callbacks == {}
