"""Asks per second through ask() and ctx.tools.execute, beside a direct provider call.

    .venv/bin/python bench/ask.py [--asks 20000] [--repeat 7]

An instant scripted provider answers every question, so the numbers are hotseam's own cost:
validation, the provider lease, answer checking, logging calls and (for the tool) pydantic
input validation and result building. Run on asyncio and trio.
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import time
from collections.abc import Awaitable, Callable

import anyio

from hotseam import Context
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ask,
    ask_user_question_tool,
)
from hotseam.providers.scripted import ScriptedProvider

REQUEST = AskUserQuestionRequest(
    "Which database?",
    header="Storage",
    options=(
        AskUserQuestionOption("Postgres", "pg", "Server database", recommended=True),
        AskUserQuestionOption("SQLite", description="One file"),
    ),
)
TOOL_INPUT = REQUEST.to_dict()


def _setup() -> tuple[Context, ScriptedProvider]:
    provider = ScriptedProvider(lambda request: "SQLite")
    context = Context("bench")
    context.provide(USER_INTERACTION, provider)
    context.tools.register(ask_user_question_tool())
    return context, provider


async def direct(n: int) -> float:
    _, provider = _setup()
    started = time.perf_counter()
    for _ in range(n):
        await provider.ask(REQUEST)
    return time.perf_counter() - started


async def through_ask(n: int) -> float:
    context, _ = _setup()
    started = time.perf_counter()
    for _ in range(n):
        await ask(REQUEST, context=context)
    return time.perf_counter() - started


async def through_tool(n: int) -> float:
    context, _ = _setup()
    started = time.perf_counter()
    for _ in range(n):
        result = await context.tools.execute("ask_user_question", TOOL_INPUT)
        assert result.ok, result.error
    return time.perf_counter() - started


CASES: list[tuple[str, Callable[[int], Awaitable[float]]]] = [
    ("provider.ask() direct", direct),
    ("hotseam.interaction.ask()", through_ask),
    ("ctx.tools.execute('ask_user_question')", through_tool),
]


async def measure(n: int, repeat: int) -> dict[str, list[float]]:
    runs: dict[str, list[float]] = {name: [] for name, _ in CASES}
    for _ in range(repeat):
        for name, case in CASES:
            gc.collect()
            runs[name].append(n / await case(n))
    return runs


def report(backend: str, runs: dict[str, list[float]]) -> None:
    baseline = statistics.median(runs[CASES[0][0]])
    print(f"\n{backend}:\n")
    print(
        f"| {'path':<40} | {'median asks/s':>13} | {'p95-slow asks/s':>15} | {'µs/ask':>7} "
        f"| {'vs direct':>9} |"
    )
    print(f"|{'-' * 42}|{'-' * 15}|{'-' * 17}|{'-' * 9}|{'-' * 11}|")
    for name, _ in CASES:
        rates = sorted(runs[name])
        median = statistics.median(rates)
        slow = rates[max(0, round(0.05 * (len(rates) - 1)))]
        print(
            f"| {name:<40} | {median:>13,.0f} | {slow:>15,.0f} | {1e6 / median:>7.2f} "
            f"| {baseline / median:>8.1f}x |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--asks", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.system()} {platform.release()}"
    )
    print(
        f"{args.asks:,} asks per run, {args.repeat} runs; an instant scripted provider; "
        "'p95-slow' is the rate of the slowest 5% run"
    )
    for backend in ("asyncio", "trio"):
        report(backend, anyio.run(measure, args.asks, args.repeat, backend=backend))


if __name__ == "__main__":
    main()
