"""Watching the journal the torture writes to, and breaking it on purpose (``--sabotage``).

:func:`watch` wraps three methods of one open journal: the winning settlements and the
divergences are reported to the torture; a sabotage, when one is chosen, is done there.
:class:`ApproveOther` is the sabotage of the approvals (``bench/_torture_approvals.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from hotseam import GateVerdict, ToolGate
from hotseam.interaction import AskUserQuestionAnswer
from hotseam.interaction._journal import AskRecord, AskState, Journal, Settlement
from hotseam.interaction._journal._sqlite import SqliteJournal
from hotseam.interaction.journal import AgentRun, JournalDaemon

__all__ = [
    "APPROVING",
    "SABOTAGES",
    "TAMPERING",
    "ApproveOther",
    "patch_faults",
    "patch_replay_position",
    "tamper",
    "watch",
]

SABOTAGES = (
    "no-withdraw",
    "forget-answer",
    "replay-position",
    "answer-twice",
    "touch-ended",
    "keep-removed",
    "no-wait",
    "approve-other",
)
TAMPERING = ("answer-twice", "touch-ended")  # writes to the SQLite file behind the journal
APPROVING = ("approve-other",)  # breaks the tool gate: needs approvals in the scripts


def watch(
    journal: Journal,
    sabotage: str | None,
    on_won: Callable[[AskRecord], None],
    on_diverged: Callable[[str, int, list[AskRecord]], None],
) -> None:
    """Report every winning settlement of ``journal`` (``on_won``) and every divergence
    (``on_diverged``: a resumed run found another question at a position); do
    ``sabotage``'s harm to answers and withdrawals."""
    answer_ask, settle_ask = journal.answer_ask, journal.settle_ask
    abandon_asks = journal.abandon_asks

    def won(settlement: Settlement) -> Settlement:
        if settlement.won:
            on_won(settlement.ask)
        return settlement

    async def answering(ask_id: str, answer: AskUserQuestionAnswer, **kw: Any) -> Settlement:
        if sabotage == "forget-answer":
            return Settlement(True, await journal.get_ask(ask_id))
        settlement = won(await answer_ask(ask_id, answer, **kw))
        if sabotage == "answer-twice" and settlement.won:
            await tamper(
                journal, "UPDATE hotseam_asks SET settled_by = 'again' WHERE id = ?", ask_id
            )
        return settlement

    async def settling(ask_id: str, state: AskState, **kw: Any) -> Settlement:
        if sabotage == "no-withdraw" and state is AskState.WITHDRAWN:
            return Settlement(True, await journal.get_ask(ask_id))
        return won(await settle_ask(ask_id, state, **kw))

    async def abandoning(run_id: str, from_seq: int) -> list[AskRecord]:
        abandoned = await abandon_asks(run_id, from_seq)
        on_diverged(run_id, from_seq, abandoned)
        return abandoned

    journal.answer_ask = answering  # type: ignore[method-assign]
    journal.settle_ask = settling  # type: ignore[method-assign]
    journal.abandon_asks = abandoning  # type: ignore[method-assign]


async def tamper(journal: Journal, statement: str, ask_id: str) -> None:
    """Sabotage: write to the SQLite file behind the journal's back, as a broken engine."""
    await journal._write(lambda db: db.count(statement, (ask_id,)))  # type: ignore[attr-defined]


def patch_replay_position() -> Callable[[], None]:
    """Sabotage ``replay-position``: a resumed run replays the next position's record."""
    real = AgentRun.recorded_at

    def wrong(self: AgentRun, position: int, key: str | None) -> AskRecord | None:
        return real(self, position + 1, key)

    AgentRun.recorded_at = wrong  # type: ignore[method-assign]

    def undo() -> None:
        AgentRun.recorded_at = real  # type: ignore[method-assign]

    return undo


def patch_faults(sabotage: str | None) -> Callable[[], None]:
    """Sabotages of the journal faults: ``keep-removed`` (removed journal files go
    unnoticed: the daemon writes on to them) and ``no-wait`` (a journal out of reach fails
    the write at once, as before hotseam waited for it). Returns the undo."""
    if sabotage == "keep-removed":
        moved = SqliteJournal._moved
        SqliteJournal._moved = lambda self: None  # type: ignore[method-assign]

        def undo_moved() -> None:
            SqliteJournal._moved = moved  # type: ignore[method-assign]

        return undo_moved
    if sabotage == "no-wait":
        persist = JournalDaemon.persist

        async def at_once(self: JournalDaemon, what: str, operation: Any, **kw: Any) -> Any:
            return await operation()

        JournalDaemon.persist = at_once  # type: ignore[method-assign]

        def undo_persist() -> None:
            JournalDaemon.persist = persist  # type: ignore[method-assign]

        return undo_persist
    return lambda: None


class ApproveOther:
    """Sabotage ``approve-other``: a tool gate that lets an approved call run with the
    arguments of the previous call it let run (a decision applied to another call)."""

    def __init__(self, gate: ToolGate) -> None:
        self.gate = gate
        self.previous: BaseModel | None = None

    async def review(self, tool: Any, input: BaseModel, call: Any) -> GateVerdict:
        verdict = await self.gate.review(tool, input, call)
        if verdict.kind != "run" or verdict.input is None:
            return verdict
        previous, self.previous = self.previous, verdict.input
        if previous is None:
            return verdict
        return GateVerdict.run(previous, **(verdict.details or {}))
