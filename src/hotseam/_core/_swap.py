"""A provider swap in progress: seams (and tools) changing hands as one step.

Callers that find no provider for a seam a running swap covers wait for it to end (see
``Context.swap``); the context creates and ends it, and is known to it only by name.
"""

from __future__ import annotations

from typing import Any, Protocol

import anyio

from ._seam import Seam

DEFAULT_SWAP_WAIT = 10.0
"""Seconds a caller that finds no provider (or tool) waits for a running swap to end."""


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class Swap:
    """A provider swap in progress; see ``Context.swap``."""

    __slots__ = ("_finished", "context", "error", "seams", "tools")

    def __init__(
        self,
        context: _Named,
        seams: frozenset[Seam[Any]] | None,
        tools: frozenset[str] = frozenset(),
    ) -> None:
        self.context = context
        self.seams = seams
        self.tools = tools
        self.error: BaseException | None = None
        self._finished = anyio.Event()

    def __repr__(self) -> str:
        names = "all seams" if self.seams is None else sorted(s.name for s in self.seams)
        return f"<Swap {self.context.name!r} {names}>"

    def covers(self, seam: Seam[Any]) -> bool:
        """True if callers looking for ``seam`` should wait for this swap."""
        return self.seams is None or seam in self.seams

    def covers_tool(self, name: str) -> bool:
        """True if callers of the tool ``name`` should wait for this swap."""
        return self.seams is None or name in self.tools

    @property
    def finished(self) -> bool:
        """True once the swap ended (with or without a new provider)."""
        return self._finished.is_set()

    def fail(self, error: BaseException) -> None:
        """Record why the swap could not install a replacement (waiters get it as cause)."""
        self.error = error
