"""What an approval costs: ``ctx.tools.execute()`` of a tool needing approval, beside the
same tool ungated and its handler called directly.

    .venv/bin/python bench/approvals.py [--calls 2000] [--rounds 15] [--profile]

The gate is :class:`~hotseam.interaction.approvals.HumanGate` over an instant scripted
provider answering every approval ``Reply.approve()``, so the numbers are hotseam's own
cost: the approval (canonical JSON and SHA-256 of the call), its request (two plain
questions), a whole ``ask()`` (validation, the provider lease, the answer check), reading
the decision back, the one-time grant, and the approved input validated again. Three rows,
interleaved round by round in one run (the order rotating), so drift and load hit them
alike: gated, ungated (``needs_approval=False``) and the floor (``await handler(input,
call)`` with an input already validated), and a tool that asks the human one question
(``ask_user_question``, the same kind of provider). Median and p95 of the per-round µs per call.
Goal: gated ≤ 1.5x ungated — a gated call is a whole ask, so expect it far above; the
table says what it is. ``--profile`` adds where a gated call's time goes: the parts of
``HumanGate.review`` timed one by one, and cProfile's top functions.

Machine, load average (before and after) and versions are printed with the tables.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import platform
import pstats
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from importlib.metadata import version

import anyio
from pydantic import BaseModel, Field

from hotseam import TOOL_GATE, Context, Tool, ToolCall, tool
from hotseam.interaction import USER_INTERACTION, ask, ask_user_question_tool
from hotseam.interaction._human_gate import _input_schema
from hotseam.interaction.approvals import (
    Approval,
    HumanGate,
    approval_request,
    call_digest,
    read_decision,
)
from hotseam.providers.scripted import Reply, ScriptedProvider

ARGUMENTS = {"service": "api", "replicas": 2, "region": "eu-west-1", "dry_run": False}
GOAL = 1.5


class DeployInput(BaseModel):
    service: str
    replicas: int = Field(ge=1, le=10)
    region: str = "eu-west-1"
    dry_run: bool = False


def _deploy(name: str, needs_approval: bool) -> Tool[DeployInput]:
    @tool(name, needs_approval=needs_approval)
    async def deploy(input: DeployInput, call: ToolCall) -> dict[str, object]:
        """Deploy a service."""
        return {"deployed": input.service, "replicas": input.replicas}

    return deploy


class Bench:
    """One context with both tools, the gate and an approving scripted provider."""

    def __init__(self) -> None:
        self.provider = ScriptedProvider(default=Reply.approve())
        self.gate = HumanGate()
        self.context = Context("bench")
        self.context.provide(USER_INTERACTION, self.provider)
        self.context.provide(TOOL_GATE, self.gate)
        self.gated = _deploy("deploy_gated", True)
        self.ungated = _deploy("deploy", False)
        self.context.tools.register(self.gated)
        self.context.tools.register(self.ungated)
        self.call = ToolCall(self.context, "deploy", None, None)
        self.input = DeployInput.model_validate(ARGUMENTS)
        # The alternative that also asks: the model's own question tool, one question, the
        # same kind of instant scripted provider (what a tool asking the human costs).
        self.asking = Context("bench-ask")
        self.asker = ScriptedProvider(default=Reply.exactly("yes"))
        self.asking.provide(USER_INTERACTION, self.asker)
        self.asking.tools.register(ask_user_question_tool())

    def forget(self) -> None:
        """Drop the requests and answers the providers keep (a list growing per call)."""
        for provider in (self.provider, self.asker):
            provider.requests.clear()
            provider.answers.clear()

    async def asking_calls(self, n: int) -> float:
        execute = self.asking.tools.execute
        started = time.perf_counter()
        for _ in range(n):
            result = await execute("ask_user_question", {"question": "Deploy api now?"})
            assert result.ok, result.error
        return time.perf_counter() - started

    async def gated_calls(self, n: int) -> float:
        execute = self.context.tools.execute
        started = time.perf_counter()
        for _ in range(n):
            result = await execute("deploy_gated", ARGUMENTS)
            assert result.ok, result.error
        return time.perf_counter() - started

    async def ungated_calls(self, n: int) -> float:
        execute = self.context.tools.execute
        started = time.perf_counter()
        for _ in range(n):
            result = await execute("deploy", ARGUMENTS)
            assert result.ok, result.error
        return time.perf_counter() - started

    async def floor_calls(self, n: int) -> float:
        handler, parsed, call = self.ungated.handler, self.input, self.call
        started = time.perf_counter()
        for _ in range(n):
            await handler(parsed, call)
        return time.perf_counter() - started


ROWS = (
    "gated (HumanGate, approve)",
    "ungated",
    "floor: handler direct",
    "ungated tool that asks once",
)


def _cases(bench: Bench) -> list[Callable[[int], Awaitable[float]]]:
    return [bench.gated_calls, bench.ungated_calls, bench.floor_calls, bench.asking_calls]


async def measure(calls: int, rounds: int) -> dict[str, list[float]]:
    """µs per call of each row, one sample per round, the order rotating each round."""
    bench = Bench()
    cases = _cases(bench)
    for case in cases:  # warm up: models built, schemas cached, code paths hot
        await case(min(200, calls))
    samples: dict[str, list[float]] = {name: [] for name in ROWS}
    for index in range(rounds):
        order = list(range(len(cases)))
        order = order[index % len(order) :] + order[: index % len(order)]
        for which in order:
            bench.forget()
            gc.collect()
            samples[ROWS[which]].append(await cases[which](calls) / calls * 1e6)
    return samples


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def report(backend: str, samples: dict[str, list[float]]) -> float:
    """Print the table; return gated / ungated (medians)."""
    medians = {name: statistics.median(values) for name, values in samples.items()}
    ungated, floor = medians[ROWS[1]], medians[ROWS[2]]
    print(f"\n{backend}:\n")
    print(
        f"| {'path':<28} | {'median µs/call':>14} | {'p95 µs/call':>11} | {'calls/s':>9} "
        f"| {'vs ungated':>10} | {'above floor µs':>14} |"
    )
    print(f"|{'-' * 30}|{'-' * 16}|{'-' * 13}|{'-' * 11}|{'-' * 12}|{'-' * 16}|")
    for name in ROWS:
        median = medians[name]
        print(
            f"| {name:<28} | {median:>14.2f} | {_p95(samples[name]):>11.2f} "
            f"| {1e6 / median:>9,.0f} | {median / ungated:>9.2f}x | {median - floor:>14.2f} |"
        )
    ratio = medians[ROWS[0]] / ungated
    verdict = "met" if ratio <= GOAL else "NOT met"
    print(
        f"\ngoal gated ≤ {GOAL}x ungated: {verdict} ({ratio:.1f}x; the approval adds "
        f"{medians[ROWS[0]] - ungated:.1f} µs a call)"
    )
    asking = medians[ROWS[3]]
    within = "within" if medians[ROWS[0]] <= GOAL * asking else "above"
    print(
        f"against a tool that asks the human once (ask_user_question, the same provider): "
        f"{medians[ROWS[0]] / asking:.2f}x ({within} {GOAL}x)"
    )
    return ratio


async def parts(calls: int) -> dict[str, float]:
    """µs per call of each step ``HumanGate.review`` takes, done one by one as it does."""
    bench = Bench()
    gated, parsed = bench.gated, bench.input
    model = gated.input_model
    totals: dict[str, float] = dict.fromkeys(
        (
            "input.model_dump(mode='json')",
            "the input schema (made once per model)",
            "Approval.of (canonical JSON + SHA-256)",
            "approval_request",
            "ask() (validation, provider, answer check)",
            "read_decision",
            "grants.issue",
            "model_validate (approved input)",
            "call_digest of the approved input",
            "grants.redeem",
        ),
        0.0,
    )
    names = list(totals)
    clock = time.perf_counter
    for _ in range(calls):
        t0 = clock()
        dumped = parsed.model_dump(mode="json")
        t1 = clock()
        schema = _input_schema(gated)
        t2 = clock()
        approval = Approval.of(gated.name, dumped, input_schema=schema)
        t3 = clock()
        request = approval_request(approval)
        t4 = clock()
        answer = await ask(request, context=bench.context)
        t5 = clock()
        decision = read_decision(approval, answer, input_model=model)
        t6 = clock()
        grant = bench.gate.grants.issue(decision, run_id=None, agent=None)
        t7 = clock()
        assert decision.arguments is not None
        edited = model.model_validate(decision.arguments)
        t8 = clock()
        digest = call_digest(gated.name, edited.model_dump(mode="json"))
        t9 = clock()
        bench.gate.grants.redeem(grant.id, digest, run_id=None, agent=None)
        t10 = clock()
        stamps = (t0, t1, t2, t3, t4, t5, t6, t7, t8, t9, t10)
        for index, name in enumerate(names):
            totals[name] += stamps[index + 1] - stamps[index]
        bench.provider.requests.clear()
        bench.provider.answers.clear()
    return {name: total / calls * 1e6 for name, total in totals.items()}


def report_parts(backend: str, gated_us: float, ungated_us: float, steps: dict[str, float]) -> None:
    total = sum(steps.values())
    print(f"\n{backend}: where a gated call's time goes (each step timed alone)\n")
    print(f"| {'step of HumanGate.review':<44} | {'µs/call':>8} | {'share':>6} |")
    print(f"|{'-' * 46}|{'-' * 10}|{'-' * 8}|")
    for name, value in sorted(steps.items(), key=lambda item: -item[1]):
        print(f"| {name:<44} | {value:>8.2f} | {value / total:>5.0%} |")
    print(f"| {'sum of the steps':<44} | {total:>8.2f} | {'':>6} |")
    print(
        f"\nthe gate adds {gated_us - ungated_us:.1f} µs a call in the table above; its steps "
        f"sum to {total:.1f} µs"
    )


async def _profiled(calls: int) -> None:
    bench = Bench()
    await bench.gated_calls(200)
    bench.forget()
    profiler = cProfile.Profile()
    profiler.enable()
    await bench.gated_calls(calls)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(15)
    print("\ncProfile of the gated calls (asyncio), top 15 by own time:\n")
    lines = out.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if "ncalls" in line)
    print("\n".join("    " + line for line in lines[start:] if line.strip()))


def _load() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2_000, help="calls per row per round")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--profile", action="store_true", help="where a gated call's time goes")
    args = parser.parse_args()
    print(
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; machine: {platform.machine()}, "
        f"{os.cpu_count()} CPUs, {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.system()} {platform.release()}; "
        f"hotseam {version('hotseam')}, pydantic {version('pydantic')}, anyio "
        f"{version('anyio')}"
    )
    print(f"load average (1, 5, 15 min) before: {_load()}")
    print(
        f"{args.calls:,} calls per row per round, {args.rounds} rounds interleaved; an instant "
        "scripted provider approving every call"
    )
    medians: dict[str, tuple[float, float]] = {}
    for backend in ("asyncio", "trio"):
        samples = anyio.run(measure, args.calls, args.rounds, backend=backend)
        report(backend, samples)
        medians[backend] = (
            statistics.median(samples[ROWS[0]]),
            statistics.median(samples[ROWS[1]]),
        )
    if args.profile:
        for backend in ("asyncio", "trio"):
            steps = anyio.run(parts, args.calls * 2, backend=backend)
            report_parts(backend, *medians[backend], steps)
        model = DeployInput
        started = time.perf_counter()
        for _ in range(200):
            model.model_json_schema()
        made = (time.perf_counter() - started) / 200 * 1e6
        print(
            f"\nfor comparison, pydantic's model_json_schema() (what tool.input_schema makes anew "
            f"each time, and the gate did per call before it kept one per model): {made:.1f} µs"
        )
        anyio.run(_profiled, args.calls, backend="asyncio")
    print(f"\nload average (1, 5, 15 min) after: {_load()}")


if __name__ == "__main__":
    main()
