"""A long-lived object outside the reloaded folder: an event bus that keeps its listeners."""

from collections.abc import Callable


class Bus:
    def __init__(self) -> None:
        self.listeners: list[Callable[[str], None]] = []

    def subscribe(self, listener: Callable[[str], None]) -> None:
        self.listeners.append(listener)


BUS = Bus()
