"""The journal torture with approvals: some of an agent's script items are gated tool calls.

    .venv/bin/python bench/torture.py --journal sqlite [--approvals 0.2] [--sabotage approve-other]

A share of the items of each agent's script (``--approvals``, 0.2 by default with
``--journal``) is a call ``ctx.tools.execute("deploy", {"service": <item>, "n": ...})`` of a
tool registered with ``needs_approval=True``, gated by :class:`HumanGate` (a new one in each
life of the daemon) as ``TOOL_GATE``. Its approval is an ask of the run like the others —
recorded, replayed on a resume, re-attached when pending — asked through the active provider
module of the reload torture as two questions, ``decision`` and ``text``. The providers
answer it (:class:`ApprovalLedger`) with a decision picked from the call's digest: approve,
edit (``n`` changed and ``note`` naming the answer), reject or respond, the text a mark naming
the item and the generation (an edit's: its ``note``); a provider showing one question at a
time gets the two apart, so a reload can land between them. Its handler records in the
ledger every run, with the arguments it got; what the gate's ask returned is tapped
(:func:`tap_gate_asks`) to know the decision the gate got.

An approval is an ask of two questions answered per question, as the asks of several: its
marks are checked by *questions lost* / *answered twice* / *asks half-answered* (the
per-question forms of *answers discarded* / *given twice*), its record by every journal
counter (settled as the gate got it, replayed as recorded...).

**Must be 0** besides the journal torture's:

* *decisions applied to another call* — the tool ran, for a call, with arguments whose
  digest is not the one its decision lets run (the approved call's, or for an edit the edited
  arguments'), or not one a provider decided for that call (the ledger);
* *decisions used twice* — the tool ran twice with one decision's arguments in one life of
  the daemon (a resumed run replays the decision and runs its step again: counted apart, as
  *tool runs again by a resumed run*);
* *approvals asked again after their decision was recorded* — a resumed run's approval whose
  record was settled was put to a provider again (the journal's replay must answer it);
* *approved calls that did not run / rejected calls that ran* — the tool ran for a call whose
  decision lets nothing run (rejected, responded, or no decision), did not run for one
  approved or edited (its ask not cut), or the call's result is not its decision's.

``--sabotage approve-other`` (:class:`~_torture_sabotage.ApproveOther`) lets an approved call
run with the arguments of the previous call: the counters above must catch it.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
from _torture_agents import NOT_AS_GOT, Item
from _torture_journal import JOURNAL_FAILED, JournalTorture
from _torture_ledger import Generation, Ledger, Outcome, Report, Settings
from _torture_sabotage import ApproveOther
from pydantic import BaseModel
from torture import _mark

import hotseam.interaction._human_gate as _human_gate  # its ``ask``, tapped
from hotseam import TOOL_GATE, Tool, ToolCall, ToolResult
from hotseam.interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    QuestionAnswer,
    UserInteractionError,
)
from hotseam.interaction._journal import AskRecord, AskState, Journal, JournalError
from hotseam.interaction.approvals import (
    DECISION_ID,
    TEXT_ID,
    Approval,
    ApprovalAnswerError,
    ApprovalDecision,
    Decision,
    HumanGate,
    call_digest,
    canonical_json,
    read_decision,
)
from hotseam.interaction.journal import AgentRun

__all__ = [
    "APPLIED_ELSEWHERE",
    "APPROVALS",
    "APPROVAL_ZERO",
    "ASKED_AGAIN",
    "RUN_MISMATCH",
    "USED_TWICE",
    "ApprovalLedger",
    "ApprovalTorture",
    "run_approval_torture",
]

APPROVALS = 0.2
"""The share of script items that are gated calls, by default with ``--journal``."""
TOOL = "deploy"

APPLIED_ELSEWHERE = "approvals: decisions applied to another call"
USED_TWICE = "approvals: decisions used twice"
ASKED_AGAIN = "approvals: approvals asked again after their decision was recorded"
RUN_MISMATCH = "approvals: approved calls that did not run / rejected calls that ran"
APPROVAL_ZERO = (APPLIED_ELSEWHERE, USED_TWICE, ASKED_AGAIN, RUN_MISMATCH)


class DeployInput(BaseModel):
    """The gated tool's input: ``note`` is set by an edit (it names the answer)."""

    service: str
    n: int
    note: str = ""


def output_of(arguments: Any) -> str:
    """What the tool returns for ``arguments`` (so a result tells which it ran with)."""
    note = arguments.get("note") or ""
    return f"deployed {arguments['service']} x{arguments['n']}" + (f" ({note})" if note else "")


def choose(approval: Approval) -> Decision:
    """The decision every provider makes for ``approval``: from its digest, 40 % approve,
    20 % each edit, reject and respond (among those offered)."""
    roll = int(approval.digest[:8], 16) % 10
    wanted = Decision.APPROVE if roll < 4 else Decision.EDIT if roll < 6 else Decision.REJECT
    if roll >= 8:
        wanted = Decision.RESPOND
    return wanted if wanted in approval.decisions else approval.decisions[0]


def edited(approval: Approval, mark: str) -> dict[str, Any]:
    """An edit's arguments: ``n`` changed, ``note`` the answer's mark."""
    arguments = dict(approval.arguments)
    arguments["n"] = int(arguments["n"]) + 100
    arguments["note"] = mark
    return arguments


# -- the providers' side: answering an approval, the tool's runs ----------------------------


@dataclass(frozen=True)
class ToolRun:
    """One run of the gated tool: for which call (the attempt), with what."""

    attempt: Attempt | None
    arguments: dict[str, Any]
    digest: str


class ApprovalLedger(Ledger):
    """The torture's ledger, answering approvals too and recording the tool's runs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # by item: the digests of the calls the providers' decisions let run
        self.decided: defaultdict[str, set[str]] = defaultdict(set)
        self.decisions: Counter[str] = Counter()  # by decision, as providers gave them
        self.runs: list[ToolRun] = []

    def asked_keys(self, request: AskUserQuestionRequest) -> list[str]:
        approval = request.approval
        if approval is None:
            return super().asked_keys(request)
        service = approval.arguments["service"]
        return [f"{service}/{question.id}" for question in request.questions]

    def answer(
        self, request: AskUserQuestionRequest, generation: Generation
    ) -> AskUserQuestionAnswer:
        """An approval's answer: the decision picked from its digest, the text a mark
        naming the item and the generation (an edit's: its arguments, ``note`` the mark)."""
        approval = request.approval
        if approval is None:
            return super().answer(request, generation)
        service = str(approval.arguments["service"])
        decision = choose(approval)
        entries = []
        for question in request.questions:
            if question.id == DECISION_ID:
                entry = QuestionAnswer.chosen(question, [decision.value])
                self.decisions[decision.value] += 1
                if decision is Decision.APPROVE:
                    self.decided[service].add(approval.digest)
            elif question.id == TEXT_ID:
                mark = f"{service}/{TEXT_ID}@{generation!r}"
                text = mark
                if decision is Decision.EDIT:
                    arguments = edited(approval, mark)
                    text = canonical_json(arguments)
                    self.decided[service].add(call_digest(approval.tool, arguments))
                entry = QuestionAnswer.chosen(question, custom=text)
            else:  # not an approval's question: a mark, as for any other
                entry = QuestionAnswer.chosen(question, custom=f"{service}/{question.id}")
            entries.append(entry)
            self.returned_parts[f"{service}/{question.id}"].append(_mark(entry))
        return AskUserQuestionAnswer.of(entries, request)

    def ran(self, arguments: dict[str, Any]) -> None:
        """The tool's handler ran with ``arguments`` (for the call of the current attempt)."""
        attempt = ATTEMPT.get(None)
        run = ToolRun(attempt, arguments, call_digest(TOOL, arguments))
        self.runs.append(run)
        if attempt is not None:
            attempt.runs.append(run)


# -- the agent's side: one gated call -------------------------------------------------------


@dataclass(eq=False)
class Attempt:
    """One gated call of an item, in one life of the daemon: what the gate's ask returned,
    the tool's runs, the call's result."""

    item: Item
    life: int
    asked: list[tuple[AskUserQuestionRequest, AskUserQuestionAnswer]] = field(default_factory=list)
    errors: list[Exception] = field(default_factory=list)
    runs: list[ToolRun] = field(default_factory=list)
    result: ToolResult | None = None

    def decision(self) -> ApprovalDecision | None:
        """The decision the gate got (its last answer read back), or None."""
        if not self.asked:
            return None
        request, answer = self.asked[-1]
        assert request.approval is not None
        try:
            return read_decision(request.approval, answer, input_model=DeployInput)
        except ApprovalAnswerError:
            return None


ATTEMPT: ContextVar[Attempt | None] = ContextVar("torture_attempt", default=None)
"""The gated call the agent's task is making (the gate asks, and the tool runs, in it)."""


def tap_gate_asks() -> Callable[[], None]:
    """Record, in the current attempt, what each ask of the gate returned or raised: the
    decision the gate got is what its ask returned (a reply's text included, which the gate
    does not pass on). Returns the undo."""
    real = _human_gate.ask

    async def tapped(request: AskUserQuestionRequest, **kwargs: Any) -> AskUserQuestionAnswer:
        attempt = ATTEMPT.get(None)
        try:
            answer = await real(request, **kwargs)
        except Exception as error:
            if attempt is not None:
                attempt.errors.append(error)
            raise
        if attempt is not None:
            attempt.asked.append((request, answer))
        return answer

    _human_gate.ask = tapped  # type: ignore[assignment]

    def undo() -> None:
        _human_gate.ask = real

    return undo


class ApprovalTorture(JournalTorture):
    """The journal torture whose agents also make gated calls (see the module docstring)."""

    def __init__(
        self,
        folder: Path,
        settings: Settings,
        engine: str,
        *,
        approvals: float = APPROVALS,
        **kwargs: Any,
    ) -> None:
        if not 0 < approvals <= 1:
            raise ValueError(f"approvals must be in (0, 1], got {approvals}")
        self.approval_ratio = approvals
        self.life = 0
        self.tool = Tool(
            TOOL, "Deploy a service (torture).", DeployInput, self.deploy, needs_approval=True
        )
        super().__init__(folder, settings, engine, **kwargs)
        for agent in self.agents:
            agent.approval_ratio = approvals
        self.approval_counts = self.report.section("approvals")

    @property
    def book(self) -> ApprovalLedger:
        assert isinstance(self.ledger, ApprovalLedger)
        return self.ledger

    def make_ledger(self, rng: Any) -> Ledger:
        return ApprovalLedger(rng, self.settings)

    def make_report(self) -> Report:
        report = super().make_report()
        report.title = report.title.replace(
            f"({self.engine}", f"({self.engine}, approvals {self.approval_ratio:g}"
        )
        report.zero.update(dict.fromkeys(APPROVAL_ZERO, 0))
        return report

    async def run(self) -> Report:
        undo = tap_gate_asks()
        try:
            return await super().run()
        finally:
            undo()

    @contextlib.asynccontextmanager
    async def incarnation(self, shared: Journal | None, number: int) -> AsyncIterator[Journal]:
        """As the journal torture's, with this life's gate (a new process's) and the tool."""
        async with (
            super().incarnation(shared, number) as journal,
            self.context.scope("approvals") as scope,
        ):
            gate = HumanGate()
            scope.provide(
                TOOL_GATE, ApproveOther(gate) if self.sabotage == "approve-other" else gate
            )
            scope.register_tool(self.tool)
            self.life = number
            yield journal

    async def deploy(self, input: DeployInput, call: ToolCall) -> str:
        """The gated tool: records that it ran, with what, in the ledger."""
        arguments = input.model_dump(mode="json")
        self.book.ran(arguments)
        await anyio.lowlevel.checkpoint()  # a cancellation may come as it runs
        return output_of(arguments)

    # -- one gated call -----------------------------------------------------------------------

    async def ask_once(
        self, question: str, cancel_after: float, cancel: bool, several: bool = False
    ) -> Outcome:
        item = self.items.get(question)
        if item is None or item.approval is None:
            return await super().ask_once(question, cancel_after, cancel, several)
        return await self.call_gated(item, cancel_after, cancel)

    async def call_gated(self, item: Item, cancel_after: float, cancel: bool) -> Outcome:
        """Make the item's gated call; its outcome is what the gate's ask returned (the
        decision's two answers, or how the ask failed), as an ask's would be."""
        question = item.question
        started = anyio.current_time()
        outcome = self.outcomes[question] = Outcome(question, started)
        asks = self.report.asks
        asks["started"] += 1
        self.approval_counts["gated calls"] += 1
        attempt = Attempt(item, self.life)
        token = ATTEMPT.set(attempt)
        try:
            with anyio.move_on_after(self.settings.hang_after) as bound:
                with anyio.CancelScope() as harness:
                    if cancel:
                        harness.deadline = started + cancel_after
                    attempt.result = await self.context.tools.execute(TOOL, item.arguments)
                outcome.cancelled = harness.cancelled_caught
            outcome.hung = bound.cancelled_caught
        except anyio.get_cancelled_exc_class():  # a restart: what ran is checked all the same
            self.read_attempt(attempt, outcome)
            self.check_runs(attempt, cut=True)
            raise
        finally:
            ATTEMPT.reset(token)
        self.read_attempt(attempt, outcome)
        outcome.ended = anyio.current_time()
        if outcome.hung:
            asks["hung"] += 1
            self.report.count(
                "asks hung", f"{question}: no outcome after {self.settings.hang_after} s"
            )
        elif outcome.cancelled:
            asks["cancelled by the harness"] += 1
        elif outcome.parts is not None:
            asks["answered"] += 1
            self.approval_counts["approvals answered"] += 1
            self.check_approval_parts(item, outcome.parts, attempt.decision())
        elif outcome.legitimate:
            asks["failed legitimately"] += 1
            self.report.legitimate[str(outcome.code)] += 1
        else:
            asks["failed, unexplained"] += 1
            self.report.unexplained[str(outcome.code)] += 1
            errors = [f"{type(e).__name__}: {e}" for e in attempt.errors]
            result = attempt.result.to_dict() if attempt.result is not None else None
            self.report.count(
                "unexplained failures",
                f"{question} (gated) failed with {outcome.code}: {errors or result}",
            )
        self.check_runs(attempt, cut=outcome.cancelled or outcome.hung)
        return outcome

    def read_attempt(self, attempt: Attempt, outcome: Outcome) -> None:
        """The outcome of the gate's ask: its answer, or how it failed."""
        if attempt.asked:
            answer = attempt.asked[-1][1]
            outcome.answer = answer.answer
            outcome.parts = {entry.id: _mark(entry) for entry in answer.answers}
            return
        if attempt.errors:
            error = attempt.errors[-1]
            if isinstance(error, JournalError):  # must have waited for the journal
                self.report.count(JOURNAL_FAILED, f"{attempt.item.question}: gated: {error}")
            outcome.code = str(getattr(error, "code", None) or type(error).__name__)
            if isinstance(error, UserInteractionError):
                outcome.legitimate = self.legitimate(outcome, error)
            return
        result = attempt.result
        if result is not None and result.error is not None:  # refused before any ask
            outcome.code = str(result.error.get("code"))

    def check_approval_parts(
        self, item: Item, parts: dict[str, str], decision: ApprovalDecision | None
    ) -> None:
        """Both questions answered, each for this call: the decision its digest picks, the
        text naming the item."""
        question = item.question
        if sorted(parts) != sorted([DECISION_ID, TEXT_ID]):
            self.report.count(
                "asks half-answered", f"{question} (approval): answers for {sorted(parts)}"
            )
            return
        approval = Approval.of(
            TOOL, DeployInput.model_validate(item.arguments).model_dump(mode="json")
        )
        if decision is None or decision.decision is not choose(approval):
            self.report.count("wrong question", f"{question} (approval) got {parts}")
        text = parts[TEXT_ID]
        if text.startswith("{"):
            text = str(json.loads(text).get("note", ""))
        if text.partition("@")[0] != f"{question}/{TEXT_ID}":
            self.report.count("wrong question", f"{question}/{TEXT_ID} got {parts[TEXT_ID]}")

    def check_runs(self, attempt: Attempt, *, cut: bool) -> None:
        """The tool ran as the decision the gate got says: with its arguments, once, and only
        for a decision to run; the call's result is its decision's (unless cut)."""
        question = attempt.item.question
        decision = attempt.decision()
        decided = self.book.decided.get(question, set())
        for run in attempt.runs:
            if decision is None or not decision.runs:
                what = "no decision" if decision is None else decision.decision.value
                self.report.count(RUN_MISMATCH, f"{question}: ran {run.arguments} on {what}")
            elif run.digest != decision.digest or run.digest not in decided:
                self.report.count(
                    APPLIED_ELSEWHERE,
                    f"{question}: {decision.decision.value} of {dict(decision.arguments or {})} "
                    f"ran {run.arguments}",
                )
        if cut:
            self.approval_counts["gated calls cut (a restart, the task cancelled)"] += 1
            return
        result = attempt.result
        if decision is None:
            if result is not None and result.ok:
                self.report.count(RUN_MISMATCH, f"{question}: no decision; got {result.to_dict()}")
            return
        self.approval_counts[f"decisions the gate got: {decision.decision.value}"] += 1
        expected = expected_result(decision)
        got = None if result is None else result.to_dict()
        if decision.runs and not attempt.runs:
            self.report.count(RUN_MISMATCH, f"{question}: {decision.decision.value}, never ran")
        elif got is None or not matches(got, expected):
            self.report.count(
                RUN_MISMATCH, f"{question}: {decision.decision.value}, got {got}, not {expected}"
            )

    # -- the journal's checks, for approvals ----------------------------------------------------

    def calls_of(self, item: Item) -> int:
        if item.approval is None:
            return super().calls_of(item)
        calls = self.book.calls
        return calls[f"{item.question}/{DECISION_ID}"] + calls[f"{item.question}/{TEXT_ID}"]

    def cut(self, item: Item) -> None:
        super().cut(item)
        if item.approval is not None:
            returned = self.book.returned_parts
            self.parts_cut.update(
                key for n in (DECISION_ID, TEXT_ID) if returned.get(key := f"{item.question}/{n}")
            )

    async def check_record(
        self,
        run: AgentRun,
        item: Item,
        outcome: Outcome,
        recorded: AskRecord | None,
        calls: int,
    ) -> None:
        """As for a question; an approval's record settled before the resume was asked of
        nobody (counted here, the base given the calls as they are now)."""
        if item.approval is not None:
            now = self.calls_of(item)
            if recorded is not None and not recorded.pending:
                self.approval_counts[f"replayed: {recorded.state.value}"] += 1
                if now != calls:
                    self.report.count(
                        ASKED_AGAIN, f"{item.question}: put to a provider again ({now - calls})"
                    )
            calls = now
        await super().check_record(run, item, outcome, recorded, calls)

    def check_cancelled(self, question: str, record: AskRecord | None) -> None:
        """An approval answered as its task was cancelled has the answers providers gave."""
        if (
            record is not None
            and record.request.approval is not None
            and record.state is AskState.ANSWERED
            and record.answer is not None
        ):
            returned = self.book.returned_parts
            for entry in record.answer.answers:
                if _mark(entry) not in returned.get(f"{question}/{entry.id}", []):
                    self.report.count(
                        NOT_AS_GOT, f"{question}/{entry.id}: answered {_mark(entry)}; not given"
                    )
        super().check_cancelled(question, record)

    def tally(self) -> None:
        """Each decision used once in a life of the daemon (a resumed run's step runs again
        on the replayed decision: counted apart)."""
        super().tally()
        uses: Counter[tuple[int, str]] = Counter()
        lives: defaultdict[str, set[int]] = defaultdict(set)
        for run in self.book.runs:
            life = run.attempt.life if run.attempt is not None else 0
            uses[life, run.digest] += 1
            lives[run.digest].add(life)
        for (life, digest), count in sorted(uses.items()):
            if count > 1:
                ran = [r.arguments for r in self.book.runs if r.digest == digest]
                self.report.count(USED_TWICE, f"life {life}: ran {count}x with {ran[0]}")
        counts = self.approval_counts
        counts["tool runs"] = len(self.book.runs)
        counts["tool runs again by a resumed run (its decision replayed)"] = sum(
            len(found) - 1 for found in lives.values()
        )
        for decision, count in sorted(self.book.decisions.items()):
            counts[f"decisions providers gave: {decision}"] = count


def expected_result(decision: ApprovalDecision) -> dict[str, Any]:
    """The call's result that ``decision`` gives (an error by its code and message part)."""
    if decision.runs:
        return {"ok": True, "output": output_of(decision.arguments)}
    if decision.decision is Decision.RESPOND:
        return {"ok": True, "output": decision.message}
    return {"ok": False, "code": "APPROVAL_REJECTED", "says": decision.message}


def matches(got: dict[str, Any], expected: dict[str, Any]) -> bool:
    if expected["ok"]:
        return got == expected
    error = got.get("error") or {}
    return error.get("code") == expected["code"] and str(expected["says"]) in str(
        error.get("message")
    )


async def run_approval_torture(
    folder: Path,
    settings: Settings | None = None,
    engine: str = "sqlite",
    *,
    approvals: float = APPROVALS,
    restart_every: int = 25,
    sabotage: str | None = None,
    fault_every: int | None = None,
) -> Report:
    """Run the journal torture with approvals in ``folder`` (as ``run_journal_torture``)."""
    torture = ApprovalTorture(
        folder,
        settings or Settings(),
        engine,
        approvals=approvals,
        restart_every=restart_every,
        sabotage=sabotage,
        fault_every=fault_every,
    )
    return await torture.run()
