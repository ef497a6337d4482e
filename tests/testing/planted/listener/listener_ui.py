"""Planted defect: a listener added to a long-lived object on each reload, never removed."""

import planted_bus

from hotseam import Scope


def on_change(event: str) -> None:
    pass


def setup(scope: Scope) -> None:
    planted_bus.BUS.subscribe(on_change)  # PLANTED: no scope.defer to unsubscribe
