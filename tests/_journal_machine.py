"""Invariant 10 (DESIGN.md) in the property-based state machine of tests/test_invariants.py.

:class:`JournalRules` is mixed into that machine, which keeps driving scopes, providers,
swaps and asks and checking invariants 1-6 after every step. With it, a daemon process opens
the journal — an SQLite file in a temporary folder, or `memory:` (SQLite in memory) — as an
:class:`~hotseam.interaction.journal.JournalDaemon`, and its agents ask inside runs. New rules:

* the daemon stops (its agents' runs are cancelled, left to resume) and starts again on the
  same journal (on SQLite, a new ``Journal`` object on the file, as a new process would);
* an agent starts (resuming its unfinished run, or ``fresh``), asks (the question recorded
  at its position or under a key, the same or changed — a divergence — or a new one) and
  ends (returns: finished; raises: failed);
* another process (on SQLite a second ``Journal`` on the same file, as a fleet inbox)
  answers or dismisses a recorded question, the daemon up or down, a settled one too, and
  answers in the same turn as this process's provider (first answer wins);
* a provider answers in the same turn as the process stops;
* another daemon starts for an agent this process runs (resuming or ``fresh``): refused,
  the run left alone.

The machine's model is in _journal_model.py, the other process's rules in _journal_inbox.py,
the racing daemon's in _journal_race.py, the checks in _journal_checks.py.

After every step the journal is read whole and checked against what the machine saw
(each broken rule fails with :class:`JournalViolation`):

* a recorded answer is delivered to at most one ask per run incarnation and live to one only,
  always to an ask of the record's own run, at its position or key, with its digest; an
  answer is recorded for the question it was given to, by whoever gave it;
* an ask placed in a run replays a settled record (its outcome at once, no provider asked),
  re-attaches to a pending one (never a duplicate), diverges (the records from there on are
  abandoned) or is recorded anew, as the records held when the run started say;
* what a journaled ask returns is what its record says, and its record says what happened:
  an answer a provider returned is recorded (unless an earlier settlement won);
* every pending record belongs to an unfinished run; a record settles once (only
  ``abandoned`` may follow) and keeps its answer; nothing of an ended run ever changes;
* of two racing answers exactly one is recorded, and the other is told it lost; a write to
  a pending record nobody races wins; a live ask answered elsewhere receives it (no hang).
"""

from __future__ import annotations

import contextlib
import math
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule
from tests._timing import scaled

from _journal_checks import JournalChecks
from _journal_inbox import OtherProcessRules
from _journal_model import (
    AGENTS,
    FRESH,
    MAX_AGENT_ASKS,
    POLL_INTERVAL,
    SEVERAL,
    SWAP_WAIT,
    THEN,
    AgentFailed,
    Incarnation,
    JournalAsk,
    JournalViolation,
    MAgent,
    MDaemon,
    MWrite,
    agent_request,
    asked_text,
    gone,
    idle,
    name_of,
)
from _journal_race import RacingClaimRules
from _multi_question_machine import MultiAsk
from hotseam import AbortController
from hotseam.interaction import USER_INTERACTION, ErrorCode, UserInteractionError, ask
from hotseam.interaction._journal import (
    AskRecord,
    AskState,
    Journal,
    JournalError,
    RunRecord,
    RunState,
    open_journal,
    question_digest,
)
from hotseam.interaction.journal import JournalDaemon


@dataclass(frozen=True)
class _Kept:
    """Who answered the questions a record kept (``AskRecord.partial``): an earlier life's
    provider, through the journal."""

    name: str = "the journal (answers kept before the ask was cut)"


KEPT = _Kept()


class JournalRules(RacingClaimRules, OtherProcessRules, JournalChecks):
    """The journal's rules and checks, for a machine of tests/test_invariants.py."""

    engine = "memory"
    max_free_asks = 3  # the machine without a journal makes plenty; asks in runs are new
    # Tools have nothing to do with the journal (the machine without one drives them): here
    # their steps go to runs, restarts and the other process.
    register_tool = None
    execute_tool = None

    # -- set-up and teardown ----------------------------------------------------------------

    def __init__(self) -> None:
        self.j_folder = Path(tempfile.mkdtemp(prefix="hotseam-journal-machine-"))
        self.j_url = "memory:" if self.engine == "memory" else str(self.j_folder / "j.sqlite3")
        self.j_daemon: MDaemon | None = None
        self.j_daemons: list[MDaemon] = []
        self.j_agents = [MAgent(key) for key in AGENTS]
        self.j_resume: list[MAgent] = []  # the agents the daemon ran when it stopped
        self.j_incs: list[Incarnation] = []
        self.j_writes: list[MWrite] = []
        self.j_sqlite: list[Journal] = []
        self.j_asks: dict[str, AskRecord] = {}
        self.j_runs: dict[str, RunRecord] = {}
        self.j_prev_asks: dict[str, AskRecord] = {}
        self.j_prev_runs: dict[str, RunRecord] = {}
        self.j_order: dict[str, int] = {}  # records in the order this machine first saw them
        try:
            super().__init__()  # type: ignore[call-arg]
        except BaseException:
            shutil.rmtree(self.j_folder, ignore_errors=True)
            raise

    async def _boot(self) -> None:
        await super()._boot()  # type: ignore[misc]
        self.j_closing = anyio.Event()
        self.j_closed = anyio.Event()
        self.j_journal: Journal = await self.tg.start(self._hold_journal)
        await self._start_daemon([self.j_agents[0]])

    async def _hold_journal(self, *, task_status: Any) -> None:
        """The journal as another process sees it (``memory:``: the journal itself)."""
        try:
            async with open_journal(self.j_url, poll_interval=POLL_INTERVAL) as journal:
                if journal.engine == "sqlite":
                    self.j_sqlite.append(journal)
                task_status.started(journal)
                await self.j_closing.wait()
        finally:
            self.j_closed.set()

    async def cleanup(self) -> None:
        if self.j_daemon is not None:  # the process stops first; its runs stay to resume
            await self._stop_daemon()
            await self._settle()
            await self.check_all()
        await super().cleanup()  # type: ignore[misc]
        self.j_closing.set()
        with anyio.fail_after(scaled(10)):
            await self.j_closed.wait()

    def teardown(self) -> None:
        try:
            super().teardown()  # type: ignore[misc]
        finally:
            shutil.rmtree(self.j_folder, ignore_errors=True)

    async def _settle(self) -> None:
        """Every task blocked, and no journal operation running in a worker thread."""
        for _ in range(20_000):
            await super()._settle()  # type: ignore[misc]
            if all(idle(journal) for journal in self.j_sqlite):
                return
            await anyio.sleep(0.0005)
        raise AssertionError("a journal operation never ended")

    def fail_journal(self, message: str) -> None:
        self.violations.append((JournalViolation, message))

    # -- the daemon process -----------------------------------------------------------------

    async def _start_daemon(
        self,
        agents: list[MAgent],
        change_at: int | None = None,
        ctx: str = "C",
        *,
        fresh: bool = False,
    ) -> None:
        """The process starts and runs ``agents``: each resumes its unfinished run (or,
        ``fresh``, abandons it) and, given ``change_at``, asks again what the run recorded
        (see :meth:`rerun`)."""
        daemon = MDaemon(f"daemon-{len(self.j_daemons) + 1}")
        self.j_daemons.append(daemon)
        await self.tg.start(self._daemon_process, daemon)
        self.j_daemon = daemon
        incs = [self._launch(agent, fresh=fresh) for agent in agents]
        if change_at is None or fresh or not incs:
            return
        await self._settle()
        for inc in incs:
            if inc.run is None:
                continue  # refused: the end check says so
            records = await self.j_journal.run_asks(inc.run.id)
            inc.recorded = [a for a in records if a.state is not AskState.ABANDONED]
            inc.read_with = sorted(a.id for a in inc.recorded)
            if inc.recorded and self.agent_asks_left():
                self.rerun(inc.agent, change_at, ctx)

    def _launch(self, agent: MAgent, *, fresh: bool) -> Incarnation:
        daemon = self.j_daemon
        assert daemon is not None and daemon.agents is not None and agent.inc is None
        unfinished = [
            run
            for run in self.j_runs.values()
            if run.agent == agent.key and run.state is RunState.RUNNING
        ]
        inc = Incarnation(
            f"{agent.key}#{len(self.j_incs) + 1}",
            agent,
            daemon,
            fresh,
            unfinished[0].id if unfinished else None,
        )
        self.j_incs.append(inc)
        send, receive = anyio.create_memory_object_stream[Any](math.inf)
        inc.send = send
        agent.inc, agent.busy = inc, None
        daemon.agents.start_soon(self._agent_task, inc, receive)
        what = "fresh" if fresh else "resuming" if unfinished else "new run"
        self.log(f"{inc.name} starts in {daemon.name} ({what})")
        return inc

    async def _daemon_process(self, daemon: MDaemon, *, task_status: Any) -> None:
        started = False
        try:
            async with contextlib.AsyncExitStack() as stack:
                journal = self.j_journal
                if self.engine == "sqlite":  # a new process opens the file anew
                    journal = await stack.enter_async_context(
                        open_journal(self.j_url, poll_interval=POLL_INTERVAL)
                    )
                    self.j_sqlite.append(journal)
                    stack.callback(self.j_sqlite.remove, journal)
                journaling = await stack.enter_async_context(
                    JournalDaemon.open(journal, name=daemon.name)
                )
                daemon.label = f"{journaling.daemon.name} (pid {journaling.daemon.pid})"
                async with anyio.create_task_group() as agents:
                    daemon.journaling, daemon.agents = journaling, agents
                    started = True
                    task_status.started()
                    await daemon.stop.wait()
                    # The agents' asks are cancelled now, not when the stop was asked for:
                    # an ask answered meanwhile may have gone on to its next question.
                    for agent in self.j_agents:
                        busy = agent.busy
                        if agent.inc is not None and busy is not None and busy.outcome is None:
                            busy.caller_cancelled = True
                    agents.cancel_scope.cancel()
        except Exception as error:
            if not started:
                raise
            self.fail_internal(f"{daemon.name} failed: {error!r}")
        finally:
            daemon.journaling = daemon.agents = None
            daemon.down.set()

    async def _stop_daemon(self, racing: Any = None) -> None:
        """The process stops (SIGTERM for a deploy): its agents are cancelled mid-run."""
        daemon = self.j_daemon
        assert daemon is not None
        self.j_resume = [agent for agent in self.j_agents if agent.inc is not None]
        if racing is not None:
            self.give(racing, "answer")
        daemon.stop.set()
        with anyio.fail_after(scaled(10)):
            await daemon.down.wait()
        self.j_daemon = None

    async def _agent_task(self, inc: Incarnation, receive: Any) -> None:
        assert inc.daemon.journaling is not None
        ended = "cancelled"
        try:
            with receive:
                async with inc.daemon.journaling.run(inc.agent.key, fresh=inc.fresh) as run:
                    inc.run = run
                    inc.resumed_with = sorted(a.id for a in run.recorded)
                    async for command in receive:
                        if command == "return":
                            break
                        if command == "raise":
                            raise AgentFailed(inc.name)
                        await self._agent_ask(command)
            ended = "finished"
        except AgentFailed:
            ended = "failed"
        except JournalError as error:
            ended = f"refused with {error.code}: {error}"
        except Exception as error:
            ended = f"raised {error!r}"
        finally:
            inc.ended = ended
            inc.send.close()
            if inc.agent.inc is inc:
                inc.agent.inc = None

    async def _agent_ask(self, rec: Any) -> None:
        """The agent's ask, inside its run (as test_invariants' run_ask, with a key)."""
        rec.started = True
        rec.swap_at_start = self.current_swap
        rec.acceptable_at_start = self.acceptable(rec.ctx, USER_INTERACTION)
        try:
            with rec.cancel_scope:
                try:
                    answer = await ask(
                        rec.request,
                        context=rec.ctx,
                        swap_timeout=scaled(SWAP_WAIT),
                        key=rec.journal.key,
                    )
                except UserInteractionError as error:
                    rec.outcome, rec.error = ("error", error.code), error
                except Exception as error:
                    rec.outcome = ("unexpected", repr(error))
                else:
                    rec.outcome, rec.answer = ("answer", answer.answer), answer
        finally:
            if rec.outcome is None:  # its caller cancelled it, or the process stopped
                rec.outcome = ("cancelled",)
            rec.journal.done.set()

    # -- rules: the process and its agents --------------------------------------------------

    @precondition(lambda self: self.j_daemon is not None)
    @rule(change_at=st.integers(0, 11), ctx=st.sampled_from(["C", "D"]), fresh=FRESH)
    def restart_daemon(self, change_at: int, ctx: str, fresh: bool) -> None:
        """A deploy: the process stops mid-run and starts again; its agents resume their
        runs, running from their start again (what they asked replays), or, ``--fresh``,
        abandon them and start anew."""

        async def action() -> None:
            self.log(
                f"{name_of(self.j_daemon)} restarts{' --fresh' if fresh else ''}: its agents "
                "are cancelled mid-run"
            )
            await self._stop_daemon()
            await self._start_daemon(self.j_resume, change_at, ctx, fresh=fresh)

        self.do(action)

    @precondition(lambda self: self.j_daemon is not None)
    @rule()
    def stop_daemon(self) -> None:
        async def action() -> None:
            self.log(f"{name_of(self.j_daemon)} stops: its agents are cancelled mid-run")
            await self._stop_daemon()

        self.do(action)

    @precondition(lambda self: self.j_daemon is None)
    @rule(change_at=st.integers(0, 11), ctx=st.sampled_from(["C", "D"]), fresh=FRESH)
    def start_daemon(self, change_at: int, ctx: str, fresh: bool) -> None:
        async def action() -> None:
            self.log(
                f"daemon-{len(self.j_daemons) + 1} starts on the same journal"
                + (" --fresh" if fresh else "")
            )
            await self._start_daemon(self.j_resume, change_at, ctx, fresh=fresh)

        self.do(action)

    @precondition(lambda self: self.j_daemon is not None and self.stopped_agents())
    @rule(pick=st.integers(0, 63), fresh=st.integers(0, 2).map(lambda i: i == 2))
    def start_agent(self, pick: int, fresh: bool) -> None:
        def action() -> None:
            self._launch(self.pick(self.stopped_agents(), pick), fresh=fresh)

        self.do(action)

    @precondition(lambda self: self.idle_agents() and self.agent_asks_left())
    @rule(
        pick=st.integers(0, 63),
        choice=st.integers(0, 7),
        change=st.integers(0, 4).map(lambda i: i == 4),
        keyed=st.integers(0, 3).map(lambda i: i == 3),
        ctx=st.sampled_from(["C", "D"]),
        abortable=st.booleans(),
        then=THEN,
        several=st.integers(0, 2).map(lambda i: i == 2),
    )
    def agent_asks(
        self,
        pick: int,
        choice: int,
        change: bool,
        keyed: bool,
        ctx: str,
        abortable: bool,
        then: str,
        several: bool,
    ) -> None:
        """An agent asks its next question: mostly what its run recorded there (when it
        resumes), sometimes changed, else a new one (by position or key; ``several``: an
        ask of several questions)."""

        async def action() -> None:
            agent = self.pick(self.idle_agents(), pick)
            assert agent.inc is not None
            question, key = self.next_question(agent.inc, choice, change, keyed, several)
            rec = self.queue_ask(agent, question, key, ctx, abortable)
            await self.reply_then(rec, then)

        self.do(action)

    @precondition(lambda self: self.replaying_agents() and self.agent_asks_left())
    @rule(
        pick=st.integers(0, 63),
        change_at=st.integers(0, 11),
        ctx=st.sampled_from(["C", "D"]),
        then=THEN,
    )
    def agent_reruns(self, pick: int, change_at: int, ctx: str, then: str) -> None:
        """A resumed agent's function runs from its start again: it asks every question its
        run recorded, in order — those answered replay at once, the one left open is asked
        again — or, at ``change_at``, something else (the agent was edited: divergence)."""

        async def action() -> None:
            rec = self.rerun(self.pick(self.replaying_agents(), pick), change_at, ctx)
            if rec is not None:
                await self.reply_then(rec, then)

        self.do(action)

    def rerun(self, agent: MAgent, change_at: int, ctx: str) -> Any:
        """``agent`` asks again, in order, what its run recorded and it did not ask yet in
        this process, until the one left open (or changed at ``change_at``); the last ask."""
        inc = agent.inc
        assert inc is not None and inc.recorded is not None
        left = [
            r
            for r in inc.recorded
            if (r.key is None and r.seq >= inc.position)
            or (r.key is not None and r.key not in inc.keys)
        ]
        left.sort(key=lambda r: (r.seq, r.key is None))
        rec = None
        for index, record in enumerate(left):
            change = index == change_at
            question = asked_text(record.request) + ("'" if change else "")
            rec = self.queue_ask(agent, question, record.key, ctx, abortable=False)
            if change or record.pending or not self.agent_asks_left():
                break  # the agent waits here (or asks anew from here on)
        return rec

    def queue_ask(
        self, agent: MAgent, question: str, key: str | None, ctx: str, abortable: bool
    ) -> Any:
        """``agent`` asks ``question`` (under ``key``) next in its run, on context ``ctx``:
        what the journal must make of it is worked out now, from the records its run held
        when it started (docs/journal.md)."""
        inc = agent.inc
        assert inc is not None and inc.run is not None
        controller = AbortController() if abortable else None
        request = agent_request(question, controller.signal if controller is not None else None)
        digest = question_digest(request)
        position = inc.position
        matched = self.replayable(inc, position, key)
        expect = "new"
        if matched is not None and matched.digest != digest:
            expect = "diverge"
            inc.replaying = False
            assert inc.recorded is not None
            inc.recorded = [r for r in inc.recorded if r.seq < matched.seq]
        elif matched is not None:
            expect = "reattach" if matched.pending else "replay"
        if key is None:
            inc.position += 1
        else:
            inc.keys.add(key)
        before = frozenset(a.id for a in self.j_asks.values() if a.run_id == inc.run.id)
        name = f"q{next(self.ids)}"
        mode = "controller" if abortable else "none"
        rec = self.make_ask_record(name, self._ctx(ctx), request, False, mode, controller)
        rec.journal = JournalAsk(inc, position, key, digest, expect, matched, before)
        if len(request.questions) > 1:
            rec.multi = MultiAsk(list(request.questions))
            if expect == "reattach" and matched is not None and matched.partial:
                # The questions answered before the ask was cut, kept in the record: the
                # resumed ask asks only the rest (the run held them when it resumed).
                rec.multi.given[KEPT] = {str(entry.id): entry for entry in matched.partial}
        for item in request.questions:
            self.ask_by_question[item.question] = rec
        agent.busy = rec
        where = f"key {key!r}" if key is not None else f"position {position}"
        self.log(f"{name} = {inc.name} asks {question!r} on {ctx} at {where} ({expect})")
        inc.send.send_nowait(rec)
        return rec

    async def reply_then(self, rec: Any, then: str) -> None:
        """Once ``rec`` reached a provider (if it does), the human replies ``then``."""
        if then == "wait":
            return
        # An ask of several questions put one at a time: the human answers each in turn.
        for _ in rec.multi.items if rec.multi is not None and then == "answer" else [then]:
            await self._settle()
            waiting = [attempt for attempt in rec.attempts if attempt.status == "waiting"]
            if not waiting or rec.outcome is not None or waiting[-1].reply is not None:
                return
            self.log(f"{waiting[-1].name} ({rec.name} on {waiting[-1].reg.name}) replies {then}")
            self.give(waiting[-1], then)

    @precondition(lambda self: self.idle_agents())
    @rule(pick=st.integers(0, 63), failed=st.integers(0, 3).map(lambda i: i == 3))
    def agent_ends(self, pick: int, failed: bool) -> None:
        def action() -> None:
            agent = self.pick(self.idle_agents(), pick)
            assert agent.inc is not None
            agent.inc.ending = "failed" if failed else "finished"
            self.log(f"{agent.inc.name} {'raises' if failed else 'returns'}: its run ends")
            agent.inc.send.send_nowait("raise" if failed else "return")

        self.do(action)

    @precondition(lambda self: self.agent_attempts())
    @rule(
        pick=st.integers(0, 63),
        reply=st.sampled_from(["answer"] * 4 + ["invalid", ErrorCode.ASK_DECLINED, "crash"]),
    )
    def human_answers_agent(self, pick: int, reply: str) -> None:
        """The human replies to an agent's question (as the generic ``answer`` rule, for
        agents' questions only: an agent waits for each of its answers)."""

        def action() -> None:
            attempt = self.pick(self.agent_attempts(), pick)
            self.log(f"{attempt.name} ({attempt.ask.name} on {attempt.reg.name}) replies {reply}")
            self.give(attempt, reply)

        self.do(action)

    @precondition(
        lambda self: not any(r is not None for r in self.acceptable(self.C, USER_INTERACTION))
    )
    @rule()
    def provide_ui_again(self) -> None:
        """A new generation provides the user-interaction seam on C (none is live there):
        agents' asks reach a provider more often than the generic rules alone allow."""

        def action() -> None:
            ms = self.new_scope(self.C, fast=False)
            assert ms is not None
            reg = self.add_provider(self.C, USER_INTERACTION, ms)
            self.log(f"{ms.name} = root scope on C; {ms.name}.provide(ui) -> {name_of(reg)}")

        self.do(action)

    # -- model queries ----------------------------------------------------------------------

    def stopped_agents(self) -> list[MAgent]:
        return [agent for agent in self.j_agents if agent.inc is None]

    def idle_agents(self) -> list[MAgent]:
        return [
            agent
            for agent in self.j_agents
            if agent.inc is not None
            and agent.inc.recorded is not None
            and agent.inc.ending is None
            and (agent.busy is None or agent.busy.outcome is not None)
        ]

    def agent_asks_left(self) -> bool:
        return sum(1 for rec in self.asks if rec.journal is not None) < MAX_AGENT_ASKS

    def replaying_agents(self) -> list[MAgent]:
        """Idle agents whose run still holds a recorded question for their next ask."""
        return [
            agent
            for agent in self.idle_agents()
            if agent.inc is not None
            and agent.inc.replaying
            and any(r.key is None and r.seq == agent.inc.position for r in agent.inc.recorded or [])
        ]

    def agent_attempts(self) -> list[Any]:
        return [attempt for attempt in self.waiting_attempts() if attempt.ask.journal is not None]

    def racing_candidates(self) -> list[Any]:
        return [
            attempt
            for attempt in self.agent_attempts()
            if attempt.ask.journal.record_id in self.j_asks
            and self.j_asks[attempt.ask.journal.record_id].pending
        ]

    def live_ask_of(self, record_id: str) -> Any:
        for rec in self.asks:
            j = rec.journal
            if j is not None and j.record_id == record_id and rec.outcome is None:
                return rec
        return None

    def replayable(self, inc: Incarnation, position: int, key: str | None) -> AskRecord | None:
        """The record the ask at ``position`` (or with ``key``) replays, as docs/journal.md
        says: same key, or same position among the unkeyed; none once replay stopped."""
        if not inc.replaying or inc.recorded is None:
            return None
        for record in inc.recorded:
            if (key is not None and record.key == key) or (
                key is None and record.key is None and record.seq == position
            ):
                return record
        return None

    def next_question(
        self, inc: Incarnation, choice: int, change: bool, keyed: bool, several: bool = False
    ) -> tuple[str, str | None]:
        """Mostly what the run recorded (at this position, or a key not yet asked again),
        sometimes changed; else a new question (``several``: an ask of several), whose text
        repeats across runs."""
        assert inc.run is not None and inc.recorded is not None
        run_id = inc.run.id
        live = [a for a in self.j_asks.values() if a.run_id == run_id and not gone(a)]
        options = [
            r for r in inc.recorded if inc.replaying and r.key is None and r.seq == inc.position
        ]
        options += [r for r in live if r.key is not None and r.key not in inc.keys]
        if options and choice < 6:
            record = options[choice % len(options)]
            question, key = asked_text(record.request), record.key
        else:
            key = None
            if keyed:
                taken = {a.key for a in live} | inc.keys
                key = next(f"key{n}" for n in range(100) if f"key{n}" not in taken)
            question = f"{inc.agent.key}.{key if key is not None else inc.position}"
            question += SEVERAL if several else ""
        return (f"{question}'" if change else question), key
