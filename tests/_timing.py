"""One factor for every wall-clock deadline the tests set.

A deadline in a test is a guard against a hang, never a claim about speed: each is written
for an idle machine and multiplied by ``TIME_SCALE``, so a busy machine (a CI box, the
suite's own workers, ``make test-loaded``) stretches every one of them alike.

The factor is ``HOTSEAM_TEST_TIME_SCALE`` when set; otherwise it is measured once, when the
suite starts: a fixed small CPU workload timed against what it takes on an idle reference
machine, and the load average per core, whichever is larger, never below 1. The measured
factor is written back to ``HOTSEAM_TEST_TIME_SCALE``, so pytest-xdist's workers and the
processes the tests start use the same factor instead of measuring their own; with more
workers than cores it is at least workers per core (``share_cores_with``).
"""

from __future__ import annotations

import os
import statistics
import time

_VARIABLE = "HOTSEAM_TEST_TIME_SCALE"

# What one round of ``_workload`` takes on the reference machine: 2 cores, idle (the median
# of 9 rounds was 12.0-12.4 ms on 2026-12-02). A machine twice as slow, or one whose cores
# are shared by twice as many busy processes, measures about 2.
_REFERENCE_SECONDS = 0.012
_ROUNDS = 7


def _workload() -> int:
    """A fixed amount of pure-Python work (no allocation to speak of, no I/O)."""
    total = 0
    for i in range(100_000):
        total += i * i % 7
    return total


def measure() -> float:
    """How much slower than the reference machine this one is now (at least 1).

    The median of a few short rounds: a round is shorter than the scheduler's slice, so a
    busy machine delays most rounds and the median sees it, and one lucky or unlucky round
    does not decide. The load average per core covers a machine busy in bursts."""
    rounds = []
    for _ in range(_ROUNDS):
        start = time.perf_counter()
        _workload()
        rounds.append(time.perf_counter() - start)
    cpu = statistics.median(rounds) / _REFERENCE_SECONDS
    try:
        load = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:  # no load average on this platform
        load = 0.0
    return max(1.0, round(max(cpu, load), 1))


def _time_scale() -> float:
    """The factor chosen by ``HOTSEAM_TEST_TIME_SCALE``, else measured (and then exported)."""
    chosen = os.environ.get(_VARIABLE, "")
    if chosen:
        try:
            value = float(chosen)
        except ValueError:
            raise SystemExit(f"{_VARIABLE}={chosen!r}: expected a number such as 2.5") from None
        if not value > 0:
            raise SystemExit(f"{_VARIABLE}={chosen!r}: expected a number above 0")
        return value
    value = measure()
    os.environ[_VARIABLE] = str(value)
    return value


_CHOSEN = bool(os.environ.get(_VARIABLE))
TIME_SCALE = _time_scale()


def share_cores_with(workers: int) -> None:
    """The suite is about to run in ``workers`` processes (pytest-xdist): with more workers
    than cores each gets a share of one, so a measured factor is at least workers per core.
    Called before the workers start, so that they inherit the result; a chosen factor is
    left as it is."""
    global TIME_SCALE
    if _CHOSEN:
        return
    TIME_SCALE = max(TIME_SCALE, round(workers / (os.cpu_count() or 1), 1))
    os.environ[_VARIABLE] = str(TIME_SCALE)


def scaled(seconds: float) -> float:
    """``seconds`` stretched by the suite's one time factor."""
    return seconds * TIME_SCALE
