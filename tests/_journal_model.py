"""The model of tests/_journal_machine.py: what the machine knows of the daemon process, its
agents and their runs, the asks they make and the writes of another process, and how it
reads a record (the state machine's rules are in _journal_machine.py, its checks in
_journal_checks.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
from hypothesis import strategies as st

from _multi_question_machine import build_question
from hotseam import AbortSignal
from hotseam.interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ErrorCode,
    QuestionAnswer,
)
from hotseam.interaction._journal import (
    AskRecord,
    AskState,
    Journal,
    RunRecord,
    RunState,
)
from hotseam.interaction.journal import AgentRun, JournalDaemon

ENGINES = ("memory", "sqlite")
AGENTS = ("alpha", "beta")
POLL_INTERVAL = 0.01  # SQLite: how soon this process sees another's answer
DELIVERY_WAIT = 5.0  # an ask answered elsewhere must have its answer within this
MAX_AGENT_ASKS = 20
SWAP_WAIT = 30.0
FLEET = "fleet inbox (another process)"
FRESH = st.integers(0, 4).map(lambda i: i == 4)
THEN = st.sampled_from(["wait", "wait", "answer", "answer", "answer", ErrorCode.ASK_DECLINED])
YES_NO = (AskUserQuestionOption("yes"), AskUserQuestionOption("no"))
SEVERAL = "+"  # an agent's question whose text holds it is an ask of several questions
SEVERAL_KINDS = ("one", "many", "free_skip")  # each takes text: another process answers so


class JournalViolation(AssertionError):
    """Invariant 10 broke: an answer lost, delivered twice, to another question or run."""


class AgentFailed(Exception):
    """What an agent raises to end its run as failed."""


@dataclass(eq=False)
class MDaemon:
    """One start of this process as the journal sees it (a JournalDaemon)."""

    name: str
    stop: anyio.Event = field(default_factory=anyio.Event)
    down: anyio.Event = field(default_factory=anyio.Event)
    journaling: JournalDaemon | None = None
    agents: anyio.abc.TaskGroup | None = None
    label: str = ""  # how its settlements are signed in the journal


@dataclass(eq=False)
class MAgent:
    key: str
    inc: Incarnation | None = None  # its task, while it runs
    busy: Any = None  # its ask in flight (an AskRec)


@dataclass(eq=False)
class Incarnation:
    """One call of an agent's function in one daemon: one AgentRun."""

    name: str
    agent: MAgent
    daemon: MDaemon
    fresh: bool
    expected_run: str | None  # the unfinished run it must resume (or abandon, when fresh)
    send: Any = None  # the commands to its task
    run: AgentRun | None = None
    recorded: list[AskRecord] | None = None  # the run's live records when it started
    replaying: bool = True
    position: int = 0
    keys: set[str] = field(default_factory=set)
    ending: str | None = None  # finished | failed: what the machine told it to do
    ended: str | None = None  # finished | failed | cancelled | refused ...
    resumed_with: list[str] | None = None  # the records the AgentRun started with
    read_with: list[str] | None = None  # the records this machine read as it started
    start_checked: bool = False
    end_checked: bool = False


@dataclass(eq=False)
class JournalAsk:
    """What the journal side of an ask (an AskRec of the machine) must become."""

    inc: Incarnation
    position: int
    key: str | None
    digest: str
    expect: str  # new | replay | reattach | diverge
    matched: AskRecord | None  # the record (as the run started) it replays/re-attaches to
    before: frozenset[str]  # the run's records when it was asked
    done: anyio.Event = field(default_factory=anyio.Event)
    record_id: str | None = None
    placed: bool = False


@dataclass(eq=False)
class MWrite:
    """An answer (or, with no text, a dismissal) written by another process."""

    name: str
    ask_id: str
    text: str | None
    was_pending: bool
    answer: AskUserQuestionAnswer | None = None  # what it writes (text: its answer)
    racing: Any = None  # the AskRec whose provider answers in the same turn
    won: bool | None = None
    error: str | None = None
    done: bool = False
    checked: bool = False


def agent_request(question: str, signal: AbortSignal | None) -> AskUserQuestionRequest:
    """What an agent asks for ``question``: yes or no, or (its text holds :data:`SEVERAL`)
    three questions in one ask; the same text always makes the same request (digest)."""
    if SEVERAL in question:
        items = [build_question(kind, question, n + 1) for n, kind in enumerate(SEVERAL_KINDS)]
        return AskUserQuestionRequest.of(items, signal=signal)
    return AskUserQuestionRequest(question, options=YES_NO, allow_custom=True, signal=signal)


def asked_text(request: AskUserQuestionRequest) -> str:
    """The ``question`` :func:`agent_request` made ``request`` of (a record's request)."""
    if len(request.questions) > 1:
        return request.question.rpartition("/")[0]
    return request.question


def written_answer(request: AskUserQuestionRequest, name: str) -> AskUserQuestionAnswer:
    """The answer another process's inbox writes, as ``name``, to ``request``: text, or
    one entry per question (each says who wrote it)."""
    if len(request.questions) == 1:
        return AskUserQuestionAnswer(f"answer from {name}")
    entries = [
        QuestionAnswer.chosen(item, custom=f"answer from {name}:{item.id}")
        for item in request.questions
    ]
    return AskUserQuestionAnswer.of(entries, request)


def outcome_of(record: AskRecord) -> tuple[Any, ...] | None:
    """What an ask of this record returns (None: still pending)."""
    if record.state is AskState.ANSWERED:
        assert record.answer is not None
        return ("answer", record.answer.answer)
    if record.state is AskState.FAILED:
        return ("error", record.code or ErrorCode.ASK_ABORTED)
    if record.state is AskState.PENDING:
        return None
    return ("error", ErrorCode.ASK_ABORTED)


def idle(journal: Journal) -> bool:
    """No operation of this SQLite journal is running in, or waiting for, its worker thread."""
    limiter = journal._limiter  # type: ignore[attr-defined]
    statistics = limiter.statistics()
    return bool(statistics.borrowed_tokens == 0 and statistics.tasks_waiting == 0)


def name_of(item: Any) -> str:
    return "nothing" if item is None else str(item.name)


def gone(record: AskRecord) -> bool:
    return record.state is AskState.ABANDONED


def run_ended(run: RunRecord | None) -> bool:
    return run is not None and run.state is not RunState.RUNNING


def state_of(run: RunRecord | None) -> str:
    return "unknown" if run is None else run.state.value


def settlement_of(record: AskRecord) -> tuple[object, ...]:
    answer = None if record.answer is None else record.answer.answer
    return (record.state.value, record.code, answer, record.settled_by)
