"""The journal across real processes: first answer wins and claims are exclusive when two
processes race, an answer from another process wakes the waiter (PostgreSQL: NOTIFY), and a
process killed inside a write transaction leaves the journal consistent."""

from __future__ import annotations

import json
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests._timing import scaled

from hotseam.interaction import AskUserQuestionAnswer, AskUserQuestionRequest
from hotseam.interaction._journal import AskState, RunState, open_journal

CHILD = Path(__file__).with_name("_child.py")
QUESTION = AskUserQuestionRequest("Merge?")
DEADLINE = 30.0


class Child:
    """A ``_child.py`` process, read line by line."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(CHILD), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def line(self, timeout: float = DEADLINE) -> str:
        """The next line it prints (fails naming its stderr when it ends first);
        ``timeout``: seconds on an idle machine, scaled here."""
        timeout = scaled(timeout)
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"no line from the child within {timeout} s")
        if line is None:
            assert self.process.stderr is not None
            pytest.fail(f"the child ended: {self.process.wait()}: {self.process.stderr.read()}")
        return line

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=scaled(DEADLINE))
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def children() -> Iterator[list[Child]]:
    started: list[Child] = []
    yield started
    for child in started:
        child.close()


COUNT = 25


async def _prepare_race(url: str) -> None:
    """COUNT runs of a daemon that died, each with a pending ask."""
    async with open_journal(url) as journal:
        dead = await journal.register_daemon("dead")
        for i in range(COUNT):
            run = await journal.start_run(f"agent-{i}", dead.id)
            await journal.record_ask(f"race-{i}", run.id, 0, QUESTION)
        await journal.stop_daemon(dead.id)


async def _outcome(url: str) -> tuple[list[str], list[tuple[str | None, str | None]]]:
    async with open_journal(url) as journal:
        owners = []
        for i in range(COUNT):
            run = await journal.unfinished_run(f"agent-{i}")
            assert run is not None
            owners.append(run.daemon_id)
        asks = [await journal.get_ask(f"race-{i}") for i in range(COUNT)]
        assert all(ask.state is AskState.ANSWERED for ask in asks)
        return owners, [(a.answer.answer if a.answer else None, a.settled_by) for a in asks]


def test_two_processes_racing_for_runs_and_answers_each_win_exactly_once(
    shared_url: str, children: list[Child]
) -> None:
    anyio.run(_prepare_race, shared_url)
    names = ("alpha", "beta")
    for name, backend in zip(names, ("asyncio", "trio"), strict=True):
        children.append(Child("race", shared_url, name, backend))
    daemon_of = {
        name: json.loads(child.line())["daemon"]
        for name, child in zip(names, children, strict=True)
    }

    def both(command: str) -> dict[str, Any]:
        """The barrier: each line goes to both processes at once, then both replies."""
        for child in children:
            child.send(command)
        return {name: json.loads(child.line()) for name, child in zip(names, children, strict=True)}

    claims = [both(f"claim {i}") for i in range(COUNT)]
    said = [both(f"answer {i}") for i in range(COUNT)]
    owners, answers = anyio.run(_outcome, shared_url)
    for i in range(COUNT):
        winners = [name for name, got in claims[i].items() if got == "won"]
        assert len(winners) == 1, f"run {i}: {claims[i]}"
        assert set(claims[i].values()) == {"won", "RUN_CLAIMED"}, f"run {i}: {claims[i]}"
        assert owners[i] == daemon_of[winners[0]]

        answer_winners = [name for name, got in said[i].items() if got["won"]]
        assert len(answer_winners) == 1, f"ask {i}: {said[i]}"
        winner = answer_winners[0]
        assert answers[i] == (winner, winner)  # recorded: the winner's answer, by the winner
        for got in said[i].values():  # the loser learned what was recorded, and who won
            assert (got["recorded"], got["by"]) == (winner, winner)
    split = {name: sum(got[name]["won"] for got in said) for name in names}
    claimed = {name: sum(got[name] == "won" for got in claims) for name in names}
    print(f"answers won per process: {split}; runs claimed per process: {claimed}")


@pytest.mark.anyio
async def test_an_answer_from_another_process_wakes_the_waiter_within_milliseconds(
    postgres_url: str, children: list[Child]
) -> None:
    latencies = []
    async with open_journal(postgres_url) as journal:
        daemon = await journal.register_daemon("waiting")
        run = await journal.start_run("agent", daemon.id)
        child = Child("answer", postgres_url, "inbox", "asyncio")
        children.append(child)
        assert await anyio.to_thread.run_sync(child.line) == "ready"
        for seq in range(5):
            ask_id = f"wake-{seq}"
            await journal.record_ask(ask_id, run.id, seq, QUESTION)
            woken: list[float] = []

            async def wait(ask_id: str = ask_id, woken: list[float] = woken) -> None:
                settled = await journal.wait_settled(ask_id)
                woken.append(time.monotonic())
                assert settled.answer == AskUserQuestionAnswer("inbox")

            with anyio.fail_after(scaled(DEADLINE)):
                async with anyio.create_task_group() as group:
                    group.start_soon(wait)
                    await anyio.wait_all_tasks_blocked()
                    child.send(ask_id)
                    reply = json.loads(await anyio.to_thread.run_sync(child.line))
            assert reply["won"]
            latencies.append(woken[0] - reply["sent"])
    print(
        f"answer in another process -> waiter woken: {[round(s * 1000, 1) for s in latencies]} ms"
    )
    # The goal is 20 ms on an idle machine; these are bounds, stretched on a busy one.
    assert sorted(latencies)[len(latencies) // 2] < scaled(0.1)
    assert max(latencies) < scaled(1.0)


async def _prepare_held(url: str) -> str:
    async with open_journal(url) as journal:
        daemon = await journal.register_daemon("d")
        run = await journal.start_run("agent", daemon.id)
        await journal.record_ask("answered", run.id, 0, QUESTION)
        await journal.answer_ask("answered", AskUserQuestionAnswer("before"))
        await journal.record_ask("pending", run.id, 1, QUESTION)
        return run.id


async def _state_of(url: str, run_id: str) -> tuple[RunState, dict[str, AskState]]:
    async with open_journal(url) as journal:
        run = await journal.get_run(run_id)
        return run.state, {ask.id: ask.state for ask in await journal.run_asks(run_id)}


async def _answer_and_finish(url: str, run_id: str) -> tuple[bool, RunState]:
    async with open_journal(url) as journal:
        with anyio.fail_after(scaled(DEADLINE)):  # the dead writer's lock is gone: no waiting on it
            settlement = await journal.answer_ask("pending", AskUserQuestionAnswer("after"))
            run = await journal.finish_run(run_id)
        return settlement.won, run.state


def test_a_process_killed_inside_a_write_transaction_leaves_the_journal_consistent(
    shared_url: str, children: list[Child]
) -> None:
    run_id = anyio.run(_prepare_held, shared_url)
    child = Child("hold", shared_url, "killed", "asyncio", run_id)
    children.append(child)
    assert child.line() == "holding"  # finish_run's statements ran; no COMMIT yet
    unchanged = (RunState.RUNNING, {"answered": AskState.ANSWERED, "pending": AskState.PENDING})
    assert anyio.run(_state_of, shared_url, run_id) == unchanged  # nothing is seen half-done
    child.process.send_signal(signal.SIGKILL)
    assert child.process.wait(timeout=scaled(DEADLINE)) == -signal.SIGKILL
    assert anyio.run(_state_of, shared_url, run_id) == unchanged  # nothing of it survived
    assert anyio.run(_answer_and_finish, shared_url, run_id) == (True, RunState.FINISHED)
    if not shared_url.startswith("postgresql:"):
        with sqlite3.connect(shared_url) as connection:
            assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
