"""What the journal holds and hands back: frozen records, their states, events and results.

Records are snapshots taken by one read: a :class:`DaemonRecord`'s ``alive`` is its liveness
at that read. Times are seconds since the epoch by the journal's clock (the database
server's on PostgreSQL, so machines with skewed clocks agree on liveness; this process's on
SQLite and in memory). An answer is personal data: it is left out of every ``repr``.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ._errors import JournalError, JournalErrorCode

if TYPE_CHECKING:
    from .._model import AskUserQuestionAnswer, AskUserQuestionRequest, QuestionAnswer


class AskState(enum.StrEnum):
    """Where an ask stands; every state but ``pending`` is final."""

    PENDING = "pending"
    """Recorded, waiting for its answer."""
    ANSWERED = "answered"
    """The first answer was recorded (it is delivered to the run's ask, once)."""
    FAILED = "failed"
    """It ended without an answer; ``code`` says why (``ASK_TIMEOUT``, ``ASK_DECLINED``...)."""
    WITHDRAWN = "withdrawn"
    """The asker took it back (its signal, its timeout, or its run finished)."""
    ABANDONED = "abandoned"
    """Nobody will read it: its run was abandoned, or a resumed run asked something else."""


SETTLED_STATES = frozenset(AskState) - {AskState.PENDING}
"""The final states of an ask."""


class RunState(enum.StrEnum):
    """Where a run stands; every state but ``running`` is final."""

    RUNNING = "running"
    """Unfinished: its owner daemon runs it, or a restarted daemon may resume it."""
    FINISHED = "finished"
    """The agent function returned."""
    FAILED = "failed"
    """The agent function raised."""
    ABANDONED = "abandoned"
    """Given up (a fresh start, an operator): its pending asks were abandoned."""


@dataclass(frozen=True, slots=True)
class DaemonRecord:
    """A process that runs agents and writes to the journal.

    Attributes:
        id: Chosen by the journal at registration.
        name: The daemon's name (``hotseam run --name``).
        host: The machine it runs on.
        pid: Its process id on that machine.
        agent: The agent it runs, when it names one.
        started_at: When it registered.
        heartbeat_at: Its last heartbeat (registration counts as one).
        stopped_at: When it was marked stopped, or ``None``.
        alive: At the read: not stopped, and a heartbeat younger than the journal's
            ``liveness_timeout``.
    """

    id: str
    name: str
    host: str
    pid: int
    agent: str | None
    started_at: float
    heartbeat_at: float
    stopped_at: float | None
    alive: bool


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One call of an agent's function, from its start until it returns, fails or is abandoned.

    Attributes:
        id: Chosen by the journal.
        agent: The agent's key; at most one run of a key is unfinished at a time.
        daemon_id: The daemon that owns it (started it or claimed it last).
        state: See :class:`RunState`.
        started_at: When it started.
        claimed_at: When its owner took it (its start, or its last claim).
        finished_at: When it ended, or ``None`` while it runs.
    """

    id: str
    agent: str
    daemon_id: str
    state: RunState
    started_at: float
    claimed_at: float
    finished_at: float | None

    @property
    def unfinished(self) -> bool:
        """True while the run may still ask, be answered and be resumed."""
        return self.state is RunState.RUNNING


@dataclass(frozen=True, slots=True)
class AskRecord:
    """One question of a run and what became of it.

    Attributes:
        id: The ask's identity, chosen by the asker (stable across a resume).
        run_id: The run that asked it.
        seq: Its position in the run (0, 1, 2...).
        key: The caller's key, when ``ask(..., key=)`` gave one.
        digest: ``question_digest`` of the request: a resumed run replays the record
            only while the question is the same.
        request: The question (without its signal).
        state: See :class:`AskState`.
        code: For ``failed``: the error code.
        answer: For ``answered``: the answer (personal data, left out of ``repr``).
        settled_by: Who settled it, as the settler described itself (an inbox, a host).
        created_at: When it was recorded.
        settled_at: When it left ``pending``, or ``None``.
        partial: For a pending ask of several questions asked one at a time: the answers
            given so far (personal data, left out of ``repr``); a resumed run asks only
            the rest.
    """

    id: str
    run_id: str
    seq: int
    key: str | None
    digest: str
    request: AskUserQuestionRequest
    state: AskState
    code: str | None
    answer: AskUserQuestionAnswer | None = field(repr=False)
    settled_by: str | None
    created_at: float
    settled_at: float | None
    partial: tuple[QuestionAnswer, ...] = field(default=(), repr=False)

    @property
    def pending(self) -> bool:
        """True until the ask is answered or otherwise settled."""
        return self.state is AskState.PENDING


@dataclass(frozen=True, slots=True)
class Settlement:
    """The result of an attempt to settle an ask (answer it, fail it, withdraw it...).

    Attributes:
        won: True when this attempt settled the ask; False when it was settled before.
        ask: The ask as recorded after the attempt: for a loser, what was recorded first,
            when and by whom (``answer``, ``settled_at``, ``settled_by``).
    """

    won: bool
    ask: AskRecord

    def error(self) -> JournalError:
        """The error a loser reports (``ALREADY_ANSWERED`` or ``ASK_NOT_PENDING``).

        Its ``details`` say how the ask was settled, when and by whom; never the answer.
        """
        ask = self.ask
        details = {
            "ask_id": ask.id,
            "state": ask.state.value,
            "code": ask.code,
            "settled_at": ask.settled_at,
            "settled_by": ask.settled_by,
        }
        if ask.state is AskState.ANSWERED:
            by = f" by {ask.settled_by}" if ask.settled_by else ""
            return JournalError(
                f"ask {ask.id} was already answered{by}",
                JournalErrorCode.ALREADY_ANSWERED,
                details=details,
            )
        return JournalError(
            f"ask {ask.id} is no longer pending: it was {ask.state.value}",
            JournalErrorCode.ASK_NOT_PENDING,
            details=details,
        )


@dataclass(frozen=True, slots=True)
class InboxEntry:
    """An ask with its run and the run's daemon (is the asker up?): what a fleet inbox shows
    of a pending ask, and an operator's listing of any ask."""

    ask: AskRecord
    run: RunRecord
    daemon: DaemonRecord


@dataclass(frozen=True, slots=True)
class RunOverview:
    """A run with its owner daemon and how many asks it holds, for an operator's listing.

    Attributes:
        run: The run.
        daemon: The daemon that owns it (started it, or claimed it last).
        asks: How many of its asks are in each state (states it has none of are left out).
    """

    run: RunRecord
    daemon: DaemonRecord
    asks: Mapping[AskState, int]

    @property
    def total(self) -> int:
        """How many asks the run holds."""
        return sum(self.asks.values())


@dataclass(frozen=True, slots=True)
class JournalEvent:
    """A change seen on the journal's change feed.

    ``created``: an ask was recorded; ``settled``: it left ``pending`` (``state`` says how);
    ``cleared``: an abandoned ask was removed from the journal (``Journal.clear``: every
    inbox drops it); ``resync``: changes may have been missed (a lost database connection, a
    reader too slow to keep up): list again. A subscriber is told an ask's latest state; on
    SQLite across processes, an ask created and settled between two polls is told once, as
    ``settled``.
    """

    kind: Literal["created", "settled", "cleared", "resync"]
    ask_id: str | None = None
    run_id: str | None = None
    state: AskState | None = None


@dataclass(frozen=True, slots=True)
class PurgeReport:
    """How many records a purge removed."""

    asks: int
    runs: int
    daemons: int


CLEARED = "cleared"
"""How the change log (SQLite) and notifications (PostgreSQL) mark an ask that was cleared,
where other changes carry the ask's new state."""


def change_event(ask_id: str, run_id: str, mark: str) -> JournalEvent:
    """The feed's event for a change an engine logged or notified as ``(ask, run, mark)``,
    ``mark`` being the ask's new state or :data:`CLEARED`.

    Raises:
        ValueError: ``mark`` is neither.
    """
    if mark == CLEARED:
        return JournalEvent("cleared", ask_id, run_id)
    state = AskState(mark)
    return JournalEvent(
        "created" if state is AskState.PENDING else "settled", ask_id, run_id, state
    )


def question_digest(request: AskUserQuestionRequest) -> str:
    """A digest of what the human is asked (question, header, options, free text allowed).

    The asking agent and the signal are left out: the run already names the agent. A
    resumed run replays a recorded answer only while the digest is the same.
    """
    data: dict[str, Any] = request.to_dict()
    data.pop("agent", None)
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
