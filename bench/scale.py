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
4. save → new generation serving an ask among 1 and 1,000 modules, native watcher at its
   defaults (inotify on Linux), then its watchfiles backend: median, p95 and hotseam's own
   part (from the watcher's batch to the answer); beside them, in the same rounds, the
   same provider with one call at import (``len('')``: its body goes to the module-body
   thread, see ``inert()`` in ``hotseam.reload._loader``), and **the floor**: a bare process doing a
   blocking inotify read, read, ``compile``, ``exec`` and a call (``bench/_floor.py``);
5. idle CPU of native (inotify, watchfiles) and polling watching over 100 / 1,000 / 3,000
   files.

The start-up of the commands is ``bench/startup.py``'s.

Plain ``importlib`` is measured without writing bytecode, as hotseam loads watched modules
(compiled from source at each load, nothing cached); hotseam's own code and the commands'
may use and write bytecode (hotseam is compiled before the run). Memory per module is given
twice: what ``tracemalloc`` traces (Python objects), and the resident set (RSS) a fresh
process grows by (allocator overhead, arenas...). The header says when the run was made, on
what, and under what load (``os.getloadavg``), and the end
line the load when it ended. ``--only`` runs one part; ``--hog N`` runs N busy processes
beside it (``bench/_hog.py``), so the load is a stated condition.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
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
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from datetime import UTC, datetime
from pathlib import Path

import anyio
from _floor import floor

import hotseam
from _hog import add_hog_option, hog
from hotseam import Context, Scope
from hotseam.interaction import AskUserQuestionRequest, ask
from hotseam.reload import (
    FileChange,
    NativeWatcher,
    PollingWatcher,
    ReloadCommitted,
    Reloader,
    Watcher,
    WatchOptions,
    WatchRoot,
)
from hotseam.reload._watcher import Backend

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


@contextmanager
def plain_imports(folder: Path) -> Iterator[None]:
    """``folder`` importable, without writing bytecode: hotseam compiles a watched module
    from source at each load and caches nothing, so plain importlib is measured alike
    (writing a ``.pyc`` per module would cost it a file each)."""
    sys.path.insert(0, str(folder))
    dont_write = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        yield
    finally:
        sys.dont_write_bytecode = dont_write
        sys.path.remove(str(folder))
        forget(folder)


async def startup_plain(folder: Path) -> float:
    context = Context("scale")
    names = module_names(folder)
    with plain_imports(folder):
        started = time.perf_counter()
        async with Scope("plain", context=context) as scope:
            for name in names:
                module = importlib.import_module(name)
                module.setup(scope.child(name))
            elapsed = time.perf_counter() - started
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
                with plain_imports(folder):
                    async with Scope("plain", context=Context("scale")) as scope:
                        for module_name in names:
                            importlib.import_module(module_name).setup(scope.child(module_name))
                        gc.collect()
                        result[name] = (tracemalloc.get_traced_memory()[0] - before) / size
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


class _Timed:
    """The reloader's watcher, noting when each batch leaves it (own work = batch → served)."""

    def __init__(self, inner: Watcher) -> None:
        self.inner = inner
        self.last_batch = 0.0

    def open(
        self, roots: Sequence[WatchRoot]
    ) -> AbstractAsyncContextManager[AsyncIterator[Collection[FileChange]]]:
        return self._open(roots)

    @asynccontextmanager
    async def _open(
        self, roots: Sequence[WatchRoot]
    ) -> AsyncIterator[AsyncIterator[Collection[FileChange]]]:
        async with self.inner.open(roots) as batches:

            async def timed() -> AsyncIterator[Collection[FileChange]]:
                async for batch in batches:
                    self.last_batch = time.perf_counter()
                    yield batch

            yield timed()


CALLING = "CALLED = len('')\n"
"""One call at import: the body is no longer inert and executes in the module-body thread."""


async def save_to_serve(
    sizes: Sequence[int], saves: int, backend: Backend = "auto"
) -> dict[str, tuple[list[float], list[float]]]:
    """The native watcher at its defaults: write the serving provider among ``size``
    modules, then time until an ask sees the new one (and hotseam's own part of it: from
    the watcher's batch); the same at N = 1 with a body that calls, and the floor. The rows
    are interleaved, in a random order each round (the first round is warm-up)."""
    rows = [f"N = {size:,}" for size in sizes] + ["N = 1, a call at import", "floor"]
    samples: dict[str, tuple[list[float], list[float]]] = {row: ([], []) for row in rows}
    async with contextlib.AsyncExitStack() as stack:
        setups = {}
        for row, size, extra in [
            *((f"N = {size:,}", size, "") for size in sizes),
            ("N = 1, a call at import", 1, CALLING),
        ]:
            folder = stack.enter_context(folder_of(size - 1))
            target = folder / f"serving_{folder.name}.py"
            target.write_text(SERVING.format(value=0) + extra, encoding="utf-8")
            context = Context("scale")
            watcher = _Timed(NativeWatcher(backend=backend))
            reloader = await stack.enter_async_context(
                Reloader(context, [folder], watch=WatchOptions(watcher=watcher))
            )
            events = await stack.enter_async_context(reloader.events())
            setups[row] = (target, context, watcher, events, extra)
        bare = stack.enter_context(floor(stack.enter_context(folder_of(0))))
        for version in range(saves + 1):
            for row in random.sample(rows, len(rows)):
                await anyio.sleep(0.15 + random.uniform(0, JITTER))
                if row == "floor":
                    started = bare.save(version + 1)
                    served = await anyio.to_thread.run_sync(bare.served, version + 1)
                    if version:
                        samples[row][0].append(served - started)
                    continue
                target, context, watcher, events, extra = setups[row]
                write(target, SERVING.format(value=version + 1) + extra)
                started = time.perf_counter()
                await events.next(ReloadCommitted, path=target)
                answer = await ask(QUESTION, context=context)
                served = time.perf_counter()
                assert answer.answer == f"v{version + 1}", answer
                if version:
                    samples[row][0].append(served - started)
                    samples[row][1].append(served - watcher.last_batch)
    return samples


# -- 5. idle CPU --------------------------------------------------------------------------------


async def idle_cpu(files: int, watcher: str, seconds: float) -> float:
    """Percent of one core used by the process while watching and nothing changes
    (``watcher``: ``inotify``, ``watchfiles`` or ``polling``)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / f"idle{next(_RUN)}"
        for number in range(files):
            sub = folder / f"d{number // 100}"
            sub.mkdir(parents=True, exist_ok=True)
            (sub / f"f{number}.py").write_text("")
        chosen: Watcher
        if watcher == "polling":
            chosen = PollingWatcher()
        elif watcher == "watchfiles, step 1":  # what a peer on awatch(step=1) pays to wait
            chosen = NativeWatcher(backend="watchfiles", step_ms=1)
        else:
            chosen = NativeWatcher(backend="watchfiles" if watcher == "watchfiles" else "inotify")
        # A folder without __init__.py: nothing loads, so only the watching costs.
        async with Reloader(Context("scale"), [folder], watch=WatchOptions(watcher=chosen)):
            await anyio.sleep(3.0)  # past the first scans and the back-off
            cpu, wall = time.process_time(), time.perf_counter()
            await anyio.sleep(seconds)
            return (time.process_time() - cpu) / (time.perf_counter() - wall) * 100


# -- report --------------------------------------------------------------------------------------


def _environment() -> dict[str, str]:
    """This environment, with bytecode caching allowed (hotseam's own code may use it)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def machine() -> str:
    uname = platform.uname()
    return (
        f"{uname.system} {uname.release} {uname.machine}; {os.cpu_count()} cores (nproc); "
        f"Python {platform.python_version()}; load average {_load()}"
    )


def _load() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


RSS_CHILD = """\
import anyio, gc, importlib, sys
from pathlib import Path
from hotseam import Context, Scope
from hotseam.reload import Reloader

folder = Path(sys.argv[1])
method = sys.argv[2]


def rss() -> int:
    with open("/proc/self/statm") as file:
        return int(file.read().split()[1]) * 4096


async def main():
    names = sorted(p.stem for p in folder.glob("*.py"))
    gc.collect()
    before = rss()
    if method == "hotseam":
        async with Reloader(Context("rss"), [folder], watch=False):
            gc.collect()
            print((rss() - before) / len(names))
    else:
        sys.path.insert(0, str(folder))
        sys.dont_write_bytecode = True  # as hotseam: compiled from source, nothing cached
        async with Scope("plain", context=Context("rss")) as scope:
            for name in names:
                importlib.import_module(name).setup(scope.child(name))
            gc.collect()
            print((rss() - before) / len(names))


anyio.run(main)
"""


def rss_per_module(size: int, rounds: int) -> dict[str, float]:
    """Resident memory per loaded module (bytes): each method in a fresh process (so that
    nothing else it allocated counts), the two in a random order each round; median."""
    found: dict[str, list[float]] = {"hotseam": [], "plain": []}
    with folder_of(size) as folder:
        for _ in range(rounds):
            for method in random.sample(sorted(found), 2):
                done = subprocess.run(
                    [sys.executable, "-c", RSS_CHILD, str(folder), method],
                    capture_output=True,
                    text=True,
                    check=True,
                    env=_environment(),
                )
                found[method].append(float(done.stdout.strip().splitlines()[-1]))
    return {method: statistics.median(values) for method, values in found.items()}


async def main(sizes: list[int], quick: bool, only: str | None) -> None:
    random.seed(1)
    logging.getLogger("hotseam").setLevel(logging.ERROR)  # the idle folders' skip warnings
    compileall.compile_dir(Path(hotseam.__file__).parent, quiet=1)
    print(f"Run of {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {machine()}.")
    print(
        "Bytecode: hotseam from its cache (compiled first); watched modules and plain "
        "importlib's compiled from source at every load, neither caching bytecode.\n"
    )
    if only in (None, "sizes"):
        await per_size(sizes, quick)
    if only in (None, "serve"):
        saves = 15 if quick else 60
        for backend in ("auto", "watchfiles"):
            served = await save_to_serve((1, 1000), saves, backend)
            shown = NativeWatcher(backend=backend).backend
            print(
                f"Save → new generation serving an ask, native watcher ({shown}) at its "
                f"defaults, {saves} saves, the rows interleaved in a random order each round "
                "(ms; own work: from the watcher's batch to the answer; the floor: a bare "
                "inotify read + read + compile + exec + call in a process of its own):\n"
            )
            floor_median = median_ms(served["floor"][0])
            print("| row | median | p95 | x floor | own work median | own work p95 |")
            print("|---|---:|---:|---:|---:|---:|")
            for row, (total, own) in served.items():
                own_cells = f"{median_ms(own):.2f} | {p95_ms(own):.2f}" if own else "- | -"
                print(
                    f"| {row} | {median_ms(total):.2f} | {p95_ms(total):.2f} | "
                    f"{median_ms(total) / floor_median:.2f}x | {own_cells} |"
                )
            print(f"\n(load average {_load()})\n")
    if only in (None, "idle"):
        seconds = 3.0 if quick else 10.0
        modes = ("inotify", "watchfiles", "watchfiles, step 1", "polling")
        print(
            f"Idle CPU over {seconds:g} s (% of one core; watchfiles at step_ms=8, and at "
            "step_ms=1 as awatch(step=1) polls):\n"
        )
        print("| files | " + " | ".join(modes) + " |")
        print("|---:|" + "---:|" * len(modes))
        for files in (100, 1000, 3000):
            cells = [await idle_cpu(files, mode, seconds) for mode in modes]
            print(f"| {files:,} | " + " | ".join(f"{cell:.2f}" for cell in cells) + " |")
    print(f"\nEnded {datetime.now(UTC):%H:%M} UTC, load average {_load()}.")


async def per_size(sizes: list[int], quick: bool) -> None:
    rounds = 10 if quick else 60
    start_rounds = 2 if quick else 5
    rows = []
    for size in sizes:
        edit = await edits(size, rounds)
        start = await startups(size, start_rounds if size <= 1000 else 2)
        mem = await memory(size) if size in (100, 1000) else None
        rss = rss_per_module(size, 3 if quick else 5) if size in (100, 1000) else None
        rows.append((size, edit, start, mem, rss))
        print(f"  measured N={size}", file=sys.stderr)
    per_module = {size: statistics.median(start["hotseam"]) for size, _, start, _, _ in rows}
    reference = per_module.get(100, next(iter(per_module.values())))
    print(
        "| N | edit one module (ms) | x N=1 (same rounds) | no-op save (ms) | no-op p95 (ms) "
        "| startup per module (ms) | x N=100 | x plain importlib + setup "
        "| traced memory per module (KB) | plain (KB) | RSS per module (KB) | plain (KB) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size, edit, start, mem, rss in rows:
        hot, plain = statistics.median(start["hotseam"]), statistics.median(start["plain"])
        memory_cells = (
            f"{mem['hotseam'] / 1024:.1f} | {mem['plain'] / 1024:.1f}" if mem else "- | -"
        )
        rss_cells = f"{rss['hotseam'] / 1024:.1f} | {rss['plain'] / 1024:.1f}" if rss else "- | -"
        print(
            f"| {size:,} | {median_ms(edit['edit']):.2f} | "
            f"{median_ms(edit['edit']) / median_ms(edit['edit 1']):.2f}x | "
            f"{median_ms(edit['noop']):.3f} | {p95_ms(edit['noop']):.3f} | "
            f"{hot * 1000:.3f} | {hot / reference:.2f}x | {hot / plain:.2f}x | {memory_cells} "
            f"| {rss_cells} |"
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
    print()


def _sizes(text: str) -> list[int]:
    return [int(part) for part in text.split(",")]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, for a smoke run")
    parser.add_argument("--sizes", type=_sizes, default=[1, 10, 100, 1000, 4000])
    parser.add_argument("--only", choices=["sizes", "serve", "idle"], help="one part of the run")
    add_hog_option(parser)
    options = parser.parse_args()
    with hog(options.hog):
        if options.hog:
            print(f"With --hog {options.hog}: {options.hog} busy processes beside the run.")
        anyio.run(main, options.sizes, options.quick, options.only)
