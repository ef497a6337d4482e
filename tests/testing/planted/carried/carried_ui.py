"""Planted defect: a closable value carried across reloads with nothing to close it."""

from hotseam import Scope


class Buffer:
    def close(self) -> None:
        pass


def setup(scope: Scope) -> None:
    scope.carry("buffer", Buffer)  # PLANTED: no dispose=, not a context manager
