"""The reload tortures' bookkeeping: what every provider generation reports, what every caller
got, and the report with its must-be-0 counters.

Some asks hold several questions (:func:`several_questions`: one choice, several choices
between bounds, free text that may be skipped): a provider answers each question it is
asked with a mark naming the question and its generation, and the ledger keeps them per
question, so that an answer lost, given twice or missing is counted per question.

Shared by ``bench/torture.py`` (the reload torture) and ``bench/torture_daemon.py`` (the
daemon torture, which adds carried values, the deletion grace and replaced folders). The
provider modules the tortures write import one bookkeeping module, ``torture_ledger``
(:meth:`Ledger.module` is put in ``sys.modules``, so every generation reports to the same
:class:`Ledger`).
"""

from __future__ import annotations

import os
import platform
import random
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import anyio

from hotseam import ScopeState
from hotseam.interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    QuestionAnswer,
)

__all__ = [
    "ALT",
    "BARRIER",
    "EXAMPLES",
    "LEDGER",
    "MUST_BE_ZERO",
    "PROVIDER_MODULES",
    "UI",
    "WORDS",
    "Generation",
    "Ledger",
    "Outcome",
    "Report",
    "Settings",
    "closing",
    "machine",
    "several_questions",
]

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
    "questions lost",
    "questions answered twice",
    "asks half-answered",
)
EXAMPLES = 5
SKIPPED = "(skipped)"
LETTERS = tuple(AskUserQuestionOption(letter) for letter in "abcd")
YES_NO = (AskUserQuestionOption("yes"), AskUserQuestionOption("no"))


def several_questions(ask: str) -> AskUserQuestionRequest:
    """An ask of three questions, each named ``<ask>/<id>``: one choice (or text), two
    or three of four letters (text counts as one), free text that may be skipped."""
    return AskUserQuestionRequest.of(
        [
            Question(f"{ask}/k1", options=YES_NO, id="k1"),
            Question(
                f"{ask}/k2",
                options=LETTERS,
                id="k2",
                multi_select=True,
                min_selections=2,
                max_selections=3,
            ),
            Question(f"{ask}/k3", id="k3", allow_skip=True),
        ]
    )


def is_several(request: AskUserQuestionRequest) -> bool:
    """A question of an ask of :func:`several_questions` (all of it, or some)."""
    return "/" in request.question


@dataclass(frozen=True)
class Settings:
    """What one torture run does."""

    edits: int = 1000
    seed: int = 1
    askers: int = 4
    cancel_ratio: float = 0.15
    several_ratio: float = 0.3  # asks of several questions (several_questions)
    hang_after: float = 30.0
    swap_timeout: float = 10.0
    dispose_timeout: float = 0.1
    slow_disposer: float = 0.5
    settle_timeout: float = 30.0


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
        # per question of an ask of several ("<ask>/<id>"): each mark a provider returned
        self.returned_parts: defaultdict[str, list[str]] = defaultdict(list)
        self.calls: Counter[str] = Counter()
        self.served_closing = 0
        self.closing_examples: list[str] = []
        self.due_as_close_began = 0
        # (module kind, number) of saves that fail for now, like a setup whose service is down
        self.transient: dict[tuple[str, int], int] = {}

    def module(self) -> ModuleType:
        module = ModuleType(LEDGER, "torture bookkeeping shared by every generation")
        module.__dict__.update(self.exported())
        return module

    def exported(self) -> dict[str, Any]:
        """What the provider modules call, by name."""
        return {
            "set_up": self.set_up,
            "serve": self.serve,
            "close": self.close,
            "check": self.check,
        }

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
        for key in self.asked_keys(request):
            self.calls[key] += 1
        entered_closing = closing(provider)
        if not entered_closing:
            self.entered(provider)
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
        elif closing(provider):
            self.due_as_close_began += 1
        return self.answer(request, generation)

    def asked_keys(self, request: AskUserQuestionRequest) -> list[str]:
        """What ``calls`` counts an ask under: each question of an ask of several, or the
        question (``bench/_torture_approvals.py``: an approval's two questions)."""
        if is_several(request):
            return [item.question for item in request.questions]
        return [request.question]

    def answer(
        self, request: AskUserQuestionRequest, generation: Generation
    ) -> AskUserQuestionAnswer:
        """The answer of ``generation``: a mark naming the question and the generation."""
        if is_several(request):
            return self.answer_several(request, generation)
        answer = f"{request.question}@{generation!r}"
        self.returned[request.question].append(answer)
        return AskUserQuestionAnswer(answer)

    def answer_several(
        self, request: AskUserQuestionRequest, generation: Generation
    ) -> AskUserQuestionAnswer:
        """Each question asked answered within its bounds, its custom text a mark naming
        the question and the generation (a skipped question's mark is ``(skipped)``)."""
        entries = []
        for item in request.questions:
            mark = f"{item.question}@{generation!r}"
            if item.allow_skip and self._rng.random() < 0.3:
                entries.append(QuestionAnswer.skip(item))
                mark = SKIPPED
            elif item.is_multi_select:
                least, most = item.selection_range
                count = self._rng.randint(least, most) - 1  # the mark counts as one
                entries.append(
                    QuestionAnswer.chosen(item, self._rng.sample(item.choices, count), mark)
                )
            else:
                entries.append(QuestionAnswer.chosen(item, custom=mark))
            self.returned_parts[item.question].append(mark)
        return AskUserQuestionAnswer.of(entries, request)

    def entered(self, provider: Any) -> None:
        """An ask entered ``provider`` while it was open (a hook for what it holds)."""

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


def closing(provider: Any) -> bool:
    """The provider's generation has begun closing (its disposer started, or its scope)."""
    began = provider.generation.closing_since is not None
    return began or provider.scope.state is not ScopeState.OPEN


@dataclass
class Outcome:
    """What the caller of one question got, and when it asked and got it (anyio clock)."""

    question: str
    started: float = 0.0
    ended: float | None = None
    answer: str | None = None
    code: str | None = None
    legitimate: bool = False
    cancelled: bool = False
    hung: bool = False
    parts: dict[str, str] | None = None  # an ask of several: each question's mark, by id

    @property
    def failed(self) -> bool:
        """The caller got a failure (not an answer, not the harness's cancellation)."""
        return not self.cancelled and (self.hung or (self.answer is None and self.code is not None))


@dataclass
class Report:
    """Every counter of one run, the problems found, and how to print them."""

    settings: Settings
    backend: str
    title: str = "Reload torture"
    zero_names: Iterable[str] = MUST_BE_ZERO
    seconds: float = 0.0
    edits: Counter[str] = field(default_factory=Counter)
    asks: Counter[str] = field(default_factory=Counter)
    legitimate: Counter[str] = field(default_factory=Counter)
    unexplained: Counter[str] = field(default_factory=Counter)
    reloads: Counter[str] = field(default_factory=Counter)
    sections: dict[str, Counter[str]] = field(default_factory=dict)
    """More counters, by section (``carry``, ``episodes``...), printed after the reloads."""
    figures: dict[str, str] = field(default_factory=dict)
    """Measured values that are not counts (convergence times...)."""
    zero: dict[str, int] = field(init=False)
    examples: defaultdict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    problems: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.zero = dict.fromkeys(self.zero_names, 0)

    @property
    def ok(self) -> bool:
        return not self.problems and not any(self.zero.values())

    def section(self, name: str) -> Counter[str]:
        return self.sections.setdefault(name, Counter())

    def count(self, counter: str, example: str | None = None) -> None:
        """One more of the must-be-0 ``counter``, with an example of it."""
        self.zero[counter] += 1
        if example is not None:
            self.example(counter, example)

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
        for name, counts in self.sections.items():
            rows += [(f"{name}: {what}", count) for what, count in sorted(counts.items())]
        rows += list(self.figures.items())
        rows += [(f"**{name}** (must be 0)", count) for name, count in self.zero.items()]
        rows.append(("**final state**", "ok" if not self.problems else "FAILED"))
        lines = [
            f"{self.title}, {self.backend}, seed {self.settings.seed}: "
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
