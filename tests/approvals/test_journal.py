"""Approvals inside an agent run are recorded in the journal like any ask: the request holds
the approval, so the record's digest is the call's. A resumed run replays a decision for the
same call without asking; a changed call is asked again (its record abandoned)."""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from pydantic import BaseModel

from hotseam import TOOL_GATE, Context, ToolCall, tool
from hotseam.interaction import USER_INTERACTION, AskUserQuestionRequest
from hotseam.interaction._journal import AskState, open_journal
from hotseam.interaction.approvals import HumanGate, call_digest
from hotseam.interaction.journal import JournalDaemon
from hotseam.providers.scripted import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


class DeployInput(BaseModel):
    service: str


class Counting:
    multiple_questions = True

    def __init__(self, *replies: Reply) -> None:
        self.asked = 0
        self.scripted = ScriptedProvider(list(replies))

    async def ask(self, request: AskUserQuestionRequest):  # type: ignore[no-untyped-def]
        self.asked += 1
        return await self.scripted.ask(request)


async def _daemon_life(
    path: Path,
    provider: Counting,
    service: str,
    ran: list[str],
    *,
    finish: bool,
    gate: HumanGate | None = None,
) -> object:
    """One daemon's life: the agent's run calls the gated tool; ``finish`` False leaves the
    run unfinished (the process stops after the call), to resume."""

    @tool("deploy", needs_approval=True)
    async def deploy(input: DeployInput, call: ToolCall) -> str:
        """Deploy."""
        ran.append(input.service)
        return f"deployed {input.service}"

    context = Context("daemon")
    async with (
        open_journal(path) as journal,
        JournalDaemon.open(journal, name="d") as journaling,
        context.scope("ui") as scope,
    ):
        scope.provide(USER_INTERACTION, provider)
        scope.provide(TOOL_GATE, gate if gate is not None else HumanGate())
        scope.register_tool(deploy)
        with anyio.CancelScope() as stop:  # a stop mid-run leaves the run to resume
            async with journaling.run("deployer") as run:
                result = await context.tools.execute("deploy", {"service": service})
                if not finish:
                    stop.cancel()
                    await anyio.lowlevel.checkpoint()
        records = await journal.run_asks(run.record.id)
    return result, records


async def test_a_resumed_run_replays_the_decision_for_the_same_call(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    ran: list[str] = []
    first = Counting(Reply.reject("not now"))
    result, records = await _daemon_life(path, first, "api", ran, finish=False)
    assert first.asked == 1 and result.error["code"] == "APPROVAL_REJECTED"  # type: ignore[attr-defined]
    (record,) = records  # type: ignore[misc]
    assert record.request.approval.digest == call_digest("deploy", {"service": "api"})
    again = Counting()  # nothing scripted: a question asked again would fail
    result, records = await _daemon_life(path, again, "api", ran, finish=True)
    assert again.asked == 0 and ran == []
    assert result.error["code"] == "APPROVAL_REJECTED"  # type: ignore[attr-defined]


async def test_a_resumed_run_asks_again_for_a_changed_call(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    ran: list[str] = []
    await _daemon_life(path, Counting(Reply.approve()), "api", ran, finish=False)
    assert ran == ["api"]
    changed = Counting(Reply.reject("that is the database"))
    result, records = await _daemon_life(path, changed, "db", ran, finish=True)
    assert changed.asked == 1 and ran == ["api"]  # the approval of api did not run db
    assert result.error["code"] == "APPROVAL_REJECTED"  # type: ignore[attr-defined]
    states = sorted(record.state.value for record in records)  # type: ignore[attr-defined]
    assert states == [AskState.ABANDONED.value, AskState.ANSWERED.value]


class AnswersLate:
    """A provider whose human decides too, but only after the fleet inbox did."""

    multiple_questions = True

    def __init__(self, path: Path) -> None:
        self.path = path
        self.asked = 0

    async def ask(self, request: AskUserQuestionRequest):  # type: ignore[no-untyped-def]
        from hotseam.interaction import AskUserQuestionAnswer, QuestionAnswer

        self.asked += 1
        decision, text = request.questions
        async with open_journal(self.path) as other:  # another process's inbox, first
            (entry,) = await other.inbox()
            approve = AskUserQuestionAnswer.of(
                [QuestionAnswer.chosen(decision, ["approve"]), QuestionAnswer.skip(text)],
                entry.ask.request,
            )
            assert (await other.answer_ask(entry.ask.id, approve, by="fleet inbox")).won
        await anyio.sleep(0)
        return AskUserQuestionAnswer.of(  # this surface's human, a moment too late
            [QuestionAnswer.chosen(decision, ["reject"]), QuestionAnswer.chosen(text, custom="no")],
            request,
        )


async def test_two_inboxes_racing_on_one_approval_apply_the_first_decision_once(
    tmp_path: Path,
) -> None:
    """The fleet inbox approves while this daemon's surface rejects: the first decision
    recorded wins everywhere — the call runs once, with the approval, and the late
    rejection is not applied."""
    path = tmp_path / "journal.sqlite3"
    ran: list[str] = []

    @tool("deploy", needs_approval=True)
    async def deploy(input: DeployInput, call: ToolCall) -> str:
        """Deploy."""
        ran.append(input.service)
        return f"deployed {input.service}"

    provider = AnswersLate(path)
    context = Context("daemon")
    async with (
        open_journal(path) as journal,
        JournalDaemon.open(journal, name="d") as journaling,
        context.scope("ui") as scope,
    ):
        scope.provide(USER_INTERACTION, provider)
        scope.provide(TOOL_GATE, HumanGate())
        scope.register_tool(deploy)
        async with journaling.run("deployer") as run:
            result = await context.tools.execute("deploy", {"service": "api"})
        (record,) = await journal.run_asks(run.record.id)
    assert result.to_dict() == {"ok": True, "output": "deployed api"} and ran == ["api"]
    assert record.settled_by == "fleet inbox"


async def test_a_decision_replayed_after_its_expiry_is_refused(tmp_path: Path) -> None:
    """The expiry counts from when the decision was recorded, not from the resume: replayed
    two hours later (the gate's clock moved on) under a one-hour expiry, the call is refused
    ``APPROVAL_EXPIRED`` and does not run; within the hour it runs."""
    import time

    path = tmp_path / "journal.sqlite3"
    ran: list[str] = []
    await _daemon_life(path, Counting(Reply.approve()), "api", ran, finish=False)
    assert ran == ["api"]
    later = HumanGate(expires_in=3600, clock=lambda: time.time() + 7200)
    result, _ = await _daemon_life(path, Counting(), "api", ran, finish=False, gate=later)
    assert result.error["code"] == "APPROVAL_EXPIRED" and ran == ["api"]  # type: ignore[attr-defined]
    soon = HumanGate(expires_in=3600, clock=lambda: time.time() + 60)
    result, _ = await _daemon_life(path, Counting(), "api", ran, finish=True, gate=soon)
    assert result.ok and ran == ["api", "api"]  # type: ignore[attr-defined]
