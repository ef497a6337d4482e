"""The approval machine of tests/test_invariants_approvals.py: gated tool calls decided by the
machine's human, through provider swaps, rules added and revoked, and (the journal variant)
daemon stops and resumes. One event loop behind a blocking portal; every step settled
(every task blocked) and checked.

Each call is labelled by the gate's ``reason`` (``c7``, or ``alpha#2`` in a run: stable
across resumes, so a resumed call asks the same question), so the human knows whose
approval it is asked and the tool knows whose call it runs.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import shutil
import tempfile
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from pydantic import BaseModel
from tests._timing import scaled

from _invariant_machine import InvariantMachine
from _journal_model import idle
from hotseam import TOOL_GATE, CloseReason, Context, Scope, ToolCall, ToolResult, tool
from hotseam.interaction import USER_INTERACTION, AskUserQuestionAnswer, AskUserQuestionRequest
from hotseam.interaction.approvals import ApprovalRule, HumanGate, RuleBook
from hotseam.interaction.journal import Journal, JournalDaemon, open_journal
from hotseam.providers.scripted import Reply

LABEL: ContextVar[str] = ContextVar("approval_machine_label")
TOOL = "op"
AGENTS = ("alpha", "beta")


class OpInput(BaseModel):
    target: str
    n: int = 1


ARGS = ({"target": "a", "n": 1}, {"target": "a", "n": 2}, {"target": "b", "n": 1})
EDITS = ({"target": "c", "n": 3}, {"target": "a", "n": 1}, {"target": "b"})
WHERE = ({}, {"target": "a"}, {"n": "2"}, {"target": "[bc]"})
DECISIONS = ("approve", "approve", "edit", "reject", "respond", "always", "never")


class ApprovalViolation(AssertionError):
    """A guarantee of approvals broken (what ran, what was asked, what a rule decided)."""


@dataclass(eq=False)
class MAsk:
    label: str
    gen: int
    request: AskUserQuestionRequest
    done: anyio.Event = field(default_factory=anyio.Event)
    answer: AskUserQuestionAnswer | None = None
    decision: tuple[str, Any] | None = None  # what the human decided
    state: str = "open"  # open, returned, revoked


@dataclass(eq=False)
class MCall:
    label: str
    args: dict[str, Any]
    life: int
    agent: str | None = None
    index: int = 0
    run_id: str | None = None
    expect: str = "ask"  # ask, replay, or the rule deciding it: "allow R" / "reject R"
    rule: ApprovalRule | None = None
    replay_of: tuple[str, Any] | None = None  # the recorded decision it replays
    record: list[Any] | None = None  # the model's record of its ask: [index, args, decision]
    asks: list[MAsk] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    result: ToolResult | None = None
    ended: str | None = None  # finished, cancelled
    decision: tuple[str, Any] | None = None  # the decision that took effect

    def kind(self) -> str:
        """Ruled or asked: what takes (or not) a position among the run's asks."""
        return "ruled" if self.rule is not None else "asked"


@dataclass(eq=False)
class MAgent:
    key: str
    script: list[dict[str, Any]] = field(default_factory=list)
    done: int = 0  # calls of the script made in this life
    wake: anyio.Event = field(default_factory=anyio.Event)
    busy: MCall | None = None
    run_id: str | None = None
    records: list[list[Any]] = field(default_factory=list)  # the run's asks, by position
    pos: int = 0  # the position of its next ask in this life


class Human:
    """The machine's user-interaction provider, one per generation: each ask waits for the
    machine's human."""

    multiple_questions = True

    def __init__(self, machine: ApprovalMachine, gen: int) -> None:
        self.machine, self.gen = machine, gen

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        assert request.approval is not None
        label = request.approval.reason or "?"
        rec = MAsk(label, self.gen, request)
        self.machine.open_ask(rec)
        try:
            await rec.done.wait()
        except BaseException:
            rec.state = "revoked"
            raise
        rec.state = "returned"
        assert rec.answer is not None
        return rec.answer


def canonical(args: dict[str, Any]) -> dict[str, Any]:
    return OpInput.model_validate(args).model_dump(mode="json")


def covers(rule: ApprovalRule, args: dict[str, Any], run_id: str | None) -> bool:
    """The model's reading of a rule: its tool, its globs, its scope."""
    if rule.tool != TOOL or not rule.active:
        return False
    if rule.scope == "run" and rule.scope_id != run_id:
        return False
    for name, pattern in rule.where.items():
        value = args.get(name)
        text = value if isinstance(value, str) else json.dumps(value)
        if not fnmatch.fnmatchcase(text, pattern):
            return False
    return True


class ApprovalMachine(RuleBasedStateMachine):
    backend = "asyncio"
    journaled = False
    engine = "memory"
    max_calls = 14
    # Whether a replayed Always allow / Always reject adds its rule again (it must not: a
    # revoked rule would come back after a restart; test_a_revoked_rule_stays_revoked_...).
    replay_adds_rules = False

    _all_blocked = InvariantMachine._all_blocked

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="hotseam-approval-machine-"))
        self.url = "memory:" if self.engine == "memory" else str(self.folder / "j.sqlite3")
        self.calls: list[MCall] = []
        self.by_label: dict[tuple[int, str], MCall] = {}
        self.asks: list[MAsk] = []
        self.gen = 0
        self.life = 0
        self.count = 0
        self.agents = [MAgent(key) for key in AGENTS]
        self.journals: list[Journal] = []
        self.violations: list[str] = []
        self.notes: list[str] = []
        self.human_rules = 0  # rules the human's Always allow / Always reject added
        self.portal_cm = anyio.from_thread.start_blocking_portal(self.backend)
        self.portal = self.portal_cm.__enter__()
        try:
            self.host, _ = self.portal.start_task(self._host)
            self.portal.call(self._boot)
        except BaseException:
            self.portal_cm.__exit__(None, None, None)
            shutil.rmtree(self.folder, ignore_errors=True)
            raise

    # -- the loop ---------------------------------------------------------------------------

    async def _host(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as tg:
            self.tg = tg
            self.stop = anyio.Event()
            task_status.started()
            await self.stop.wait()
            tg.cancel_scope.cancel()

    async def _boot(self) -> None:
        self.C = Context("C")
        self.gate = HumanGate(offer_rules=True, reason=lambda t, i, c: LABEL.get())
        self.base = Scope("base", context=self.C)
        self.base.provide(TOOL_GATE, self.gate)
        self.base.register_tool(self._tool())
        self.ui: Scope | None = None
        await self._new_generation()
        if self.journaled:
            self.journal_closing = anyio.Event()
            self.journal: Journal = await self.tg.start(self._hold_journal)
            await self._start_daemon(None)
            await self._settle()  # the agents' runs open before the first step

    def _tool(self) -> Any:
        @tool(TOOL, needs_approval=True)
        async def op(input: OpInput, call: ToolCall) -> str:
            """A gated operation."""
            label = LABEL.get()
            mcall = self.by_label.get((self.life, label))
            if mcall is None:
                self.fail(f"the tool ran for {label}, which the machine never called")
            else:
                mcall.runs.append(input.model_dump(mode="json"))
            return f"ran {input.target} x{input.n}"

        return op

    async def _new_generation(self) -> None:
        self.gen += 1
        self.ui = Scope(f"ui{self.gen}", context=self.C)
        self.ui.provide(USER_INTERACTION, Human(self, self.gen))

    async def _hold_journal(self, *, task_status: Any) -> None:
        async with open_journal(self.url, poll_interval=0.01) as journal:
            if journal.engine == "sqlite":
                self.journals.append(journal)
            task_status.started(journal)
            await self.journal_closing.wait()

    def book(self) -> RuleBook:
        return self.journal if self.journaled else self.gate.rules

    def do(self, action: Any) -> None:
        async def step() -> None:
            outcome = action()
            if outcome is not None:
                await outcome
            await self._settle()
            await self.check()

        try:
            self.portal.call(step)
        finally:
            notes, self.notes = self.notes, []
            for line in notes:
                note(line)

    async def _settle(self) -> None:
        for _ in range(20_000):
            await self._all_blocked()
            if all(idle(journal) for journal in self.journals):
                return
            await anyio.sleep(0.0005)
        raise AssertionError("a journal operation never ended")

    def log(self, line: str) -> None:
        self.notes.append(line)

    def fail(self, message: str) -> None:
        self.violations.append(message)

    # -- calls ------------------------------------------------------------------------------

    async def _call(self, mcall: MCall) -> None:
        """One gated call, what the gate will read of the rules taken just before."""
        in_force = [r for r in await self.book().rules() if covers(r, mcall.args, mcall.run_id)]
        in_force.sort(key=lambda r: (r.allow, r.created_at))  # reject rules first
        if in_force:
            mcall.rule = in_force[0]
            mcall.expect = f"{'allow' if mcall.rule.allow else 'reject'} {mcall.rule.id}"
        elif mcall.agent is not None:
            self._place(mcall)
        self.by_label[(self.life, mcall.label)] = mcall
        token = LABEL.set(mcall.label)
        try:
            mcall.result = await self.C.tools.execute(TOOL, mcall.args)
            mcall.ended = "finished"
            replayed = mcall.replay_of
            adds = replayed is not None and replayed[0] in ("always", "never")
            if mcall.expect == "replay" and adds and self.replay_adds_rules:
                self.human_rules += 1
        finally:
            LABEL.reset(token)
            if mcall.ended is None:
                mcall.ended = "cancelled"

    def open_ask(self, rec: MAsk) -> None:
        self.asks.append(rec)
        mcall = self.by_label.get((self.life, rec.label))
        if mcall is None:
            self.fail(f"an approval was asked for {rec.label}, which the machine never called")
            return
        mcall.asks.append(rec)

    @precondition(lambda self: not self.journaled and self.count < self.max_calls)
    @rule(args=st.sampled_from(ARGS))
    def agent_calls(self, args: dict[str, Any]) -> None:
        self.count += 1
        mcall = MCall(f"c{self.count}", dict(args), self.life)
        self.calls.append(mcall)
        self.log(f"{mcall.label} = op({args})")

        async def start() -> None:
            self.tg.start_soon(self._call, mcall)

        self.do(start)

    # -- the human --------------------------------------------------------------------------

    def open_asks(self) -> list[MAsk]:
        return [a for a in self.asks if a.state == "open" and a.gen == self.gen]

    @precondition(lambda self: bool(self.open_asks()))
    @rule(
        pick=st.integers(0, 5),
        decision=st.sampled_from(DECISIONS),
        edit=st.sampled_from(EDITS),
        swap_after=st.booleans(),
    )
    def human_decides(
        self, pick: int, decision: str, edit: dict[str, Any], swap_after: bool
    ) -> None:
        asks = self.open_asks()
        rec = asks[pick % len(asks)]
        text = f"{decision} {rec.label}"
        reply = {
            "approve": lambda: Reply.approve(),
            "edit": lambda: Reply.edit(edit),
            "reject": lambda: Reply.reject(text),
            "respond": lambda: Reply.respond(text),
            "always": lambda: Reply.always_allow(),
            "never": lambda: Reply.always_reject(text),
        }[decision]()
        rec.decision = (decision, canonical(edit) if decision == "edit" else text)
        self.log(f"the human decides {rec.label} (generation {rec.gen}): {rec.decision}")

        async def decide() -> None:
            rec.answer = await reply.resolve(rec.request)
            rec.done.set()
            if decision in ("always", "never"):
                self.human_rules += 1

        self.do(decide)
        if swap_after:
            self.swap_provider()

    @rule()
    def swap_provider(self) -> None:
        """A new provider generation: the open approvals are asked there, once."""
        self.log(f"the provider is swapped: generation {self.gen + 1}")

        async def swap() -> None:
            async with self.C.swap(USER_INTERACTION):
                if self.ui is not None:
                    await self.ui.aclose(CloseReason.RELOAD)
                await self._new_generation()

        self.do(swap)

    # -- rules ------------------------------------------------------------------------------

    @rule(allow=st.booleans(), where=st.sampled_from(WHERE))
    def add_rule(self, allow: bool, where: dict[str, str]) -> None:
        async def add() -> None:
            rule = await self.book().add_rule(TOOL, allow=allow, where=where, by="the machine")
            self.log(f"rule {rule.id}: always {'allow' if allow else 'reject'} where {where}")

        self.do(add)

    @rule(pick=st.integers(0, 5))
    def revoke_rule(self, pick: int) -> None:
        async def revoke() -> None:
            in_force = await self.book().rules()
            if in_force:
                rule = in_force[pick % len(in_force)]
                await self.book().revoke_rule(rule.id, by="the machine")
                self.log(f"rule {rule.id} revoked")

        self.do(revoke)

    # -- the journal: agents' runs, the daemon stopping and resuming -------------------------

    async def _start_daemon(self, change: tuple[int, dict[str, Any]] | None) -> None:
        self.life += 1
        self.daemon_stop = anyio.Event()
        self.daemon_down = anyio.Event()
        await self.tg.start(self._daemon, change)

    async def _daemon(self, change: tuple[int, dict[str, Any]] | None, *, task_status: Any) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                journal = self.journal
                if self.engine == "sqlite":  # a new process opens the file anew
                    journal = await stack.enter_async_context(
                        open_journal(self.url, poll_interval=0.01)
                    )
                    self.journals.append(journal)
                    stack.callback(self.journals.remove, journal)
                journaling = await stack.enter_async_context(
                    JournalDaemon.open(journal, name=f"daemon-{self.life}")
                )
                async with anyio.create_task_group() as agents:
                    for agent in self.agents:
                        if change is not None and agent.key == AGENTS[0] and agent.script:
                            at, args = change
                            at %= len(agent.script)
                            self.log(f"{agent.key}'s call {at} is now op({args})")
                            agent.script[at] = dict(args)
                        agent.done, agent.busy, agent.wake = 0, None, anyio.Event()
                        agent.pos = 0
                        agents.start_soon(self._agent, agent, journaling)
                    task_status.started()
                    await self.daemon_stop.wait()
                    agents.cancel_scope.cancel()
        finally:
            self.daemon_down.set()

    async def _agent(self, agent: MAgent, journaling: JournalDaemon) -> None:
        life = self.life
        async with journaling.run(agent.key) as run:
            agent.run_id = run.record.id
            while True:
                if agent.done < len(agent.script):
                    index = agent.done
                    args = agent.script[index]
                    mcall = MCall(f"{agent.key}#{index}", dict(args), life, agent.key, index)
                    mcall.run_id = run.record.id
                    self.calls.append(mcall)
                    agent.busy = mcall
                    await self._call(mcall)
                    agent.busy = None
                    agent.done += 1
                else:
                    await agent.wake.wait()
                    agent.wake = anyio.Event()

    def _place(self, mcall: MCall) -> None:
        """The model of the run's records: an asked call takes the next position; the record
        there replays its decision for the same call (the same label and arguments), is asked
        again while pending, and is abandoned with every later one for another call."""
        agent = next(a for a in self.agents if a.key == mcall.agent)
        position, agent.pos = agent.pos, agent.pos + 1
        here = agent.records[position] if position < len(agent.records) else None
        if here is not None and (here[0], here[1]) == (mcall.index, mcall.args):
            mcall.record = here
            if here[2] is not None:
                mcall.replay_of, mcall.expect = here[2], "replay"
            return
        del agent.records[position:]
        mcall.record = [mcall.index, mcall.args, None]
        agent.records.append(mcall.record)

    def idle_agents(self) -> list[MAgent]:
        return [
            a
            for a in self.agents
            if a.busy is None and a.done == len(a.script) and a.run_id is not None
        ]

    @precondition(
        lambda self: self.journaled and self.count < self.max_calls and bool(self.idle_agents())
    )
    @rule(pick=st.integers(0, 1), args=st.sampled_from(ARGS))
    def agent_calls_in_run(self, pick: int, args: dict[str, Any]) -> None:
        agents = self.idle_agents()
        agent = agents[pick % len(agents)]
        self.count += 1
        agent.script.append(dict(args))
        self.log(f"{agent.key}#{len(agent.script) - 1} = op({args}) in daemon-{self.life}")

        async def wake() -> None:
            agent.wake.set()

        self.do(wake)

    @precondition(lambda self: self.journaled)
    @rule(change=st.none() | st.tuples(st.integers(0, 9), st.sampled_from(ARGS)))
    def daemon_restarts(self, change: tuple[int, dict[str, Any]] | None) -> None:
        """The daemon stops (open approvals cancelled, mid-run) and a new one resumes the
        runs, each agent making its calls again (one changed, given ``change``)."""
        self.log(f"daemon-{self.life} stops; daemon-{self.life + 1} resumes")

        async def restart() -> None:
            self.daemon_stop.set()
            with anyio.fail_after(scaled(10)):
                await self.daemon_down.wait()
            await self._settle()
            await self._start_daemon(change)

        self.do(restart)

    # -- checks -----------------------------------------------------------------------------

    async def check(self) -> None:
        for mcall in self.calls:
            self._check_call(mcall)
        await self._check_rules()

    def _check_call(self, c: MCall) -> None:
        name = f"{c.label} (daemon life {c.life}, op({c.args}), expected {c.expect})"
        returned = [a for a in c.asks if a.state == "returned"]
        if len(returned) > 1:
            self.fail(f"{name}: {len(returned)} answers taken for one call")
        if len(c.runs) > 1:
            self.fail(f"{name}: the tool ran {len(c.runs)} times: {c.runs}")
        if (c.rule is not None or c.expect == "replay") and c.asks:
            self.fail(f"{name}: asked {len(c.asks)} time(s), though decided without asking")
        if c.ended is None:
            if c.runs:
                self.fail(f"{name}: the tool ran before the call was decided")
            live = [a for a in c.asks if a.state == "open"]
            asked_here = c.rule is None and c.expect != "replay" and self.ui is not None
            if asked_here and [a.gen for a in live] != [self.gen]:
                self.fail(
                    f"{name}: pending, open on generation(s) {[a.gen for a in live]}, "
                    f"the provider being generation {self.gen}"
                )
            return
        if c.ended == "cancelled":
            if c.runs:
                self.fail(f"{name}: cancelled, yet the tool ran with {c.runs}")
            return
        assert c.result is not None
        if c.decision is None:
            if c.rule is not None:
                c.decision = ("always" if c.rule.allow else "never", c.rule.reason)
            elif c.expect == "replay":
                c.decision = c.replay_of
            elif returned:
                c.decision = returned[0].decision
                if c.record is not None:
                    c.record[2] = c.decision
        if c.decision is None:
            self.fail(f"{name}: finished ({c.result.to_dict()}) with no decision taken")
            return
        kind, value = c.decision
        result = c.result.to_dict()
        if kind in ("approve", "always", "edit"):
            ran = value if kind == "edit" else canonical(c.args)
            if c.runs != [ran]:
                self.fail(
                    f"{name}: decided {kind}, the tool should have run with {ran} "
                    f"once, ran {c.runs} ({result})"
                )
            if not result.get("ok"):
                self.fail(f"{name}: decided {kind}, got {result}")
            return
        if c.runs:
            self.fail(f"{name}: decided {kind}, yet the tool ran with {c.runs}")
        if kind == "respond":
            if result != {"ok": True, "output": value}:
                self.fail(f"{name}: responded {value!r}, the call's result is {result}")
            return
        error = result.get("error") or {}
        if error.get("code") != "APPROVAL_REJECTED" or (
            value and value not in str(error.get("message"))
        ):
            self.fail(f"{name}: rejected ({value!r}), the call's result is {result}")
        if c.rule is not None and (error.get("details") or {}).get("rule") != c.rule.id:
            self.fail(f"{name}: rejected by rule {c.rule.id}, the result says {result}")

    async def _check_rules(self) -> None:
        every = await self.book().rules(revoked=True)
        for r in every:
            ruled = [c for c in self.calls if c.rule is not None and c.rule.id == r.id]
            if r.uses != len(ruled):
                self.fail(
                    f"rule {r.id} ({r.describe()}) counts {r.uses} uses; it decided "
                    f"{[c.label for c in ruled]}"
                )
        added = [r for r in every if r.created_by != "the machine"]
        if len(added) != self.human_rules:
            self.fail(
                f"{len(added)} rule(s) added by decisions ({[r.describe() for r in added]}), "
                f"the human chose Always allow / Always reject {self.human_rules} time(s)"
            )

    @invariant()
    def everything_holds(self) -> None:
        if self.violations:
            messages = list(dict.fromkeys(self.violations))
            self.violations = []
            raise ApprovalViolation("\n".join(messages))

    def teardown(self) -> None:
        async def cleanup() -> None:
            if self.journaled:
                self.daemon_stop.set()
                with anyio.fail_after(scaled(10)):
                    await self.daemon_down.wait()
                self.journal_closing.set()
            await self._settle()
            if self.ui is not None:
                await self.ui.aclose()
            await self.base.aclose()

        try:
            self.portal.call(cleanup)
        finally:
            try:
                self.portal.call(self.stop.set)
                self.host.result(timeout=scaled(30))
            finally:
                self.portal_cm.__exit__(None, None, None)
                shutil.rmtree(self.folder, ignore_errors=True)
