"""Two ``hotseam inbox`` processes on one journal, with daemons simulated by other processes.

Real processes, real HTTP, a real PostgreSQL (``tests/_postgres.py``) and a real SQLite
file shared by every process: both inboxes list every daemon's questions; answers given
at once in both are won exactly once per question, the loser hearing what was answered and
by whom, and the asking daemon's ``wait_settled`` wakes with the winner's answer; what is
settled elsewhere leaves every open page; a daemon that stops beating or is stopped is
shown down and still answered; an abandoned run's questions are marked and cleared.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator, MutableMapping
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from structlog.testing import capture_logs
from tests._timing import scaled

from _postgres import PostgresServer
from hotseam.interaction import AskUserQuestionRequest
from hotseam.interaction._journal import AskState, open_journal
from hotseam.providers._web._journal_inbox import serve_journal_inbox
from journal.conftest import postgres_server, postgres_url  # noqa: F401 (fixtures)

from .conftest import EventReader, open_events, said

pytestmark = pytest.mark.anyio

DEADLINE = 20.0  # seconds on an idle machine, scaled where used
HOST = socket.gethostname()
QUESTION = AskUserQuestionRequest("Merge?")

# A daemon as the journal sees one: it registers, starts a run of its agent, records its
# asks and waits for each to be settled (printing what it got), heart-beating unless told
# not to. Lines on stdin: "withdraw ID", "stop" (mark itself stopped); EOF ends it.
DAEMON = """
import json, sys
import anyio, anyio.to_thread
from hotseam.interaction import AskUserQuestionOption, AskUserQuestionRequest
from hotseam.interaction._journal import AskState, open_journal

url, name, agent, count, beat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]

def say(data):
    sys.stdout.write(json.dumps(data) + "\\n")
    sys.stdout.flush()

async def main():
    async with open_journal(url, liveness_timeout=1.0, poll_interval=0.05) as journal:
        daemon = await journal.register_daemon(name, agent=agent)
        run = await journal.start_run(agent, daemon.id)
        for seq in range(count):
            request = AskUserQuestionRequest(
                f"{name} asks {seq}?",
                header=name,
                options=(AskUserQuestionOption("Yes", description="go", recommended=True),
                         AskUserQuestionOption("No")),
            )
            await journal.record_ask(f"{name}-{seq}", run.id, seq, request)
        say({"daemon": daemon.id, "run": run.id})
        beating, beats_ended = anyio.CancelScope(), anyio.Event()

        async def beat_until_stopped():
            with beating:
                await journal.keep_alive(daemon.id, interval=0.2)
            beats_ended.set()

        async with anyio.create_task_group() as tasks:
            if beat == "beat":
                tasks.start_soon(beat_until_stopped)
            else:
                beats_ended.set()

            async def wait(ask_id):
                ask = await journal.wait_settled(ask_id)
                answer = None if ask.answer is None else ask.answer.answer
                say({"ask": ask_id, "state": ask.state.value, "answer": answer,
                     "by": ask.settled_by})

            for seq in range(count):
                tasks.start_soon(wait, f"{name}-{seq}")
            while line := (await anyio.to_thread.run_sync(sys.stdin.readline)).strip():
                what, _, arg = line.partition(" ")
                if what == "withdraw":
                    await journal.settle_ask(arg, AskState.WITHDRAWN, by=name)
                elif what == "stop":
                    beating.cancel()
                    await beats_ended.wait()
                    await journal.stop_daemon(daemon.id)
            tasks.cancel_scope.cancel()

anyio.run(main)
"""


class Lines:
    """A child process whose stdout (or stderr) is read line by line in a thread."""

    def __init__(self, args: list[str], *, stream: str = "stdout") -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"}
        env.pop("HOTSEAM_WEB_TOKEN", None)
        self.process = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        source = self.process.stdout if stream == "stdout" else self.process.stderr
        threading.Thread(target=self._pump, args=(source,), daemon=True).start()

    def _pump(self, source: Any) -> None:
        for line in source:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def line(self, timeout: float = DEADLINE) -> str:
        try:
            line = self._lines.get(timeout=scaled(timeout))
        except queue.Empty:
            pytest.fail(
                f"no line from {self.process.args[:4]} within {scaled(timeout)} s: {self.seen}"
            )
        if line is None:
            pytest.fail(f"{self.process.args[:4]} ended ({self.process.wait()}): {self.seen}")
        self.seen.append(line)
        return line

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=scaled(DEADLINE))
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


@dataclass
class Daemon:
    name: str
    agent: str
    lines: Lines
    id: str = ""
    run: str = ""
    got: dict[str, dict[str, Any]] = field(default_factory=dict)

    def settled(self, count: int) -> dict[str, dict[str, Any]]:
        """Until ``count`` of its asks have woken with their settlement."""
        while len(self.got) < count:
            data = json.loads(self.lines.line())
            self.got[data["ask"]] = data
        return self.got


@dataclass
class InboxProcess:
    lines: Lines
    url: str = ""

    @property
    def identity(self) -> str:
        return f"inbox {HOST}:{self.lines.process.pid}"

    @property
    def port(self) -> int:
        return int(re.search(r":(\d+)/", self.url).group(1))  # type: ignore[union-attr]

    @property
    def token(self) -> str:
        return self.url.split("?token=", 1)[1]


@pytest.fixture
def processes() -> Iterator[list[Lines]]:
    started: list[Lines] = []
    yield started
    for process in started:
        if process.process.poll() is None and process.process.args[1:3] == ["-m", "hotseam"]:
            process.process.send_signal(signal.SIGTERM)
            with suppress(subprocess.TimeoutExpired):
                process.process.wait(timeout=scaled(DEADLINE))
        process.close()


def start_daemon(
    processes: list[Lines], url: str, name: str, agent: str, count: int, *, beat: bool = True
) -> Daemon:
    args = [sys.executable, "-c", DAEMON, url, name, agent, str(count), "beat" if beat else "-"]
    lines = Lines(args)
    processes.append(lines)
    daemon = Daemon(name, agent, lines)
    ready = json.loads(lines.line())
    daemon.id, daemon.run = ready["daemon"], ready["run"]
    return daemon


def start_inboxes(processes: list[Lines], url: str, *extra: str) -> list[InboxProcess]:
    inboxes = []
    for _ in range(2):
        args = [sys.executable, "-m", "hotseam", "inbox", "--journal", url, "--web-port", "0"]
        lines = Lines([*args, "--log-format", "json", *extra], stream="stderr")
        processes.append(lines)
        inboxes.append(InboxProcess(lines))
    for inbox in inboxes:
        while "web inbox: http://" not in (line := inbox.lines.line()):
            pass
        inbox.url = json.loads(line)["url"]
    return inboxes


class Pages:
    """One open event stream per inbox, with the questions each shows now."""

    def __init__(self, readers: list[EventReader]) -> None:
        self.readers = readers
        self.shown: list[dict[str, dict[str, Any]]] = [{} for _ in readers]
        self.removed: list[dict[str, dict[str, Any]]] = [{} for _ in readers]

    async def _read(self, index: int) -> None:
        event = await self.readers[index].next()
        shown = self.shown[index]
        if event["type"] == "snapshot":
            shown.clear()
            shown.update({q["id"]: q for q in event["questions"]})
        elif event["type"] in ("added", "changed"):
            shown[event["question"]["id"]] = event["question"]
        elif event["type"] == "removed":
            shown.pop(event["id"], None)
            self.removed[index][event["id"]] = event

    async def until(self, check: Any, timeout: float = DEADLINE) -> None:
        """Until ``check(shown, removed)`` holds on every page (``timeout``: seconds on an
        idle machine)."""
        with anyio.fail_after(scaled(timeout)):
            for index in range(len(self.readers)):
                while not check(self.shown[index], self.removed[index]):
                    await self._read(index)


@asynccontextmanager
async def pages(inboxes: list[InboxProcess]) -> AsyncIterator[Pages]:
    async with AsyncExitStack() as stack:
        readers = [
            await stack.enter_async_context(open_events(inbox.port, inbox.token))
            for inbox in inboxes
        ]
        yield Pages(readers)


def api(inbox: InboxProcess) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{inbox.port}",
        headers={"x-hotseam-token": inbox.token},
        timeout=scaled(DEADLINE),
    )


@pytest.fixture(params=["postgres", "sqlite"])
def fleet_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """One journal every process opens: a PostgreSQL schema, or one SQLite file."""
    if request.param == "sqlite":
        return str(tmp_path / "journal.sqlite3")
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the processes are what is tested; each inbox runs on its own loop


COUNT = 8


async def test_two_inboxes_show_every_daemon_and_the_first_answer_wins_once_per_question(
    fleet_url: str, processes: list[Lines]
) -> None:
    daemons = [
        start_daemon(processes, fleet_url, "alpha", "deployer", COUNT),
        start_daemon(processes, fleet_url, "beta", "reviewer", COUNT),
    ]
    inboxes = start_inboxes(processes, fleet_url)
    assert inboxes[0].token == inboxes[1].token  # the kept token, in the state folder
    ids = [f"{d.name}-{seq}" for d in daemons for seq in range(COUNT)]
    async with pages(inboxes) as open_pages, api(inboxes[0]) as first, api(inboxes[1]) as second:
        await open_pages.until(lambda shown, _: set(shown) == set(ids))
        for shown in open_pages.shown:
            for daemon in daemons:
                question = shown[f"{daemon.name}-3"]
                (item,) = question["questions"]
                assert item["question"] == f"{daemon.name} asks 3?"
                assert item["header"] == daemon.name and item["allowCustom"] is True
                assert item["options"][0] == {
                    "index": 0,
                    "label": "Yes",
                    "description": "go",
                    "recommended": True,
                }
                assert question["daemon"] == {
                    "id": daemon.id,
                    "name": daemon.name,
                    "host": HOST,
                    "pid": daemon.lines.process.pid,
                    "agent": daemon.agent,
                    "up": True,
                    "stopped": False,
                }
        for inbox in (first, second):
            listed = (await inbox.get("/api/questions")).json()["questions"]
            assert sorted(q["id"] for q in listed) == sorted(ids)

        # Settled in one process, gone from the other's page (the journal's change feed).
        assert (await first.post("/api/questions/alpha-0/answer", json={"option": 1})).is_success
        daemons[1].lines.send("withdraw beta-0")
        started = time.monotonic()
        await open_pages.until(lambda _, gone: {"alpha-0", "beta-0"} <= set(gone))
        assert time.monotonic() - started < scaled(5.0)
        elsewhere = open_pages.removed[1]["alpha-0"]
        assert (elsewhere["reason"], elsewhere["by"]) == ("answered", inboxes[0].identity)
        assert elsewhere["answer"] == said("alpha asks 0?", "No")
        assert open_pages.removed[1]["beta-0"]["reason"] == "withdrawn"

        # Both inboxes answer every other question at the same moment.
        racing = [ask_id for ask_id in ids if ask_id not in ("alpha-0", "beta-0")]
        replies: dict[tuple[str, int], httpx.Response] = {}
        go = anyio.Event()

        async def answer(ask_id: str, index: int, client: httpx.AsyncClient) -> None:
            await go.wait()
            body = {"text": f"from inbox {index}"}
            replies[ask_id, index] = await client.post(
                f"/api/questions/{ask_id}/answer", json=body, headers={"x-hotseam-client": "t"}
            )

        async with anyio.create_task_group() as tasks:
            for ask_id in racing:
                tasks.start_soon(answer, ask_id, 0, first)
                tasks.start_soon(answer, ask_id, 1, second)
            await anyio.sleep(0.05)
            go.set()
        await open_pages.until(lambda shown, _: not shown)

    winners = {}
    for ask_id in racing:
        got = {index: replies[ask_id, index] for index in (0, 1)}
        assert sorted(r.status_code for r in got.values()) == [200, 409], ask_id
        winner = next(index for index, r in got.items() if r.status_code == 200)
        error = got[1 - winner].json()["error"]
        assert error["code"] == "ALREADY_ANSWERED", error
        name, seq = ask_id.rsplit("-", 1)
        assert error["answer"] == said(f"{name} asks {seq}?", text=f"from inbox {winner}")
        assert error["by"] == inboxes[winner].identity
        winners[ask_id] = winner
    print("answers won per inbox:", {i: list(winners.values()).count(i) for i in (0, 1)})
    for daemon in daemons:
        for ask_id, got in daemon.settled(COUNT).items():
            if ask_id == "alpha-0":
                assert (got["answer"], got["by"]) == ("No", inboxes[0].identity)
            elif ask_id == "beta-0":
                assert got["state"] == "withdrawn"
            else:
                winner = winners[ask_id]
                assert got == {
                    "ask": ask_id,
                    "state": "answered",
                    "answer": f"from inbox {winner}",
                    "by": inboxes[winner].identity,
                }


async def test_down_daemons_and_abandoned_runs_across_two_inboxes(
    postgres_url: str,  # noqa: F811
    processes: list[Lines],
) -> None:
    silent = start_daemon(processes, postgres_url, "gamma", "builder", 1, beat=False)
    beating = start_daemon(processes, postgres_url, "delta", "tester", 2)
    inboxes = start_inboxes(processes, postgres_url, "--liveness-timeout", "1")
    async with pages(inboxes) as open_pages, api(inboxes[0]) as first, api(inboxes[1]) as second:

        def up(ask_id: str, value: bool) -> Any:
            return lambda shown, _: ask_id in shown and shown[ask_id]["daemon"]["up"] is value

        await open_pages.until(up("gamma-0", False))  # a second without a heartbeat
        assert all(shown["delta-0"]["daemon"]["up"] for shown in open_pages.shown)
        held = await second.post("/api/questions/gamma-0/answer", json={"option": 0})
        assert held.json() == {"ok": True, "outcome": "answered", "heldFor": "gamma"}
        assert silent.settled(1)["gamma-0"] == {  # it was not beating, but it was waiting
            "ask": "gamma-0",
            "state": "answered",
            "answer": "Yes",
            "by": inboxes[1].identity,
        }

        beating.lines.send("stop")
        await open_pages.until(up("delta-0", False))
        assert all(shown["delta-0"]["daemon"]["stopped"] for shown in open_pages.shown)
        async with open_journal(postgres_url) as journal:
            await journal.abandon_run(beating.run)
        await open_pages.until(
            lambda shown, _: all(shown[f"delta-{i}"]["state"] == "abandoned" for i in (0, 1))
        )
        refused = await first.post("/api/questions/delta-0/answer", json={"option": 0})
        assert refused.status_code == 409 and "abandoned" in refused.json()["error"]["message"]
        for client in (first, second):
            assert (await client.post("/api/questions/delta-0/clear", json={})).is_success
        await open_pages.until(lambda shown, _: "delta-0" not in shown and "delta-1" in shown)
        async with open_journal(postgres_url) as journal:
            abandoned = await journal.list_asks(states={AskState.ABANDONED})
            assert [ask.id for ask in abandoned] == ["delta-1"]  # delta-0 was cleared: removed
            ask = await journal.get_ask("gamma-0")
            assert ask.answer is not None and ask.answer.answer == "Yes"


async def test_the_inbox_outlives_the_postgresql_server_going_away_and_coming_back(
    postgres_server: PostgresServer,  # noqa: F811
    postgres_url: str,  # noqa: F811
) -> None:
    """While the journal is out of reach the inbox says so once, shows what it knew, and
    refuses answers with a 503 that changes nothing; once it is back the inbox lists again
    and shows what was asked meanwhile."""
    unreachable = anyio.Event()

    def spot(logger: object, method: str, event: MutableMapping[str, Any]) -> Any:
        if event["event"] == "web.fleet_journal_unreachable":
            unreachable.set()
        return event

    with capture_logs(processors=[spot]) as logs:
        async with (
            open_journal(postgres_url) as daemon_side,
            open_journal(postgres_url, liveness_timeout=0.8) as inbox_side,
            serve_journal_inbox(inbox_side, port=0) as served,
            open_events(served.port, served.token) as events,
            httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{served.port}",
                headers={"x-hotseam-token": served.token},
                timeout=scaled(DEADLINE),
            ) as client,
        ):
            daemon = await daemon_side.register_daemon("alpha")
            run = await daemon_side.start_run("alpha", daemon.id)
            await daemon_side.record_ask("before", run.id, 0, QUESTION)
            await events.until(lambda e: e["type"] == "added" and e["question"]["id"] == "before")
            await anyio.to_thread.run_sync(postgres_server._pg_ctl, "stop", "-m", "fast")
            try:
                with anyio.fail_after(scaled(DEADLINE)):
                    await unreachable.wait()
                refused = await client.post("/api/questions/before/answer", json={"text": "x"})
                assert refused.status_code == 503, refused.text
                assert refused.json()["error"]["code"] == "JOURNAL_UNAVAILABLE"
                listed = (await client.get("/api/questions")).json()["questions"]
                assert [q["id"] for q in listed] == ["before"]  # what it knew
            finally:
                await anyio.to_thread.run_sync(postgres_server._pg_ctl, "start")
            assert (await daemon_side.get_ask("before")).pending  # the 503 changed nothing
            await daemon_side.record_ask("after", run.id, 1, QUESTION)
            await events.until(lambda e: e["type"] == "added" and e["question"]["id"] == "after")
            reply = await client.post("/api/questions/after/answer", json={"text": "ok"})
            assert reply.status_code == 200, reply.text
            assert (await daemon_side.wait_settled("after")).state is AskState.ANSWERED
    warned = [e for e in logs if e["event"] == "web.fleet_journal_unreachable"]
    assert len(warned) == 1 and any(e["event"] == "web.fleet_journal_recovered" for e in logs)
