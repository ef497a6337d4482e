"""Scaling: what a reload, a startup, memory and idle watching cost as the folder grows.

    .venv/bin/python bench/scale.py [--quick] [--sizes 1,10,100,1000,4000]

Every figure is hotseam's own work, measured with the clock started after the file was
written (a back-to-back rewrite of one file stalls ~4 ms on ext4: that is the file system,
not the reloader). Within one size, the compared methods run interleaved, in a random order
each round. Prints markdown tables:

1. per size N (providers in one folder): an edit of one module (``reload(path)`` by hand),
   a save that changes nothing, startup per module beside plain ``importlib`` + ``setup``
   of the same files, and memory per loaded module beside the same;
2. a helper imported by K modules, with 0 / 1,000 / 3,000 unrelated modules beside it;
3. a chain of D modules each importing the next, the last one edited;
4. save → new generation serving an ask, native watcher, among 1,000 modules;
5. idle CPU of native and polling watching over 100 / 1,000 / 3,000 files;
6. start-up of a fresh interpreter: bare, ``import hotseam``, ``hotseam --help``.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio

from hotseam import Context, Scope
from hotseam.interaction import AskUserQuestionRequest, ask
from hotseam.reload import ReloadCommitted, Reloader

PROVIDER = """\
VALUE = {value}


def setup(scope):
    scope.defer(lambda: None)
"""
SERVING = """\
from hotseam.interaction import USER_INTERACTION, AskUserQuestionAnswer


class Provider:
    async def ask(self, request):
        return AskUserQuestionAnswer("v{value}")


def setup(scope):
    scope.provide(USER_INTERACTION, Provider())
"""
USER = """\
import {helper}


def setup(scope):
    scope.defer(lambda: None)
"""
QUESTION = AskUserQuestionRequest("Which version is serving?")
JITTER = 0.02
"""Added at random to each pause between saves: a fixed pause phase-locks the saves with
the watcher's 10 ms polling steps (a fixed 0.15 s measured ~3 ms more than random phases)."""
_RUN = iter(range(1, 1_000_000))


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def p95_ms(samples: list[float]) -> float:
    return statistics.quantiles(sorted(samples), n=100, method="inclusive")[94] * 1000


@contextmanager
def folder_of(count: int, template: str = PROVIDER, prefix: str = "m") -> Iterator[Path]:
    """A fresh folder of ``count`` provider modules with names unique to this process."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / f"run{next(_RUN)}"
        folder.mkdir()
        for number in range(count):
            (folder / f"{prefix}{folder.name}_{number}.py").write_text(
                template.format(value=0), encoding="utf-8"
            )
        yield folder


def write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def module_names(folder: Path) -> list[str]:
    return sorted(path.stem for path in folder.glob("*.py"))


def forget(folder: Path) -> None:
    """Drop what plain importlib loaded from ``folder`` (its names are never reused)."""
    for name in [n for n in sys.modules if folder.name in n]:
        del sys.modules[name]
    importlib.invalidate_caches()


# -- 1. per size -------------------------------------------------------------------------------


async def edits(size: int, rounds: int) -> dict[str, list[float]]:
    """``reload(path)`` of one edited module, and of one saved without a change, among
    ``size`` modules and — interleaved with them in a random order each round, so that the
    ratio compares the same minutes of a VM whose speed drifts — among 1 ("edit 1", "noop 1").
    """
    samples: dict[str, list[float]] = {"edit": [], "noop": [], "edit 1": [], "noop 1": []}
    with folder_of(size) as folder, folder_of(1, prefix="one") as alone:
        targets = {"": sorted(folder.iterdir())[size // 2], " 1": next(alone.iterdir())}
        async with (
            Reloader(Context("scale"), [folder], watch=False) as many,
            Reloader(Context("scale-1"), [alone], watch=False) as one,
        ):
            reloaders = {"": many, " 1": one}
            versions = {"": 0, " 1": 0}
            for _ in range(rounds):
                for kind, among in random.sample(
                    [(k, a) for k in ("edit", "noop") for a in ("", " 1")], 4
                ):
                    versions[among] += kind == "edit"
                    write(targets[among], PROVIDER.format(value=versions[among]))
                    started = time.perf_counter()
                    result = await reloaders[among].reload(targets[among])
                    samples[kind + among].append(time.perf_counter() - started)
                    assert (result.batch is None) == (kind == "noop"), (kind, result)
    return samples


async def startup_hotseam(folder: Path) -> float:
    context = Context("scale")
    started = time.perf_counter()
    async with Reloader(context, [folder], watch=False):
        return time.perf_counter() - started


async def startup_plain(folder: Path) -> float:
    context = Context("scale")
    names = module_names(folder)
    sys.path.insert(0, str(folder))
    try:
        started = time.perf_counter()
        async with Scope("plain", context=context) as scope:
            for name in names:
                module = importlib.import_module(name)
                module.setup(scope.child(name))
            elapsed = time.perf_counter() - started
    finally:
        sys.path.remove(str(folder))
        forget(folder)
    return elapsed


async def startups(size: int, rounds: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {"hotseam": [], "plain": []}
    methods = {"hotseam": startup_hotseam, "plain": startup_plain}
    for _ in range(rounds):
        for name in random.sample(sorted(methods), 2):
            with folder_of(size) as folder:
                gc.collect()
                samples[name].append(await methods[name](folder) / size)
    return samples


async def memory(size: int) -> dict[str, float]:
    """Bytes allocated per loaded module (tracemalloc), while loaded."""
    result: dict[str, float] = {}
    for name in random.sample(["hotseam", "plain"], 2):
        with folder_of(size) as folder:
            gc.collect()
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            if name == "hotseam":
                async with Reloader(Context("scale"), [folder], watch=False):
                    gc.collect()
                    result[name] = (tracemalloc.get_traced_memory()[0] - before) / size
            else:
                names = module_names(folder)
                sys.path.insert(0, str(folder))
                try:
                    async with Scope("plain", context=Context("scale")) as scope:
                        for module_name in names:
                            importlib.import_module(module_name).setup(scope.child(module_name))
                        gc.collect()
                        result[name] = (tracemalloc.get_traced_memory()[0] - before) / size
                finally:
                    sys.path.remove(str(folder))
                    forget(folder)
            tracemalloc.stop()
    return result


# -- 2, 3. helpers and chains -----------------------------------------------------------------


async def edit_one(folder: Path, target: Path, rounds: int, expect: int) -> list[float]:
    samples: list[float] = []
    async with Reloader(Context("scale"), [folder], watch=False) as reloader:
        for version in range(1, rounds + 1):
            write(target, f"VALUE = {version}\n")
            started = time.perf_counter()
            result = await reloader.reload(target)
            samples.append(time.perf_counter() - started)
            assert len(result.committed) == expect, (len(result.committed), expect)
    return samples


async def helper(importers: int, unrelated: int, rounds: int) -> list[float]:
    with folder_of(unrelated, prefix="u") as folder:
        target = folder / f"helper_{folder.name}.py"
        target.write_text("VALUE = 0\n", encoding="utf-8")
        for number in range(importers):
            (folder / f"user_{folder.name}_{number}.py").write_text(
                USER.format(helper=f"helper_{folder.name}"),
                encoding="utf-8",
            )
        return await edit_one(folder, target, rounds, importers + 1)


async def chain(depth: int, rounds: int) -> list[float]:
    with folder_of(0) as folder:
        names = [f"c_{folder.name}_{level}" for level in range(depth)]
        for level, name in enumerate(names):
            below = f"import {names[level + 1]}\n" if level + 1 < depth else "VALUE = 0\n"
            (folder / f"{name}.py").write_text(
                f"{below}\n\ndef setup(scope):\n    scope.defer(lambda: None)\n", encoding="utf-8"
            )
        return await edit_one(folder, folder / f"{names[-1]}.py", rounds, depth)


# -- 4. save → serving ---------------------------------------------------------------------------


async def save_to_serve(size: int, saves: int) -> list[float]:
    """Native watcher: write the serving provider, then time until an ask sees the new one."""
    with folder_of(size - 1) as folder:
        target = folder / f"serving_{folder.name}.py"
        target.write_text(SERVING.format(value=0), encoding="utf-8")
        context = Context("scale")
        samples: list[float] = []
        async with Reloader(context, [folder]) as reloader, reloader.events() as events:
            for version in range(1, saves + 1):
                await anyio.sleep(0.15 + random.uniform(0, JITTER))
                write(target, SERVING.format(value=version))
                started = time.perf_counter()
                await events.next(ReloadCommitted, path=target)
                answer = await ask(QUESTION, context=context)
                samples.append(time.perf_counter() - started)
                assert answer.answer == f"v{version}", answer
    return samples


# -- 5. idle CPU --------------------------------------------------------------------------------


async def idle_cpu(files: int, polling: bool, seconds: float) -> float:
    """Percent of one core used by the process while watching and nothing changes."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / f"idle{next(_RUN)}"
        for number in range(files):
            sub = folder / f"d{number // 100}"
            sub.mkdir(parents=True, exist_ok=True)
            (sub / f"f{number}.py").write_text("")
        # A folder without __init__.py: nothing loads, so only the watching costs.
        async with Reloader(Context("scale"), [folder], polling=polling):
            await anyio.sleep(3.0)  # past the first scans and the back-off
            cpu, wall = time.process_time(), time.perf_counter()
            await anyio.sleep(seconds)
            return (time.process_time() - cpu) / (time.perf_counter() - wall) * 100


# -- 6. import time ------------------------------------------------------------------------------

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import hotseam": [sys.executable, "-c", "import hotseam"],
    "hotseam --help": [sys.executable, "-c", "from hotseam.cli import main; main(['--help'])"],
}


def import_times(rounds: int) -> dict[str, list[float]]:
    """Wall time of fresh interpreters, the three commands in a random order each round."""
    samples: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(rounds):
        for name in random.sample(sorted(COMMANDS), len(COMMANDS)):
            started = time.perf_counter()
            subprocess.run(COMMANDS[name], check=False, capture_output=True)
            samples[name].append(time.perf_counter() - started)
    return samples


def import_tree() -> float:
    """``import hotseam``'s own cumulative time from ``-X importtime`` (ms), median of 5."""
    totals = []
    for _ in range(5):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import hotseam"],
            check=True,
            capture_output=True,
            text=True,
        )
        line = next(line for line in done.stderr.splitlines() if line.endswith("| hotseam"))
        totals.append(int(line.split("|")[1]) / 1000)
    return statistics.median(totals)


# -- report --------------------------------------------------------------------------------------


async def main(sizes: list[int], quick: bool) -> None:
    random.seed(1)
    logging.getLogger("hotseam").setLevel(logging.ERROR)  # the idle folders' skip warnings
    rounds = 10 if quick else 60
    start_rounds = 2 if quick else 5
    rows = []
    for size in sizes:
        edit = await edits(size, rounds)
        start = await startups(size, start_rounds if size <= 1000 else 2)
        mem = await memory(size) if size in (100, 1000) else None
        rows.append((size, edit, start, mem))
        print(f"  measured N={size}", file=sys.stderr)
    per_module = {size: statistics.median(start["hotseam"]) for size, _, start, _ in rows}
    reference = per_module.get(100, next(iter(per_module.values())))
    print(
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, {platform.system()} {platform.release()}.\n"
    )
    print(
        "| N | edit one module (ms) | x N=1 (same rounds) | no-op save (ms) | no-op p95 (ms) "
        "| startup per module (ms) | x N=100 | x plain importlib + setup "
        "| memory per module (KB) | plain (KB) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size, edit, start, mem in rows:
        hot, plain = statistics.median(start["hotseam"]), statistics.median(start["plain"])
        memory_cells = (
            f"{mem['hotseam'] / 1024:.1f} | {mem['plain'] / 1024:.1f}" if mem else "- | -"
        )
        print(
            f"| {size:,} | {median_ms(edit['edit']):.2f} | "
            f"{median_ms(edit['edit']) / median_ms(edit['edit 1']):.2f}x | "
            f"{median_ms(edit['noop']):.3f} | {p95_ms(edit['noop']):.3f} | "
            f"{hot * 1000:.3f} | {hot / reference:.2f}x | {hot / plain:.2f}x | {memory_cells} |"
        )

    print("\nA helper imported by K modules, edited, with U unrelated modules beside it (ms):\n")
    unrelated = [0, 1000] if quick else [0, 1000, 3000]
    print("| K | " + " | ".join(f"U = {u:,}" for u in unrelated) + " |")
    print("|---:|" + "---:|" * len(unrelated))
    for importers in (1, 10, 100):
        cells = [median_ms(await helper(importers, count, rounds // 2)) for count in unrelated]
        print(f"| {importers} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")

    print("\nA chain of D modules, each importing the next; the last one edited (ms):\n")
    print("| D | median | per module |")
    print("|---:|---:|---:|")
    for depth in (1, 10, 50):
        value = median_ms(await chain(depth, rounds // 2))
        print(f"| {depth} | {value:.2f} | {value / depth:.3f} |")

    saves = 15 if quick else 60
    served = await save_to_serve(1000, saves)
    print(
        f"\nSave → new generation serving an ask among 1,000 modules, native watcher "
        f"({saves} saves): median {median_ms(served):.1f} ms, p95 {p95_ms(served):.1f} ms\n"
    )

    times = {name: median_ms(values) for name, values in import_times(5 if quick else 15).items()}
    base = times["python -c pass"]
    print("\nStart-up of a fresh interpreter (ms, median; the same commands interleaved):\n")
    print("| command | wall | minus `python -c pass` |")
    print("|---|---:|---:|")
    for name, value in times.items():
        print(f"| `{name}` | {value:.1f} | {value - base:.1f} |")
    help_ratio = (times["hotseam --help"] - base) / (times["import hotseam"] - base)
    print(
        f"\n`import hotseam` by `-X importtime`: {import_tree():.1f} ms; `hotseam --help` costs "
        f"{help_ratio:.2f}x `import hotseam` (each minus the bare interpreter)\n"
    )

    seconds = 3.0 if quick else 10.0
    print(f"Idle CPU over {seconds:g} s (% of one core):\n")
    print("| files | native | polling |")
    print("|---:|---:|---:|")
    for files in (100, 1000, 3000):
        cells = [await idle_cpu(files, polling, seconds) for polling in (False, True)]
        print(f"| {files:,} | {cells[0]:.2f} | {cells[1]:.2f} |")


def _sizes(text: str) -> list[int]:
    return [int(part) for part in text.split(",")]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, for a smoke run")
    parser.add_argument("--sizes", type=_sizes, default=[1, 10, 100, 1000, 4000])
    options = parser.parse_args()
    anyio.run(main, options.sizes, options.quick)
