"""How the reloader watches: the watch tuning in one frozen object, checked when it is made.

``Reloader(ctx, paths, watch=WatchOptions(polling=True))`` rather than eight loose keywords
beside the reloader's own: like httpx's ``Timeout`` and ``Limits``, the knobs that go
together are one value, validated once with an error naming the field, and passed on (the
CLI builds one from its flags and ``[tool.hotseam]``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._watcher import PollingWatcher, Watcher, WatchfilesWatcher

__all__ = ["WatchOptions"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchOptions:
    """The watch tuning of a :class:`Reloader` (``watch=WatchOptions(...)``).

    Args:
        watcher: A custom :class:`Watcher` (overrides ``polling`` and the native and
            polling timings below).
        polling: Scan the folders instead of using native notifications (network mounts,
            containers); changes are still decided by content hash.
        debounce_ms: Native watching: the longest a batch of changes is held open.
        step_ms: Native watching: how long changes must pause before a batch is reported
            (``0 < step_ms <= debounce_ms``).
        poll_interval: Polling: seconds between scans.
        root_check: Seconds between checks that each watched path still leads to the folder
            watched: a folder replaced at its path (``rm -rf`` and made again, an atomic
            deploy by renames, a parent swapped) is watched again, and a path given through
            a symbolic link that is pointed elsewhere (``ln -sfn``) is followed; what
            appeared, changed or vanished in the swap is applied.
        coalesce: Seconds after a reload during which further changes are gathered into
            the next one (a lone change is applied at once).
        deletion_grace: Seconds a loaded module whose file (or folder) is gone keeps
            serving before it is unloaded (default 0: unloaded at once; ``hotseam dev`` and
            ``run`` use 2). A file back within the grace (``git checkout``, ``git stash``,
            an editor that deletes then writes) is reloaded if it changed, and nothing
            happens if it did not; whatever plans a reload meanwhile (a save of a module
            it imports, :meth:`Reloader.reload`) leaves it serving. See ``docs/reload.md``.

    Raises:
        TypeError: a field of the wrong type (the message names it).
        ValueError: a field out of range (the message names it and its range).
    """

    watcher: Watcher | None = None
    polling: bool = False
    debounce_ms: int = 50
    step_ms: int = 8
    poll_interval: float = 0.3
    root_check: float = 1.0
    coalesce: float = 0.1
    deletion_grace: float = 0.0

    def __post_init__(self) -> None:
        if self.watcher is not None and not callable(getattr(self.watcher, "open", None)):
            raise TypeError(f"watcher must be a Watcher (or None), got {self.watcher!r}")
        if not isinstance(self.polling, bool):
            raise TypeError(f"polling must be True or False, got {self.polling!r}")
        for name in ("debounce_ms", "step_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be a whole number of milliseconds, got {value!r}")
        if self.step_ms <= 0:
            raise ValueError(f"step_ms must be > 0, got {self.step_ms!r}")
        if self.debounce_ms < self.step_ms:
            raise ValueError(
                f"debounce_ms must be >= step_ms ({self.step_ms}), got {self.debounce_ms!r}"
            )
        for name, zero in (
            ("poll_interval", False),
            ("root_check", False),
            ("coalesce", True),
            ("deletion_grace", True),
        ):
            value = getattr(self, name)
            bound = ">= 0" if zero else "> 0"
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{name} must be a number of seconds {bound}, got {value!r}")
            if math.isnan(value) or math.isinf(value) or value < 0 or (value == 0 and not zero):
                message = f"{name} must be a finite number of seconds {bound}, got {value!r}"
                raise ValueError(message)

    def make_watcher(self) -> Watcher:
        """The watcher these options describe: the custom one, polling, or native."""
        if self.watcher is not None:
            return self.watcher
        if self.polling:
            return PollingWatcher(interval=self.poll_interval)
        return WatchfilesWatcher(
            debounce_ms=self.debounce_ms, step_ms=self.step_ms, root_check=self.root_check
        )
