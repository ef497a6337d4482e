"""Callbacks run once when a registration stops being active (``on_inactive``).

For code waiting to take a registration's place (the reloader retrying a module that lost
a provider conflict). One listener's bug never stops the others or a close.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from ._log import get_logger

_log = get_logger("hotseam.context")
_keys = itertools.count()


class InactiveCallbacks:
    """Callbacks to run once when a registration stops being active (see ``on_inactive``)."""

    __slots__ = ("_callbacks", "_fired")

    def __init__(self) -> None:
        self._callbacks: dict[int, Callable[[], object]] = {}
        self._fired = False

    def add(self, callback: Callable[[], object], done: bool) -> Callable[[], None]:
        """Subscribe ``callback``; at once if ``done`` or already fired. Returns an
        unsubscriber."""
        if done or self._fired:
            callback()
            return _noop
        key = next(_keys)
        self._callbacks[key] = callback

        def remove() -> None:
            self._callbacks.pop(key, None)

        return remove

    def fire(self) -> None:
        """Run every callback once (later subscribers run at once)."""
        self._fired = True
        if not self._callbacks:
            return
        callbacks, self._callbacks = self._callbacks, {}
        for callback in callbacks.values():
            try:
                callback()
            except Exception:  # a listener's bug must not stop a close
                _log.error("registration.inactive_callback_failed", exc_info=True)


def _noop() -> None:
    return None
