"""Refusing registrations made while a hot-reloaded module's body executes.

A registration made at module level (``ctx.provide(...)`` outside ``setup``) belongs to no
generation's scope: nothing disposes it at the next reload, so every save would add one
more provider. The reloader marks the thread executing a module body (:func:`executing`);
:func:`refuse_registration` then fails the load, naming the line.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ._errors import ScopeError

_state = threading.local()

MESSAGE = "register in setup(scope): a module-level registration would outlive its generation"


@contextmanager
def executing(path: str) -> Iterator[None]:
    """Mark this thread as executing the body of the module at ``path`` (nests)."""
    previous: str | None = getattr(_state, "path", None)
    _state.path = path
    try:
        yield
    finally:
        _state.path = previous


def executing_path() -> str | None:
    """The module body this thread is executing, if any."""
    path: str | None = getattr(_state, "path", None)
    return path


def refuse_registration(what: str, location: str) -> None:
    """Raise if a module body is executing in this thread (``location``: the caller).

    Raises:
        ScopeError: code ``MODULE_LEVEL_REGISTRATION``.
    """
    path: str | None = getattr(_state, "path", None)
    if path is None:
        return
    where = location if location.rpartition(":")[0] == path else f"{location}, importing {path}"
    raise ScopeError(
        f"{MESSAGE} ({what} at {where})",
        "MODULE_LEVEL_REGISTRATION",
        details={"location": location, "module": path},
    )


# The registration machinery itself; the caller of these is where a provider or a tool was
# registered (a provider module, a test, or hotseam's own CLI).
_REGISTRATION_MODULES = frozenset(
    {
        "hotseam._core._registry",
        "hotseam._core._context",
        "hotseam._core._scope",
        "hotseam._core._tools",
    }
)


def caller_location(stacklevel: int) -> str:
    """Return ``file:line`` of the nearest caller outside the registration machinery."""
    frame = sys._getframe(stacklevel)
    while frame.f_back is not None and frame.f_globals.get("__name__") in _REGISTRATION_MODULES:
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"
