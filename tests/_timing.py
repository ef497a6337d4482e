"""One factor for every wall-clock deadline the tests set.

A deadline in a test is a guard against a hang, never a claim about speed: each is written
for an idle machine and multiplied by ``TIME_SCALE``, so a busy machine (a CI box, the
suite's own workers, ``make test-loaded``) stretches every one of them alike.

The factor is ``HOTSEAM_TEST_TIME_SCALE`` when set; otherwise it is measured when the suite
starts: a fixed small CPU workload timed against what it takes on an idle reference
machine, and the load average per core, whichever is larger, never below 1. The measured
factor is written back to ``HOTSEAM_TEST_TIME_SCALE`` (with ``HOTSEAM_TEST_TIME_MEASURED``),
so pytest-xdist's workers and the processes the tests start use the same factor instead of
measuring their own; with more workers than cores it is at least workers per core
(``share_cores_with``).

A measured factor also follows a load that rises after the start (a neighbour's build
beginning mid-suite): ``scaled`` uses the larger of the start's factor and the machine's
load per core at the moment it is called (``current_load``: the processes runnable right
now and the one-minute average, read from ``/proc/loadavg``, a few microseconds). It never
goes below the start's factor, so a deadline is never shorter than the one measured at the
start. It is read as each test starts and held for that test (``pin``), so the deadlines
of one test keep their ratios. A chosen factor is used as it is.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

_VARIABLE = "HOTSEAM_TEST_TIME_SCALE"
# The measured value, set beside _VARIABLE: a worker or child that inherits both alike knows
# the factor was measured, not chosen, and follows the load too; one whose _VARIABLE was set
# to something else (a test choosing a factor for a child) uses that as chosen.
_MEASURED = "HOTSEAM_TEST_TIME_MEASURED"

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
    return max(1.0, round(max(cpu, current_load()), 1))


def current_load() -> float:
    """The machine's load per core now: the larger of the processes runnable at this
    instant (less the caller, which is one of them) and the one-minute load average.

    The average alone lags a load that just rose by most of a minute; the instant count
    alone can catch a lull. Cheap enough to read on every ``scaled`` call."""
    cores = os.cpu_count() or 1
    try:
        fields = Path("/proc/loadavg").read_text().split()
        average, running = float(fields[0]), int(fields[3].split("/")[0]) - 1
    except (OSError, IndexError, ValueError):  # not Linux
        try:
            average, running = os.getloadavg()[0], 0
        except OSError:  # no load average on this platform
            return 0.0
    return max(average, running) / cores


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
    _export(value)
    return value


def _export(value: float) -> None:
    os.environ[_VARIABLE] = os.environ[_MEASURED] = str(value)


_CHOSEN = bool(os.environ.get(_VARIABLE)) and os.environ.get(_VARIABLE) != os.environ.get(_MEASURED)
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
    _export(TIME_SCALE)


# The factor held for the test running now (``pin``): ``None`` between tests.
_pinned: float | None = None


def factor() -> float:
    """The suite's time factor now: a chosen one as it is; a measured one, the larger of
    the start's and the load per core at this moment (rounded as ``measure`` rounds), or
    the one pinned for the running test."""
    if _CHOSEN:
        return TIME_SCALE
    if _pinned is not None:
        return _pinned
    return max(TIME_SCALE, round(current_load(), 1))


def pin() -> None:
    """Hold the factor of this moment for the test that starts now (until ``unpin``).

    A test pairs its deadlines: a liveness window of ``scaled(0.3)`` and a wait past it of
    ``scaled(0.4)``, a grace and a moment inside it. Each pair must keep its ratio, so one
    test sees one factor; the load is followed from one test to the next."""
    global _pinned
    _pinned = None
    _pinned = factor()


def unpin() -> None:
    global _pinned
    _pinned = None


def scaled(seconds: float) -> float:
    """``seconds`` stretched by the suite's time factor at the moment of the call: call it
    where the deadline is set (``anyio.fail_after(scaled(10))``), not once at import."""
    return seconds * factor()
