"""The status of each watched module, as ``reloader.status()`` reports it."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ._errors import LoadError

__all__ = ["ModuleKind", "ModuleState", "ModuleStatus", "NotLoadedError"]

ModuleKind = Literal["provider", "helper"]
"""A provider module has a ``setup(scope)`` function; a helper has none."""


class ModuleState(enum.Enum):
    """Where a module stands after its latest load attempt."""

    ACTIVE = "active"
    """Its latest content is loaded (and, for a provider, set up and active)."""
    FAILED = "failed"
    """Its latest content failed to load; ``generation`` (if any) is still the one serving."""
    UNLOADED = "unloaded"
    """Its file was deleted (or left the watched paths); nothing of it is active."""


@dataclass(frozen=True, slots=True)
class ModuleStatus:
    """One watched module.

    Attributes:
        path: The module's file.
        module: Its import name (``my_ui``, ``providers.helpers``).
        kind: ``provider`` or ``helper`` for the serving generation (``None`` before any).
        state: See :class:`ModuleState`.
        generation: The number of the generation currently serving, counted from 1 per
            module; ``None`` when none is (never loaded, unloaded, or lost at commit).
        error: The error of the latest failed attempt, or of a crashed background task of
            the serving generation; ``None`` after a clean load.
        load_ms: How long the latest attempt took to read, execute and set up the module.
        imports: The watched modules the serving generation imported while it executed.
    """

    path: Path
    module: str
    kind: ModuleKind | None
    state: ModuleState
    generation: int | None
    error: LoadError | None
    load_ms: float | None
    imports: tuple[str, ...]


class NotLoadedError(KeyError):
    """No watched module was loaded from a path (``Reloader.status_of``): never seen, or
    refused — a symbolic link leading out of the watched paths — with the reason.

    A ``KeyError`` whose ``str()`` is the plain sentence (``KeyError`` would quote it).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message
