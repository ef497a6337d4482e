"""The ask journal as an agent and an operator feel it: ask() overhead, wake-ups, replay, inbox.

    .venv/bin/python bench/journal.py [--asks 400] [--wakeups 60] [--replays 15]
        [--listings 20] [--tables ask,wake,replay,inbox] [--folder DIR] [--postgres URL]

Four tables, each with the median and the 95th percentile:

1. **ask() overhead**: ``ask()`` answered at once by a scripted provider, without a journal
   and inside an agent run on each engine — the embedded SQLite journal as it is (an
   answer, how an ask or a run ended, committed with ``synchronous=FULL``: it survives a
   power cut; a question recorded with ``NORMAL``: it survives a crash of the process), the
   same with every commit ``FULL``, and with every commit ``NORMAL`` (an answer survives a
   crash of the process, not of the machine), memory, PostgreSQL — interleaved ask by ask
   in one run, so that the machine's moods hit every variant alike (goal for the embedded
   journal: <= 1 ms median added);
2. **answer -> agent wake-up across processes**: a real ``hotseam run`` daemon whose agent
   asks one question after another (no provider: answers come through the journal); this
   process answers each open question, through the journal (``answer_ask``) or through a
   ``hotseam inbox`` process's HTTP API, and the time runs until the agent's ``ask()``
   returns (the agent prints ``time.monotonic()``, one clock for every process of the
   machine) — goal on PostgreSQL: p50 <= 20 ms, p95 <= 100 ms; SQLite polls every 0.2 s;
3. **replay of 100 answered questions**: a new daemon resumes an unfinished run of 100
   answered questions: from entering the run (claim, read the record) until the 100th
   ``ask()`` returned its recorded answer (goal <= 50 ms);
4. **inbox listing of 1,000 pending questions of 10 daemons**: ``Journal.inbox()`` per
   engine, and ``GET /api/questions`` of a ``hotseam inbox`` process serving them (goal
   <= 200 ms).

Files go to ``--folder`` (default: a new temporary folder on the disk of /tmp): the
fsync figures are those of that disk. PostgreSQL is a throw-away server started for the run
(``tests/_postgres.py``: durability switched off, as in the tests — its figures are not
those of a durable server), unless ``--postgres`` names one (each table's journal goes to
a new schema of it).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread
import httpx
from anyio.streams.buffered import BufferedByteReceiveStream

from hotseam import Context
from hotseam.interaction import USER_INTERACTION, AskUserQuestionAnswer, AskUserQuestionRequest, ask
from hotseam.interaction._journal import Journal, open_journal
from hotseam.interaction.journal import JournalDaemon
from hotseam.providers.scripted import ScriptedProvider

TESTS = Path(__file__).resolve().parents[1] / "tests"
QUESTION = AskUserQuestionRequest("Deploy build 1234 to production now?", header="Deploy")


def _stats(values: list[float]) -> tuple[float, float]:
    """Median and 95th percentile, in ms."""
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p95 * 1000


def _table(title: str, header: list[str], rows: list[list[str]]) -> None:
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


# -- 1. ask() overhead -----------------------------------------------------------------------


async def _asker(
    name: str,
    journal: JournalDaemon | None,
    turns: anyio.abc.ObjectReceiveStream[None],
    done: anyio.abc.ObjectSendStream[float],
) -> None:
    """Ask once per turn (inside an agent run when there is a journal); report the time."""
    context = Context(f"bench-{name}")
    context.provide(USER_INTERACTION, ScriptedProvider(lambda request: "yes"))
    run = journal.run(f"bench-{name}-{uuid.uuid4().hex[:8]}") if journal else None
    async with run if run is not None else contextlib.nullcontext():
        async for _ in turns:
            started = time.perf_counter()
            await ask(QUESTION, context=context)
            await done.send(time.perf_counter() - started)


def _synchronous(journal: JournalDaemon, mode: str) -> None:
    """Make every commit of the SQLite engine use ``synchronous=mode`` (the engine itself
    commits answers FULL and questions NORMAL)."""
    engine: Any = journal.journal
    write = engine._write

    async def every_commit(operation: Any, *, durable: bool = False) -> Any:
        return await write(operation, durable=mode == "FULL")

    engine._write = every_commit


Lane = tuple[anyio.abc.ObjectSendStream[None], anyio.abc.ObjectReceiveStream[float]]


async def _interleave(lanes: dict[str, Lane], asks: int, timings: dict[str, list[float]]) -> None:
    """One ask of each variant per round, in a new order each round; the first 20 rounds
    warm up."""
    rng = random.Random(1)
    order = list(lanes)
    for index in range(asks + 20):
        rng.shuffle(order)
        for name in order:
            send_turn, results = lanes[name]
            await send_turn.send(None)
            took = await results.receive()
            if index >= 20:
                timings[name].append(took)
    for send_turn, _ in lanes.values():
        await send_turn.aclose()


async def ask_overhead(folder: Path, postgres: str, asks: int) -> None:
    variants: dict[str, str | None] = {
        "no journal": None,
        "SQLite (default: answers FULL, questions NORMAL)": str(folder / "mixed.sqlite3"),
        "SQLite, every commit FULL": str(folder / "full.sqlite3"),
        "SQLite, every commit NORMAL": str(folder / "normal.sqlite3"),
        "memory": "memory:",
        "PostgreSQL (fsync off)": postgres,
    }
    timings: dict[str, list[float]] = {name: [] for name in variants}
    async with contextlib.AsyncExitStack() as stack:
        journals: dict[str, JournalDaemon | None] = {}
        for name, url in variants.items():
            journals[name] = None
            if url is not None:
                journals[name] = await stack.enter_async_context(JournalDaemon.open(url, name=name))
        for name, journal in journals.items():
            if journal is not None and name.startswith("SQLite, every commit"):
                _synchronous(journal, name.rpartition(" ")[2])
        async with anyio.create_task_group() as group:
            lanes: dict[str, Lane] = {}
            for name, journal in journals.items():
                send_turn, turns = anyio.create_memory_object_stream[None](1)
                done, results = anyio.create_memory_object_stream[float](1)
                group.start_soon(_asker, name, journal, turns, done)
                lanes[name] = (send_turn, results)
            await _interleave(lanes, asks, timings)
    base = statistics.median(timings["no journal"]) * 1000
    rows = []
    for name, values in timings.items():
        p50, p95 = _stats(values)
        added = "-" if name == "no journal" else f"+{p50 - base:.3f}"
        rows.append([name, f"{p50:.3f}", f"{p95:.3f}", added])
    _table(
        f"ask() answered at once, {asks} asks per variant, interleaved (ms; goal for the "
        "embedded journal: <= 1 ms median added)",
        ["journal", "median", "p95", "median added"],
        rows,
    )


# -- 2. answer -> agent wake-up across processes ---------------------------------------------

WAKE_AGENT = """
import json, sys, time
from hotseam.interaction import AskUserQuestionRequest, ask

async def main(context):
    for index in range(__COUNT__):
        answer = await ask(AskUserQuestionRequest(f"wake-up {index}?"), context=context)
        returned = time.monotonic()
        sys.stdout.write(json.dumps({"index": index, "returned": returned,
                                     "answer": answer.answer}) + "\\n")
        sys.stdout.flush()
"""


def _environment(folder: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "XDG_STATE_HOME": str(folder / "state"),
        "HOTSEAM_RUNTIME_DIR": str(folder / "run"),
    }
    env.pop("HOTSEAM_WEB_TOKEN", None)
    env.pop("HOTSEAM_WEB_TOKEN_FILE", None)
    return env


@asynccontextmanager
async def _inbox_process(folder: Path, url: str) -> AsyncIterator[httpx.AsyncClient]:
    """A ``hotseam inbox`` process on ``url``; an HTTP client holding its token."""
    command = [
        sys.executable, "-m", "hotseam", "inbox", "--journal", url, "--web-port", "0",
        "--log-format", "json",
    ]  # fmt: skip
    async with await anyio.open_process(
        command, env=_environment(folder), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
    ) as process:
        assert process.stderr is not None
        lines = BufferedByteReceiveStream(process.stderr)
        while True:
            event = json.loads(await lines.receive_until(b"\n", 1 << 20))
            if event["event"] == "web.serving":
                break
        base, token = event["url"].split("/?token=")

        async def drain() -> None:
            with contextlib.suppress(anyio.EndOfStream, anyio.IncompleteRead):
                while True:
                    await lines.receive_until(b"\n", 1 << 20)

        async with (
            anyio.create_task_group() as group,
            httpx.AsyncClient(base_url=base, headers={"x-hotseam-token": token}) as client,
        ):
            group.start_soon(drain)
            try:
                yield client
            finally:
                process.terminate()
                group.cancel_scope.cancel()


async def wakeups(folder: Path, url: str, count: int, through: str) -> list[float]:
    """Answers given by this process (``journal``) or by an inbox process (``inbox``) to a
    ``hotseam run`` daemon's open questions, each timed until its agent's ask() returns."""
    project = folder / f"wake-{uuid.uuid4().hex[:6]}"
    (project / "providers").mkdir(parents=True)
    (project / "agent.py").write_text(WAKE_AGENT.replace("__COUNT__", str(count)))
    command = [
        sys.executable, "-m", "hotseam", "run", "providers", "--agent", "agent.py",
        "--name", project.name, "--journal", url, "--provider-wait", "3600",
        "--log-level", "warning",
    ]  # fmt: skip
    latencies = []
    async with contextlib.AsyncExitStack() as stack:
        journal = await stack.enter_async_context(open_journal(url, poll_interval=0.2))
        feed = await stack.enter_async_context(journal.subscribe())
        client = None
        if through == "inbox":
            client = await stack.enter_async_context(_inbox_process(folder, url))
        daemon = await stack.enter_async_context(
            await anyio.open_process(
                command, cwd=project, env=_environment(folder), stdin=subprocess.DEVNULL
            )
        )
        assert daemon.stdout is not None
        printed = BufferedByteReceiveStream(daemon.stdout)
        for index in range(count):
            async for event in feed:  # the daemon's next question, recorded
                if event.kind == "created" and event.ask_id is not None:
                    ask_id = event.ask_id
                    break
            await anyio.sleep(0.1)  # the daemon waits, as it does for a human
            sent = time.monotonic()
            if client is None:
                await journal.answer_ask(ask_id, AskUserQuestionAnswer(f"a{index}"), by="bench")
            else:
                reply = await client.post(
                    f"/api/questions/{ask_id}/answer", json={"text": f"a{index}"}
                )
                assert reply.status_code == 200, reply.text
            line = json.loads(await printed.receive_until(b"\n", 1 << 20))
            assert line["answer"] == f"a{index}", line
            latencies.append(line["returned"] - sent)
        await daemon.wait()
    return latencies


# -- 3. replay -------------------------------------------------------------------------------


async def replays(url: str, count: int, repeat: int) -> tuple[list[float], list[float]]:
    """A run of ``count`` answered questions, left unfinished; then ``repeat`` new daemons
    resume it: (time to enter the run, time until the last ask returned), each."""
    agent = f"replay-{uuid.uuid4().hex[:8]}"
    requests = [AskUserQuestionRequest(f"Question {i} of the run?") for i in range(count)]
    answered = Context("bench-answered")
    answered.provide(USER_INTERACTION, ScriptedProvider(lambda request: "recorded"))
    async with JournalDaemon.open(url, name="first") as journal:
        with anyio.CancelScope() as cut:
            async with journal.run(agent):
                for request in requests:
                    await ask(request, context=answered)
                cut.cancel()  # a cancelled run stays unfinished, to resume
                await anyio.lowlevel.checkpoint()
    nobody = Context("bench-replay")  # no provider: a question asked anew would wait
    entered, whole = [], []
    for attempt in range(repeat):
        async with JournalDaemon.open(url, name=f"resumer-{attempt}") as journal:
            with anyio.CancelScope() as cut:
                started = time.perf_counter()
                async with journal.run(agent) as run:
                    resumed = time.perf_counter()
                    for request in requests:
                        answer = await ask(request, context=nobody)
                        assert answer.answer == "recorded"
                    ended = time.perf_counter()
                    assert run.replayed == count
                    cut.cancel()
                    await anyio.lowlevel.checkpoint()
        entered.append(resumed - started)
        whole.append(ended - started)
    return entered, whole


# -- 4. inbox listing ------------------------------------------------------------------------


async def _pending(journal: Journal, daemons: int, per_daemon: int) -> None:
    for d in range(daemons):
        daemon = await journal.register_daemon(f"daemon-{d}", host=f"box-{d}", agent=f"a{d}")
        run = await journal.start_run(f"inbox-{d}-{uuid.uuid4().hex[:6]}", daemon.id)
        for seq in range(per_daemon):
            request = AskUserQuestionRequest(f"daemon {d} asks {seq}?", header=f"d{d}")
            await journal.record_ask(f"{run.id[:10]}-{seq}", run.id, seq, request)


async def listings(folder: Path, url: str, repeat: int) -> dict[str, list[float]]:
    """1,000 pending asks of 10 daemons: ``inbox()`` in this process, and GET
    /api/questions of a ``hotseam inbox`` process."""
    timings: dict[str, list[float]] = {"inbox()": [], "GET /api/questions": []}
    async with open_journal(url) as journal:
        await _pending(journal, 10, 100)
        for _ in range(repeat):
            started = time.perf_counter()
            listed = await journal.inbox()
            timings["inbox()"].append(time.perf_counter() - started)
        assert len(listed) == 1000
    async with _inbox_process(folder, url) as client:  # serving once it listed the journal
        for _ in range(repeat):
            started = time.perf_counter()
            reply = await client.get("/api/questions")
            questions = reply.json()["questions"]
            timings["GET /api/questions"].append(time.perf_counter() - started)
            assert len(questions) == 1000
    return timings


# -- the whole -------------------------------------------------------------------------------


def new_schema(url: str) -> str:
    """A URL of the database at ``url`` whose tables go to a new, empty schema (the
    journal's tables are made in the connection's current schema)."""
    import psycopg

    name = "hotseam_bench_" + uuid.uuid4().hex[:10]
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {name}")
    option = quote(f"-csearch_path={name}", safe="")
    return f"{url}{'&' if '?' in url else '?'}options={option}"


@asynccontextmanager
async def _postgres(given: str | None) -> AsyncIterator[Callable[[], str]]:
    if given is not None:
        yield lambda: new_schema(given)
        return
    sys.path.insert(0, str(TESTS))
    from _postgres import PostgresServer  # type: ignore[import-not-found]

    server = await anyio.to_thread.run_sync(PostgresServer.start)
    try:
        yield server.new_schema
    finally:
        server.stop()


def _versions(postgres_url: str) -> str:
    import psycopg

    with psycopg.connect(postgres_url.split("&options=")[0]) as connection:
        row = connection.execute("SHOW server_version").fetchone()
    server = row[0] if row else "?"
    packages = ", ".join(
        f"{name} {importlib.metadata.version(name)}"
        for name in ("hotseam", "anyio", "psycopg", "httpx", "hypercorn")
    )
    return (
        f"{platform.uname().system} {platform.uname().release} {platform.machine()}, "
        f"{os.cpu_count()} cores, CPython {platform.python_version()}, SQLite "
        f"{sqlite3.sqlite_version}, PostgreSQL {server}; {packages}"
    )


async def table_wakeups(folder: Path, postgres: Callable[[], str], count: int) -> None:
    rows = []
    for engine, url, through in (
        ("PostgreSQL", postgres(), "journal"),
        ("PostgreSQL", postgres(), "inbox"),
        ("SQLite (polls every 0.2 s)", str(folder / "wake.sqlite3"), "journal"),
    ):
        answers = count if engine == "PostgreSQL" else max(10, count // 4)
        latencies = await wakeups(folder, url, answers, through)
        how = "answer_ask() in another process"
        if through == "inbox":
            how = "POST to a hotseam inbox process"
        p50, p95 = _stats(latencies)
        peak = max(latencies) * 1000
        rows.append([engine, how, str(answers), f"{p50:.1f}", f"{p95:.1f}", f"{peak:.1f}"])
    _table(
        "Answer -> the daemon's ask() returns, across processes (ms; goal on PostgreSQL: "
        "p50 <= 20, p95 <= 100)",
        ["engine", "answer given by", "answers", "median", "p95", "max"],
        rows,
    )


async def table_replays(folder: Path, postgres: Callable[[], str], repeat: int) -> None:
    rows = []
    for engine, url in (("SQLite", str(folder / "replay.sqlite3")), ("PostgreSQL", postgres())):
        entered, whole = await replays(url, 100, repeat)
        shown = [f"{value:.1f}" for value in (*_stats(entered), *_stats(whole))]
        rows.append([engine, str(repeat), *shown])
    _table(
        "Resume a run and replay its 100 answered questions (ms; goal <= 50)",
        [
            "engine",
            "resumes",
            "enter (claim, read): median",
            "p95",
            "enter + 100 replays: median",
            "p95",
        ],
        rows,
    )


async def table_listings(folder: Path, postgres: Callable[[], str], repeat: int) -> None:
    rows = []
    for engine, url in (("SQLite", str(folder / "inbox.sqlite3")), ("PostgreSQL", postgres())):
        for what, values in (await listings(folder, url, repeat)).items():
            rows.append([engine, what, *(f"{value:.1f}" for value in _stats(values))])
    _table(
        f"1,000 pending questions of 10 daemons, {repeat} listings each (ms; goal <= 200)",
        ["engine", "listing", "median", "p95"],
        rows,
    )


async def main(options: argparse.Namespace) -> None:
    with contextlib.ExitStack() as stack:
        if options.folder:
            folder = Path(options.folder)
            await anyio.Path(folder).mkdir(parents=True, exist_ok=True)
        else:
            made = tempfile.TemporaryDirectory(prefix="hotseam-journal-")
            folder = Path(stack.enter_context(made))
        async with _postgres(options.postgres) as postgres:
            print(f"# hotseam journal bench — {_versions(postgres())}")
            print(f"# uname -a: {' '.join(platform.uname())}")
            print(f"# files in {folder}; load average {os.getloadavg()}")
            tables = set(options.tables.split(","))
            if "ask" in tables:
                await ask_overhead(folder, postgres(), options.asks)
            if "wake" in tables:
                await table_wakeups(folder, postgres, options.wakeups)
            if "replay" in tables:
                await table_replays(folder, postgres, options.replays)
            if "inbox" in tables:
                await table_listings(folder, postgres, options.listings)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--tables", default="ask,wake,replay,inbox", help="which tables, comma-separated"
    )
    parser.add_argument("--asks", type=int, default=400, help="asks per variant of table 1")
    parser.add_argument("--wakeups", type=int, default=60)
    parser.add_argument("--replays", type=int, default=15)
    parser.add_argument("--listings", type=int, default=20)
    parser.add_argument("--folder", help="where the SQLite files go (its disk is measured)")
    parser.add_argument("--postgres", help="a PostgreSQL URL to use instead of a new server")
    return parser.parse_args()


if __name__ == "__main__":
    anyio.run(main, _arguments())
