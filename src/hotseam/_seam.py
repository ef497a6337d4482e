"""Seam: a typed key for a capability that exactly one provider serves at a time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from ._errors import NoProviderError

__all__ = ["Seam"]

T = TypeVar("T")


class Seam(Generic[T]):
    """A typed key naming a capability, such as ``Seam("user-interaction", Provider)``.

    Args:
        name: A stable, human-readable name used in errors and logs.
        protocol: The type providers must satisfy. When it is a ``runtime_checkable``
            Protocol (or a class), :meth:`Context.provide` rejects objects that do not match.
        missing: Builds the error raised when the seam has no provider (default:
            :class:`~hotseam.NoProviderError`), so that each seam fails in its own vocabulary.
    """

    __slots__ = ("_missing", "name", "protocol")

    def __init__(
        self,
        name: str,
        protocol: type[Any] | None = None,
        *,
        missing: Callable[[str], Exception] | None = None,
    ) -> None:
        if not name or not name.strip():
            raise ValueError("a seam needs a non-blank name")
        self.name = name
        self.protocol = protocol
        self._missing = missing

    def __repr__(self) -> str:
        protocol = f" {self.protocol.__qualname__}" if self.protocol is not None else ""
        return f"<Seam {self.name!r}{protocol}>"

    def missing_error(self, message: str) -> Exception:
        """Return the error that says this seam has no provider."""
        if self._missing is not None:
            return self._missing(message)
        return NoProviderError(message)

    def check(self, provider: object) -> None:
        """Raise ``TypeError`` when ``provider`` visibly does not satisfy the seam's protocol."""
        protocol = self.protocol
        if protocol is None:
            return
        is_protocol = getattr(protocol, "_is_protocol", False)
        if is_protocol and not getattr(protocol, "_is_runtime_protocol", False):
            return  # a plain Protocol cannot be checked at run time
        if not isinstance(provider, protocol):
            raise TypeError(
                f"{provider!r} does not provide seam {self.name!r}: it is not a "
                f"{protocol.__qualname__}"
            )
