"""The fleet torture's ledger: what the inboxes were told and the agents received, checked
against the journal once the fleet has finished.

Every answer the torture gives is ``ASK_ID|QUESTION|inbox N|ATTEMPT``, so an answer names
the question it was given to. Every line an agent prints names the agent's run, the
position and the question, with the answer it received, and whether the record the run
resumed with held that answer already (then the ask must replay it). Each daemon life's
log says which positions it *replayed* (``ask.replayed``); the other answers it printed
reached it *live* (its ``ask()`` returned on the answer). A SIGKILL can lose the tail of a
life's stderr (its lines wait in a writer thread's queue; the agent's line on stdout was
written at once): a position the agent saw as a replay, with no ``ask.replayed``, of a
killed life whose stderr says nothing of a later position, counts as a replay — before, it
counted as a second live delivery. Checked:

* **asked / answered**: the journal holds one record per question of every run, every one
  answered; every agent's runs all finished (none abandoned, failed or left running);
* **answers lost**: an answered question whose answer no life of its agent received (not
  live, not replayed);
* **delivered twice**: an answer received live by more than one ask (a replay is not a
  delivery: it is the resumed run reading its record);
* **delivered to a different question**: an answer that names another question than the
  one it was returned for, or a record of another position;
* **delivered ≠ recorded**: an answer received live that is not the recorded one;
* **finished runs delivered again**: a line of a run whose agent had already returned;
* **replays inconsistent**: a replayed answer that is not the record's, or a life that
  replayed positions out of order or with a gap;
* **answered twice**: two inbox answers to one question both told ``200``; a ``409
  ALREADY_ANSWERED`` naming an answer the journal does not hold;
* **duplicate records**: two records for one position of a run, or a record not answered.
"""

from __future__ import annotations

import signal
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from _fleet_race import MUST_BE_ZERO as RACES_MUST_BE_ZERO
from _fleet_world import FleetSettings, Life, Slot

from hotseam.interaction._journal import AskRecord, AskState, Journal, RunRecord, RunState

MUST_BE_ZERO = (
    "answers lost",
    "delivered twice",
    "delivered to a different question",
    "delivered ≠ recorded",
    "finished runs delivered again",
    "replays inconsistent",
    "answered twice (two 200s, or a 409 naming another answer)",
    "duplicate or unanswered records",
    "asks that failed in the agent",
    "unexpected replies (404, 409 NOT_PENDING, 5xx)",
    "daemons that exited on their own with an error",
    *RACES_MUST_BE_ZERO,
)


@dataclass
class Attempt:
    """One answer posted to an inbox, and what it said."""

    ask_id: str
    inbox: int
    text: str
    mode: str  # "one", "both" or "window" (while the daemon was frozen)
    status: int | None = None  # None: no reply (the inbox died, or a time-out)
    code: str | None = None
    shown: str | None = None  # a 409's answer text
    error: str | None = None


@dataclass
class Ledger:
    """Everything seen during the torture; :meth:`check` reads the journal at the end."""

    attempts: list[Attempt] = field(default_factory=list)
    kills: Counter[str] = field(default_factory=Counter)
    wins: int = 0  # 200s: the pace of the answers
    outages: list[tuple[float, float]] = field(default_factory=list)  # wall clock: down, up

    def answered(self, attempt: Attempt) -> None:
        self.attempts.append(attempt)
        if attempt.status == 200:
            self.wins += 1


@dataclass
class Report:
    """The torture's result: counters, the must-be-0 ones, examples of each failure."""

    settings: FleetSettings
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    seconds: float = 0.0

    def bad(self, counter: str, example: str) -> None:
        self.counts[counter] = self.counts.get(counter, 0) + 1
        if len(self.examples[counter]) < 5:
            self.examples[counter].append(example)

    @property
    def ok(self) -> bool:
        return all(self.counts.get(name, 0) == 0 for name in MUST_BE_ZERO) and not any(
            name.startswith("missing") for name, value in self.counts.items() if value
        )

    def render(self) -> str:
        settings = self.settings
        lines = [
            f"fleet torture on {settings.engine}: {settings.daemons} daemons x "
            f"{settings.agents} agents ({settings.agent_count} hotseam run), 2 hotseam inbox, "
            f"{settings.rounds} runs x {settings.per_run} questions per agent, seed "
            f"{settings.seed}"
            + (f", BROKEN: {', '.join(settings.breaks)}" if settings.breaks else ""),
            "",
            "| | count |",
            "|---|---:|",
        ]
        for name, value in self.counts.items():
            shown = f"{value:,}"
            if name in MUST_BE_ZERO:
                name, shown = f"**{name}**", f"**{shown}**"
            lines.append(f"| {name} | {shown} |")
        lines.append(f"| time | {self.seconds:.1f} s |")
        lines.append("")
        lines.append("result: " + ("ok" if self.ok else "FAILED"))
        for name, examples in self.examples.items():
            lines.append(f"  {name}:")
            lines.extend(f"    {example}" for example in examples)
        return "\n".join(lines)


def _parse(text: str | None) -> tuple[str, str] | None:
    """The question id and text an answer names."""
    if text is None:
        return None
    parts = text.split("|")
    return (parts[0], parts[1]) if len(parts) == 4 else None


async def check(
    journal: Journal,
    agents: list[Slot],
    inboxes: list[Slot],
    ledger: Ledger,
    settings: FleetSettings,
    races: list[list[Life]] = (),  # type: ignore[assignment]
) -> Report:
    """Hold everything seen against the journal (``races``: the lives started at once)."""
    report = Report(settings)
    counts = report.counts
    for name in (
        "questions asked (records)",
        "questions expected",
        "answered",
        "delivered live",
        "delivered by replay only (answered while the daemon was down or frozen)",
        "replayed deliveries (consistent)",
        *MUST_BE_ZERO,
        "inbox answers posted",
        "200 (recorded)",
        "409 ALREADY_ANSWERED",
        "no reply (inbox killed or timed out)",
        "503 JOURNAL_UNAVAILABLE",
        "daemon kills (SIGKILL)",
        "of which frozen first (SIGSTOP, its question answered, SIGKILL)",
        "of which the answer was committed while it was frozen",
        "inbox kills (SIGKILL)",
        "daemon starts (restarts after a kill, and new runs)",
        "restarts refused (exit 2: run claimed)",
        "starts while the journal was down (exit 1, one line)",
        "journal outages (the server stopped 1-3 s)",
    ):
        counts[name] = 0
    counts["questions expected"] = settings.expected

    asks = await journal.list_asks()
    by_run: dict[str, list[AskRecord]] = defaultdict(list)
    for ask in asks:
        by_run[ask.run_id].append(ask)
    runs: dict[str, RunRecord] = {run_id: await journal.get_run(run_id) for run_id in by_run}
    counts["questions asked (records)"] = len(asks)
    counts["answered"] = sum(ask.state is AskState.ANSWERED for ask in asks)
    record_at: dict[tuple[str, int], AskRecord] = {}
    for run_id, records in by_run.items():
        seen: Counter[int] = Counter(record.seq for record in records)
        for record in records:
            record_at[run_id, record.seq] = record
            if seen[record.seq] > 1 or record.state is not AskState.ANSWERED:
                report.bad(
                    "duplicate or unanswered records",
                    f"run {run_id[:8]} position {record.seq}: {record.id} {record.state.value}",
                )
    by_id = {ask.id: ask for ask in asks}

    # Runs: every agent ran `rounds` runs of `per_run` questions, all finished — and one
    # more for each slow racer: a daemon started with the winner of a race that looked for
    # the agent's run only once the winner had ended it (a resumed run whose questions were
    # all answered replays in a few ms; a racer may be slower to start, or wait out an
    # outage) starts the agent's next run, with new questions. That is a run of its own,
    # not a replay (what would break "a finished run never replays" is counted below).
    extra_runs = 0
    for slot in agents:
        mine = sorted(
            (run for run in runs.values() if run.agent == slot.name), key=lambda r: r.started_at
        )
        finished = [run for run in mine if run.state is RunState.FINISHED]
        # A slow racer's run may be one of the agent's `rounds` (its supervisor then
        # starts one run fewer): only runs beyond them are extra.
        extras = _slow_racer_runs(slot, mine, races)[: max(0, len(mine) - settings.rounds)]
        extra_runs += len(extras)
        expected_runs = settings.rounds + len(extras)
        if len(finished) != expected_runs or len(mine) != expected_runs:
            report.bad(
                "missing or extra runs",
                f"{slot.name}: {len(mine)} runs, {len(finished)} finished "
                f"(expected {settings.rounds}, and {len(extras)} of slow racers)",
            )
        if await journal.unfinished_run(slot.name) is not None:
            report.bad("missing or extra runs", f"{slot.name}: a run left unfinished")
        for run in mine:
            if len(by_run[run.id]) != settings.per_run:
                report.bad(
                    "missing or extra runs",
                    f"{slot.name}: run {run.id[:8]} has {len(by_run[run.id])} questions",
                )
    counts["runs of slow racers (started after the winner's run ended; told)"] = extra_runs
    expected = settings.expected + extra_runs * settings.per_run
    counts["questions expected"] = expected
    if counts["questions asked (records)"] != expected:
        report.bad("missing questions", f"{len(asks)} recorded of {expected}")

    # What the agents received, life by life.
    live: Counter[str] = Counter()
    replayed: Counter[str] = Counter()
    finished_by: dict[str, float] = {}  # run id -> when the life whose agent returned ended
    for slot in agents:
        for life in slot.lives:
            if life.returned and life.ended is not None and life.runs:
                finished_by.setdefault(life.runs[-1], life.ended)
    for slot in agents:
        counts["daemon starts (restarts after a kill, and new runs)"] += len(slot.lives)
        for life in slot.lives:
            _check_life(life, slot, record_at, by_id, finished_by, live, replayed, report)

    for ask in asks:
        if ask.state is not AskState.ANSWERED:
            continue
        if live[ask.id] + replayed[ask.id] == 0:
            report.bad("answers lost", f"{ask.id} (run {ask.run_id[:8]} position {ask.seq})")
        if live[ask.id] > 1:
            report.bad("delivered twice", f"{ask.id}: received live {live[ask.id]} times")
        if live[ask.id]:
            counts["delivered live"] += 1
        elif replayed[ask.id]:
            counts["delivered by replay only (answered while the daemon was down or frozen)"] += 1

    # What the inboxes said.
    wins: Counter[str] = Counter()
    for attempt in ledger.attempts:
        counts["inbox answers posted"] += 1
        held = by_id.get(attempt.ask_id)
        recorded = None if held is None or held.answer is None else held.answer.answer
        if attempt.status == 200:
            counts["200 (recorded)"] += 1
            wins[attempt.ask_id] += 1
            if recorded != attempt.text:
                report.bad(
                    "answered twice (two 200s, or a 409 naming another answer)",
                    f"{attempt.ask_id}: 200 for {attempt.text!r}, recorded {recorded!r}",
                )
        elif attempt.status == 409 and attempt.code == "ALREADY_ANSWERED":
            counts["409 ALREADY_ANSWERED"] += 1
            if attempt.shown != recorded:
                report.bad(
                    "answered twice (two 200s, or a 409 naming another answer)",
                    f"{attempt.ask_id}: 409 naming {attempt.shown!r}, recorded {recorded!r}",
                )
        elif attempt.status is None:
            counts["no reply (inbox killed or timed out)"] += 1
        elif attempt.status == 503:
            counts["503 JOURNAL_UNAVAILABLE"] += 1
        else:
            report.bad(
                "unexpected replies (404, 409 NOT_PENDING, 5xx)",
                f"{attempt.ask_id} in inbox {attempt.inbox}: {attempt.status} {attempt.code}",
            )
    for ask_id, count in wins.items():
        if count > 1:
            report.bad(
                "answered twice (two 200s, or a 409 naming another answer)",
                f"{ask_id}: {count} answers told 200",
            )

    counts["daemon kills (SIGKILL)"] = ledger.kills["daemon"] + ledger.kills["window"]
    counts["of which frozen first (SIGSTOP, its question answered, SIGKILL)"] = ledger.kills[
        "window"
    ]
    counts["of which the answer was committed while it was frozen"] = ledger.kills[
        "window committed"
    ]
    for name, count in sorted(ledger.kills.items()):
        if name.startswith("window missed"):
            counts[f"frozen, {name}"] = count
    counts["inbox kills (SIGKILL)"] = ledger.kills["inbox"]
    counts["journal outages (the server stopped 1-3 s)"] = ledger.kills["journal outage"]
    for slot in inboxes:
        for life in slot.lives:
            if life.killed is None and life.code not in (0, None):
                if _journal_down_at_start(life):
                    counts["starts while the journal was down (exit 1, one line)"] += 1
                    continue
                if life.code == -signal.SIGTERM and life.serving is None:
                    continue  # the torture's final SIGTERM came before its handler was set
                report.bad(
                    "daemons that exited on their own with an error",
                    f"inbox life {life.number} exited {life.code}: {life.problems[-3:]}",
                )
    _problems(agents + inboxes, report)
    return report


def _problems(slots: list[Slot], report: Report) -> None:
    """Warnings and errors the children logged, by event (told, not judged: a daemon
    killed inside a write, an inbox restarted, may rightly warn)."""
    seen: Counter[str] = Counter()
    for slot in slots:
        for life in slot.lives:
            for problem in life.problems:
                name = f"logged, {slot.kind} {problem.get('level', '?')}: {problem.get('event')}"
                seen[name] += 1
                if len(report.examples[name]) < 3:
                    what = problem.get("summary") or problem.get("line") or problem
                    by = [  # who took it for gone (its pid dead), if one of the fleet did
                        f"{other.name} life {later.number}"
                        for other in slots
                        for later in other.lives
                        for event in later.events
                        if event["event"] == "run.owner_gone" and event.get("pid") == life.pid
                    ]
                    report.examples[name].append(
                        f"{slot.name} life {life.number} (pid {life.pid}, killed: "
                        f"{life.killed}; taken for gone by {by or 'none of the fleet'}): {what}"
                    )
    for name, count in sorted(seen.items()):
        report.counts[name] = count


def _slow_racer_runs(slot: Slot, mine: list[RunRecord], races: list[list[Life]]) -> list[RunRecord]:
    """The agent's runs started by a racer after another racer of the same race had ended
    the agent's run: by the journal, the later run started after the earlier one ended."""
    starter: dict[str, Life] = {}  # run id -> the first life that started, resumed or printed it
    for life in slot.lives:
        for run_id in life.runs:
            starter.setdefault(run_id, life)
    found = []
    for run in mine:
        life = starter.get(run.id)
        race = next((race for race in races if life in race), None)
        if life is None or race is None:
            continue
        if any(
            other.finished_at is not None
            and other.finished_at <= run.started_at
            and any(other.id in sibling.runs for sibling in race if sibling is not life)
            for other in mine
        ):
            found.append(run)
    return found


def _journal_down_at_start(life: Life) -> bool:
    """The life ended at its start, saying in one plain line that its journal could not be
    reached (no connection, no LISTEN, or the server gone between two of the start's
    statements), and asked nothing."""
    lines = [p.get("line", "") for p in life.problems if p.get("event") == "not json"]
    if life.code != 1 or life.runs or len(lines) != 1:
        return False
    for command in ("run", "inbox"):
        said = lines[0].removeprefix(f"hotseam {command}: ")
        if said.startswith(("cannot connect to the journal", "cannot listen to")) or (
            said.startswith("the journal ") and " failed: " in said
        ):
            return True
    return False


def _check_life(
    life: Life,
    slot: Slot,
    record_at: dict[tuple[str, int], AskRecord],
    by_id: dict[str, AskRecord],
    finished_by: dict[str, float],
    live: Counter[str],
    replayed: Counter[str],
    report: Report,
) -> None:
    counts = report.counts
    if life.killed is None and life.code not in (0, None):
        if life.code == 2:
            counts["restarts refused (exit 2: run claimed)"] += 1
        elif _journal_down_at_start(life):
            # Started while the journal's server was stopped (--outages): one plain line,
            # and its supervisor starts it again; a running daemon's questions wait instead.
            counts["starts while the journal was down (exit 1, one line)"] += 1
        else:
            report.bad(
                "daemons that exited on their own with an error",
                f"{slot.name} life {life.number} exited {life.code}: {life.problems[-3:]}",
            )
    replays = [e for e in life.events if e["event"] == "ask.replayed"]
    replayed_at = {(e["run_id"], e["position"]) for e in replays}
    positions = [e["position"] for e in replays]
    if positions != list(range(len(positions))):
        report.bad(
            "replays inconsistent",
            f"{slot.name} life {life.number} replayed positions {positions}",
        )
    for e in replays:
        record = record_at.get((e["run_id"], e["position"]))
        if record is None or record.id != e["question_id"]:
            report.bad(
                "replays inconsistent",
                f"{slot.name} life {life.number}: replayed {e['question_id']} at "
                f"{e['position']}, the record there is {record and record.id}",
            )
    logged_up_to: dict[str, int] = {}  # run id -> the last position stderr spoke of
    for event in life.events:
        found = by_id.get(event.get("question_id", ""))
        if found is not None:
            logged_up_to[found.run_id] = max(logged_up_to.get(found.run_id, -1), found.seq)
    for line in life.stdout:
        if "run" not in line:
            report.bad("delivered to a different question", f"unreadable line {line}")
            continue
        if "error" in line:
            report.bad("asks that failed in the agent", f"{slot.name}: {line}")
            continue
        where = (line["run"], line["seq"])
        ended = finished_by.get(line["run"])
        if ended is not None and life.started > ended:
            report.bad(
                "finished runs delivered again",
                f"{slot.name} life {life.number}: run {line['run'][:8]} position "
                f"{line['seq']} (that run finished before this life started)",
            )
        record = record_at.get(where)
        named = _parse(line.get("answer"))
        recorded = None if record is None or record.answer is None else record.answer.answer
        if (
            record is None
            or named is None
            or named != (record.id, line["question"])
            or record.request.question != line["question"]
        ):
            report.bad(
                "delivered to a different question",
                f"{slot.name} life {life.number}: {line['question']!r} at position "
                f"{line['seq']} got {line.get('answer')!r} (record {record and record.id})",
            )
            continue
        if where in replayed_at and not line.get("replayed"):
            report.bad(
                "replays inconsistent",
                f"{record.id}: the daemon logged a replay the agent did not see",
            )
        # A replay the agent saw whose `ask.replayed` is missing: lost with the tail of a
        # killed life's stderr (its writer thread's queue), but only if nothing of a later
        # position of the run reached stderr (the queue is written in order).
        lost_tail = (
            line.get("replayed")
            and life.killed is not None
            and logged_up_to.get(line["run"], -1) < line["seq"]
        )
        if where in replayed_at or lost_tail:
            if line["answer"] == recorded:
                counts["replayed deliveries (consistent)"] += 1
                replayed[record.id] += 1
            else:
                report.bad(
                    "replays inconsistent",
                    f"{record.id}: replayed {line['answer']!r}, recorded {recorded!r}",
                )
            continue
        live[record.id] += 1
        if line["answer"] != recorded:
            report.bad(
                "delivered ≠ recorded",
                f"{record.id}: received {line['answer']!r}, recorded {recorded!r}",
            )
