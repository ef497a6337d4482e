"""A long-lived object inside the watched folder: a helper module whose list keeps listeners
(it is reloaded only when it changes, so it outlives the providers that import it)."""

from collections.abc import Callable

BUS: list[Callable[[str], None]] = []
