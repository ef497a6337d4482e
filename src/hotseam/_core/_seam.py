"""Seam: a typed key for a capability that exactly one provider serves at a time.

A seam is identified by its *name*: a seam defined in a hot-reloaded module is a new
object after each save, and an agent holding the first generation's must still find the
provider the fifth one registered. Two live definitions of one name in different files
with different provider types would be ambiguous, so the second one is refused.
"""

from __future__ import annotations

import gc
import sys
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from ._errors import HarnessError, NoProviderError

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

    __slots__ = ("__weakref__", "_missing", "location", "name", "protocol")

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
        frame = sys._getframe(1)
        self.location = f"{frame.f_code.co_filename}:{frame.f_lineno}"
        """Where the seam was defined (``file:line``), shown when two definitions clash."""
        _define(self)

    def __repr__(self) -> str:
        protocol = f" {self.protocol.__qualname__}" if self.protocol is not None else ""
        return f"<Seam {self.name!r}{protocol}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Seam):
            return NotImplemented
        return other.name == self.name

    def __hash__(self) -> int:
        return hash((Seam, self.name))

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


_definitions: dict[str, list[weakref.ref[Seam[Any]]]] = {}


def _type_name(protocol: type[Any] | None) -> str:
    if protocol is None:
        return "any provider"
    return f"{protocol.__module__}.{protocol.__qualname__}"


def _define(seam: Seam[Any]) -> None:
    """Remember a live definition of ``seam.name``; refuse one that clashes with another
    (definitions from one file are its generations; types compare by qualified name, as a
    reload makes a new class)."""
    live = [ref for ref in _definitions.get(seam.name, ()) if ref() is not None]
    kind = _type_name(seam.protocol)
    where = seam.location.rpartition(":")[0]
    for ref in live:
        other = ref()
        if other is None or other.location.rpartition(":")[0] == where:
            continue
        if _type_name(other.protocol) != kind:
            del other
            gc.collect()  # a replaced generation may be garbage not yet collected (cycles)
            other = ref()
            if other is None:
                continue
            raise HarnessError(
                f"seam {seam.name!r} is defined twice with different provider types: "
                f"{_type_name(other.protocol)} at {other.location} and {kind} at "
                f"{seam.location}; a seam is found by its name, so define it once (outside "
                "the watched folders) and import it",
                "SEAM_CONFLICT",
                details={"seam": seam.name, "locations": [other.location, seam.location]},
            )
    live.append(weakref.ref(seam))
    _definitions[seam.name] = live
