"""The ACP agent's sessions, and the runs of the agent function inside them.

A **run** is one call of the agent function: a prompt starts it, and in conversation mode
it outlives that turn (:meth:`Run.end_turn`), hosted by the next prompt. Sessions are kept
in order of last use, so that a client that never sends ``session/close`` still holds a
bounded number of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

import anyio
from acp.exceptions import RequestError

from .._kit import LastUse
from ._turn import PromptTurn

StopReason: TypeAlias = Literal["end_turn", "cancelled"]
DEFAULT_IDLE_TIMEOUT = 3600.0
"""Seconds without a prompt after which a session is released (its run, if any, cancelled)."""


class Run:
    """One call of the agent function, hosted by one prompt turn after another."""

    def __init__(self, turn: PromptTurn) -> None:
        self.turn = turn
        self.stop_reason: StopReason | None = None
        self.error: RequestError | None = None
        self._turn_ended = False
        self._changed = anyio.Event()
        self._done = anyio.Event()

    @property
    def finished(self) -> bool:
        return self.stop_reason is not None or self.error is not None

    def end_turn(self) -> None:
        """End the hosting prompt turn with ``end_turn``; the run goes on (conversation mode)."""
        self._turn_ended = True
        self._changed.set()

    def resume(self) -> None:
        """A new prompt hosts the run: forget an ``end_turn`` nobody saw."""
        self._turn_ended = False

    def finish(self, stop_reason: StopReason) -> None:
        if not self.finished:
            self.stop_reason = stop_reason
        self._changed.set()
        self._done.set()

    def fail(self, error: RequestError) -> None:
        if not self.finished:
            self.error = error
        self._changed.set()
        self._done.set()

    async def wait_finished(self) -> None:
        await self._done.wait()

    async def next_stop(self) -> StopReason:
        """The hosting prompt's stop reason, once the run finishes or ends the turn (or the
        function's failure, as a ``RequestError``)."""
        while True:
            # the flags are set before the event: checked after each wake-up, none is missed
            if self.error is not None:
                raise self.error
            if self.stop_reason is not None:
                return self.stop_reason
            if self._turn_ended:
                self._turn_ended = False
                return "end_turn"
            await self._changed.wait()
            self._changed = anyio.Event()


@dataclass(eq=False, slots=True)
class Session:
    """One ACP session: its working directory, and the run it hosts, if any."""

    id: str
    cwd: str
    last_used: float = 0.0
    run: Run | None = None
    prompting: bool = False

    @property
    def live_run(self) -> Run | None:
        """The run that has not finished yet, if any."""
        run = self.run
        return run if run is not None and not run.finished else None


class Sessions(LastUse[Session]):
    """The sessions of one connection, in order of last use (a prompting one is not idle)."""

    def __init__(
        self,
        *,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(clock, idle_timeout, busy=lambda session: session.prompting)

    def open(self, session_id: str, cwd: str) -> Session:
        session = Session(session_id, cwd)
        self.add(session_id, session)
        return session
