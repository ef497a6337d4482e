"""The growth mode: reload a provider N times and fail when something keeps growing, as
CPython's ``regrtest -R`` and pytest-memray's ``limit_leaks`` do for references and memory
(``docs/testing.md``, "Growth over reloads"). Opt-in and slow by design: ``tracemalloc``
traces every allocation while it runs, and every reload is followed by a full collection
(``bench/leak_check_cost.py`` states the cost)."""

from __future__ import annotations

import functools
import gc
import itertools
import linecache
import logging
import os
import threading
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from .._core import BaseContext, HarnessError, get_tracker
from ._driver import ReloadDriver
from ._escapes import open_fds
from ._leaks import LeakTracker
from ._sites import is_library, name_originals
from ._zombies import format_zombies

_TOP_SITES = 5
_KIT = str(Path(__file__).parent) + os.sep
_HOTSEAM = str(Path(__file__).parents[1]) + os.sep


class GrowthError(HarnessError, AssertionError):
    """Something kept growing over reloads; the message names it and where it was allocated."""

    default_code = "GROWTH"


@dataclass(slots=True)
class GrowthReport:
    """What was measured after the warm-up and after each reload (index 0: the warm-up)."""

    module: str
    series: dict[str, list[int]] = field(default_factory=dict)
    grown: list[str] = field(default_factory=list)
    """A line per quantity that kept growing (empty: stable)."""
    top_allocations: list[str] = field(default_factory=list)
    zombies: str = ""

    def render(self, reloads: int, warmup: int) -> str:
        """The failure message."""
        lines = [
            f"reloading {self.module} {reloads} times after {warmup} warm-up reload(s), "
            "these kept growing:"
        ]
        lines.extend(f"  {line}" for line in self.grown)
        if self.top_allocations:
            lines.append("")
            lines.append("memory that grew most, by the traceback that allocated it:")
            lines.extend(self.top_allocations)
        if self.zombies:
            lines.append("")
            lines.append(self.zombies)
        return name_originals("\n".join(lines))


async def assert_reload_stable(
    driver: ReloadDriver,
    name: str | None = None,
    *,
    reloads: int = 10,
    warmup: int = 3,
    memory_per_reload: int = 4096,
    trace_frames: int = 10,
) -> GrowthReport:
    """Reload module ``name`` (or every module) ``warmup`` + ``reloads`` times and raise
    :class:`GrowthError` if registrations, live generations, tasks, threads, file
    descriptors or memory kept growing over the last ``reloads``: a count ended higher than
    after the warm-up and grew on at least half of the reloads (memory, besides, by more than
    ``memory_per_reload`` bytes per reload on average). The error names what grew, the
    allocation sites that grew most and, for live generations, the chain that keeps each alive.

    The module must be loaded already. Returns the measurements when nothing grew."""
    __tracebackhide__ = True
    if reloads < 2 or warmup < 0:
        raise ValueError(f"need reloads >= 2 and warmup >= 0, got {reloads} and {warmup}")
    started_tracing = not tracemalloc.is_tracing()
    if started_tracing:
        tracemalloc.start(trace_frames)
    try:
        for _ in range(warmup):
            await _reload(driver, name)
        report = GrowthReport(name or str(driver.directory))
        base_snapshot = _snapshot()
        series = {key: [value] for key, value in _measure(driver, base_snapshot).items()}
        end_snapshot = base_snapshot
        for _ in range(reloads):
            await _reload(driver, name)
            end_snapshot = _snapshot()
            for key, value in _measure(driver, end_snapshot).items():
                series[key].append(value)
    finally:
        if started_tracing:
            tracemalloc.stop()
    report.series = series
    for key, values in series.items():
        line = _growth(key, values, memory_per_reload if key == "memory" else 0)
        if line is not None:
            report.grown.append(line)
    if report.grown:
        if "memory" in " ".join(report.grown):
            report.top_allocations = _top_allocations(base_snapshot, end_snapshot)
        if any(line.startswith("live generations") for line in report.grown):
            zombies = driver.zombies()
            if zombies:
                report.zombies = format_zombies(zombies[:3]) + (
                    f"\n... and {len(zombies) - 3} more" if len(zombies) > 3 else ""
                )
        raise GrowthError(report.render(reloads, warmup), details={"grown": report.grown})
    return report


async def _reload(driver: ReloadDriver, name: str | None) -> None:
    __tracebackhide__ = True
    (await driver.reload(name, force=True)).raise_for_errors()
    await anyio.lowlevel.checkpoint()  # let cancelled tasks of the old generation end


def _measure(driver: ReloadDriver, snapshot: tracemalloc.Snapshot) -> dict[str, int]:
    """The counters, and the memory ``snapshot`` (taken after a full collection) holds."""
    serving = driver._serving()
    return {
        "registrations": _registrations(driver.context),
        "live generations": sum(
            1
            for generation in driver.generations
            if generation.alive() and (generation.name, generation.generation) not in serving
        ),
        "tasks": len(anyio.get_running_tasks()),
        "threads": threading.active_count(),
        "file descriptors": len(open_fds()),
        "memory": _memory(snapshot),
    }


def _registrations(context: BaseContext) -> int:
    """Active providers and tools up the context chain, plus every registration the
    installed leak tracker sees alive (one registered elsewhere counts too)."""
    count = 0
    ctx: BaseContext | None = context
    while ctx is not None:
        count += len(ctx.providers()) + len(ctx.tools._own)
        ctx = ctx.parent
    tracker = get_tracker()
    if isinstance(tracker, LeakTracker):
        count += tracker.live()
    return count


def _growth(key: str, values: list[int], per_reload: int) -> str | None:
    steps = [after - before for before, after in itertools.pairwise(values)]
    total = values[-1] - values[0]
    reloads = len(steps)
    if total <= 0 or sum(1 for step in steps if step > 0) * 2 < reloads:
        return None
    if total / reloads <= per_reload:
        return None
    if key == "memory":
        return (
            f"memory (tracemalloc): {_size(values[0])} → {_size(values[-1])} "
            f"(+{_size(total // reloads)} per reload)"
        )
    return f"{key}: {values[0]} → {values[-1]} (+{total / reloads:.1f} per reload)"


def _snapshot() -> tracemalloc.Snapshot:
    gc.collect()
    return tracemalloc.take_snapshot()


def _owned(traceback: tracemalloc.Traceback) -> bool:
    """Whether an allocation is the harness's own, not the code under test's: tracemalloc's,
    the kit's, log records a capturing handler keeps (caplog), linecache's and those of
    unknown origin. The newest frame that is not the standard library's or an installed
    package's decides, so the provider's own allocation is the code under test's however
    deep the reload that ran it (any frame of the kit further out would be: the driver calls
    every reload). Decided per traceback, each file name once (``Snapshot.filter_traces``
    would ``fnmatch`` every frame of every trace: seconds per snapshot after many
    allocations)."""
    if not len(traceback) or traceback[-1].filename == "<unknown>":  # the newest frame
        return True
    for frame in reversed(traceback):  # newest first
        owned = _owner(frame.filename)
        if owned is not None:
            return owned
    return False  # libraries only: the code under test's, as far as the trace shows


@functools.cache
def _owner(filename: str) -> bool | None:
    """True for the harness's file, False for the code under test's (the user's or the rest
    of hotseam), None for a library it called through."""
    name = _source(filename)
    if name in _HARNESS_FILES or name.startswith(_KIT):
        return True
    if name.startswith(_HOTSEAM) or not is_library(name):
        return False
    return None


def _source(filename: str | None) -> str:
    name = filename or ""
    return name[:-1] if name.endswith(".pyc") else name


_HARNESS_FILES = {_source(module.__file__) for module in (tracemalloc, logging, linecache)}


def _memory(snapshot: tracemalloc.Snapshot) -> int:
    """The bytes ``snapshot`` holds, the harness's own left out."""
    return sum(stat.size for stat in snapshot.statistics("traceback") if not _owned(stat.traceback))


def _top_allocations(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot) -> list[str]:
    """The tracebacks whose memory grew most, each led by its innermost frame of the
    user's code (an allocation inside a library is named by the line that called it)."""
    lines: list[str] = []
    stats = [stat for stat in after.compare_to(before, "traceback") if not _owned(stat.traceback)]
    total = sum(stat.size_diff for stat in stats if stat.size_diff > 0)
    # the sites that carry the growth; a few hundred bytes of an event loop's churn are not
    floor = max(512, total // 20)
    growing = [stat for stat in stats if stat.size_diff >= floor]
    for stat in growing[:_TOP_SITES]:
        frames = list(stat.traceback)  # oldest call first
        own = next(
            (frame for frame in reversed(frames) if not is_library(frame.filename)), frames[-1]
        )
        lines.append(
            f"  +{_size(stat.size_diff)} in {stat.count_diff:+d} block(s), allocated at "
            f"{own.filename}:{own.lineno}"
        )
        # hotseam's and the libraries' frames are left out, as from any failure of the kit
        shown = [frame for frame in frames if not is_library(frame.filename)] or frames[-3:]
        lines.extend(f'    File "{frame.filename}", line {frame.lineno}' for frame in shown)
    return lines


def _size(size: int) -> str:
    if abs(size) >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MiB"
    if abs(size) >= 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size} B"
