"""Planted defect: a listener added to a watched helper's bus on each reload, never removed."""

import event_bus

from hotseam import Scope


class Listener:
    def on_change(self, event: str) -> None:
        pass


def setup(scope: Scope) -> None:
    event_bus.BUS.append(Listener().on_change)  # PLANTED: no scope.defer to remove it
