"""Importing the agent's module in a worker thread, bounded by ``--import-timeout``.

The agent's module body is given what a provider module's body gets: the reloader's
:class:`~hotseam.reload.Worker` executes it in a daemon thread, so a slow body leaves
the event loop serving, and one still running at its time bound is abandoned (Python cannot
stop a thread): the module it makes is never installed, and an error names its line."""

from __future__ import annotations

import functools

import anyio

from ..reload import SLOW_NOTICE, Worker, current_run, report_slow
from ._agent import (
    AgentFunction,
    AgentLoadError,
    ImportAttempt,
    load_agent,
    shown_location,
    shown_path,
)

__all__ = ["AgentImporter", "load_agent_within"]


def load_agent_within(spec: str, timeout: float) -> AgentFunction:
    """:func:`~hotseam.cli._agent.load_agent`, its module body executed in a worker thread and
    abandoned past ``timeout`` seconds, for the start of a command (before its event loop).

    Raises:
        AgentLoadError: as ``load_agent``, or the body overran ``timeout`` (naming its line)."""
    importer = AgentImporter(spec, timeout)
    try:
        return anyio.run(functools.partial(importer.load, fresh=False))
    finally:
        importer.close()


class AgentImporter:
    """Imports the agent's module in a worker thread, bounded by ``timeout`` seconds: one
    thread per command, replaced after an import was abandoned. A body still running after
    :data:`~hotseam.reload._events.SLOW_NOTICE` seconds is named in a ``reload.slow`` line."""

    def __init__(self, spec: str, timeout: float) -> None:
        self._spec = spec
        self._timeout = timeout
        self._worker = Worker()

    def close(self) -> None:
        """Let the idle thread end."""
        self._worker.close()

    async def load(self, *, fresh: bool) -> AgentFunction:
        """Execute the module (again, with ``fresh``) and return the agent function.

        Raises:
            AgentLoadError: as :func:`load_agent`, or for a body abandoned at the time bound."""
        attempt = ImportAttempt()
        loaded: list[AgentFunction] = []

        def step() -> None:
            function = load_agent(self._spec, fresh=fresh, attempt=attempt)
            run = current_run()
            if run is not None and run.abandoned:
                attempt.revert()  # it ended after its time bound: nothing of it is used
                return
            loaded.append(function)

        def slow(_index: int) -> None:
            if attempt.file is not None:
                report_slow("executing", attempt.file, attempt.name or "", self._timeout)

        abandoned = True
        try:
            run, stuck = await self._worker.run(
                f"executing the agent {self._spec}",
                [step],
                self._timeout,
                on_slow=(SLOW_NOTICE, slow),
            )
            abandoned = stuck is not None
        finally:
            if abandoned:  # at the time bound, or the command stops meanwhile
                attempt.revert()
        if stuck is not None:
            file = attempt.file
            watched = [str(file)] if file is not None else []
            where = run.location(watched) or (str(file) if file is not None else self._spec)
            shown = shown_path(file) if file is not None else attempt.name
            raise AgentLoadError(
                f"--agent {self._spec!r}: executing {shown} did not finish within "
                f"{self._timeout:g} s (stuck at {shown_location(where)}); abandoned: its "
                "thread runs on, and nothing it creates is used"
            )
        if run.error is not None:
            raise run.error
        return loaded[0]
