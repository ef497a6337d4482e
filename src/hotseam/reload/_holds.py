"""The deletion grace: a module whose file goes keeps serving a moment, in case it comes back.

``git checkout``, ``git stash``, a branch switch, a deploy that replaces files, an editor
that saves by deleting and writing again: a module file — or its whole folder — vanishes for
a moment and comes back. Unloading the module then would dispose its provider (its open
question withdrawn, its UI gone, what it carries dropped) only to load it again a moment
later.

So with ``WatchOptions(deletion_grace=seconds)``, a plan that finds a loaded module's file gone
*holds* the module instead of unloading it, whatever asked for the plan: a watcher's report,
``reload()`` (``SIGHUP``, ``hotseam reload``), a retry, a watched folder replaced. A held
module is planned as still there and unchanged:

* it keeps serving, and the module index keeps its entry (:meth:`~._planner.ModuleIndex.hold`),
  so a module that imports it and is executed meanwhile gets the module it had, not an
  ``ImportError``;
* it is never executed for want of its file; a plan that would have executed it (a module
  it imports changed, a reload by hand) marks it *stale* instead;
* once its file is back — reported, or seen when the grace ends — the hold ends: the module
  is reloaded if its content changed or it is stale, and left alone otherwise;
* when the grace ends with its file still gone, it is unloaded, in a reload of its own
  (after the reload running then, if one is: reloads never overlap).

The grace used to be a wrapper of the watcher that held back deletion *events*; a plan made
for any other reason (a helper saved meanwhile, a reload by hand) still read the folder,
found the file gone and unloaded the module at once. Holding the module in the plan keeps
the promise whatever makes the plan.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio

from .._core import get_logger
from ._events import display_path

__all__ = ["Hold", "Holds", "check_grace", "report_back", "report_held"]

_log = get_logger("hotseam.reload")


def check_grace(grace: float) -> float:
    """``grace`` if it is a finite number of seconds >= 0.

    Raises:
        TypeError: it is not a number.
        ValueError: it is negative, infinite or NaN.
    """
    if isinstance(grace, bool) or not isinstance(grace, int | float):
        raise TypeError(f"deletion_grace must be a number of seconds >= 0, got {grace!r}")
    if not grace >= 0 or math.isinf(grace):
        raise ValueError(f"deletion_grace must be a finite number of seconds >= 0, got {grace!r}")
    return float(grace)


@dataclass(eq=False, slots=True)
class Hold:
    """One module kept serving while its file is gone."""

    name: str
    path: Path
    """The file that is gone (the module's entry in the index stays there)."""
    until: float
    """When the grace ends (``anyio.current_time()``)."""
    stale: bool = False
    """A plan wanted to execute it meanwhile: it is executed when its file is back."""
    handed: bool = False
    """Its end was handed to the reloader (:meth:`Holds.due`): not handed out again."""


class Holds:
    """The modules of one reloader held by the deletion grace, and when each grace ends."""

    __slots__ = ("_changed", "_holds", "grace")

    def __init__(self, grace: float) -> None:
        self.grace = check_grace(grace)
        self._holds: dict[str, Hold] = {}
        self._changed: anyio.Event | None = None
        """Set when a hold starts: :meth:`due` looks at the times again."""

    def __bool__(self) -> bool:
        return bool(self._holds)

    def __iter__(self) -> Iterator[Hold]:
        return iter(list(self._holds.values()))

    def get(self, name: str) -> Hold | None:
        """The hold of module ``name``, if it is held."""
        return self._holds.get(name)

    def start(self, name: str, path: Path, now: float) -> Hold:
        """Hold module ``name``, whose file ``path`` is gone, until ``now`` plus the grace."""
        hold = self._holds[name] = Hold(name, path, now + self.grace)
        if self._changed is not None:
            self._changed.set()
        return hold

    def end(self, name: str) -> Hold | None:
        """Stop holding ``name`` (its file is back, or the grace is over); its hold."""
        return self._holds.pop(name, None)

    async def due(self) -> AsyncIterator[list[Path]]:
        """Each time graces end, the files of the modules held until then: the consumer's
        plan of them ends each hold (an unload if the file is still gone)."""
        while True:
            self._changed = anyio.Event()
            pending = [hold.until for hold in self._holds.values() if not hold.handed]
            if not pending:
                await self._changed.wait()
            else:
                with anyio.move_on_after(max(min(pending) - anyio.current_time(), 0)):
                    await self._changed.wait()
            now = anyio.current_time()
            over = [h for h in self._holds.values() if not h.handed and h.until <= now]
            for hold in over:
                hold.handed = True
            if over:
                yield sorted(hold.path for hold in over)


def report_held(paths: list[Path], grace: float) -> None:
    """Log, once per plan, the module files found gone and held."""
    _log.info(
        "reload.held",
        paths=[str(path) for path in paths],
        grace=grace,
        summary=f"{_listed(paths)} {'is' if len(paths) == 1 else 'are'} gone: kept serving "
        f"for the deletion grace ({grace:g} s), unloaded then if still gone",
    )


def report_back(paths: list[Path]) -> None:
    """Log, once per plan, the held module files that came back within the grace."""
    _log.info(
        "reload.back",
        paths=[str(path) for path in paths],
        summary=f"{_listed(paths)} {'is' if len(paths) == 1 else 'are'} back within the "
        "deletion grace: reloaded only if it changed, or if a reload meanwhile wanted it",
    )


def _listed(paths: list[Path], most: int = 5) -> str:
    shown = [display_path(path) for path in paths]
    if len(shown) > most:
        return ", ".join(shown[:most]) + f" and {len(shown) - most} more"
    return ", ".join(shown)
