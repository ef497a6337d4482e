"""Reload torture: real files, the real watcher, and asks running through every kind of edit.

    .venv/bin/python bench/torture.py [--edits 1000] [--seed 1] [--backend asyncio|trio]

A :class:`hotseam.reload.Reloader` watches a temporary folder (watchfiles; no reload is driven
by hand) that holds a provider module, ``torture_ui.py``, which imports a helper,
``torture_words.py``. Four asker tasks ask continuously through
:func:`hotseam.interaction.ask` — 15 % of the asks are cancelled by the harness at a random
moment — while the edit loop makes ``--edits`` random edits a few ms to 50 ms apart (one in
seven pauses is 0.1-0.3 s instead, so reloads also run alone with asks in flight):

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
* *unexplained failures* — an ask failed, and it was not a legitimate failure.

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
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import random
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import anyio.lowlevel
import sniffio

from hotseam import Context, DisposalError, ScopeState
from hotseam.interaction import (
    ASK_ABORTED,
    NO_PROVIDER,
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
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

__all__ = ["Report", "Settings", "run_torture"]

LEDGER = "torture_ledger"
UI = "torture_ui"
ALT = "torture_ui_alt"
WORDS = "torture_words"
BARRIER = "torture_barrier"
PROVIDER_MODULES = (UI, ALT)
MUST_BE_ZERO = (
    "served while closing",
    "answers discarded",
    "answers given twice",
    "asks hung",
    "wrong question",
    "unexplained failures",
)
EXAMPLES = 5

PROVIDER_SOURCE = """\
import torture_ledger
import torture_words as words
from hotseam.interaction import USER_INTERACTION

VERSION = {version}
{module_line}

class Provider:
    def __init__(self, scope):
        self.scope = scope
        self.generation = torture_ledger.set_up(__name__, VERSION, words.WORD)

    async def ask(self, request):
        return await torture_ledger.serve(self, request)


def setup(scope):
    provider = Provider(scope)
    scope.provide(USER_INTERACTION, provider)

    async def close():
        await torture_ledger.close(provider, {disposer!r})

    scope.defer(close)
{setup_line}
"""

HELPER_SOURCE = 'WORD = "w{number}"\n'


@dataclass(frozen=True)
class Settings:
    """What one torture run does."""

    edits: int = 1000
    seed: int = 1
    askers: int = 4
    cancel_ratio: float = 0.15
    hang_after: float = 30.0
    swap_timeout: float = 10.0
    dispose_timeout: float = 0.1
    slow_disposer: float = 0.5
    settle_timeout: float = 30.0


# -- the bookkeeping every generation reports to --------------------------------------------------


@dataclass(eq=False)
class Generation:
    """One provider set up by one execution of a provider module."""

    id: int
    module: str
    version: int
    word: str
    disposer_runs: int = 0
    closing_since: float | None = None  # when its disposer started (anyio clock)
    disposer: str | None = None  # normal, raise or slow: known once it ran

    def __repr__(self) -> str:
        return f"{self.module}:g{self.id}:v{self.version}:{self.word}"


class Ledger:
    """Shared by every generation (``import torture_ledger``): setups, answers, disposers."""

    def __init__(self, rng: random.Random, settings: Settings) -> None:
        self._rng = rng
        self._settings = settings
        self.generations: list[Generation] = []
        self.returned: defaultdict[str, list[str]] = defaultdict(list)
        self.calls: Counter[str] = Counter()
        self.served_closing = 0
        self.closing_examples: list[str] = []
        self.due_as_close_began = 0
        # (module kind, number) of saves that fail for now, like a setup whose service is down
        self.transient: dict[tuple[str, int], int] = {}

    def module(self) -> ModuleType:
        module = ModuleType(LEDGER, "torture bookkeeping shared by every generation")
        module.__dict__.update(
            set_up=self.set_up, serve=self.serve, close=self.close, check=self.check
        )
        return module

    def set_up(self, module: str, version: int, word: str) -> Generation:
        generation = Generation(len(self.generations) + 1, module, version, word)
        self.generations.append(generation)
        return generation

    def check(self, what: str, number: int) -> None:
        """Fail while the harness says the save ``number`` of ``what`` fails for now."""
        if (what, number) in self.transient:
            raise RuntimeError(f"torture: transient failure of {what} {number}")

    async def serve(self, provider: Any, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        """A provider's ``ask``: answer at once or after a short sleep; note if it was closing.

        Entering while closing is always counted. Answering while closing is counted when the
        disposer started before the answer was due: the close began while the provider was
        still waiting, so the ask should have been withdrawn. An answer that came due before
        the close began (the provider's task was already runnable in that event-loop turn,
        and anyio delivers cancellation only at its next checkpoint) is the same-turn race
        invariant 6 gives to the answer; it is counted apart, as information.
        """
        question = request.question
        generation: Generation = provider.generation
        self.calls[question] += 1
        entered_closing = _closing(provider)
        roll = self._rng.random()
        delay = 0.0 if roll < 0.3 else self._rng.uniform(0, 0.02 if roll < 0.85 else 0.08)
        due = anyio.current_time() + delay
        if delay:
            await anyio.sleep(delay)
        since = generation.closing_since
        if entered_closing or (since is not None and since < due):
            self.served_closing += 1
            if len(self.closing_examples) < EXAMPLES:
                when = "entered" if entered_closing else "answered"
                began = "not started" if since is None else f"started {due - since:+.4f} s"
                self.closing_examples.append(
                    f"{question} {when} by {generation!r} (scope {provider.scope.state.value}, "
                    f"disposer {began} before the answer was due)"
                )
        elif _closing(provider):
            self.due_as_close_began += 1
        answer = f"{question}@{generation!r}"
        self.returned[question].append(answer)
        return AskUserQuestionAnswer(answer)

    async def close(self, provider: Any, mode: str) -> None:
        """A generation's async disposer: mark closing, sleep; maybe raise or overrun."""
        generation: Generation = provider.generation
        generation.closing_since = anyio.current_time()
        generation.disposer_runs += 1
        generation.disposer = mode
        if mode == "slow":
            await anyio.sleep(self._settings.slow_disposer)  # cancelled at dispose_timeout
            return
        await anyio.sleep(self._rng.uniform(0, 0.02))
        if mode == "raise":
            raise RuntimeError(f"torture: the disposer of {generation!r} raises")


def _closing(provider: Any) -> bool:
    closing = provider.generation.closing_since is not None
    return closing or provider.scope.state is not ScopeState.OPEN


# -- the files ------------------------------------------------------------------------------------


@dataclass
class Good:
    """The last content saved that loads."""

    number: int
    source: str


def provider_source(
    version: int, *, disposer: str = "normal", module_line: str = "", setup_line: str = ""
) -> str:
    return PROVIDER_SOURCE.format(
        version=version, disposer=disposer, module_line=module_line, setup_line=setup_line
    )


class Files:
    """The watched folder and every edit the torture makes to it (plain, blocking file I/O)."""

    def __init__(self, folder: Path, rng: random.Random, ledger: Ledger) -> None:
        self.folder = folder
        self.rng = rng
        self.ledger = ledger
        self.number = 0
        self.barrier_token = 0
        self.ui_at: str | None = f"{UI}.py"  # torture_ui.py, torture_ui_alt.py, .moved, None
        self.words_at: str | None = f"{WORDS}.py"
        self.good_ui = Good(0, provider_source(0))
        self.good_words = Good(0, HELPER_SOURCE.format(number=0))

    def path(self, name: str) -> Path:
        return self.folder / name

    def write(self, name: str, source: str, *, atomic: bool = False) -> None:
        if atomic:
            staging = self.path(f"{name}.tmp")  # an editor temporary: never a module
            staging.write_text(source, encoding="utf-8")
            os.replace(staging, self.path(name))
        else:
            self.path(name).write_text(source, encoding="utf-8")

    def create(self) -> Path:
        self.write(f"{WORDS}.py", self.good_words.source)
        self.write(f"{UI}.py", self.good_ui.source)
        return self.write_barrier()

    def write_barrier(self) -> Path:
        self.barrier_token += 1
        self.write(f"{BARRIER}.py", f"TOKEN = {self.barrier_token}\n")
        return self.path(f"{BARRIER}.py")

    def restore(self) -> None:
        """Only the two modules, under their own names, with their last good content."""
        for stray in (f"{ALT}.py", f"{UI}.py.moved", f"{WORDS}.py.moved"):
            self.path(stray).unlink(missing_ok=True)
        self.write(f"{WORDS}.py", self.good_words.source)
        self.write(f"{UI}.py", self.good_ui.source)
        self.ui_at = f"{UI}.py"
        self.words_at = f"{WORDS}.py"

    # -- one edit ---------------------------------------------------------------------------------

    def edit(self, kind: str) -> str:
        """Make one edit of ``kind`` (see ``EDITS``); return what was done."""
        self.number += 1
        target, _, what = kind.partition(": ")
        if target == "provider":
            return "provider: " + self._edit_provider(what)
        return "helper: " + self._edit_helper(what)

    def _ui_target(self) -> str:
        """Where a provider save goes: where the module is, else its own name."""
        if self.ui_at in (f"{UI}.py", f"{ALT}.py"):
            return self.ui_at
        self.path(f"{UI}.py.moved").unlink(missing_ok=True)
        self.ui_at = f"{UI}.py"
        return self.ui_at

    def _save_ui(self, source: str, *, good: bool, atomic: bool = False) -> None:
        self.write(self._ui_target(), source, atomic=atomic)
        if good:
            self.good_ui = Good(self.number, source)

    def _edit_provider(self, what: str) -> str:
        n = self.number
        if what == "valid version":
            self._save_ui(provider_source(n), good=True)
        elif what == "atomic save":
            self._save_ui(provider_source(n), good=True, atomic=True)
        elif what in ("raising disposer", "slow disposer"):
            mode = what.split()[0].replace("raising", "raise")
            self._save_ui(provider_source(n, disposer=mode), good=True)
        elif what == "syntax error":
            self._save_ui(provider_source(n) + "\ndef broken(:\n", good=False)
        elif what == "exception at import":
            line = f"raise RuntimeError('torture: importing version {n} fails')"
            self._save_ui(provider_source(n, module_line=line), good=False)
        elif what == "exception in setup":
            line = f"    raise RuntimeError('torture: setup of version {n} fails')"
            self._save_ui(provider_source(n, setup_line=line), good=False)
        elif what == "setup failing for now":
            # Good content whose setup fails until the harness lifts the failure: only a
            # later save of the same bytes (or of a helper it imports) can load it.
            self.ledger.transient["provider", n] = self.number
            line = f"    torture_ledger.check('provider', {n})"
            self._save_ui(provider_source(n, setup_line=line), good=True)
        elif what == "same bytes again":
            if self.ui_at not in (f"{UI}.py", f"{ALT}.py"):
                return self._edit_provider("delete / re-create")
            self.write(self.ui_at, self.path(self.ui_at).read_text(encoding="utf-8"))
        elif what == "delete / re-create":
            if self.ui_at in (f"{UI}.py", f"{ALT}.py"):
                self.path(self.ui_at).unlink()
                self.ui_at = None
                return "deleted"
            self._save_ui(provider_source(n), good=True)
            return "re-created"
        elif what == "rename":
            return self._rename_provider()
        else:
            raise ValueError(f"unknown provider edit {what!r}")
        return what

    def _rename_provider(self) -> str:
        ui = f"{UI}.py"
        if self.ui_at == ui:
            to = self.rng.choice([f"{UI}.py.moved", f"{ALT}.py"])
            os.replace(self.path(ui), self.path(to))
            self.ui_at = to
            return "renamed to another module" if to == f"{ALT}.py" else "renamed away"
        if self.ui_at is None:  # re-created by renaming a new file into place
            source = provider_source(self.number)
            self.write(f"{UI}.py.moved", source)
            self.good_ui = Good(self.number, source)
            os.replace(self.path(f"{UI}.py.moved"), self.path(ui))
            self.ui_at = ui
            return "re-created by a rename"
        os.replace(self.path(self.ui_at), self.path(ui))
        self.ui_at = ui
        return "renamed back"

    def _save_words(self, source: str, *, good: bool, atomic: bool = False) -> None:
        self.path(f"{WORDS}.py.moved").unlink(missing_ok=True)
        self.words_at = f"{WORDS}.py"
        self.write(self.words_at, source, atomic=atomic)
        if good:
            self.good_words = Good(self.number, source)

    def _edit_helper(self, what: str) -> str:
        n = self.number
        valid = HELPER_SOURCE.format(number=n)
        if what == "valid version":
            self._save_words(valid, good=True)
        elif what == "atomic save":
            self._save_words(valid, good=True, atomic=True)
        elif what == "syntax error":
            self._save_words(valid + "if True\n", good=False)
        elif what == "exception at import":
            self._save_words(
                valid + f"raise RuntimeError('torture: importing helper {n} fails')\n", good=False
            )
        elif what == "import failing for now":
            self.ledger.transient["helper", n] = self.number
            self._save_words(
                f"import torture_ledger\ntorture_ledger.check('helper', {n})\n{valid}", good=True
            )
        elif what == "same bytes again":
            if self.words_at != f"{WORDS}.py":
                return self._edit_helper("delete / re-create")
            self.write(self.words_at, self.path(self.words_at).read_text(encoding="utf-8"))
        elif what == "delete / re-create":
            if self.words_at == f"{WORDS}.py":
                self.path(self.words_at).unlink()
                self.words_at = None
                return "deleted"
            self._save_words(valid, good=True)
            return "re-created"
        elif what == "rename":
            if self.words_at == f"{WORDS}.py":
                os.replace(self.path(self.words_at), self.path(f"{WORDS}.py.moved"))
                self.words_at = f"{WORDS}.py.moved"
                return "renamed away"
            created = self.words_at is None
            if created:  # re-created by renaming a new file into place
                self.write(f"{WORDS}.py.moved", valid)
                self.good_words = Good(n, valid)
            os.replace(self.path(f"{WORDS}.py.moved"), self.path(f"{WORDS}.py"))
            self.words_at = f"{WORDS}.py"
            return "re-created by a rename" if created else "renamed back"
        else:
            raise ValueError(f"unknown helper edit {what!r}")
        return what


EDITS: dict[str, int] = {
    "provider: valid version": 14,
    "provider: atomic save": 10,
    "provider: raising disposer": 6,
    "provider: slow disposer": 6,
    "provider: syntax error": 7,
    "provider: exception at import": 6,
    "provider: exception in setup": 6,
    "provider: setup failing for now": 4,
    "provider: delete / re-create": 6,
    "provider: rename": 7,
    "provider: same bytes again": 3,
    "helper: valid version": 10,
    "helper: atomic save": 4,
    "helper: syntax error": 5,
    "helper: exception at import": 4,
    "helper: import failing for now": 2,
    "helper: delete / re-create": 4,
    "helper: rename": 3,
    "helper: same bytes again": 2,
}


# -- the run --------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What the caller of one question got."""

    question: str
    answer: str | None = None
    code: str | None = None
    legitimate: bool = False
    cancelled: bool = False
    hung: bool = False


@dataclass
class Report:
    """Every counter of one run, the problems found, and how to print them."""

    settings: Settings
    backend: str
    seconds: float = 0.0
    edits: Counter[str] = field(default_factory=Counter)
    asks: Counter[str] = field(default_factory=Counter)
    legitimate: Counter[str] = field(default_factory=Counter)
    unexplained: Counter[str] = field(default_factory=Counter)
    reloads: Counter[str] = field(default_factory=Counter)
    zero: dict[str, int] = field(default_factory=lambda: dict.fromkeys(MUST_BE_ZERO, 0))
    examples: defaultdict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and not any(self.zero.values())

    def example(self, counter: str, text: str) -> None:
        if len(self.examples[counter]) < EXAMPLES:
            self.examples[counter].append(text)

    def render(self) -> str:
        rows: list[tuple[str, object]] = [("edits", sum(self.edits.values()))]
        rows += [(f"edits: {kind}", count) for kind, count in sorted(self.edits.items())]
        rows += [(f"asks: {what}", count) for what, count in self.asks.items()]
        rows += [
            (f"legitimate failures: {code}", count)
            for code, count in sorted(self.legitimate.items())
        ]
        rows += [(f"reloads: {what}", count) for what, count in sorted(self.reloads.items())]
        rows += [(f"**{name}** (must be 0)", count) for name, count in self.zero.items()]
        rows.append(("**final state**", "ok" if not self.problems else "FAILED"))
        lines = [
            f"Reload torture, {self.backend}, seed {self.settings.seed}: "
            f"{sum(self.edits.values())} edits in {self.seconds:.1f} s on {machine()}.",
            "",
            "| counter | value |",
            "|---|---:|",
            *(f"| {name} | {value} |" for name, value in rows),
        ]
        if self.unexplained:
            listed = ", ".join(f"{code} {n}" for code, n in sorted(self.unexplained.items()))
            lines += ["", f"Unexplained failures by code: {listed}."]
        for counter, examples in self.examples.items():
            if examples:
                lines += ["", f"Examples of {counter}:", *(f"- {text}" for text in examples)]
        if self.problems:
            lines += ["", "Final state problems:", *(f"- {problem}" for problem in self.problems)]
        lines += ["", "Result: " + ("all guarantees held." if self.ok else "GUARANTEES BROKEN.")]
        return "\n".join(lines)


def machine() -> str:
    return (
        f"{platform.system()} {platform.release()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}"
    )


class Torture:
    def __init__(self, folder: Path, settings: Settings) -> None:
        self.folder = folder.resolve()
        self.settings = settings
        self.rng = random.Random(settings.seed)
        self.ledger = Ledger(random.Random(settings.seed + 2), settings)
        self.files = Files(self.folder, random.Random(settings.seed + 1), self.ledger)
        self.context = Context("torture")
        self.report = Report(settings, sniffio.current_async_library())
        self.outcomes: dict[str, Outcome] = {}
        self.active: set[str] = set()  # provider modules with an active generation
        self.stopping = False
        self.reported_transient = False

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

    async def asker(self, index: int) -> None:
        rng = random.Random(self.settings.seed * 1000 + index)
        number = 0
        while not self.stopping:
            number += 1
            cancel = rng.random() < self.settings.cancel_ratio
            outcome = await self.ask_once(f"a{index}-q{number}", rng.uniform(0, 0.04), cancel)
            await anyio.lowlevel.checkpoint()  # an answer given at once has no checkpoint
            if outcome.code is not None:
                await anyio.sleep(rng.uniform(0.002, 0.02))

    async def ask_once(self, question: str, cancel_after: float, cancel: bool) -> Outcome:
        outcome = self.outcomes[question] = Outcome(question)
        asks = self.report.asks
        asks["started"] += 1
        started = anyio.current_time()
        with anyio.move_on_after(self.settings.hang_after) as bound:
            with anyio.CancelScope() as harness:
                if cancel:
                    harness.deadline = started + cancel_after
                try:
                    answer = await ask(
                        AskUserQuestionRequest(question),
                        context=self.context,
                        swap_timeout=self.settings.swap_timeout,
                    )
                except UserInteractionError as error:
                    outcome.code = error.code
                    outcome.legitimate = (
                        error.code in (NO_PROVIDER, ASK_ABORTED)
                        and self.context.lookup(USER_INTERACTION) is None
                        and not self.active
                    )
                except Exception as error:  # anything else is a failure to explain
                    outcome.code = type(error).__name__
                else:
                    outcome.answer = answer.answer
            outcome.cancelled = harness.cancelled_caught
        outcome.hung = bound.cancelled_caught
        if outcome.hung:
            asks["hung"] += 1
            self.report.zero["asks hung"] += 1
            self.report.example(
                "asks hung", f"{question}: no outcome after {self.settings.hang_after} s"
            )
        elif outcome.cancelled:
            asks["cancelled by the harness"] += 1
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

    # -- edits ------------------------------------------------------------------------------------

    async def edit_loop(self) -> None:
        kinds, weights = list(EDITS), list(EDITS.values())
        for _ in range(self.settings.edits):
            self.lift_transient_failures()
            done = self.files.edit(self.rng.choices(kinds, weights)[0])
            self.report.edits[done] += 1
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
        """Put the last good content back, wait for the barrier, check the serving state.

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
            return
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
            return
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

    async def run(self) -> Report:
        started = time.perf_counter()
        self.files.create()
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

    async def _run(self) -> None:
        settings = self.settings
        live: list[Generation] = []
        try:
            async with Reloader(
                self.context,
                [self.folder],
                dispose_timeout=settings.dispose_timeout,
                on_event=self.on_event,
            ) as reloader:
                if reloader.status_of(self.folder / f"{UI}.py").state is not ModuleState.ACTIVE:
                    self.report.problems.append("the first version did not load")
                    return
                async with anyio.create_task_group() as tasks:
                    for index in range(settings.askers):
                        tasks.start_soon(self.asker, index)
                    try:
                        await self.edit_loop()
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


async def run_torture(folder: Path, settings: Settings | None = None) -> Report:
    """Run the torture in ``folder`` (an empty directory) and return its report."""
    return await Torture(folder, settings or Settings()).run()


async def main(settings: Settings) -> int:
    # Broken saves and failing disposers are made on purpose: their logs would be noise.
    logging.getLogger("hotseam").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory() as tmp:
        report = await run_torture(Path(tmp), settings)
    print(report.render())
    return 0 if report.ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--edits", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hang-after", type=float, default=30.0)
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    options = parser.parse_args()
    chosen = Settings(edits=options.edits, seed=options.seed, hang_after=options.hang_after)
    sys.exit(anyio.run(main, chosen, backend=options.backend))
