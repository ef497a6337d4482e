"""The hook a leak tracker uses to see every scope and registration come and go.

With no tracker installed it costs one global read. ``hotseam.pytest_plugin`` installs
one that records creation stacks and parents, as VS Code's ``DisposableTracker`` does.
"""

from __future__ import annotations

import weakref
from typing import Protocol


class Tracker(Protocol):
    """Receives the life events of scopes and registrations."""

    def track(self, obj: object, parent: object | None) -> None:
        """``obj`` was created, owned by ``parent`` (``None`` for a root)."""

    def disposed(self, obj: object) -> None:
        """``obj`` was disposed."""


_tracker: Tracker | None = None
_long_lived: weakref.WeakSet[object] = weakref.WeakSet()


def get_tracker() -> Tracker | None:
    """Return the installed tracker, or ``None``."""
    return _tracker


def set_tracker(tracker: Tracker | None) -> Tracker | None:
    """Install ``tracker`` (or remove it with ``None``); return the previous one."""
    global _tracker
    previous, _tracker = _tracker, tracker
    return previous


def mark_long_lived(obj: object) -> object:
    """Declare that ``obj`` (a scope or registration) deliberately outlives a test: leak
    checks skip it (not its children). Returns ``obj`` for chaining."""
    _long_lived.add(obj)
    return obj


def is_long_lived(obj: object) -> bool:
    """True if ``obj`` was marked with :func:`mark_long_lived`."""
    try:
        return obj in _long_lived
    except TypeError:
        return False
