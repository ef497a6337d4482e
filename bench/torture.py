"""Reload torture: real files, the real watcher, and asks running through every kind of edit.

    .venv/bin/python bench/torture.py [--edits 1000] [--seed 1] [--backend asyncio|trio]
        [--several-ratio 0.3]
        [--journal sqlite|memory [--restart-every 25] [--approvals 0.2] [--sabotage ...]]

A :class:`hotseam.reload.Reloader` watches a temporary folder (watchfiles; no reload is driven
by hand) that holds a provider module, ``torture_ui.py``, which imports a helper,
``torture_words.py``. Four asker tasks ask continuously through
:func:`hotseam.interaction.ask` — 15 % of the asks are cancelled by the harness at a random
moment, 30 % hold three questions (one choice; two or three of four letters; free text that
may be skipped), which every other provider version shows at once (``multiple_questions``)
and the others are asked one after the other, so reloads land between them — while the edit
loop makes ``--edits`` random edits a few ms to 50 ms apart (one in seven pauses is 0.1-0.3 s
instead, so reloads also run alone with asks in flight):

* provider: a valid version saved in place, or atomically (temporary file + ``os.replace``);
  a valid version whose async disposer raises, or overruns the reloader's
  ``dispose_timeout``; a syntax error; an exception at import; an exception in ``setup``
  (after it registered its provider and its disposer); a valid version whose ``setup``
  fails *for now* (until the failure is reported, as if a service it needs were down);
  deletion and re-creation; renames away (to a name that is not a module), to another
  module name, and back; the same bytes saved again;
* helper: a valid version (in place or atomically), a syntax error, an exception at import,
  a valid version whose import fails for now, deletion and re-creation, a rename away and
  back, the same bytes saved again.

Every provider generation reports to one bookkeeping module, ``torture_ledger`` (put in
``sys.modules``, so each generation imports the same one): its setup, every answer it
returned (``<question id>@<module>:g<generation>:v<version>:<helper word>``) and its disposer
runs. ``setup`` provides ``USER_INTERACTION`` first and then defers an async disposer that
marks the provider closing before it sleeps (the order the README uses). A provider answers
at once, or after a short sleep, so reloads hit asks in flight.

**Must be 0** (recorded as they happen, printed at the end):

* *served while closing* — a provider's ``ask`` was entered while its scope was not open or
  its disposer had started, or returned an answer although its disposer had started before
  the answer was due (the close began while it was still waiting: the ask should have been
  withdrawn). An answer that came due as the close began — the provider's task was already
  runnable in that event-loop turn, and anyio delivers the withdrawal only at its next
  checkpoint — is the same-turn race invariant 6 gives to the answer: it is printed as
  information, not counted;
* *answers discarded* — a provider returned an answer to a question whose caller was not
  cancelled by the harness and did not get that answer;
* *answers given twice* — providers returned more than one answer to one question;
* *asks hung* — an ask still running after ``--hang-after`` seconds (it is then cancelled);
* *wrong question* — a caller got an answer to another question;
* *unexplained failures* — an ask failed, and it was not a legitimate failure;
* per question of the asks of several (each answer a provider returns names its question
  and generation): *questions lost* — a provider returned an answer to a question and the
  caller, who got the ask's answer, did not get that one for it; *questions answered
  twice* — providers returned more than one answer to one question (a question answered
  before a reload asked again after it); *asks half-answered* — a caller got an answer
  without every question's.

**Legitimate failures** (counted by code, not errors): ``NO_PROVIDER`` or ``ASK_ABORTED``
when, at the moment the ask failed, no provider was active in the context and no provider
module had an active generation by the reload events (the provider was deleted or renamed
away, or re-created with broken content). After any failure the asker pauses 2-20 ms before
asking again (an agent does not spin).

**Final state.** After the last edit the harness puts the last good content of both modules
back under their own names (the bytes it last saved that load), saves one more good provider
version whose setup fails for now, waits for that failure's ``ReloadAborted``, lifts the
failure and saves the same bytes again (a failed module must be retried), then saves a
barrier module and waits for the barrier's ``ReloadCommitted``: reloads are serialized and
the barrier was saved last, so every earlier save has been applied by then. The serving
state must equal loading that content once: the serving provider is the last good version
built on the last good helper word and answers an ask, it is the only live generation, both
modules are active; and once the reloader has closed, every generation's disposer ran
exactly once.

Exit status 1 if a must-be-0 counter is not 0 or a final check fails.

With ``--journal``, the askers are agents of an ask journal (SQLite or memory) whose asks are
recorded in runs, and the daemon restarts now and then, resuming them; more counters must
be 0: see ``_torture_journal.py``. A share of the agents' steps (``--approvals``, 0.2; 0
leaves them out) are tool calls needing approval, decided by the provider modules through
the reloads and replayed through the restarts: see ``_torture_approvals.py``.
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path

import anyio
import anyio.abc
import anyio.lowlevel
import sniffio
from _torture_files import EDITS, Files
from _torture_ledger import (
    ALT,
    EXAMPLES,
    LEDGER,
    PROVIDER_MODULES,
    SKIPPED,
    UI,
    WORDS,
    Generation,
    Ledger,
    Outcome,
    Report,
    Settings,
    several_questions,
)

from hotseam import Context, DisposalError
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    ErrorCode,
    QuestionAnswer,
    UserInteractionError,
    ask,
)
from hotseam.reload import (
    DisposeFailed,
    ModuleState,
    ModuleUnloaded,
    ReloadAborted,
    ReloadCommitted,
    Reloader,
    ReloadEvent,
    ReloadPlanned,
    TaskFailed,
)

__all__ = ["Report", "Settings", "Torture", "run_torture"]

APPROVALS = 0.2
"""``--approvals`` with ``--journal`` by default (``_torture_approvals.APPROVALS``: that
module imports this one, so it is not imported for the plain torture)."""


class Torture:
    """One run: the reloader, the askers, the edit loop, the final state and the tally.

    ``bench/torture_daemon.py`` subclasses it (its hooks: ``make_ledger``, ``make_files``,
    ``make_report``, ``make_reloader``, ``edit_step``, ``settle``, ``check_final_state``).
    """

    def __init__(self, folder: Path, settings: Settings) -> None:
        self.folder = folder.resolve()
        self.settings = settings
        self.rng = random.Random(settings.seed)
        self.report = self.make_report()
        self.ledger = self.make_ledger(random.Random(settings.seed + 2))
        self.files = self.make_files(random.Random(settings.seed + 1))
        self.context = Context("torture")
        self.outcomes: dict[str, Outcome] = {}
        self.active: set[str] = set()  # provider modules with an active generation
        self.stopping = False
        self.reported_transient = False

    def make_ledger(self, rng: random.Random) -> Ledger:
        return Ledger(rng, self.settings)

    def make_files(self, rng: random.Random) -> Files:
        return Files(self.folder, rng, self.ledger)

    def make_report(self) -> Report:
        return Report(self.settings, sniffio.current_async_library())

    def make_reloader(self) -> Reloader:
        return Reloader(
            self.context,
            [self.folder],
            dispose_timeout=self.settings.dispose_timeout,
            on_event=self.on_event,
        )

    # -- reload events (the on_event callback: called as each event happens) ---------------------

    def on_event(self, event: ReloadEvent) -> None:
        reloads = self.report.reloads
        module = getattr(event, "module", None)
        if isinstance(event, ReloadPlanned):
            reloads["planned"] += 1
        elif isinstance(event, ReloadCommitted):
            reloads[f"committed: {module}"] += 1
            if module in PROVIDER_MODULES:
                self.active.add(module)
        elif isinstance(event, ReloadAborted):
            reloads[f"aborted: {module} ({event.error.phase}, {event.error.type})"] += 1
            if "torture: transient failure" in event.error.message:
                self.reported_transient = True
            if event.kept_generation is None:
                self.active.discard(str(module))
        elif isinstance(event, ModuleUnloaded):
            reloads[f"unloaded: {module}"] += 1
            self.active.discard(str(module))
        elif isinstance(event, DisposeFailed):
            reloads["disposers failed (reported)"] += len(event.errors)
        elif isinstance(event, TaskFailed):
            reloads["tasks failed"] += 1

    # -- askers -----------------------------------------------------------------------------------

    def start_askers(self, tasks: anyio.abc.TaskGroup) -> None:
        for index in range(self.settings.askers):
            tasks.start_soon(self.asker, index)

    async def asker(self, index: int) -> None:
        rng = random.Random(self.settings.seed * 1000 + index)
        number = 0
        while not self.stopping:
            number += 1
            cancel = rng.random() < self.settings.cancel_ratio
            several = rng.random() < self.settings.several_ratio
            question = f"a{index}-q{number}"
            outcome = await self.ask_once(question, rng.uniform(0, 0.04), cancel, several)
            await anyio.lowlevel.checkpoint()  # an answer given at once has no checkpoint
            if outcome.code is not None:
                await anyio.sleep(rng.uniform(0.002, 0.02))

    async def ask_once(
        self, question: str, cancel_after: float, cancel: bool, several: bool = False
    ) -> Outcome:
        """Ask ``question`` (``several``: an ask of :func:`several_questions`) and record
        what the caller got."""
        started = anyio.current_time()
        outcome = self.outcomes[question] = Outcome(question, started)
        asks = self.report.asks
        asks["started"] += 1
        request = several_questions(question) if several else AskUserQuestionRequest(question)
        with anyio.move_on_after(self.settings.hang_after) as bound:
            with anyio.CancelScope() as harness:
                if cancel:
                    harness.deadline = started + cancel_after
                try:
                    answer = await self.call_ask(request, outcome, cancel_after, cancel)
                except UserInteractionError as error:
                    outcome.code = error.code
                    outcome.legitimate = self.legitimate(outcome, error)
                except Exception as error:  # anything else is a failure to explain
                    outcome.code = type(error).__name__
                else:
                    outcome.answer = answer.answer
                    if several:
                        outcome.parts = {entry.id: _mark(entry) for entry in answer.answers}
            outcome.cancelled = outcome.cancelled or harness.cancelled_caught
        outcome.hung = bound.cancelled_caught
        outcome.ended = anyio.current_time()
        if outcome.hung:
            asks["hung"] += 1
            self.report.zero["asks hung"] += 1
            self.report.example(
                "asks hung", f"{question}: no outcome after {self.settings.hang_after} s"
            )
        elif outcome.cancelled:
            asks["cancelled by the harness"] += 1
        elif outcome.parts is not None:
            asks["answered"] += 1
            asks["asks of several questions answered"] += 1
            self.check_parts(question, outcome.parts)
        elif outcome.answer is not None:
            asks["answered"] += 1
            if outcome.answer.partition("@")[0] != question:
                self.report.zero["wrong question"] += 1
                self.report.example("wrong question", f"{question} got {outcome.answer}")
        elif outcome.legitimate:
            asks["failed legitimately"] += 1
            self.report.legitimate[str(outcome.code)] += 1
        else:
            asks["failed, unexplained"] += 1
            self.report.unexplained[str(outcome.code)] += 1
            self.report.zero["unexplained failures"] += 1
            self.report.example(
                "unexplained failures",
                f"{question} failed with {outcome.code} after "
                f"{anyio.current_time() - started:.3f} s; providers returned "
                f"{self.ledger.returned.get(question, [])}",
            )
        return outcome

    async def call_ask(
        self,
        request: AskUserQuestionRequest,
        outcome: Outcome,
        cancel_after: float,
        cancel: bool,
    ) -> AskUserQuestionAnswer:
        """The ask itself (a hook: the journal torture aborts by the request's signal
        instead of the harness's cancel scope, and marks ``outcome.cancelled`` itself)."""
        return await ask(request, context=self.context, swap_timeout=self.settings.swap_timeout)

    def legitimate(self, outcome: Outcome, error: UserInteractionError) -> bool:
        """A failure the run explains: no provider active, and no provider module had an
        active generation by the reload events."""
        return (
            error.code in (ErrorCode.NO_PROVIDER, ErrorCode.ASK_ABORTED)
            and self.context.lookup(USER_INTERACTION) is None
            and not self.active
        )

    def check_parts(self, question: str, parts: dict[str, str]) -> None:
        """An ask of several questions has every question's answer, each its own."""
        expected = [str(item.id) for item in several_questions(question).questions]
        if sorted(parts) != sorted(expected):
            self.report.count(
                "asks half-answered", f"{question}: answers for {sorted(parts)} of {expected}"
            )
        for question_id, mark in parts.items():
            if mark != SKIPPED and mark.partition("@")[0] != f"{question}/{question_id}":
                self.report.count("wrong question", f"{question}/{question_id} got {mark}")
        generations = {mark.partition("@")[2] for mark in parts.values() if mark != SKIPPED}
        if len(generations) > 1:
            self.report.asks["asks of several answered across a reload (answers kept)"] += 1

    # -- edits ------------------------------------------------------------------------------------

    async def edit_loop(self, reloader: Reloader) -> None:
        for _ in range(self.settings.edits):
            self.lift_transient_failures()
            await self.edit_step(reloader)

    async def edit_step(self, reloader: Reloader) -> None:
        """One random ordinary edit, then a pause."""
        kinds, weights = list(EDITS), list(EDITS.values())
        done = self.files.edit(self.rng.choices(kinds, weights)[0])
        self.report.edits[done] += 1
        await self.pause()

    async def pause(self) -> None:
        """A few ms to 50 ms between edits; one in seven pauses is 0.1-0.3 s (reloads alone)."""
        if self.rng.random() < 1 / 7:
            await anyio.sleep(self.rng.uniform(0.1, 0.3))
        else:
            await anyio.sleep(self.rng.uniform(0.002, 0.05))

    def lift_transient_failures(self, *, now: bool = False) -> None:
        """Transient failures last until one was reported, or for 8 edits at most."""
        transient = self.ledger.transient
        if now or self.reported_transient:
            transient.clear()
        for key, number in list(transient.items()):
            if number + 8 <= self.files.number:
                del transient[key]
        self.reported_transient = False

    # -- the end ----------------------------------------------------------------------------------

    async def settle_and_check(self, reloader: Reloader) -> None:
        """Put the last good content back, wait until it is applied, check the serving state."""
        if await self.settle(reloader):
            await self.check_final_state(reloader)

    async def settle(self, reloader: Reloader) -> bool:
        """Put the last good content back and wait for the barrier; False if it never came.

        Before that, one last good save whose setup fails for now: once its failure was
        reported and lifted, saving the same bytes again must load it.
        """
        problems = self.report.problems
        timeout = self.settings.settle_timeout
        self.lift_transient_failures(now=True)
        self.files.restore()
        ui = self.folder / f"{UI}.py"
        async with reloader.events() as events:
            self.report.edits[self.files.edit("provider: setup failing for now")] += 1
            marker = f"transient failure of provider {self.files.number}"
            with anyio.move_on_after(timeout) as reported:
                async for event in events:
                    if (
                        isinstance(event, ReloadAborted)
                        and event.path == ui
                        and marker in event.error.message
                    ):
                        break
            if reported.cancelled_caught:
                problems.append(f"a save whose setup fails was not reported within {timeout} s")
            self.lift_transient_failures(now=True)
            self.files.restore()  # the same bytes again
            barrier = self.files.write_barrier()
            with anyio.move_on_after(timeout) as settle:
                await events.next(ReloadCommitted, path=barrier)
        if settle.cancelled_caught:
            problems.append(f"the barrier save was not committed within {timeout} s")
            return False
        return True

    async def check_final_state(self, reloader: Reloader) -> Generation | None:
        """The serving state equals loading the last good content once; the serving
        generation (``None`` when no torture generation serves)."""
        problems = self.report.problems
        status = {s.module: s for s in reloader.status()}
        for name in (UI, WORDS):
            found = status.get(name)
            if found is None or found.state is not ModuleState.ACTIVE:
                state = "never seen" if found is None else f"{found.state.value}: {found.error}"
                problems.append(f"{name} is not active after the last save ({state})")
        if ALT in status and status[ALT].state is ModuleState.ACTIVE:
            problems.append(f"{ALT} is still active after its file was removed")
        good_ui, good_words = self.files.good_ui, self.files.good_words
        expected = (UI, good_ui.number, f"w{good_words.number}")
        serving = self.context.lookup(USER_INTERACTION)
        generation = getattr(serving, "generation", None)
        live = [g for g in self.ledger.generations if g.disposer_runs == 0]
        if not isinstance(generation, Generation):
            problems.append(f"no torture generation serves ({serving!r}); live: {live}")
            return None
        if (generation.module, generation.version, generation.word) != expected:
            problems.append(
                f"serving {generation!r}; loading the last good content gives "
                f"{expected[0]}:v{expected[1]}:{expected[2]}"
            )
        if len(live) != 1 or live[0] is not generation:
            problems.append(
                f"{len(live)} live generation(s) {live}; expected one, the serving {generation!r}"
            )
        outcome = await self.ask_once("final-check", 0.0, cancel=False)
        if outcome.answer != f"final-check@{generation!r}":
            problems.append(
                f"the final ask got {outcome.answer or outcome.code!r}; expected an answer of "
                f"the serving {generation!r}"
            )
        return generation

    def tally(self) -> None:
        """Discarded and duplicated answers, once every caller has its outcome."""
        zero = self.report.zero
        for question, returned in self.ledger.returned.items():
            if len(returned) > 1:
                zero["answers given twice"] += len(returned) - 1
                outcome = self.outcomes.get(question)
                got = "?" if outcome is None else (outcome.answer or outcome.code)
                self.report.example(
                    "answers given twice", f"{question}: returned {returned}; caller got {got}"
                )
        for question, outcome in self.outcomes.items():
            returned = self.ledger.returned.get(question, [])
            if outcome.cancelled or not returned:
                continue
            lost = len(returned) - (outcome.answer in returned)
            if lost:
                zero["answers discarded"] += lost
                got = outcome.answer or f"failure {outcome.code}" + " (hung)" * outcome.hung
                self.report.example(
                    "answers discarded", f"{question}: returned {returned}; caller got {got}"
                )
        self.tally_parts()
        zero["served while closing"] = self.ledger.served_closing
        self.report.examples["served while closing"] = self.ledger.closing_examples
        self.report.asks["provider calls (re-asks included)"] = self.ledger.calls.total()
        self.report.asks["answers due as the close began (allowed)"] = (
            self.ledger.due_as_close_began
        )
        self.report.asks["questions asked more than once"] = sum(
            1 for n in self.ledger.calls.values() if n > 1
        )
        self.report.reloads["generations set up"] = len(self.ledger.generations)
        wrong = [g for g in self.ledger.generations if g.disposer_runs != 1]
        if wrong:
            listed = ", ".join(f"{g!r} ran {g.disposer_runs}x" for g in wrong[:EXAMPLES])
            self.report.problems.append(
                f"{len(wrong)} generation(s) whose disposer did not run exactly once after the "
                f"reloader closed: {listed}"
            )

    def tally_parts(self) -> None:
        """Per question of the asks of several: each answered once, none lost."""
        zero = self.report.zero
        for key, returned in self.ledger.returned_parts.items():
            question, _, question_id = key.rpartition("/")
            outcome = self.outcomes.get(question)
            got = "?" if outcome is None else (outcome.parts or {}).get(question_id)
            if len(returned) > 1:
                zero["questions answered twice"] += len(returned) - 1
                self.report.example(
                    "questions answered twice", f"{key}: returned {returned}; caller got {got}"
                )
            if outcome is None or outcome.cancelled or outcome.parts is None:
                continue  # cancelled, or failed: an unexplained failure is counted as such
            lost = len(returned) - (got in returned)
            if lost:
                zero["questions lost"] += lost
                self.report.example(
                    "questions lost", f"{key}: returned {returned}; caller got {got}"
                )
        self.report.asks["questions of several answered by providers"] = len(
            self.ledger.returned_parts
        )

    async def run(self) -> Report:
        started = time.perf_counter()
        self.prepare_folder()
        sys.modules[LEDGER] = self.ledger.module()
        try:
            await self._run()
        except Exception:
            self.report.problems.append("the run crashed:\n" + traceback.format_exc())
        finally:
            del sys.modules[LEDGER]
            self.report.seconds = time.perf_counter() - started
        self.tally()
        return self.report

    def prepare_folder(self) -> None:
        """The watched folder's first content."""
        self.files.create()

    async def _run(self) -> None:
        live: list[Generation] = []
        try:
            async with self.make_reloader() as reloader:
                if reloader.status_of(self.folder / f"{UI}.py").state is not ModuleState.ACTIVE:
                    self.report.problems.append("the first version did not load")
                    return
                async with anyio.create_task_group() as tasks:
                    self.start_askers(tasks)
                    try:
                        await self.edit_loop(reloader)
                        await self.settle_and_check(reloader)
                    finally:
                        self.stopping = True
                live = [g for g in self.ledger.generations if g.disposer_runs == 0]
        except DisposalError as error:
            failed: DisposalError | None = error
        else:
            failed = None
        # Closing disposes the live generations: a raising or overrunning disposer among them
        # must fail the close (DisposalError), and only then.
        failing = [g for g in live if g.disposer in ("raise", "slow")]
        if failed is not None and not failing:
            self.report.problems.append(f"closing the reloader failed: {failed!r}")
        elif failed is None and failing:
            self.report.problems.append(
                f"closing the reloader hid the failed disposer of {failing}"
            )


def _mark(entry: QuestionAnswer) -> str:
    """The mark a provider's answer to one question carries (see ``Ledger.answer_several``)."""
    if entry.skipped is not None:
        return SKIPPED
    return entry.custom or f"(no mark: {entry.answer})"


async def run_torture(folder: Path, settings: Settings | None = None) -> Report:
    """Run the torture in ``folder`` (an empty directory) and return its report."""
    return await Torture(folder, settings or Settings()).run()


async def main(settings: Settings, options: argparse.Namespace) -> int:
    # Broken saves and failing disposers are made on purpose: their logs would be noise.
    logging.getLogger("hotseam").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "watched"  # the SQLite journal goes beside it, not in it
        folder.mkdir()
        if options.journal is None:
            report = await run_torture(folder, settings)
        elif options.approvals:
            # The journal's tortures extend this one (they import this module): imported here.
            from _torture_approvals import run_approval_torture

            report = await run_approval_torture(
                folder,
                settings,
                options.journal,
                approvals=options.approvals,
                restart_every=options.restart_every,
                sabotage=options.sabotage,
            )
        else:
            from _torture_journal import run_journal_torture

            report = await run_journal_torture(
                folder,
                settings,
                options.journal,
                restart_every=options.restart_every,
                sabotage=options.sabotage,
            )
    print(report.render())
    return 0 if report.ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--edits", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hang-after", type=float, default=30.0)
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument(
        "--several-ratio",
        type=float,
        default=Settings.several_ratio,
        help="the share of asks of several questions",
    )
    parser.add_argument(
        "--journal",
        choices=["sqlite", "memory"],
        help="ask inside agent runs of a journal (sqlite: a temporary file), with daemon "
        "restarts (see bench/_torture_journal.py)",
    )
    parser.add_argument(
        "--restart-every",
        type=int,
        default=25,
        help="with --journal: edits between daemon restarts (0: none)",
    )
    parser.add_argument(
        "--approvals",
        type=float,
        default=None,
        help="with --journal: the share of the agents' steps that are tool calls needing "
        "approval (default 0.2; 0 leaves them out; see bench/_torture_approvals.py)",
    )
    parser.add_argument(
        "--sabotage",
        choices=[
            "no-withdraw",
            "forget-answer",
            "replay-position",
            "answer-twice",
            "touch-ended",
            "approve-other",
        ],
        help="with --journal: break one guarantee on purpose (the run must fail)",
    )
    options = parser.parse_args()
    if not 0 <= options.several_ratio <= 1:
        parser.error(f"--several-ratio must be between 0 and 1, got {options.several_ratio}")
    if options.restart_every < 0:
        parser.error(f"--restart-every must be >= 0 (0: no restarts), got {options.restart_every}")
    if options.journal is None and options.sabotage is not None:
        parser.error("--sabotage needs --journal")
    if options.approvals is None:
        options.approvals = APPROVALS if options.journal is not None else 0.0
    if not 0 <= options.approvals <= 1:
        parser.error(f"--approvals must be between 0 and 1, got {options.approvals}")
    if options.approvals and options.journal is None:
        parser.error("--approvals needs --journal (the approvals are asked inside agent runs)")
    if options.sabotage == "approve-other" and not options.approvals:
        parser.error("--sabotage approve-other breaks the approvals: --approvals above 0")
    if options.sabotage in ("answer-twice", "touch-ended") and options.journal != "sqlite":
        parser.error(f"--sabotage {options.sabotage} writes to the SQLite file: --journal sqlite")
    chosen = Settings(
        edits=options.edits,
        seed=options.seed,
        hang_after=options.hang_after,
        several_ratio=options.several_ratio,
    )
    sys.exit(anyio.run(main, chosen, options, backend=options.backend))
