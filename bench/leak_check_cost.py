"""Cost of the pytest plugin's checks on hotseam's own tests, and of the growth mode per
reload (run by hand).

    .venv/bin/python bench/leak_check_cost.py [--repeat 3] [--reloads 20] [tests ...]

1. **The default checks** — the same tests run in a pytest subprocess (one process, no
   xdist, no random order) three ways: with no check, with the leak check (scopes,
   registrations, carried values, zombie generations), and with the leak check plus the
   escape check (tasks, timers, threads, descriptors: what hotseam's own suite runs
   with). The least CPU time (user + system) of ``--repeat`` runs
   of each is compared (the wall clock of a shared machine varies more than the checks).
   Without test paths, a sample of the suite that exercises scopes, contexts, carrying,
   reloads and providers is run (the whole suite is the lead's to run, once).
   Goal: the default checks at most 15 % slower than none.
2. **Per test** — ``--synthetic`` small async tests (a scope, a child, a task, a socket,
   a thread, each undone) in a temporary folder, the same three ways: the checks' cost per
   test, free of the sample's own variance.
3. **The growth mode** — a clean provider reloaded ``--reloads`` times through a
   ``ReloadDriver``, plain and under ``assert_reload_stable`` (tracemalloc tracing, a full
   collection and a snapshot after each reload): the cost per reload of each.
"""

from __future__ import annotations

import argparse
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from hotseam import Context
from hotseam.testing import ReloadDriver, assert_reload_stable

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = [
    "tests/test_scope.py",
    "tests/test_context.py",
    "tests/test_carry.py",
    "tests/test_tools.py",
    "tests/reload/test_reloader.py",
    "tests/providers/test_scripted.py",
]
MODES = {
    "no check": ["-o", "hotseam_leak_check=false", "-o", "hotseam_escape_check=false"],
    "leak check": ["-o", "hotseam_leak_check=true", "-o", "hotseam_escape_check=false"],
    "leak + escape (default)": ["-o", "hotseam_leak_check=true", "-o", "hotseam_escape_check=true"],
}
SYNTHETIC = """
import socket
import threading

import pytest
from hotseam import Scope


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.parametrize("n", range({count}))
@pytest.mark.anyio
async def test_small(n):
    async with Scope("test") as scope:
        child = scope.child("child")
        child.defer(lambda: None)

        async def work():
            pass

        child.spawn(work)
        await child.aclose()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
    thread = threading.Thread(target=lambda: None)
    thread.start()
    thread.join()
"""
CLEAN_PROVIDER = """
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.scripted import ScriptedProvider


def setup(scope):
    scope.provide(USER_INTERACTION, ScriptedProvider(lambda request: "yes"))
"""


def run_tests(paths: list[str], options: list[str], cwd: Path = ROOT) -> tuple[float, str]:
    """CPU seconds one pytest run of ``paths`` took, and its summary line."""
    command = [
        sys.executable, "-m", "pytest", *paths, "-q", "-p", "no:cacheprovider",
        "-p", "no:randomly", "-p", "no:xdist", *options,
    ]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU time, not wall time: on a shared machine another process's load changes the
    # wall clock of a run far more than the checks do
    elapsed = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = done.stdout.strip().splitlines()
    return elapsed, lines[-1] if lines else done.stderr.strip()[-200:]


async def reload_cost(reloads: int) -> tuple[float, float]:
    """Milliseconds per reload: plain, and under the growth mode."""
    with tempfile.TemporaryDirectory() as folder:
        async with ReloadDriver(Context("bench"), Path(folder)) as driver:
            driver.write("bench_ui.py", CLEAN_PROVIDER)
            (await driver.reload("bench_ui.py")).raise_for_errors()
            started = time.perf_counter()
            for _ in range(reloads):
                (await driver.reload("bench_ui.py", force=True)).raise_for_errors()
            plain = (time.perf_counter() - started) / reloads * 1000
            started = time.perf_counter()
            await assert_reload_stable(driver, "bench_ui.py", reloads=reloads, warmup=0)
            growth = (time.perf_counter() - started) / reloads * 1000
    return plain, growth


def compare(paths: list[str], cwd: Path, repeat: int, per_test: int = 0) -> None:
    """Run ``paths`` each way ``repeat`` times; print the best of each against none."""
    print()
    extra = f" {'per test':>10}" if per_test else ""
    header = f"CPU, best of {repeat}"
    print(f"{'checks':<24} {header:>17} {'vs none':>9}{extra}  outcome")
    runs: dict[str, list[tuple[float, str]]] = {name: [] for name in MODES}
    for _ in range(repeat):  # interleaved, so that a busy moment hits every way alike
        for name, options in MODES.items():
            runs[name].append(run_tests(paths, options, cwd))
    baseline = None
    for name in MODES:
        best = min(elapsed for elapsed, _ in runs[name])
        baseline = baseline or best
        change = f"{(best / baseline - 1) * 100:+.1f} %"
        cost = f" {(best - baseline) / per_test * 1000:>7.2f} ms" if per_test else ""
        print(f"{name:<24} {best:>15.2f} s {change:>9}{cost}  {runs[name][-1][1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tests", nargs="*", help="test paths (default: a sample of the suite)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--reloads", type=int, default=20)
    parser.add_argument("--synthetic", type=int, default=400, help="small tests (0: none)")
    args = parser.parse_args()
    paths = args.tests or SAMPLE
    print(f"Python {platform.python_version()} on {platform.machine()}; tests: {' '.join(paths)}")
    compare(paths, ROOT, args.repeat)
    if args.synthetic:
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "test_small.py").write_text(SYNTHETIC.format(count=args.synthetic))
            print(f"\n{args.synthetic} small async tests:")
            compare(["test_small.py"], Path(folder), args.repeat, per_test=args.synthetic)
    plain, growth = anyio.run(reload_cost, args.reloads)
    print()
    print(f"{'reload of a clean provider':<32} {'ms per reload':>14}")
    print(f"{'plain (ReloadDriver.reload)':<32} {plain:>14.1f}")
    print(f"{'under assert_reload_stable':<32} {growth:>14.1f}")


if __name__ == "__main__":
    main()
