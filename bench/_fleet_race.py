"""The fleet torture's racing claims: several daemons started at once for one agent.

A supervisor that retries, a deploy that starts the new daemon before the old one is gone,
machines of a fleet started together: each daemon finds no live owner of the agent's run
and goes on to take it, and the journal lets one of them. A *race* is such a start:
:data:`RACERS` lives of one agent started at the same instant. Every agent's first start
races (a new agent: ``start_run``), so does its first restart after a ``kill -9`` (the run
the killed daemon left: ``claim_run``), and any other start with the probability
``race_share``.

The losers must refuse before asking: exit 2 with one plain line on stderr (who runs the
agent, what to do), never a traceback. Checked once the fleet is done
(:meth:`Races.check`), each counter must be 0:

* **racing losers that did not refuse cleanly**: a racer that exited 2 with other than one
  plain line on stderr, with a traceback, or after it asked a question;
* **races with two askers at once**: two racers asked in the same run and neither was
  killed (the second can take the run only once the first is gone; a racer that started
  after the winner's run finished asks in a run of its own).

A racer that exits 1 is already a "daemon that exited on their own with an error".
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

import anyio
from _fleet_world import BREAKS, Life, Slot, World, read_life

RACERS = 3
"""Lives started at once in a race."""

MUST_BE_ZERO = (
    "racing losers that did not refuse cleanly (exit 2, one plain line)",
    "races with two askers at once",
)

UNWON = "races won by none or several (told, not judged: racers may be killed)"


@dataclass
class Races:
    """The races of one torture: which starts raced, and what came of them."""

    share: float
    rng: random.Random
    races: list[list[Life]] = field(default_factory=list)
    _started: set[str] = field(default_factory=set)  # agents started at least once
    _killed: set[str] = field(default_factory=set)  # agents a life of which was killed
    _raced_after_kill: set[str] = field(default_factory=set)

    def racing(self, slot: Slot) -> bool:
        """Whether the slot's next start is a race."""
        first = slot.name not in self._started
        self._started.add(slot.name)
        after_kill = slot.name in self._killed and slot.name not in self._raced_after_kill
        if after_kill:
            self._raced_after_kill.add(slot.name)
        return first or after_kill or self.rng.random() < self.share

    async def live(self, world: World, slot: Slot) -> list[Life]:
        """Start the slot's next life (several, racing, when :meth:`racing` says so) and
        read each to its end; the lives, in the order they were started."""
        count = RACERS if self.racing(slot) else 1
        lives = [await world.start(slot) for _ in range(count)]
        if count > 1:
            self.races.append(lives)
        slot.poke()
        async with anyio.create_task_group() as group:
            for life in lives:
                group.start_soon(read_life, life)
        if any(life.killed is not None for life in lives):
            self._killed.add(slot.name)
        return lives

    def check(self, counts: dict[str, int], examples: dict[str, list[str]]) -> None:
        """Count the races and their outcomes into a report's ``counts``."""
        counts["races (daemons started at once for one agent)"] = len(self.races)
        counts["race losers (exit 2)"] = 0
        counts["races won by exactly one asker"] = 0
        for name in MUST_BE_ZERO:
            counts[name] = 0

        def bad(name: str, example: str) -> None:
            counts[name] += 1
            if len(examples.setdefault(name, [])) < 5:
                examples[name].append(example)

        for lives in self.races:
            askers = [life for life in lives if _asked(life)]
            if len(askers) == 1:
                counts["races won by exactly one asker"] += 1
            elif len(examples.setdefault(UNWON, [])) < 5:
                examples[UNWON].append(
                    ", ".join(
                        f"{life.slot} life {life.number}: exit {life.code}, killed "
                        f"{life.killed}, asked {_asked(life)}, runs "
                        f"{[run[:8] for run in life.runs]}"
                        for life in lives
                    )
                )
            for one, other in itertools.combinations(askers, 2):
                shared = set(one.runs) & set(other.runs)
                if shared and one.killed is None and other.killed is None:
                    bad(
                        "races with two askers at once",
                        f"{one.slot} lives {one.number} and {other.number} both asked in "
                        f"run {sorted(shared)[0][:8]}, neither killed",
                    )
            for life in lives:
                if life.killed is not None or life.code != 2:
                    continue
                counts["race losers (exit 2)"] += 1
                plain = [p["line"] for p in life.problems if p.get("event") == "not json"]
                traced = [p for p in life.problems if "exception" in p]
                if len(plain) != 1 or traced or _asked(life):
                    bad(
                        "racing losers that did not refuse cleanly (exit 2, one plain line)",
                        f"{life.slot} life {life.number}: {len(plain)} plain line(s) "
                        f"{plain[:2]}, {len(traced)} traceback(s), asked: {_asked(life)}",
                    )


def _asked(life: Life) -> bool:
    return any(event["event"] == "ask.started" for event in life.events) or bool(life.stdout)


# -- breaks ------------------------------------------------------------------------------------

RACE_BREAKS: dict[str, tuple[str, list[tuple[str, str, str]]]] = {
    "race-refusal": (
        "a daemon that loses the race for its agent's run fails with the journal's error "
        "(exit 1, a traceback) instead of refusing in one line",
        [("cli/_agent_loop.py", "if error.code in _TAKEN:", "if False:")],
    ),
    "claim-live-run": (
        "a daemon takes the agent's run from a live owner (claim_run ignores the owner)",
        [
            (
                "interaction/_journal/_store.py",
                "if owner is not None and owner.alive:\n                    raise run_claimed",
                "if False:\n                    raise run_claimed",
            )
        ],
    ),
}
"""Guarantees of the races broken on purpose (``--break``): the torture must then fail."""

BREAKS.update(RACE_BREAKS)
