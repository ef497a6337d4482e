"""What one reload did, as returned by :meth:`Reloader.reload`.

Kept apart from the reloader so that tests and tools can read a result (committed, aborted,
unloaded, ``raise_for_errors``) without the machinery that produced it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ._errors import ReloadError
from ._events import ModuleUnloaded, ReloadAborted, ReloadCommitted, ReloadEvent, display_path

__all__ = ["ReloadResult"]


@dataclass(frozen=True, slots=True)
class ReloadResult:
    """What one :meth:`Reloader.reload` did (``batch`` is ``None`` when nothing changed).

    A reload that unloaded provider generations is followed at once by a reload of the
    modules that failed while those were alive (see ``docs/reload.md``): ``events`` then
    holds the events of both, and ``batch`` is the first one's number.
    """

    batch: int | None
    events: tuple[ReloadEvent, ...]
    duration_ms: float
    deferred: tuple[Path, ...] = ()
    """Files (or folders) that could not be read (or listed) for a passing reason — out of
    file descriptors or memory, a network file system that does not answer — and were
    left out: the reloader tries them again on its own until it can (logged once as
    ``reload.deferred``), so a later event or :meth:`Reloader.status_of` tells how they
    loaded."""

    @property
    def committed(self) -> tuple[ReloadCommitted, ...]:
        """The modules whose new generation is now active."""
        return tuple(e for e in self.events if isinstance(e, ReloadCommitted))

    @property
    def aborted(self) -> tuple[ReloadAborted, ...]:
        """The modules that failed to load (their previous generation, if any, serves on)."""
        return tuple(e for e in self.events if isinstance(e, ReloadAborted))

    @property
    def unloaded(self) -> tuple[ModuleUnloaded, ...]:
        """The modules whose file is gone."""
        return tuple(e for e in self.events if isinstance(e, ModuleUnloaded))

    @property
    def ok(self) -> bool:
        """True when no module failed to load."""
        return not self.aborted

    def raise_for_errors(self) -> None:
        """Raise :class:`ReloadError` listing every module that failed to load, if any."""
        if self.aborted:
            listed = "; ".join(f"{display_path(e.path)}: {e.error}" for e in self.aborted)
            raise ReloadError(
                f"{len(self.aborted)} module(s) failed to load: {listed}",
                details={"errors": [e.log_fields() for e in self.aborted]},
            )
