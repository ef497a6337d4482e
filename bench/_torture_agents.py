"""The journal torture's agents: the scripts they run (the same again when they resume),
and what an asker got compared with what its record says (``bench/_torture_journal.py``)."""

from __future__ import annotations

import random
from dataclasses import dataclass

import anyio
from _torture_ledger import Outcome
from torture import _mark

from hotseam import AbortController
from hotseam.interaction import ErrorCode
from hotseam.interaction._journal import AskRecord, AskState

__all__ = [
    "ASKED_AGAIN",
    "DIVERGED",
    "DUPLICATES",
    "ENDED_CHANGED",
    "JOURNAL_ZERO",
    "LEFT_OPEN",
    "LEFT_PENDING",
    "LOST_RUN",
    "NOT_AS_GOT",
    "PARTS_AGAIN",
    "REPLAY",
    "TWICE",
    "Agent",
    "AgentFailedError",
    "Item",
    "abort_after",
    "asked",
    "got",
    "said",
    "settled_as",
    "several",
]

NOT_AS_GOT = "journal: records not settled as the asker got"
LEFT_PENDING = "journal: records left pending when their ask ended"
TWICE = "journal: answers recorded twice"
ENDED_CHANGED = "journal: records of ended runs changed afterwards"
REPLAY = "journal: replays not as recorded"
ASKED_AGAIN = "journal: questions asked again after their answer was recorded"
DUPLICATES = "journal: questions recorded twice"
LOST_RUN = "journal: resumes that lost their run"
DIVERGED = "journal: runs diverged"
LEFT_OPEN = "journal: runs or records left open at the end"
PARTS_AGAIN = "journal: questions of several answered before their ask was cut, asked again"
JOURNAL_ZERO = (
    NOT_AS_GOT,
    LEFT_PENDING,
    TWICE,
    ENDED_CHANGED,
    REPLAY,
    ASKED_AGAIN,
    DUPLICATES,
    LOST_RUN,
    DIVERGED,
    LEFT_OPEN,
    PARTS_AGAIN,
)


@dataclass(frozen=True)
class Item:
    """One ask of an agent's script: the same each time the script runs (a resume)."""

    question: str
    several: bool
    # "signal" (the agent takes it back), "task" (the agent's task cancels the ask: its
    # record stays pending until the run ends), "timeout" (a time limit), or None
    withdraw: str | None
    after: float  # when the signal fires, or the time limit
    # a gated tool call instead of a question: ``deploy(service=<question>, n=approval)``,
    # asked for approval (never withdrawn)
    approval: int | None = None

    @property
    def arguments(self) -> dict[str, object]:
        """The gated call's arguments (the service names the item, so its approval too)."""
        return {"service": self.question, "n": self.approval}


class AgentFailedError(Exception):
    """Raised by an agent whose run fails (its function raises)."""


@dataclass(eq=False)
class Agent:
    """An asker as an agent: its runs and the script of the one it is in."""

    index: int
    rng: random.Random
    runs: int = 0
    script: list[Item] | None = None
    fails: bool = False
    run_id: str | None = None
    resume: dict[str, AskRecord] | None = None  # its run's records at the last restart
    approval_ratio: float = 0.0  # items that are gated tool calls (drawn only when > 0)

    @property
    def key(self) -> str:
        return f"torture-agent-{self.index}"

    def new_script(self, several_ratio: float) -> None:
        self.runs += 1
        rng = self.rng
        script = []
        for number in range(1, rng.randint(2, 8) + 1):
            roll = rng.random()
            withdraw = (
                "signal"
                if roll < 0.1
                else "task"
                if roll < 0.15
                else "timeout"
                if roll < 0.2
                else None
            )
            item = Item(
                f"a{self.index}-r{self.runs}-q{number}",
                rng.random() < several_ratio,
                withdraw,
                rng.uniform(0.001, 0.04),
            )
            if self.approval_ratio and rng.random() < self.approval_ratio:
                # A gated call, never withdrawn: the gate's ask has no signal or time limit
                # of its own, and a task cancelled before the ask took its position (while
                # the gate reads the journal's rules) would shift the run's later positions,
                # so that its resume diverges (the scripts' positions must be the same).
                item = Item(item.question, False, None, item.after, rng.randint(1, 9))
            script.append(item)
        self.script = script
        self.fails = rng.random() < 0.1
        self.run_id = None
        self.resume = None


def asked(record: AskRecord) -> str:
    """The torture's question a record is of (an ask of several: ``<ask>/k1`` -> ``<ask>``;
    an approval: the gated call's service)."""
    approval = record.request.approval
    if approval is not None:
        return str(approval.arguments.get("service"))
    return record.request.question.partition("/")[0]


def several(record: AskRecord) -> bool:
    """The record is of an ask of several questions, answered per question: the torture's
    three questions, or an approval's two (``decision`` and ``text``)."""
    return record.request.approval is not None or "/" in record.request.question


def settled_as(record: AskRecord) -> tuple[object, ...]:
    """What a settled record says, to compare two reads of it."""
    answer = record.answer
    marks = None if answer is None else (answer.answer, tuple(_mark(e) for e in answer.answers))
    return (record.state, record.code, record.settled_by, record.settled_at, marks)


async def abort_after(controller: AbortController, seconds: float) -> None:
    """The agent takes its question back after ``seconds`` (by the request's signal)."""
    await anyio.sleep(seconds)
    controller.abort("the agent took its question back")


def got(outcome: Outcome) -> tuple[object, ...]:
    """What an asker got, as a record would say it."""
    if outcome.answer is not None:
        return ("answered", outcome.answer, outcome.parts)
    if outcome.code == ErrorCode.ASK_ABORTED:
        return ("withdrawn", None)
    return ("failed", outcome.code)


def said(record: AskRecord) -> tuple[object, ...]:
    """What a record says its asker got."""
    if record.state is AskState.ANSWERED:
        answer = record.answer
        assert answer is not None
        parts = {e.id: _mark(e) for e in answer.answers} if several(record) else None
        return ("answered", answer.answer, parts)
    if record.state is AskState.WITHDRAWN:
        return ("withdrawn", None)
    return (record.state.value, record.code)
