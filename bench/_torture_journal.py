"""The reload torture with a journal: every ask recorded in an agent run, daemon restarts.

    .venv/bin/python bench/torture.py --journal sqlite|memory [--restart-every 25]

The reload torture (``bench/torture.py``) runs as it does without a journal — the real
watcher, random edits of every kind, asks in flight through every reload — and its asks are
made inside agent runs of a :class:`~hotseam.interaction.journal.JournalDaemon` (provided as
``JOURNALING``): ``sqlite``, a temporary SQLite file, or ``memory``. Each asker is an agent: a
run is a script of 2-8 asks (30 % of several questions, ``--several-ratio``), after which
the agent returns (the run finishes) or, one run in ten, raises (the run fails). 15 % of
the asks are ended by the agent at a random moment: 10 % by the request's signal (the
question is withdrawn), 5 % by cancelling the task that asks (the question stays pending
for the run: a resume re-attaches to it, the run's end withdraws it); 5 % more have a time
limit.

Every ``--restart-every`` edits the daemon restarts, in process: its agents' tasks are
cancelled mid-ask, the journal is closed and opened anew on the same file (``memory:``,
SQLite in memory, keeps its one object: a new daemon writes to it), and every agent resumes
its unfinished run by running its script again from the start — as an agent process
restarted for a deploy.

**Must be 0**, besides every counter of the torture without a journal:

* *records not settled as the asker got* — when an ask ends, its record is not answered
  with the answer the asker got (each question's, for an ask of several), not failed with
  the code it got, not withdrawn when it got ``ASK_ABORTED``; or the ask has no record;
* *records left pending when their ask ended* — the same, the record still pending;
* *answers recorded twice* — a record settled by two winning writes (watched on the
  journal's ``answer_ask``/``settle_ask``), or a settled record seen to change later;
* *records of ended runs changed afterwards* — a run that finished or failed, and its
  records, read again at every restart and at the end, differ from what they were when its
  agent ended it; or the run did not end as its agent did, kept a pending record, or did
  not withdraw one that a cancelled task had left pending;
* *replays not as recorded* — a resumed run's ask of a settled record did not return what
  the record says, at once, or it did not stay that record;
* *questions asked again after their answer was recorded* — a provider was asked a question
  of a resumed run whose record was settled (an answer recorded is never asked for again);
* *questions recorded twice* — a run holds two live records of one question (a resumed
  ask did not re-attach to its pending record);
* *resumes that lost their run* — an agent restarted inside a run did not resume that run
  with the records it held (or a new run resumed something);
* *runs diverged* — a resumed run's ask found another question at its position (the scripts
  are the same, so the positions must be);
* *runs or records left open at the end* — once the agents ended, a run still running or a
  record still pending;
* *questions of several answered before their ask was cut, asked again* — a question of an
  ask of several that a provider had answered when a restart (or the agent's task) cut the
  ask, its record pending, asked again when a resumed run re-attached to the ask (counted
  here rather than as *questions answered twice* and *lost*). Not 0 today: the journal
  records an ask's answer whole, so what was answered of it lives in the ask only — the
  open finding of ``tests/interaction/test_asks_at_their_edges.py``. ``--several-ratio 0``
  leaves it out.

**Journal faults** (SQLite, every ``fault_every`` edits, 20 by default, in turn): the
journal's ``-wal`` and ``-shm`` removed, its whole folder removed (a tmp cleaner, an
operator's clean-up), and — when the journal's folder is a small tmpfs this process could
mount (as root) — its disk full for 0.3-1.5 s while the agents ask. After a removal an
inbox opened afterwards must list every question the daemon holds pending throughout;
through a full disk the questions wait. Two more counters must be 0:

* *asks or runs failed for the journal's sake* — a ``JournalError`` reached an agent (an
  ask, a run's start or end) instead of the ask waiting for the journal;
* *questions an inbox opened after a fault does not list* — a question pending before and
  after the removal that a journal opened afresh at the path does not have (the daemon
  kept writing to removed files), or that journal cannot be opened at all.

The agents' scripts and the comparison of what an asker got with its record are in
``_torture_agents.py``, the watching of the journal and the sabotages in
``_torture_sabotage.py``.

``--sabotage`` breaks one guarantee on purpose, to watch these counters catch it:
``no-withdraw`` (a withdrawal is not recorded: the record stays pending), ``forget-answer``
(an answer is not recorded), ``replay-position`` (a resumed run replays the record of the
next position); on SQLite only, as a broken engine would, ``answer-twice`` (an answer is
written again over the first) and ``touch-ended`` (a record of a run changes after the run
ended); ``keep-removed`` (removed journal files go unnoticed) and ``no-wait`` (a journal
out of reach fails the ask at once), which the fault counters catch (these two through
``run_journal_torture(..., sabotage=...)``).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import random
import shutil
import subprocess
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.abc
import anyio.lowlevel
import sniffio
from _journal_reads import patient
from _torture_agents import (
    ASKED_AGAIN,
    DIVERGED,
    DUPLICATES,
    ENDED_CHANGED,
    JOURNAL_ZERO,
    LEFT_OPEN,
    LEFT_PENDING,
    LOST_RUN,
    NOT_AS_GOT,
    PARTS_AGAIN,
    REPLAY,
    TWICE,
    Agent,
    AgentFailedError,
    Item,
    abort_after,
    asked,
    got,
    said,
    settled_as,
    several,
)
from _torture_ledger import MUST_BE_ZERO, Outcome, Report, Settings
from _torture_sabotage import (
    SABOTAGES,
    TAMPERING,
    patch_faults,
    patch_replay_position,
    tamper,
    watch,
)
from torture import Torture

from hotseam import AbortController
from hotseam.interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    ErrorCode,
    UserInteractionError,
    ask,
)
from hotseam.interaction._journal import (
    AskRecord,
    AskState,
    Journal,
    JournalError,
    RunState,
    open_journal,
)
from hotseam.interaction.journal import JOURNALING, AgentRun, JournalDaemon
from hotseam.reload import Reloader, ReloadEvent

__all__ = ["ENGINES", "JournalTorture", "run_journal_torture"]

ENGINES = ("sqlite", "memory")

T = TypeVar("T")

FAULT_EVERY = 20
"""Edits between two journal faults on SQLite (0: none)."""
FAULTS = ("-wal and -shm removed", "folder removed", "disk full")
DISK = "64m"
"""The size of the tmpfs the journal's folder is on, when it can be mounted: room for the
journal of 1,000 edits (about 4 MiB, and as much write-ahead log) and a copy of it (a
repair after a removal), so that the disk is full only while a fault fills it."""

JOURNAL_FAILED = "journal: asks or runs failed for the journal's sake"
UNLISTED = "journal: questions an inbox opened after a fault does not list"


async def patient_read(read: Callable[[], Awaitable[T]]) -> T:
    """The harness's own read, waiting out a fault for up to the settle timeout."""
    return await patient(read, within=Settings.settle_timeout)


class JournalTorture(Torture):
    """The reload torture whose askers are agents of a journal, restarted now and then."""

    def __init__(
        self,
        folder: Path,
        settings: Settings,
        engine: str,
        *,
        restart_every: int = 25,
        sabotage: str | None = None,
        fault_every: int | None = None,
    ) -> None:
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
        if sabotage is not None and sabotage not in SABOTAGES:
            raise ValueError(f"sabotage must be one of {SABOTAGES}, got {sabotage!r}")
        if sabotage in TAMPERING and engine != "sqlite":
            raise ValueError(f"the sabotage {sabotage} writes to the SQLite file: use sqlite")
        self.engine = engine
        self.restart_every = restart_every
        self.sabotage = sabotage
        if fault_every is None:
            fault_every = FAULT_EVERY if engine == "sqlite" else 0
        if fault_every and engine != "sqlite":
            raise ValueError("journal faults need a journal in files: use sqlite")
        self.fault_every = fault_every
        self.faults_done = 0
        self.fault_rng = random.Random(settings.seed * 7 + 3)
        self.fault_windows: list[list[float]] = []  # the full disks: [start, end]
        self._stopping = False
        self.wake: anyio.Event | None = None
        super().__init__(folder, settings)
        # The journal in a folder of its own (removed by a fault), on a disk of its own
        # (a tmpfs, filled by a fault) when one can be mounted.
        self.disk = self.folder.parent / f"{self.folder.name}-journal"
        self.path = self.disk / "journal" / "journal.sqlite3"
        self.mounted = False
        self.agents = [
            Agent(index, random.Random(settings.seed * 1000 + index))
            for index in range(settings.askers)
        ]
        self.items: dict[str, Item] = {}
        self.replaying: set[str] = set()
        self.journaling: JournalDaemon | None = None
        self.agent_tasks: anyio.abc.TaskGroup | None = None
        self.restarted = anyio.Event()
        self.edits_done = 0
        self.wins: Counter[str] = Counter()  # winning settlements, by ask id
        self.seen: dict[str, tuple[object, ...]] = {}  # settled records as first seen, by id
        self.ended: dict[str, tuple[RunState, list[tuple[str, tuple[object, ...]]]]] = {}
        self.known_runs: set[str] = set()
        self.left_pending: dict[str, set[str]] = {}  # by run: records of cancelled tasks
        self.counted: set[tuple[str, str]] = set()
        # questions of an ask of several that providers had answered when the ask was cut
        # (a restart, or its task cancelled) with its record pending: their answers lived
        # in the ask only (not in the journal), and a re-attachment asks them again
        self.parts_cut: set[str] = set()
        self.idle_until = -1.0  # when a provider module last became active after none was
        self.counts = self.report.section("journal")

    def make_report(self) -> Report:
        return Report(
            self.settings,
            sniffio.current_async_library(),
            title=f"Reload torture with a journal ({self.engine}"
            + (f", sabotage {self.sabotage}" if self.sabotage else "")
            + ")",
            zero_names=(*MUST_BE_ZERO, *JOURNAL_ZERO, JOURNAL_FAILED, UNLISTED),
        )

    async def run(self) -> Report:
        undo = patch_replay_position() if self.sabotage == "replay-position" else None
        unfault = patch_faults(self.sabotage)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.fault_every:
            self.mount()
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            return await super().run()
        finally:
            unfault()
            if undo is not None:
                undo()
            self.unmount()

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.disk)], check=False)
            self.mounted = False

    def mount(self) -> None:
        """A small tmpfs for the journal, when this process may mount one (root)."""
        if os.geteuid() != 0 or shutil.which("mount") is None:
            self.counts["faults: disk full left out (mounting a tmpfs needs root)"] = 1
            return
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={DISK},mode=0700", "tmpfs", str(self.disk)],
            capture_output=True,
            text=True,
            check=False,
        )
        self.mounted = done.returncode == 0
        if not self.mounted:
            self.counts["faults: disk full left out (no tmpfs could be mounted)"] = 1

    # The base sets ``stopping`` when the edits and the final check are over: wake the daemon.
    @property
    def stopping(self) -> bool:
        return self._stopping

    @stopping.setter
    def stopping(self, value: bool) -> None:
        self._stopping = value
        if value and self.wake is not None:
            self.wake.set()

    # -- the daemon: the journal, the agents, restarts ----------------------------------------

    def start_askers(self, tasks: anyio.abc.TaskGroup) -> None:
        tasks.start_soon(self.daemon)

    async def daemon(self) -> None:
        """Open the journal and run the agents; on a restart cancel them mid-ask, close the
        journal, and open it anew on the same file, where the agents resume their runs."""
        async with contextlib.AsyncExitStack() as process:
            shared = None
            if self.engine == "memory":
                shared = await process.enter_async_context(open_journal("memory:"))
                self.watch(shared)
            incarnation = 0
            while True:
                incarnation += 1
                async with self.incarnation(shared, incarnation) as journal:
                    await self.run_agents()
                    if self.stopping:
                        await self.check_end(journal)
                        return
                    await self.note_restart(journal)
                self.counts["restarts"] += 1

    @contextlib.asynccontextmanager
    async def incarnation(self, shared: Journal | None, number: int) -> AsyncIterator[Journal]:
        """One life of the daemon: the journal (on SQLite, opened anew on the same file) and
        this process's ``JournalDaemon`` in it, provided as ``JOURNALING``."""
        async with contextlib.AsyncExitStack() as life:
            journal = shared
            if journal is None:
                journal = await life.enter_async_context(open_journal(self.path))
                self.watch(journal)
            journaling = await life.enter_async_context(
                JournalDaemon.open(journal, name=f"torture-daemon-{number}")
            )
            scope = await life.enter_async_context(self.context.scope("journal"))
            scope.provide(JOURNALING, journaling)
            self.journaling = journaling
            yield journal

    async def run_agents(self) -> None:
        """Until the stop (the agents end their runs) or a restart (cancelled mid-ask)."""
        self.wake = anyio.Event()
        async with anyio.create_task_group() as agents:
            self.agent_tasks = agents  # the agents' signal timers run there too
            for agent in self.agents:
                agents.start_soon(self.agent, agent)
            self.restarted.set()
            if not self.stopping:
                await self.wake.wait()
            if not self.stopping:
                agents.cancel_scope.cancel()

    async def restart(self) -> None:
        """Ask the daemon to restart and wait until its agents run again."""
        # On a busy machine the edits can reach the first restart before the daemon's
        # agents started: wait for them (the incarnation to restart) first.
        with anyio.move_on_after(self.settings.settle_timeout):
            await self.restarted.wait()
        self.restarted = anyio.Event()
        assert self.wake is not None
        self.wake.set()
        with anyio.move_on_after(self.settings.settle_timeout) as waited:
            await self.restarted.wait()
        if waited.cancelled_caught:
            self.report.problems.append(
                f"a restart did not resume the agents within {self.settings.settle_timeout} s"
            )

    async def edit_step(self, reloader: Reloader) -> None:
        await super().edit_step(reloader)
        self.edits_done += 1
        if self.restart_every and self.edits_done % self.restart_every == 0:
            await self.restart()
        if self.fault_every and self.edits_done % self.fault_every == self.fault_every // 2:
            await self.fault()

    # -- journal faults -----------------------------------------------------------------------

    async def fault(self) -> None:
        """The next fault in turn, while the agents ask; then its check."""
        kinds = FAULTS if self.mounted else FAULTS[:2]
        kind = kinds[self.faults_done % len(kinds)]
        self.faults_done += 1
        journaling = self.journaling
        if journaling is None:
            return
        before = await self.pending_ids(journaling.journal)
        if kind == "disk full":
            filler = self.disk / "filler"
            window = [anyio.current_time(), float("inf")]
            self.fault_windows.append(window)
            await anyio.to_thread.run_sync(_fill, filler)
            try:
                await anyio.sleep(self.fault_rng.uniform(0.3, 1.5))  # the agents' asks wait
            finally:
                filler.unlink()
                window[1] = anyio.current_time()
            self.counts[f"faults: {kind}"] += 1
            return
        if kind == "folder removed":
            # As ``rm -rf`` racing the daemon: what the daemon makes again meanwhile (its
            # repair, started as it saw the first file go) can leave the folder not empty.
            await anyio.to_thread.run_sync(
                functools.partial(shutil.rmtree, self.path.parent, ignore_errors=True)
            )
        else:
            for suffix in ("-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{self.path}{suffix}")
        self.counts[f"faults: {kind}"] += 1
        # The daemon's next transaction notices (its agents' asks, or this read).
        after = await self.pending_ids(journaling.journal)
        try:
            async with open_journal(self.path) as fresh:  # an inbox opened afterwards
                listed = {entry.ask.id for entry in await fresh.inbox()}
        except JournalError as error:  # the daemon did not make the journal again
            listed = set()
            self.report.count(UNLISTED, f"after {kind}: an inbox could not open: {error}")
        later = await self.pending_ids(journaling.journal)
        unlisted = sorted((before & after & later) - listed)
        if unlisted:
            self.report.count(UNLISTED, f"after {kind}: {len(unlisted)}, {unlisted[:5]}")

    def in_fault(self, outcome: Outcome) -> bool:
        """True when a full disk began before the ask ended and ended after it started."""
        return any(end >= outcome.started for _, end in self.fault_windows)

    async def pending_ids(self, journal: Journal) -> set[str]:
        """The asks ``journal`` holds pending."""
        try:
            return {ask.id for ask in await journal.list_asks(states=[AskState.PENDING])}
        except JournalError:
            return set()

    def watch(self, journal: Journal) -> None:
        """Watch ``journal``'s settlements and divergences (and sabotage it, when asked)."""
        watch(journal, self.sabotage, self.won, self.diverged)

    def won(self, record: AskRecord) -> None:
        self.wins[record.id] += 1
        self.seen.setdefault(record.id, settled_as(record))

    def diverged(self, run_id: str, position: int, abandoned: list[AskRecord]) -> None:
        self.report.count(
            DIVERGED, f"run {run_id} diverged at position {position}: {len(abandoned)} abandoned"
        )

    # -- an agent -----------------------------------------------------------------------------

    async def agent(self, agent: Agent) -> None:
        """Run scripts until the stop; a restart cancels it inside a run, left to resume."""
        assert self.journaling is not None
        journaling = self.journaling
        while not self.stopping:
            if agent.script is None:
                agent.new_script(self.settings.several_ratio)
            assert agent.script is not None
            try:
                with contextlib.suppress(AgentFailedError):
                    async with journaling.run(agent.key) as run:
                        self.check_start(agent, run)
                        await self.run_script(agent, run)
            except JournalError as error:  # an ask, the run's start or end: must wait
                self.report.count(JOURNAL_FAILED, f"{agent.key}: {error.code}: {error}")
                agent.script = None
                agent.run_id = None
                await anyio.sleep(0.05)
                continue
            with anyio.CancelScope(shield=True):
                await self.run_ended(agent, run, failed=agent.fails)
            agent.script = None

    async def run_script(self, agent: Agent, run: AgentRun) -> None:
        """Ask the script's items in order (until the stop); then return, or raise."""
        assert agent.script is not None
        for item in agent.script:
            if self.stopping:
                break
            await self.ask_item(agent, run, item)
        if agent.fails:
            raise AgentFailedError(agent.key)

    def check_start(self, agent: Agent, run: AgentRun) -> None:
        """A restarted agent resumes its run with the records it held; a new one starts
        a run nobody ran."""
        recorded = [record.id for record in run.recorded]
        if agent.run_id is None:
            if run.id in self.known_runs or recorded:
                self.report.count(
                    LOST_RUN, f"{agent.key} started a new script in run {run.id}, {recorded}"
                )
        else:
            expected = [r.id for r in (agent.resume or {}).values()]
            if run.id != agent.run_id or sorted(recorded) != sorted(expected):
                self.report.count(
                    LOST_RUN,
                    f"{agent.key} resumed run {run.id} with {recorded}; it was in run "
                    f"{agent.run_id} with {expected}",
                )
            else:
                self.counts["runs resumed"] += 1
        agent.run_id = run.id
        self.known_runs.add(run.id)

    async def ask_item(self, agent: Agent, run: AgentRun, item: Item) -> None:
        """Ask one item of the script (a replay, a re-attachment or a new ask) and check
        its record once it ended."""
        self.items[item.question] = item
        recorded = (agent.resume or {}).get(item.question)
        replay = recorded is not None and not recorded.pending
        calls = self.calls_of(item)
        if replay:
            self.replaying.add(item.question)
        cancel = item.withdraw == "task"  # the harness's cancel scope, as without a journal
        try:
            outcome = await self.ask_once(item.question, item.after, cancel, item.several)
        except anyio.get_cancelled_exc_class():
            interrupted = self.outcomes.get(item.question)
            if interrupted is not None:
                interrupted.cancelled = True  # a restart: what the record keeps is replayed
                self.report.asks["interrupted by a restart"] += 1
            self.cut(item)
            raise
        finally:
            self.replaying.discard(item.question)
        if outcome.cancelled and cancel:
            self.cut(item)
        await anyio.lowlevel.checkpoint()
        with anyio.CancelScope(shield=True):
            await self.check_record(run, item, outcome, recorded, calls)
        if outcome.code is not None and not outcome.cancelled:
            await anyio.sleep(agent.rng.uniform(0.002, 0.02))

    def cut(self, item: Item) -> None:
        """The item's ask ended without an outcome: note which of its questions were
        answered (an ask of several), to tell them apart if a re-attachment asks again."""
        if item.several:
            returned = self.ledger.returned_parts
            self.parts_cut.update(
                key for n in (1, 2, 3) if returned.get(key := f"{item.question}/k{n}")
            )

    def calls_of(self, item: Item) -> int:
        """How many times providers were asked the item's question(s)."""
        calls = self.ledger.calls
        if not item.several:
            return calls[item.question]
        return sum(calls[f"{item.question}/k{n}"] for n in (1, 2, 3))

    async def call_ask(
        self,
        request: AskUserQuestionRequest,
        outcome: Outcome,
        cancel_after: float,
        cancel: bool,
    ) -> AskUserQuestionAnswer:
        """Withdraw through the request's signal, or ask with a time limit, as the item says."""
        item = self.items.get(outcome.question)
        if item is None or item.withdraw == "task" or outcome.question in self.replaying:
            return await super().call_ask(request, outcome, cancel_after, cancel)
        controller = AbortController()
        if item.withdraw == "signal":
            assert self.agent_tasks is not None
            self.agent_tasks.start_soon(abort_after, controller, item.after)
        try:
            return await ask(
                request.with_signal(controller.signal),
                context=self.context,
                swap_timeout=self.settings.swap_timeout,
                timeout=item.after if item.withdraw == "timeout" else None,
            )
        except UserInteractionError as error:
            if error.code == ErrorCode.ASK_ABORTED and controller.signal.aborted:
                outcome.cancelled = True  # the agent took it back
            raise

    def on_event(self, event: ReloadEvent) -> None:
        idle = not self.active
        super().on_event(event)
        if idle and self.active:
            self.idle_until = anyio.current_time()

    def legitimate(self, outcome: Outcome, error: UserInteractionError) -> bool:
        """As without a journal, except that the journal records the failure before the
        caller sees it (a write, in a worker thread on SQLite), and a reload may activate a
        provider meanwhile: a moment without one during the ask explains it."""
        if outcome.question in self.replaying:
            return True  # what the record says (checked against it)
        item = self.items.get(outcome.question)
        if item is not None and item.withdraw == "timeout" and error.code == ErrorCode.ASK_TIMEOUT:
            return True
        if (
            error.code in (ErrorCode.NO_PROVIDER, ErrorCode.ASK_ABORTED)
            and self.idle_until >= outcome.started
        ):
            return True
        return super().legitimate(outcome, error)

    # -- the checks ---------------------------------------------------------------------------

    def tally_parts(self) -> None:
        """A question of several answered before its ask was cut and asked again when a
        resume re-attached to the ask is counted apart (its answer was kept in the ask only,
        not in the journal: see tests/interaction/test_asks_at_their_edges.py); the other
        questions as without a journal."""
        returned = self.ledger.returned_parts
        apart = {key: returned.pop(key) for key in self.parts_cut if key in returned}
        try:
            super().tally_parts()
        finally:
            returned.update(apart)
        for key, marks in sorted(apart.items()):
            if len(marks) > 1:
                self.report.count(PARTS_AGAIN, f"{key}: providers returned {marks}")

    async def check_record(
        self,
        run: AgentRun,
        item: Item,
        outcome: Outcome,
        recorded: AskRecord | None,
        calls: int,
    ) -> None:
        """The ask's record says what the asker got; a resumed ask kept its record, and a
        replay asked nobody."""
        assert self.journaling is not None
        records = await patient_read(lambda: self.journaling.journal.run_asks(run.id))
        mine = [r for r in records if asked(r) == item.question and r.state != AskState.ABANDONED]
        question = item.question
        if len(mine) > 1:
            self.report.count(DUPLICATES, f"{question}: {[(r.id, r.state.value) for r in mine]}")
        replay = recorded is not None and not recorded.pending
        if outcome.cancelled and item.withdraw == "task" and not replay:
            self.check_cancelled(question, mine[0] if mine else None)
            return
        if not mine:
            if outcome.cancelled and item.withdraw == "signal" and self.in_fault(outcome):
                # Taken back by its signal while it waited for the journal (a full disk):
                # never recorded, never asked.
                self.counts["signal aborts while waiting for the journal (never recorded)"] += 1
                return
            self.report.count(NOT_AS_GOT, f"{question}: no record; the asker got {got(outcome)}")
            return
        record = mine[0]
        if recorded is not None and record.id != recorded.id:
            self.report.count(
                LOST_RUN, f"{question}: record {record.id}, it was {recorded.id} before"
            )
        if replay:
            assert recorded is not None
            self.counts[f"replayed: {recorded.state.value}"] += 1
            if settled_as(record) != settled_as(recorded) or got(outcome) != said(recorded):
                self.report.count(
                    REPLAY, f"{question}: got {got(outcome)}; its record says {said(recorded)}"
                )
            if self.calls_of(item) != calls:
                self.report.count(
                    ASKED_AGAIN, f"{question}: asked again; its record says {said(recorded)}"
                )
        elif recorded is not None:
            self.counts["re-attached to a pending record"] += 1
            self.left_pending.get(run.id, set()).discard(record.id)
        if outcome.hung:
            return  # counted as hung; its record may stay pending
        if got(outcome) != said(record):
            counter = LEFT_PENDING if record.pending else NOT_AS_GOT
            self.report.count(
                counter, f"{question}: got {got(outcome)}; record {record.id} {said(record)}"
            )
        if not record.pending:
            self.observe(record)

    def check_cancelled(self, question: str, record: AskRecord | None) -> None:
        """The agent's task cancelled the ask: its record stays pending for the run (the
        run's end withdraws it), unless the ask was cancelled before it was recorded, or as
        it was being settled — by an answer a provider returned, or a failure."""
        if record is not None and not record.pending:  # settled now (as it was re-attached)
            self.left_pending.get(record.run_id, set()).discard(record.id)
        if record is None:
            self.counts["cancelled tasks: before the ask was recorded"] += 1
        elif record.pending:
            self.counts["cancelled tasks: left pending for the run"] += 1
            self.left_pending.setdefault(record.run_id, set()).add(record.id)
        elif record.state is AskState.ANSWERED:
            assert record.answer is not None
            returned = self.ledger.returned.get(question, [])
            if not several(record) and record.answer.answer not in returned:
                self.report.count(
                    NOT_AS_GOT, f"{question}: answered {record.answer.answer}; {returned}"
                )
            self.counts["cancelled tasks: answered as they were cancelled (kept)"] += 1
            self.observe(record)
        else:
            self.counts[f"cancelled tasks: {record.state.value} as they were cancelled"] += 1
            self.observe(record)

    def observe(self, record: AskRecord) -> None:
        """A settled record never changes (``abandoned`` aside: a resumed run diverged)."""
        now = settled_as(record)
        first = self.seen.setdefault(record.id, now)
        if first != now and record.state is not AskState.ABANDONED:
            self.once(TWICE, record.id, f"record {record.id} was {first}, then {now}")

    async def run_ended(self, agent: Agent, run: AgentRun, *, failed: bool) -> None:
        """The run ended as its agent did, no record pending; keep it to compare later."""
        assert self.journaling is not None
        journal = self.journaling.journal
        state = (await patient_read(lambda: journal.get_run(run.id))).state
        records = await patient_read(lambda: journal.run_asks(run.id))
        expected = RunState.FAILED if failed else RunState.FINISHED
        pending = [r.id for r in records if r.pending]
        if state is not expected or pending:
            self.report.count(
                ENDED_CHANGED,
                f"run {run.id} of {agent.key} is {state.value} with pending {pending}; its "
                f"agent {'failed' if failed else 'returned'}",
            )
        left = self.left_pending.pop(run.id, set())
        kept = [
            f"{r.id} ({r.state.value})"
            for r in records
            if r.id in left and r.state is not AskState.WITHDRAWN
        ]
        if kept:
            self.report.count(
                ENDED_CHANGED,
                f"run {run.id} of {agent.key} ended without withdrawing {kept}, left pending by "
                "cancelled tasks",
            )
        self.counts["cancelled tasks: withdrawn by the run's end"] += len(left) - len(kept)
        self.counts[f"runs {expected.value}"] += 1
        self.ended[run.id] = (state, [(r.id, settled_as(r)) for r in records])
        for record in records:
            self.observe(record)
        if self.sabotage == "touch-ended" and records:
            await tamper(
                journal, "UPDATE hotseam_asks SET settled_by = 'later' WHERE id = ?", records[0].id
            )

    async def note_restart(self, journal: Journal) -> None:
        """The daemon stopped: keep each agent's run's records, the replay its resume
        owes; compare the ended runs with what they were."""
        for agent in self.agents:
            if agent.run_id is not None:
                records = await patient_read(functools.partial(journal.run_asks, agent.run_id))
                agent.resume = {asked(r): r for r in records if r.state is not AskState.ABANDONED}
                self.counts["restarts: records the runs held"] += len(agent.resume)
                pending = sum(r.pending for r in agent.resume.values())
                self.counts["restarts: records the runs held, pending"] += pending
        await self.check_ended(journal)

    async def check_ended(self, journal: Journal) -> None:
        """Every ended run and its records are as they were when the run ended."""
        now: dict[str, list[tuple[str, tuple[object, ...]]]] = {}
        for record in await patient_read(journal.list_asks):
            now.setdefault(record.run_id, []).append((record.id, settled_as(record)))
        overviews = await patient_read(journal.runs)
        states = {overview.run.id: overview.run.state for overview in overviews}
        for run_id, (state, records) in self.ended.items():
            if states.get(run_id) is not state or sorted(now.get(run_id, [])) != sorted(records):
                self.once(ENDED_CHANGED, run_id, f"run {run_id} changed after it ended")
        for ask_id, wins in self.wins.items():
            if wins > 1:
                self.once(TWICE, ask_id, f"record {ask_id} settled {wins} times")

    def once(self, counter: str, what: str, example: str) -> None:
        """Count ``what`` (a record, a run) once under ``counter``, however often seen."""
        if (counter, what) not in self.counted:
            self.counted.add((counter, what))
            self.report.count(counter, example)

    async def check_end(self, journal: Journal) -> None:
        """Once the agents ended: no run running, no record pending, nothing ended changed."""
        running = await patient_read(lambda: journal.runs(states=[RunState.RUNNING]))
        pending = await patient_read(lambda: journal.list_asks(states=[AskState.PENDING]))
        if running or pending:
            self.report.count(
                LEFT_OPEN,
                f"{len(running)} run(s) running, {len(pending)} record(s) pending "
                f"({[r.id for r in pending[:5]]})",
            )
        await self.check_ended(journal)
        self.counts["records in the journal"] = len(await patient_read(journal.list_asks))


async def run_journal_torture(
    folder: Path,
    settings: Settings | None = None,
    engine: str = "sqlite",
    *,
    restart_every: int = 25,
    sabotage: str | None = None,
    fault_every: int | None = None,
) -> Report:
    """Run the journal torture in ``folder`` (an empty directory; the SQLite journal is in a
    folder next to it) and return its report. ``fault_every``: edits between two journal
    faults (default: every 20 on SQLite, none on memory; 0: none)."""
    torture = JournalTorture(
        folder,
        settings or Settings(),
        engine,
        restart_every=restart_every,
        sabotage=sabotage,
        fault_every=fault_every,
    )
    return await torture.run()


def _fill(filler: Path) -> None:
    """Write ``filler`` until its file system is full, down to the last page."""
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (1 << 20, 65536, 4096, 512):
            chunk = b"\0" * size
            while True:
                try:
                    os.write(fd, chunk)
                except OSError as error:
                    if error.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
