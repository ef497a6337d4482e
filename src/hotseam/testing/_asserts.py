"""Assertion helpers for disposal-lifecycle tests."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from .._core import Context, Seam


class DisposalRecorder:
    """Hands out named disposers and records the order in which they ran.

    ``scope.defer(recorder.callback("db"))``, then after closing
    ``recorder.assert_order(["cache", "db"])`` and ``recorder.assert_exactly_once()``.
    """

    def __init__(self) -> None:
        self.events: list[str] = []
        self._handed_out: list[str] = []

    def callback(self, name: str) -> Callable[[], None]:
        """A sync disposer that records ``name`` when it runs."""
        self._handed_out.append(name)
        return lambda: self.events.append(name)

    def async_callback(self, name: str) -> Callable[[], Any]:
        """An async disposer that records ``name`` when it runs."""
        self._handed_out.append(name)

        async def record() -> None:
            self.events.append(name)

        return record

    def record(self, name: str) -> None:
        """Record ``name`` from a disposer of your own."""
        self.events.append(name)

    def assert_order(self, expected: Iterable[str]) -> None:
        """The disposers ran in exactly this order (and no others ran)."""
        __tracebackhide__ = True
        wanted = list(expected)
        if self.events != wanted:
            raise AssertionError(
                f"disposal order was {self.events}, expected {wanted}"
                + _first_difference(self.events, wanted)
            )

    def assert_exactly_once(self, names: Iterable[str] | None = None) -> None:
        """Each handed-out disposer (or each of ``names``) ran exactly once."""
        __tracebackhide__ = True
        wanted = list(names) if names is not None else list(self._handed_out)
        counts = Counter(self.events)
        wrong = {name: counts[name] for name in wanted if counts[name] != 1}
        if wrong:
            detail = ", ".join(f"{name!r} ran {count} times" for name, count in wrong.items())
            raise AssertionError(f"every disposer must run exactly once: {detail}")


def _first_difference(actual: list[str], expected: list[str]) -> str:
    for index, (a, e) in enumerate(zip(actual, expected, strict=False)):
        if a != e:
            return f" (first difference at position {index}: {a!r} instead of {e!r})"
    return f" (lengths differ: {len(actual)} vs {len(expected)})"


def assert_no_provider(context: Context, seam: Seam[Any] | None = None) -> None:
    """No provider is active for ``seam`` (inherited ones count), or for any seam in ``context``."""
    __tracebackhide__ = True
    if seam is not None:
        registration = context.registration(seam)
        if registration is not None:
            raise AssertionError(
                f"expected no provider for seam {seam.name!r}, but "
                f"{registration.label} is active (registered at {registration.location})"
            )
        return
    active = context.providers()
    if active:
        described = "; ".join(
            f"{seam.name!r} by {registration.label} at {registration.location}"
            for seam, registration in active.items()
        )
        raise AssertionError(f"expected no active provider in {context.name!r}, found {described}")
