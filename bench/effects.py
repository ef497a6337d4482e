"""Cost of scope effects, side by side with contextlib.AsyncExitStack (run by hand).

    .venv/bin/python bench/effects.py [--repeat 15]

Measures, on asyncio:

* N sync ``scope.defer`` callbacks added to one scope and the scope closed, beside
  ``AsyncExitStack.callback`` doing the same, for N = 10,000 and 100,000;
* N ``ctx.provide`` + ``registration.dispose()`` cycles on one context;
* 100,000 child scopes opened and closed under one long-lived parent.

Goals: per effect at most 2x AsyncExitStack; per-effect cost at 100,000 within 1.5x of that
at 10,000; provide+dispose at least 50,000 per second.
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack

import anyio

from hotseam import Context, Scope, Seam


def _noop() -> None:
    return None


async def hotseam_defer(n: int) -> float:
    scope = Scope("bench")
    started = time.perf_counter()
    for _ in range(n):
        scope.defer(_noop)
    await scope.aclose()
    return time.perf_counter() - started


async def exitstack_callback(n: int) -> float:
    stack = AsyncExitStack()
    started = time.perf_counter()
    for _ in range(n):
        stack.callback(_noop)
    await stack.aclose()
    return time.perf_counter() - started


SEAM: Seam[object] = Seam("bench")


async def provide_dispose(n: int) -> float:
    context = Context("bench")
    provider = object()
    started = time.perf_counter()
    for _ in range(n):
        registration = context.provide(SEAM, provider)
        await registration.dispose()
    return time.perf_counter() - started


async def children(n: int) -> float:
    parent = Scope("parent")
    started = time.perf_counter()
    for _ in range(n):
        child = parent.child("c")
        child.defer(_noop)
        await child.aclose()
    elapsed = time.perf_counter() - started
    assert not parent.children(), "closed children must detach from their parent"
    await parent.aclose()
    return elapsed


async def sample(func: Callable[[int], Awaitable[float]], n: int, repeat: int) -> list[float]:
    runs = []
    for _ in range(repeat):
        gc.collect()
        runs.append(await func(n))
    return runs


def per_item_us(runs: list[float], n: int) -> tuple[float, float]:
    ordered = sorted(runs)
    median = statistics.median(ordered)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return median / n * 1e6, p95 / n * 1e6


async def main(repeat: int) -> None:
    print(
        f"machine: {platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.system()} {platform.release()}"
    )
    print(f"backend: asyncio, {repeat} runs each; times are per item\n")
    print(f"| {'case':<42} | {'N':>7} | {'median µs':>9} | {'p95 µs':>8} | {'ratio':>14} |")
    print(f"|{'-' * 44}|{'-' * 9}|{'-' * 11}|{'-' * 10}|{'-' * 16}|")
    per_n: dict[int, float] = {}
    for n in (10_000, 100_000):
        ours = per_item_us(await sample(hotseam_defer, n, repeat), n)
        theirs = per_item_us(await sample(exitstack_callback, n, repeat), n)
        per_n[n] = ours[0]
        print(
            f"| {'Scope.defer + aclose':<42} | {n:>7,} | {ours[0]:>9.3f} | {ours[1]:>8.3f} "
            f"| {ours[0] / theirs[0]:>9.2f}x AES |"
        )
        print(
            f"| {'AsyncExitStack.callback + aclose (AES)':<42} | {n:>7,} | {theirs[0]:>9.3f} "
            f"| {theirs[1]:>8.3f} | {'1.00x AES':>14} |"
        )
    n = 100_000
    cycle = per_item_us(await sample(provide_dispose, n, repeat), n)
    nested = per_item_us(await sample(children, n, repeat), n)
    print(
        f"| {'Context.provide + Registration.dispose':<42} | {n:>7,} | {cycle[0]:>9.3f} "
        f"| {cycle[1]:>8.3f} | {1e6 / cycle[0]:>8,.0f} /s |"
    )
    print(
        f"| {'child scope open + defer + close':<42} | {n:>7,} | {nested[0]:>9.3f} "
        f"| {nested[1]:>8.3f} | {1e6 / nested[0]:>8,.0f} /s |"
    )
    print()
    print(
        f"scaling: per-effect cost at 100,000 / at 10,000 = "
        f"{per_n[100_000] / per_n[10_000]:.2f}x (goal <= 1.5x)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    anyio.run(main, parser.parse_args().repeat)
