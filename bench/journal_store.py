"""The ask journal's engines measured: an ask's round trip, cross-process wake-ups, a fleet inbox.

    .venv/bin/python bench/journal_store.py [--cycles 300] [--wakeups 50] [--backend asyncio]
        [--postgres URL]

Three tables, each with the median and the 95th percentile:

1. per engine (memory, SQLite, PostgreSQL), in one process: ``record_ask``; ``answer_ask``
   while a task waits in ``wait_settled``; answer sent -> waiter woken; the whole cycle;
2. answer given by another process -> waiter woken: PostgreSQL (``LISTEN/NOTIFY``; goal p50
   <= 20 ms, p95 <= 100 ms) and SQLite (polling ``PRAGMA data_version``, 0.2 s);
3. ``inbox()``: 1,000 pending asks of 10 daemons (goal <= 200 ms).

PostgreSQL is a throw-away server started for the run (``tests/_postgres.py``: Debian's
binaries, a Unix socket; durability off, as in the tests), unless ``--postgres`` names one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.to_thread
from anyio.streams.buffered import BufferedByteReceiveStream

from hotseam.interaction import AskUserQuestionAnswer, AskUserQuestionRequest
from hotseam.interaction._journal import Journal, open_journal

QUESTION = AskUserQuestionRequest("Deploy build 1234 to production now?", header="Deploy")
ANSWER = AskUserQuestionAnswer("yes")
TESTS = str(Path(__file__).resolve().parents[1] / "tests")


def _ms(values: list[float]) -> tuple[str, str]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered) * 1000:.2f}", f"{p95 * 1000:.2f}"


def _table(title: str, header: list[str], rows: list[list[str]]) -> None:
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


async def _cycles(journal: Journal, cycles: int) -> dict[str, list[float]]:
    daemon = await journal.register_daemon("bench")
    run = await journal.start_run(f"bench-{time.time_ns()}", daemon.id)
    timings: dict[str, list[float]] = {"record": [], "answer": [], "wake": [], "cycle": []}
    for seq in range(cycles):
        ask_id = f"{run.id}-{seq}"
        started = time.perf_counter()
        await journal.record_ask(ask_id, run.id, seq, QUESTION)
        recorded = time.perf_counter()
        woken: list[float] = []

        async def wait(ask_id: str = ask_id, woken: list[float] = woken) -> None:
            await journal.wait_settled(ask_id)
            woken.append(time.perf_counter())

        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            sent = time.perf_counter()
            await journal.answer_ask(ask_id, ANSWER, by="bench")
            answered = time.perf_counter()
        timings["record"].append(recorded - started)
        timings["answer"].append(answered - sent)
        timings["wake"].append(woken[0] - sent)
        timings["cycle"].append((recorded - started) + (woken[0] - sent))
    await journal.finish_run(run.id)
    return timings


async def _wakeups(url: str, count: int, poll: float) -> list[float]:
    """Answers given by a child process (``--child``), each timed to the waiter's wake-up."""
    latencies = []
    command = [sys.executable, __file__, "--child", url]
    async with open_journal(url, poll_interval=poll) as journal:
        daemon = await journal.register_daemon("waiting")
        run = await journal.start_run(f"wake-{time.time_ns()}", daemon.id)
        async with await anyio.open_process(command) as child:
            assert child.stdin is not None
            assert child.stdout is not None
            lines = BufferedByteReceiveStream(child.stdout)
            assert await lines.receive_until(b"\n", 1000) == b"ready"
            for seq in range(count):
                ask_id = f"{run.id}-{seq}"
                await journal.record_ask(ask_id, run.id, seq, QUESTION)
                woken: list[float] = []

                async def wait(ask_id: str = ask_id, woken: list[float] = woken) -> None:
                    await journal.wait_settled(ask_id)
                    woken.append(time.monotonic())

                async with anyio.create_task_group() as group:
                    group.start_soon(wait)
                    await anyio.wait_all_tasks_blocked()
                    await child.stdin.send(ask_id.encode() + b"\n")
                    reply = json.loads(await lines.receive_until(b"\n", 1000))
                latencies.append(woken[0] - reply["sent"])
            await child.stdin.aclose()
    return latencies


async def _child(url: str) -> None:
    async with open_journal(url) as journal:
        print("ready", flush=True)
        while ask_id := (await anyio.to_thread.run_sync(sys.stdin.readline)).strip():
            sent = time.monotonic()
            await journal.answer_ask(ask_id, ANSWER, by="child")
            print(json.dumps({"sent": sent}), flush=True)


async def _inbox(journal: Journal, repeat: int) -> tuple[int, list[float]]:
    for d in range(10):
        daemon = await journal.register_daemon(f"daemon-{d}", host=f"box-{d}", agent=f"a{d}")
        run = await journal.start_run(f"inbox-{d}-{time.time_ns()}", daemon.id)
        for seq in range(100):
            await journal.record_ask(f"{run.id}-{seq}", run.id, seq, QUESTION)
    timings = []
    listed = 0
    for _ in range(repeat):
        started = time.perf_counter()
        listed = len(await journal.inbox())
        timings.append(time.perf_counter() - started)
    return listed, timings


@asynccontextmanager
async def _engines(postgres: str | None) -> AsyncIterator[dict[str, Callable[[], str]]]:
    folder = Path(tempfile.mkdtemp(prefix="hotseam-bench-"))
    server = None
    if postgres is None:
        sys.path.insert(0, TESTS)
        from _postgres import PostgresServer

        server = await anyio.to_thread.run_sync(PostgresServer.start)
        new_schema: Callable[[], str] = server.new_schema
    else:
        given = postgres

        def new_schema() -> str:
            return given

    counter = iter(range(1_000_000))
    try:
        yield {
            "memory": lambda: "memory:",
            "sqlite": lambda: str(folder / f"journal-{next(counter)}.sqlite3"),
            "postgresql": new_schema,
        }
    finally:
        if server is not None:
            server.stop()


async def main(args: argparse.Namespace) -> None:
    print(
        f"# hotseam journal engines — {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {platform.system()} {platform.release()}, anyio backend "
        f"{args.backend}"
    )
    async with _engines(args.postgres) as engines:
        cycle_rows, inbox_rows = [], []
        for engine, url_of in engines.items():
            async with open_journal(url_of()) as journal:
                timings = await _cycles(journal, args.cycles)
            cycle_rows.append(
                [engine, *(f"{p50} / {p95}" for p50, p95 in map(_ms, timings.values()))]
            )
            async with open_journal(url_of()) as journal:
                listed, timings_inbox = await _inbox(journal, args.repeat)
            inbox_rows.append([engine, str(listed), *_ms(timings_inbox)])
        _table(
            f"One process, {args.cycles} asks (ms, median / p95)",
            ["engine", "record_ask", "answer_ask", "answer -> waiter woken", "record + wake"],
            cycle_rows,
        )
        wake_rows = []
        for engine, poll in (("postgresql", 0.2), ("sqlite", 0.2)):
            count = args.wakeups if engine == "postgresql" else max(10, args.wakeups // 5)
            latencies = await _wakeups(engines[engine](), count, poll)
            wake_rows.append([engine, str(count), *_ms(latencies), f"{max(latencies) * 1000:.2f}"])
        _table(
            "Answer in another process -> waiter woken (ms; goal on PostgreSQL: p50 <= 20, "
            "p95 <= 100; SQLite polls every 0.2 s)",
            ["engine", "answers", "median", "p95", "max"],
            wake_rows,
        )
        _table(
            f"inbox(): 1,000 pending asks of 10 daemons, {args.repeat} listings (ms; goal <= 200)",
            ["engine", "asks listed", "median", "p95"],
            inbox_rows,
        )


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--wakeups", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=20, help="inbox listings per engine")
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--postgres", help="a PostgreSQL URL to use instead of a new server")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser.parse_args()


if __name__ == "__main__":
    arguments = _arguments()
    if arguments.child:
        anyio.run(_child, arguments.child)
    else:
        anyio.run(main, arguments, backend=arguments.backend)
