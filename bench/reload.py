"""Hot-reload latency and safety, side by side with a process restart and importlib.reload.

    .venv/bin/python bench/reload.py [--saves 60] [--restarts 50] [--reloads 500]
                                     [--handover 400] [--only-handover] [--only-log]
                                     [--log-saves 40] [--log-before SRC] [--hog N]

Prints markdown tables. Measures, on asyncio:

1. **Save → new generation serving an ask**: the time from the completed write of a provider
   file to an ask answered by the new generation, median and p95 over ``--saves`` saves
   (spaced past the reloader's coalescing window so each save is its own reload). Side by
   side, in the same run and with the same watcher (hotseam's native watcher at its
   defaults: inotify on Linux, so every row gets the same event-driven report):

   * ``hotseam`` — a :class:`hotseam.reload.Reloader` watching the folder;
   * ``process restart`` — what ``watchfiles.run_process`` / ``uvicorn --reload`` users get:
     on the same watcher's batch, start a new Python process that imports hotseam and the
     provider module, sets it up and serves one ask (the old process has already exited,
     which favours this row; the child reads hotseam's cached bytecode, compiled before
     the run, as an installed hotseam would, and compiles the provider from source);
   * ``importlib.reload`` — on the same watcher's batch, ``importlib.reload`` the module and
     ask its provider object directly (no seam, no disposal: what it cannot do is the point
     of ``hot-reload-anchors.md`` §3.1).

   Two more rows take the watcher out: ``reloader.reload(path)`` by hand and a bare
   ``importlib.reload``, write → answer, with the same pause between saves as the watched
   rows (a reload right after the last one runs on warm caches and costs less than a save
   does).

2. **Asks through reloads**: four tasks ask continuously (each answer takes ~1 ms, so asks
   are in flight when a reload withdraws them) while the provider is reloaded ``--reloads``
   times by hand. Counts asks that failed or hung (no answer within 2 s), and the time no
   provider was active for the seam inside each swap: from the old registration's removal
   (``Registration._undo``) to the new one's activation (``Registration._start``), found by
   wrapping those two methods in this script only.

3. **Handover cost**: ``reloader.reload(path)`` by hand of a provider that carries 0, 1 or
   10 values (``scope.carry``), interleaved (each round reloads the three modules in a
   rotating order, so drift and noise hit all three alike), ``--handover`` rounds. The cost
   per carried value is the difference of the medians, divided by the number of values.
   A second table times the handover machinery alone (no file, no module execution), where
   a reload's own noise does not drown it.

4. **The log of a save**: two real ``hotseam run`` daemons, JSON log lines on a piped
   stderr, one at ``--log-level info`` (every lifecycle event of the save logged) and one
   at ``warning`` (none), and the floor (``bench/_floor.py``: a bare inotify read, read,
   ``compile``, ``exec``, call), ``--log-saves`` saves each interleaved in a random order:
   the end of the write → the daemon's agent holding the new version's answer (the
   question re-asked on the new generation included; ``bench/_run_saves.py``).
   ``--only-log`` runs this part alone; ``--log-before SRC`` adds the same two daemons
   running the hotseam package found in ``SRC`` (a copy of ``src/`` from another commit),
   in the same rounds: before and after a change. Each daemon row also gives the CPU time
   its loop's thread and its other threads ran on each save's path, and how long the loop's
   thread waited for a core there.

``--hog N`` runs N busy processes beside the whole run (``bench/_hog.py``).

Goals (2 cores, issue 27): median ≤ 5 ms, p95 ≤ 8 ms, ≥ 10x faster than the restart; 0 failed or
hung asks; the no-provider gap ≤ 1 ms at p99; the handover < 0.1 ms per carried value.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import gc
import importlib
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from _run_saves import run_saves

import hotseam
import hotseam._core._registry as core_context
from _hog import add_hog_option, hog
from hotseam import Context, Scope
from hotseam._core import follow, hand_over
from hotseam.interaction import AskUserQuestionRequest, ask
from hotseam.reload import NativeWatcher, ReloadCommitted, Reloader, WatchOptions

QUESTION = AskUserQuestionRequest("Which version is serving?")
SETTLE = 0.15  # seconds between saves: past the reloader's 0.1 s coalescing window
JITTER = 0.02  # a fixed pause would phase-lock the saves with the watchers' polling steps

PROVIDER = """\
import anyio
from hotseam.interaction import USER_INTERACTION, AskUserQuestionAnswer

VERSION = {version}
DELAY = {delay}


class Provider:
    async def ask(self, request):
        if DELAY:
            await anyio.sleep(DELAY)
        return AskUserQuestionAnswer(f"v{{VERSION}}")


provider = Provider()


def setup(scope):
    scope.provide(USER_INTERACTION, provider)
"""

RESTART_CHILD = """\
import sys, anyio
sys.path.insert(0, sys.argv[1])
from hotseam import Context, Scope
from hotseam.interaction import AskUserQuestionRequest, ask
import bench_provider

async def main():
    context = Context("restart")
    async with Scope("generation", context=context) as scope:
        bench_provider.setup(scope)
        answer = await ask(AskUserQuestionRequest("Which version is serving?"), context=context)
    print(answer.answer, flush=True)

anyio.run(main)
"""


def write_provider(path: Path, version: int, delay: float = 0.0) -> None:
    path.write_text(PROVIDER.format(version=version, delay=delay), encoding="utf-8")


def summary(samples: list[float]) -> tuple[float, float, float]:
    """Median, p95 and p99 in milliseconds."""
    ordered = sorted(samples)
    quantiles = statistics.quantiles(ordered, n=100, method="inclusive")
    return statistics.median(ordered) * 1000, quantiles[94] * 1000, quantiles[98] * 1000


# -- 1. save → serving -------------------------------------------------------------------------


async def hotseam_watched(folder: Path, saves: int, watcher: NativeWatcher) -> list[float]:
    file = folder / "bench_provider.py"
    write_provider(file, 0)
    context = Context("bench")
    samples = []
    async with (
        Reloader(context, [folder], watch=WatchOptions(watcher=watcher)) as reloader,
        reloader.events() as events,
    ):
        for version in range(1, saves + 1):
            await anyio.sleep(SETTLE + random.uniform(0, JITTER))
            write_provider(file, version)
            started = time.perf_counter()  # from the completed write
            await events.next(ReloadCommitted, path=file)
            answer = await ask(QUESTION, context=context)
            samples.append(time.perf_counter() - started)
            assert answer.answer == f"v{version}", answer
    return samples


async def hotseam_by_hand(folder: Path, saves: int) -> list[float]:
    file = folder / "bench_provider.py"
    write_provider(file, 0)
    context = Context("bench")
    samples = []
    async with Reloader(context, [folder], watch=False) as reloader:
        for version in range(1, saves + 1):
            await anyio.sleep(SETTLE + random.uniform(0, JITTER))
            write_provider(file, version)
            started = time.perf_counter()  # from the completed write
            (await reloader.reload(file)).raise_for_errors()
            answer = await ask(QUESTION, context=context)
            samples.append(time.perf_counter() - started)
            assert answer.answer == f"v{version}", answer
    return samples


@contextmanager
def importable(folder: Path) -> Iterator[None]:
    sys.path.insert(0, str(folder))
    # importlib.reload trusts __pycache__ by mtime and size: two saves of the same size in
    # the same second would load the stale bytecode. Compile from source every time.
    dont_write = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        yield
    finally:
        sys.dont_write_bytecode = dont_write
        sys.path.remove(str(folder))
        sys.modules.pop("bench_provider", None)


async def importlib_watched(folder: Path, saves: int, watcher: NativeWatcher) -> list[float]:
    file = folder / "bench_provider.py"
    write_provider(file, 0)
    samples = []
    with importable(folder):
        module = importlib.import_module("bench_provider")
        async with watcher.open([_root(folder)]) as batches:
            for version in range(1, saves + 1):
                await anyio.sleep(SETTLE + random.uniform(0, JITTER))
                write_provider(file, version)
                started = time.perf_counter()  # from the completed write
                await _next_batch(batches)
                module = importlib.reload(module)
                answer = await module.provider.ask(QUESTION)
                samples.append(time.perf_counter() - started)
                assert answer.answer == f"v{version}", answer
    return samples


async def importlib_by_hand(folder: Path, saves: int) -> list[float]:
    file = folder / "bench_provider.py"
    write_provider(file, 0)
    samples = []
    with importable(folder):
        module = importlib.import_module("bench_provider")
        for version in range(1, saves + 1):
            await anyio.sleep(SETTLE + random.uniform(0, JITTER))
            write_provider(file, version)
            started = time.perf_counter()  # from the completed write
            module = importlib.reload(module)
            answer = await module.provider.ask(QUESTION)
            samples.append(time.perf_counter() - started)
            assert answer.answer == f"v{version}", answer
    return samples


async def process_restart(folder: Path, saves: int, watcher: NativeWatcher) -> list[float]:
    file = folder / "bench_provider.py"
    write_provider(file, 0)
    samples = []
    async with watcher.open([_root(folder)]) as batches:
        for version in range(1, saves + 1):
            await anyio.sleep(SETTLE + random.uniform(0, JITTER))
            write_provider(file, version)
            started = time.perf_counter()  # from the completed write
            await _next_batch(batches)
            done = await anyio.run_process(
                [sys.executable, "-c", RESTART_CHILD, str(folder)], env=_environment()
            )  # hotseam from its cached bytecode; the provider compiled from source
            samples.append(time.perf_counter() - started)
            assert done.stdout.decode().strip() == f"v{version}", done.stdout
    return samples


def _root(folder: Path) -> Any:
    from hotseam.reload import WatchRoot

    return WatchRoot(folder)


async def _next_batch(batches: Any) -> None:
    async for batch in batches:
        if any(change.path.name == "bench_provider.py" for change in batch):
            return
    raise AssertionError("the watcher stopped")


# -- 2. asks through reloads ---------------------------------------------------------------------


@contextmanager
def swap_gaps() -> Iterator[list[float]]:
    """Time from a registration's withdrawal (its scope's close began) to the next
    activation, for every swap."""
    gaps: list[float] = []
    removed: list[float] = []
    original_withdraw = core_context.Registration._withdraw
    original_start = core_context.Registration._start

    def withdraw(self: Any) -> None:
        if self.state is core_context.RegistrationState.ACTIVE:
            removed.append(time.perf_counter())
        original_withdraw(self)

    def start(self: Any) -> None:
        original_start(self)
        if removed:
            gaps.append(time.perf_counter() - removed.pop())

    core_context.Registration._withdraw = withdraw  # type: ignore[method-assign]
    core_context.Registration._start = start  # type: ignore[method-assign]
    try:
        yield gaps
    finally:
        core_context.Registration._withdraw = original_withdraw  # type: ignore[method-assign]
        core_context.Registration._start = original_start  # type: ignore[method-assign]


async def asks_through_reloads(folder: Path, reloads: int) -> dict[str, Any]:
    file = folder / "bench_provider.py"
    write_provider(file, 0, delay=0.001)
    context = Context("bench")
    answered = 0
    failed: list[str] = []
    hung = 0
    stop = anyio.Event()

    async def asker() -> None:
        nonlocal answered, hung
        while not stop.is_set():
            try:
                with anyio.fail_after(2):
                    await ask(QUESTION, context=context)
                answered += 1
            except TimeoutError:
                hung += 1
            except Exception as error:
                failed.append(f"{type(error).__name__}: {error}")

    with swap_gaps() as gaps:
        async with (
            Reloader(context, [folder], watch=False) as reloader,
            anyio.create_task_group() as tg,
        ):
            for _ in range(4):
                tg.start_soon(asker)
            started = time.perf_counter()
            for version in range(1, reloads + 1):
                write_provider(file, version, delay=0.001)
                (await reloader.reload(file)).raise_for_errors()
                await anyio.sleep(0.002)
            elapsed = time.perf_counter() - started
            stop.set()
    return {
        "reloads": reloads,
        "answered": answered,
        "failed": failed,
        "hung": hung,
        "gaps": gaps,
        "elapsed": elapsed,
    }


CARRIER = """
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.scripted import ScriptedProvider

VERSION = {version}


class Resource:
    def close(self):
        pass


def setup(scope):
{carries}
    scope.provide(USER_INTERACTION, ScriptedProvider(lambda request: "ok"))
"""


async def handover_cost(
    rounds: int, counts: tuple[int, ...] = (0, 1, 10)
) -> dict[int, list[float]]:
    """Reload times (s) of a provider carrying ``n`` values, for each ``n``, interleaved."""
    samples: dict[int, list[float]] = {n: [] for n in counts}
    with tempfile.TemporaryDirectory() as tmp:
        async with contextlib.AsyncExitStack() as stack:
            targets: dict[int, tuple[Reloader, Path]] = {}
            for n in counts:
                folder = Path(tmp) / f"carry{n}"
                folder.mkdir()
                context = Context(f"handover-{n}")
                reloader = await stack.enter_async_context(Reloader(context, [folder], watch=False))
                targets[n] = (reloader, folder / f"carrier{n}.py")
            for round_ in range(rounds + 10):  # the first 10 rounds warm up
                order = counts[round_ % len(counts) :] + counts[: round_ % len(counts)]
                for n in order:
                    reloader, path = targets[n]
                    carries = (
                        "\n".join(
                            f"    scope.carry('r{i}', Resource, dispose=Resource.close)"
                            for i in range(n)
                        )
                        or "    pass"
                    )
                    path.write_text(CARRIER.format(version=round_, carries=carries))
                    started = time.perf_counter()
                    result = await reloader.reload(path)
                    elapsed = time.perf_counter() - started
                    result.raise_for_errors()
                    if round_ >= 10:
                        samples[n].append(elapsed)
    return samples


async def handover_core(
    rounds: int, counts: tuple[int, ...] = (0, 1, 10)
) -> dict[int, list[float]]:
    """The handover machinery alone (s): a staged scope takes over ``n`` values from its
    predecessor (``follow``, ``carry`` x n, ``hand_over``) and the predecessor closes."""

    class Resource:
        def close(self) -> None:
            pass

    samples: dict[int, list[float]] = {n: [] for n in counts}
    context = Context("handover-core")
    serving: dict[int, Scope] = {}
    for n in counts:
        serving[n] = context.scope(f"carry{n}")
        for i in range(n):
            serving[n].carry(f"r{i}", Resource, dispose=Resource.close)
    for round_ in range(rounds + 100):
        order = counts[round_ % len(counts) :] + counts[: round_ % len(counts)]
        for n in order:
            started = time.perf_counter()
            new = context.scope(f"carry{n}", staged=True)
            follow(new, serving[n])
            for i in range(n):
                new.carry(f"r{i}", Resource, dispose=Resource.close)
            hand_over(new)
            await serving[n].aclose()
            elapsed = time.perf_counter() - started
            serving[n] = new
            if round_ >= 100:
                samples[n].append(elapsed)
    for scope in serving.values():
        await scope.aclose()
    return samples


def print_handover(samples: dict[int, list[float]], title: str) -> None:
    base = summary(samples[0])[0]
    print(f"{title} (ms, interleaved):\n")
    print("| carried values | samples | median | p95 | median - 0 values | per value |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n, values in samples.items():
        median, p95, _ = summary(values)
        extra = median - base
        per_value = f"{extra / n:.4f}" if n else "-"
        print(f"| {n} | {len(values)} | {median:.4f} | {p95:.4f} | {extra:+.4f} | {per_value} |")
    print()


# -- report -------------------------------------------------------------------------------------


def _environment() -> dict[str, str]:
    """The restart child's: it loads hotseam from the bytecode compiled before the run, and
    writes none (a cached ``.pyc`` of the provider, saved twice in the same second at the
    same size, would be taken for current and serve the old version)."""
    return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}


def _load() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def machine() -> str:
    try:
        uname = subprocess.run(
            ["uname", "-a"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        uname = " ".join(platform.uname())
    return (
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; `{uname}`, {os.cpu_count()} CPUs (nproc), "
        f"Python {platform.python_version()}, load average {_load()}; hotseam from its "
        "cached bytecode (compiled first), the provider compiled from source at every load"
    )


LOG_SETTINGS = {
    "info": "`hotseam run providers --agent agent.py:main --no-journal --log-format json "
    "--log-level info`, stderr a pipe that a process of its own drains and counts",
    "warning": "the same at `--log-level warning` (no line of a save is logged)",
    "floor": "`bench/_floor.py`: one process blocked in an inotify read "
    "(`IN_CLOSE_WRITE | IN_MOVED_TO`), read, `compile`, `exec`, call",
}


def print_log_rows(saves: int, other_src: Path | None = None) -> None:
    """Part 4: ``hotseam run`` at info and at warning, beside the floor (and the same two
    daemons running the code in ``other_src``, when given)."""
    with tempfile.TemporaryDirectory() as tmp:
        if other_src is not None:
            compileall.compile_dir(other_src, quiet=1)
        measured = run_saves(Path(tmp), saves, other_src)
    samples, lines, cpu = measured.samples, measured.lines, measured.cpu
    start, end = (", ".join(f"{v:.2f}" for v in load) for load in measured.load)
    print(
        f"`hotseam run` save → the agent holding the new answer, {saves} saves each after a "
        "round of warm-up, the rows interleaved round by round (each round every row once, "
        f"in a random order, 0.15-0.17 s apart); load average {start} at the first round, "
        f"{end} at the last (`os.getloadavg()`). Times in ms; the CPU columns are the "
        "daemon's threads on each save's path (`/proc/PID/task/TID/schedstat`), medians:\n"
    )
    print(
        "| row | log lines per save | median | p95 | x warning | x floor | loop thread CPU "
        "| other threads' CPU | loop thread waiting for a core |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row, values in samples.items():
        label = "floor" if row == "floor" else f"`--log-level {row.rpartition(' ')[2]}`"
        if row.startswith("before"):
            label = f"before: {label}"
        warning = statistics.median(samples["before warning" if "before" in row else "warning"])
        median = statistics.median(values)
        count = f"{lines[row]:.1f}" if row in lines else "-"
        columns = (cpu[row].loop, cpu[row].others, cpu[row].waited) if row in cpu else ([],) * 3
        times = [f"{statistics.median(c) * 1000:.3f}" if c else "-" for c in columns]
        print(
            f"| {label} | {count} | {median * 1000:.2f} | {summary(values)[1]:.2f} | "
            f"{median / warning:.2f}x | {median / statistics.median(samples['floor']):.2f}x | "
            + " | ".join(times)
            + " |"
        )
    print("\nSettings of each row:\n")
    for row in ("info", "warning", "floor"):
        print(f"- {row}: {LOG_SETTINGS[row]}")
    if other_src is not None:
        print(f"- before info, before warning: the same two daemons running `{other_src}`")
    print()


async def main(
    saves: int,
    restarts: int,
    reloads: int,
    handover: int,
    only: bool,
    log_saves: int,
    other_src: Path | None,
) -> None:
    compileall.compile_dir(Path(hotseam.__file__).parent, quiet=1)
    header = machine()
    if log_saves < 0:  # --only-log
        print(f"Run of {header}.\n")
        print_log_rows(-log_saves, other_src)
        print(f"Ended {datetime.now(UTC):%H:%M} UTC, load average {_load()}.")
        return
    carried = await handover_cost(handover)
    core = await handover_core(handover * 5)
    if only:
        print(f"Run of {header}.\n")
        print_handovers(carried, core)
        print(f"Ended {datetime.now(UTC):%H:%M} UTC, load average {_load()}.")
        return
    watcher = NativeWatcher()
    results: dict[str, list[float]] = {}
    runs: list[tuple[str, Callable[[Path], Any]]] = [
        ("hotseam Reloader (watched)", lambda f: hotseam_watched(f, saves, watcher)),
        ("process restart (watched)", lambda f: process_restart(f, restarts, watcher)),
        ("importlib.reload (watched)", lambda f: importlib_watched(f, saves, watcher)),
        ("hotseam reload() by hand", lambda f: hotseam_by_hand(f, saves)),
        ("importlib.reload by hand", lambda f: importlib_by_hand(f, saves)),
    ]
    for name, run in runs:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "providers"
            folder.mkdir()
            gc.collect()
            results[name] = await run(folder)
            print(f"  measured: {name}", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "providers"
        folder.mkdir()
        through = await asks_through_reloads(folder, reloads)

    hotseam_median = summary(results["hotseam Reloader (watched)"])[0]
    restart_median = summary(results["process restart (watched)"])[0]
    print(f"Run of {header}; watcher: {watcher!r}.\n")
    print("Save → new generation serving an ask (ms):\n")
    print("| method | saves | median | p95 | x hotseam median |")
    print("|---|---:|---:|---:|---:|")
    for name, samples in results.items():
        median = summary(samples)[0]
        ratio = median / hotseam_median
        print(
            f"| {name} | {len(samples)} | {median:.1f} | {summary(samples)[1]:.1f} | {ratio:.2f}x |"
        )
    print(
        f"\nThe process restart is {restart_median / hotseam_median:.0f}x slower than the "
        "hot reload (median).\n"
    )
    gaps = through["gaps"]
    gap_median, gap_p95, gap_p99 = summary(gaps)
    print(f"Asks running continuously (4 askers) through {through['reloads']} reloads:\n")
    print("| reloads | asks answered | failed | hung | no-provider gap median | p95 | p99 | max |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {through['reloads']} | {through['answered']} | {len(through['failed'])} | "
        f"{through['hung']} | {gap_median:.3f} ms | {gap_p95:.3f} ms | {gap_p99:.3f} ms | "
        f"{max(gaps) * 1000:.3f} ms |"
    )
    if through["failed"]:
        print("\nFailures:", *sorted(set(through["failed"])), sep="\n- ")
    print()
    print_handovers(carried, core)
    print_log_rows(log_saves, other_src)
    print(f"Ended {datetime.now(UTC):%H:%M} UTC, load average {_load()}.")


def print_handovers(carried: dict[int, list[float]], core: dict[int, list[float]]) -> None:
    print_handover(carried, "Handover: reload() by hand of a provider carrying n values")
    print_handover(core, "Handover machinery alone: follow, carry x n, hand_over, old close")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saves", type=int, default=60)
    parser.add_argument("--restarts", type=int, default=50)
    parser.add_argument("--reloads", type=int, default=500)
    parser.add_argument("--handover", type=int, default=400, help="rounds of the handover cost")
    parser.add_argument("--only-handover", action="store_true", help="measure the handover only")
    parser.add_argument("--log-saves", type=int, default=40, help="saves of part 4")
    parser.add_argument("--only-log", action="store_true", help="measure part 4 only")
    parser.add_argument(
        "--log-before",
        type=Path,
        metavar="SRC",
        help="part 4 also runs the daemons on this copy of hotseam's src folder (before/after)",
    )
    add_hog_option(parser)
    options = parser.parse_args()
    with hog(options.hog):
        if options.hog:
            print(f"With --hog {options.hog}: {options.hog} busy processes beside the run.")
        anyio.run(
            main,
            options.saves,
            options.restarts,
            options.reloads,
            options.handover,
            options.only_handover,
            -options.log_saves if options.only_log else options.log_saves,
            options.log_before,
        )
