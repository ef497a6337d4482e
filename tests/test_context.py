"""Context and Seam: one provider per seam, inheritance, the current context, swaps, leases."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

import anyio
import pytest
from tests._timing import scaled

from hotseam import (
    Context,
    HarnessError,
    NoProviderError,
    ProviderConflictError,
    RegistrationState,
    Scope,
    Seam,
    current_context,
    use_context,
)
from hotseam.interaction import USER_INTERACTION

pytestmark = pytest.mark.anyio


@runtime_checkable
class Greeter(Protocol):
    def greet(self) -> str: ...


class English:
    def greet(self) -> str:
        return "hello"


class French:
    def greet(self) -> str:
        return "bonjour"


GREETER: Seam[Greeter] = Seam("greeter", Greeter)


class TestOneProviderPerSeam:
    async def test_provide_get_and_dispose(self) -> None:
        """The registration handle is active until disposed; then the seam is empty."""
        context = Context("app")
        registration = context.provide(GREETER, English())
        assert registration.active and registration.state is RegistrationState.ACTIVE
        assert context.get(GREETER).greet() == "hello"
        await registration.dispose()
        assert not registration.active
        assert context.lookup(GREETER) is None
        with pytest.raises(NoProviderError, match="greeter"):
            context.get(GREETER)

    async def test_a_second_provider_is_a_conflict_naming_the_first(self) -> None:
        """Never a silent replacement: the error names the active provider and its file:line."""
        context = Context("app")
        context.provide(GREETER, English())  # the first registration
        line = _line_of("# the first registration")
        with pytest.raises(ProviderConflictError) as caught:
            context.provide(GREETER, French())
        error = caught.value
        assert error.code == "PROVIDER_CONFLICT"
        assert "English" in str(error) and f"test_context.py:{line}" in str(error)
        assert context.get(GREETER).greet() == "hello"

    async def test_after_dispose_a_new_provider_may_be_installed(self) -> None:
        """Disposing frees the slot for the next provider."""
        context = Context("app")
        first = context.provide(GREETER, English())
        await first.dispose()
        context.provide(GREETER, French())
        assert context.get(GREETER).greet() == "bonjour"

    async def test_scope_close_removes_its_providers(self) -> None:
        """A provider registered through a scope is removed when the scope closes."""
        context = Context("app")
        async with context.scope("ui") as scope:
            registration = scope.provide(GREETER, English())
            assert context.lookup(GREETER) is not None
        assert not registration.active
        assert context.lookup(GREETER) is None

    async def test_a_provider_that_does_not_fit_the_protocol_is_refused(self) -> None:
        """A runtime-checkable protocol is checked at provide time."""
        context = Context("app")
        with pytest.raises(TypeError, match="does not provide seam 'greeter'"):
            context.provide(GREETER, object())  # type: ignore[arg-type]

    async def test_a_seam_error_factory_shapes_the_no_provider_error(self) -> None:
        """Each seam can fail in its own vocabulary."""

        class MySeamError(HarnessError):
            pass

        seam: Seam[object] = Seam(
            "mine", missing=lambda message: MySeamError(message, "NO_PROVIDER")
        )
        with pytest.raises(MySeamError) as caught:
            Context("app").get(seam)
        assert caught.value.code == "NO_PROVIDER"


class TestInheritance:
    async def test_a_child_inherits_and_may_shadow(self) -> None:
        """A child context sees the parent's provider until it provides its own."""
        parent = Context("parent")
        parent.provide(GREETER, English())
        child = parent.child("child")
        assert child.get(GREETER).greet() == "hello"
        shadow = child.provide(GREETER, French())
        assert child.get(GREETER).greet() == "bonjour"
        assert parent.get(GREETER).greet() == "hello"
        await shadow.dispose()
        assert child.get(GREETER).greet() == "hello"


class TestCurrentContext:
    async def test_use_context_sets_and_restores(self) -> None:
        """The current context travels in a context variable."""
        outer, inner = Context("outer"), Context("inner")
        with pytest.raises(HarnessError) as caught:
            current_context()
        assert caught.value.code == "NO_CONTEXT"
        with use_context(outer):
            assert current_context() is outer
            with use_context(inner):
                assert current_context() is inner
            assert current_context() is outer

    async def test_tasks_started_inside_inherit_the_context(self) -> None:
        """Context variables are copied into tasks, so library code finds the context."""
        context = Context("tasks")
        seen: list[Context] = []

        async def worker() -> None:
            seen.append(current_context())

        with use_context(context):
            async with anyio.create_task_group() as tg:
                tg.start_soon(worker)
        assert seen == [context]

    async def test_a_scope_defaults_to_the_current_context(self) -> None:
        """Scope(context=None) picks up the current context."""
        context = Context("implicit")
        with use_context(context):
            scope = Scope("s")
        assert scope.context is context
        await scope.aclose()


class TestSwap:
    async def test_waiters_wait_for_the_swap_instead_of_seeing_a_gap(self) -> None:
        """During a swap the seam is briefly empty, but wait_for() returns the new provider."""
        context = Context("swap")
        old = context.provide(GREETER, English())
        got: list[str] = []
        async with anyio.create_task_group() as tg, context.swap(GREETER):
            await old.dispose()

            async def waiter() -> None:
                got.append((await context.wait_for(GREETER)).greet())

            tg.start_soon(waiter)
            await anyio.sleep(0.01)
            assert got == []
            context.provide(GREETER, French())
        assert got == ["bonjour"]

    async def test_a_swap_that_ends_without_a_provider_fails_waiters_with_its_cause(self) -> None:
        """NO_PROVIDER with the swap's error as the cause."""
        context = Context("swap")
        old = context.provide(GREETER, English())
        errors: list[BaseException] = []

        async def waiter() -> None:
            try:
                await context.wait_for(GREETER)
            except NoProviderError as error:
                errors.append(error)

        async with anyio.create_task_group() as tg:
            with pytest.raises(RuntimeError, match="new generation broke"):
                async with context.swap(GREETER):
                    await old.dispose()
                    tg.start_soon(waiter)
                    await anyio.sleep(0.01)
                    raise RuntimeError("new generation broke")
        (error,) = errors
        assert "ended without one" in str(error)
        assert isinstance(error.__cause__, RuntimeError)

    async def test_wait_for_without_a_swap_fails_at_once(self) -> None:
        """No provider and no swap: the error is immediate, never a wait."""
        with anyio.fail_after(scaled(1)):
            with pytest.raises(NoProviderError):
                await Context("empty").wait_for(GREETER, timeout=30)

    async def test_wait_for_is_bounded(self) -> None:
        """A swap that takes too long fails the waiter after its timeout."""
        context = Context("slow-swap")
        async with anyio.create_task_group() as tg, context.swap(GREETER):

            async def waiter() -> None:
                with pytest.raises(NoProviderError, match=r"did not finish within 0\.02 s"):
                    await context.wait_for(GREETER, timeout=0.02)

            tg.start_soon(waiter)
            await anyio.sleep(0.1)

    async def test_swaps_are_serialized(self) -> None:
        """A second swap of the same context starts only after the first ended."""
        context = Context("serial")
        log: list[str] = []

        async def swapper(tag: str) -> None:
            async with context.swap():
                log.append(f"{tag}-start")
                await anyio.sleep(0.01)
                log.append(f"{tag}-end")

        async with anyio.create_task_group() as tg:
            tg.start_soon(swapper, "a")
            await anyio.sleep(0)
            tg.start_soon(swapper, "b")
        assert log == ["a-start", "a-end", "b-start", "b-end"]


class TestLease:
    async def test_disposing_the_registration_cancels_the_lease_block(self) -> None:
        """The provider's coroutine sees cancellation, and dispose waits for it to unwind."""
        context = Context("lease")
        registration = context.provide(GREETER, English())
        inside = anyio.Event()
        unwound: list[str] = []
        leases: list[object] = []

        async def borrower() -> None:
            async with context.lease(GREETER) as lease:
                leases.append(lease)
                inside.set()
                try:
                    await anyio.sleep_forever()
                finally:
                    unwound.append("unwound")

        async with anyio.create_task_group() as tg:
            tg.start_soon(borrower)
            await inside.wait()
            await registration.dispose()
            assert unwound == ["unwound"]
        (lease,) = leases
        assert lease.revoked and not lease.replaced  # type: ignore[attr-defined]

    async def test_a_lease_revoked_inside_a_swap_is_marked_replaced(self) -> None:
        """Callers can tell "replaced, try again" from "gone"."""
        context = Context("lease-swap")
        registration = context.provide(GREETER, English())
        inside = anyio.Event()
        outcome: list[tuple[bool, bool, str]] = []

        async def borrower() -> None:
            async with context.lease(GREETER) as lease:
                inside.set()
                await anyio.sleep_forever()
            async with context.lease(GREETER) as again:
                outcome.append((lease.revoked, lease.replaced, again.provider.greet()))

        async with anyio.create_task_group() as tg:
            tg.start_soon(borrower)
            await inside.wait()
            async with context.swap(GREETER):
                await registration.dispose()
                context.provide(GREETER, French())
        assert outcome == [(True, True, "bonjour")]

    async def test_errors_inside_a_lease_propagate(self) -> None:
        """A lease only swallows its own revocation."""
        context = Context("lease-error")
        context.provide(GREETER, English())
        with pytest.raises(ZeroDivisionError):
            async with context.lease(GREETER):
                1 / 0  # noqa: B018


class TestStaging:
    async def test_a_staged_scope_records_registrations_until_activated(self) -> None:
        """Nothing is live before activate(); everything is after."""
        context = Context("staging")
        scope = Scope("generation-2", context=context, staged=True)
        registration = scope.provide(GREETER, French())
        assert registration.state is RegistrationState.STAGED
        assert context.lookup(GREETER) is None
        scope.activate()
        assert registration.active and context.get(GREETER).greet() == "bonjour"
        await scope.aclose()
        assert context.lookup(GREETER) is None

    async def test_activation_is_all_or_nothing(self) -> None:
        """A conflict during activation deactivates what was activated before it."""
        context = Context("staging")
        other: Seam[object] = Seam("other")
        context.provide(GREETER, English())
        scope = Scope("generation", context=context, staged=True)
        first = scope.provide(other, object())
        scope.provide(GREETER, French())
        with pytest.raises(ProviderConflictError):
            scope.activate()
        assert not first.active and context.lookup(other) is None
        assert scope.staged
        await scope.aclose()


def _line_of(text: str) -> int:
    source = Path(__file__).read_text(encoding="utf-8").splitlines()
    return next(n for n, line in enumerate(source, 1) if text in line and "_line_of" not in line)


async def test_a_registration_made_by_hotseam_itself_names_hotseam_code() -> None:
    """The location skips only the registration machinery, never into the event loop."""
    from hotseam.pytest_plugin import hotseam_provider

    context = Context("locations")
    async with Scope("fixture-like", context=context) as scope:
        await hotseam_provider.__wrapped__(scope)  # type: ignore[attr-defined]
        registration = context.registration(USER_INTERACTION)
        assert registration is not None
        assert "hotseam/pytest_plugin.py:" in registration.location


async def test_wait_provided_is_woken_by_an_installation_in_an_ancestor() -> None:
    """A waiter in a child context is woken by the provider its parent installs (no
    polling: it is already waiting, blocked, when the provider arrives)."""
    root = Context("root")
    child = root.child("child")
    got: list[Greeter] = []
    async with anyio.create_task_group() as tasks:

        async def waiter() -> None:
            got.append(await child.wait_provided(GREETER))

        tasks.start_soon(waiter)
        tasks.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        assert got == []
        registration = root.provide(GREETER, English())
    assert [greeter.greet() for greeter in got] == ["hello", "hello"]
    assert not root._install_waiters and not child._install_waiters
    await registration.dispose()


async def test_wait_provided_ignores_other_seams_and_gives_up_after_its_timeout() -> None:
    context = Context("alone")
    other: Seam[object] = Seam("other")
    async with anyio.create_task_group() as tasks:

        async def install_unrelated() -> None:
            await anyio.wait_all_tasks_blocked()
            await context.provide(other, object()).dispose()

        tasks.start_soon(install_unrelated)
        with pytest.raises(NoProviderError, match=r"appeared within 0\.05 s"):
            await context.wait_provided(GREETER, timeout=0.05)
    assert not context._install_waiters
    with pytest.raises(NoProviderError):
        await context.wait_provided(GREETER, timeout=0)


async def test_wait_provided_returns_at_once_when_a_provider_is_there() -> None:
    context = Context("ready")
    registration = context.provide(GREETER, French())
    assert (await context.wait_provided(GREETER, timeout=0)).greet() == "bonjour"
    await registration.dispose()
