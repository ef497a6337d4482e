"""Real ``hotseam run`` daemons killed with SIGKILL at chosen points, on PostgreSQL and SQLite.

Each daemon runs an agent that asks three questions in turn and prints every answer it gets
with its question (one JSON line each), so what the agent received is read from its own
output, process by process. The points:

* **while pending**: the question is recorded (``ask.started`` is logged after it is);
  the daemon is killed and the answer is given while it is down;
* **before the question is recorded**: the agent stops before its next ask (a pause file
  tells it to), and the journal is checked to hold nothing at that position;
* **between the answer's commit and the agent receiving it**: the daemon is frozen with
  SIGSTOP while its question is pending, the answer is committed through the journal by
  this process, and the frozen daemon is killed — it never saw it;
* **two ``hotseam inbox`` processes** answer the same questions at the same instant, while
  the daemon is up and while it is down, one of them killed and restarted in between.

After each restart the agent continues: the answered questions replay (``ask.replayed``,
never asked again), the open one is re-attached (one record per question), and every
answer reaches the agent's question exactly once, never another question.
"""

from __future__ import annotations

import json
import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest
from tests._timing import scaled

from cli._support import Process, hotseam_env, write
from hotseam.interaction import AskUserQuestionAnswer
from hotseam.interaction._journal import AskRecord, AskState, JournalError, RunState, open_journal

QUESTIONS = ["Which database?", "Service name?", "Deploy now?"]
AGENT_NAME = "deployer"
DEADLINE = 20.0

AGENT = """
import json, os, pathlib
import anyio
import anyio.lowlevel
from hotseam.interaction.journal import current_run

QUESTIONS = __QUESTIONS__

def say(data):
    print(json.dumps({"pid": os.getpid(), **data}), flush=True)

async def main(context):
    run = current_run()
    for seq, question in enumerate(QUESTIONS):
        if pathlib.Path(f"pause-{seq}").exists():
            say({"paused": seq, "run": run.id})
            await anyio.sleep_forever()
        result = await context.tools.execute("ask_user_question", {"question": question})
        answer = result.output["answer"] if result.ok else result.error["code"]
        say({"run": run.id, "seq": seq, "question": question, "answer": answer})
""".replace("__QUESTIONS__", repr(QUESTIONS))


@pytest.fixture(params=["postgres", "sqlite"])
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """One journal every process of the test opens."""
    if request.param == "sqlite":
        return str(tmp_path / "journal.sqlite3")
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path / "agent.py", AGENT)
    (tmp_path / "providers").mkdir()  # no provider: answers come through the journal
    return tmp_path


@pytest.fixture
def started() -> Iterator[list[Process]]:
    """Every process a test starts: killed at the end if still running."""
    processes: list[Process] = []
    yield processes
    for process in processes:
        if process.popen.stdout is not None and not process.popen.stdout.closed:
            process.finish(signal.SIGKILL)  # waits, reads the rest, closes the pipes


class Daemon:
    """One life of ``hotseam run`` of the agent: started, read, killed or ended."""

    def __init__(self, project: Path, journal: str, started: list[Process]) -> None:
        self.process = Process(
            "run", "providers", "--agent", "agent.py", "--name", AGENT_NAME,
            "--journal", journal, "--provider-wait", "600", "--stall-warning", "0",
            cwd=project,
        )  # fmt: skip
        started.append(self.process)
        self.pid = self.process.popen.pid

    def asking(self) -> str:
        """Until the agent's next question is recorded and open: its id."""
        found = self.process.expect(r'"ask\.started"')
        return str(json.loads(found.string)["question_id"])

    def paused(self, seq: int) -> None:
        """Until the agent stops before asking question ``seq`` (a pause file)."""
        self.process.expect(rf'"paused": {seq}\b', stream="stdout")

    def delivered(self, seq: int) -> dict[str, Any]:
        """Until the agent printed the answer to question ``seq``."""
        found = self.process.expect(rf'"seq": {seq}\b', stream="stdout")
        return dict(json.loads(found.string))

    def kill(self) -> None:
        """SIGKILL, and the end of its output."""
        assert self.process.finish(signal.SIGKILL) == -signal.SIGKILL

    def end(self) -> int:
        """Until it exits by itself (its agent finished)."""
        return self.process.finish()

    def got(self) -> list[tuple[int, str, str]]:
        """What its agent received, in order: (position, question, answer)."""
        return [
            (line["seq"], line["question"], line["answer"])
            for line in map(json.loads, self.process.lines["stdout"])
            if "seq" in line
        ]

    def events(self, name: str) -> list[dict[str, Any]]:
        return [
            event
            for event in (
                json.loads(line) for line in self.process.lines["stderr"] if line[:1] == "{"
            )
            if event["event"] == name
        ]


def _asks(url: str) -> list[AskRecord]:
    """Every ask of the journal, in the order of the run."""

    async def read() -> list[AskRecord]:
        async with open_journal(url) as journal:
            return sorted(await journal.list_asks(), key=lambda ask: (ask.run_id, ask.seq))

    return anyio.run(read)


def _runs(url: str) -> list[tuple[str, RunState]]:
    async def read() -> list[tuple[str, RunState]]:
        async with open_journal(url) as journal:
            ids = {ask.run_id for ask in await journal.list_asks()}
            return [(run_id, (await journal.get_run(run_id)).state) for run_id in sorted(ids)]

    return anyio.run(read)


def _answer(url: str, ask_id: str, text: str) -> bool:
    """Answer through the journal from this process, as another inbox would."""

    async def answer() -> bool:
        async with open_journal(url) as journal:
            with anyio.fail_after(scaled(DEADLINE)):
                settlement = await journal.answer_ask(
                    ask_id, AskUserQuestionAnswer(text), by="the test"
                )
            return settlement.won

    return anyio.run(answer)


def _answer_while_frozen(url: str, daemon: Daemon, ask_id: str, text: str) -> None:
    """Commit the answer while the daemon is frozen (SIGSTOP): it cannot receive it.

    A daemon frozen inside one of its own SQLite write transactions (a heartbeat) would
    hold the file's write lock, and the answer would wait for it: then it is thawed and
    frozen again, at another instant.
    """
    for _ in range(3):
        os.kill(daemon.pid, signal.SIGSTOP)
        try:
            assert _answer(url, ask_id, text)
            return
        except (JournalError, TimeoutError):
            os.kill(daemon.pid, signal.SIGCONT)
    pytest.fail("the answer could not be committed while the daemon was frozen")


def test_a_daemon_killed_at_each_point_resumes_and_gets_every_answer_once(
    project: Path, journal: str, started: list[Process]
) -> None:
    # 1. Killed while its first question is pending; answered while it is down.
    first = Daemon(project, journal, started)
    pending = first.asking()
    assert [(a.seq, a.state) for a in _asks(journal)] == [(0, AskState.PENDING)]
    first.kill()
    assert _answer(journal, pending, "Postgres")

    # 2. Restarted, it gets that answer (replayed: it was answered while it was down),
    #    then is killed before its second question is recorded.
    (project / "pause-1").touch()
    second = Daemon(project, journal, started)
    second.paused(1)
    # Its log says so too: a daemon's log is written a moment after the event (off the
    # event loop's path), so the kill waits for the line it will be asked about.
    second.process.expect(r'"ask\.replayed"')
    assert [a.seq for a in _asks(journal)] == [0]  # nothing recorded at position 1
    second.kill()
    (project / "pause-1").unlink()

    # 3. Restarted: asks the second question (recorded now, once); frozen; the answer is
    #    committed; killed before it could receive it.
    third = Daemon(project, journal, started)
    service = third.asking()
    _answer_while_frozen(journal, third, service, "orders")
    third.kill()

    # 4. Restarted: both answers replay, the third question is asked and answered live.
    fourth = Daemon(project, journal, started)
    deploy = fourth.asking()
    assert _answer(journal, deploy, "yes, now")
    fourth.delivered(2)
    assert fourth.end() == 0

    database, service_name, deploy_now = QUESTIONS
    assert first.got() == []
    assert second.got() == [(0, database, "Postgres")]
    assert third.got() == [(0, database, "Postgres")]  # frozen: "orders" never reached it
    assert fourth.got() == [
        (0, database, "Postgres"),
        (1, service_name, "orders"),
        (2, deploy_now, "yes, now"),
    ]
    # Each answer reached the agent live at most once; the rest are replays of the record.
    replayed = {
        d.pid: [e["position"] for e in d.events("ask.replayed")] for d in (second, third, fourth)
    }
    assert replayed == {second.pid: [0], third.pid: [0], fourth.pid: [0, 1]}
    assert [e["question_id"] for e in third.events("ask.started")] == [service]
    assert [e["question_id"] for e in fourth.events("ask.started")] == [
        deploy
    ]  # only this one asked
    asks = _asks(journal)
    assert [(a.seq, a.id, a.state, a.answer and a.answer.answer) for a in asks] == [
        (0, pending, AskState.ANSWERED, "Postgres"),
        (1, service, AskState.ANSWERED, "orders"),
        (2, deploy, AskState.ANSWERED, "yes, now"),
    ]  # one record per question: the open one was re-attached, never asked twice
    assert _runs(journal) == [(asks[0].run_id, RunState.FINISHED)]


# -- two inboxes racing ---------------------------------------------------------------------


class Inbox:
    """A ``hotseam inbox`` process serving the journal's questions over HTTP."""

    def __init__(self, project: Path, journal: str, started: list[Process]) -> None:
        env = hotseam_env(project / ".hotseam-run")
        env.pop("HOTSEAM_WEB_TOKEN", None)  # both use the token kept in the state folder
        self.process = Process(
            "inbox", "--journal", journal, "--web-port", "0", "--log-format", "json",
            cwd=project, env=env,
        )  # fmt: skip
        started.append(self.process)
        serving = json.loads(self.process.expect(r'"web\.serving"').string)
        self.base, token = serving["url"].split("/?token=")
        self.headers = {"x-hotseam-token": token}
        self.identity = f"inbox {socket.gethostname()}:{self.process.popen.pid}"

    def kill(self) -> None:
        assert self.process.finish(signal.SIGKILL) == -signal.SIGKILL


async def _listed(client: httpx.AsyncClient, ask_id: str) -> None:
    """Until the inbox's event stream shows ``ask_id`` (in its snapshot, or added)."""
    async with client.stream("GET", "/api/events") as events:
        async for line in events.aiter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[len("data: ") :])
            shown = [*event.get("questions", []), event.get("question") or {}]
            if any(question.get("id") == ask_id for question in shown):
                return


def _race(inboxes: list[Inbox], ask_id: str) -> tuple[str, str]:
    """Both inboxes answer ``ask_id`` at the same instant, once both show it; exactly one
    wins (200), the other hears 409 ALREADY_ANSWERED with the winner's answer. Returns the
    winner's answer and the winning inbox's identity."""
    replies: dict[int, httpx.Response] = {}

    async def race() -> None:
        clients = [
            httpx.AsyncClient(base_url=inbox.base, headers=inbox.headers, timeout=scaled(DEADLINE))
            for inbox in inboxes
        ]
        try:
            with anyio.fail_after(scaled(DEADLINE)):
                async with anyio.create_task_group() as group:
                    for client in clients:
                        group.start_soon(_listed, client, ask_id)
            go = anyio.Event()

            async def answer(index: int) -> None:
                await go.wait()
                replies[index] = await clients[index].post(
                    f"/api/questions/{ask_id}/answer",
                    json={"text": f"{ask_id} from inbox {index}"},
                )

            async with anyio.create_task_group() as group:
                for index in range(len(clients)):
                    group.start_soon(answer, index)
                await anyio.wait_all_tasks_blocked()
                go.set()
        finally:
            for client in clients:
                await client.aclose()

    anyio.run(race)
    codes = sorted(reply.status_code for reply in replies.values())
    assert codes == [200, 409], {index: reply.text for index, reply in replies.items()}
    winner = next(index for index, reply in replies.items() if reply.status_code == 200)
    text = f"{ask_id} from inbox {winner}"
    loser = replies[1 - winner].json()["error"]
    (shown,) = loser["answer"]["answers"]  # the winner's answer, one item per question
    assert (loser["code"], shown["text"], shown["labels"]) == ("ALREADY_ANSWERED", text, []), loser
    return text, inboxes[winner].identity


def test_two_inboxes_racing_on_a_daemon_killed_and_restarted_answer_each_question_once(
    project: Path, journal: str, started: list[Process]
) -> None:
    inboxes = [Inbox(project, journal, started) for _ in range(2)]

    first = Daemon(project, journal, started)
    database = first.asking()
    won = {database: _race(inboxes, database)}  # the daemon is up: delivered live
    first.delivered(0)
    service = first.asking()
    first.kill()
    won[service] = _race(inboxes, service)  # while it is down: held for its resume

    inboxes[1].kill()  # one inbox killed and started again, on another port
    inboxes[1] = Inbox(project, journal, started)

    second = Daemon(project, journal, started)
    deploy = second.asking()
    won[deploy] = _race(inboxes, deploy)
    second.delivered(2)
    assert second.end() == 0

    ids = [database, service, deploy]
    answers = [won[ask_id][0] for ask_id in ids]
    assert first.got() == [(0, QUESTIONS[0], answers[0])]  # then killed, Q2 open
    assert second.got() == [(seq, QUESTIONS[seq], answers[seq]) for seq in range(3)]
    assert [e["position"] for e in second.events("ask.replayed")] == [0, 1]
    assert [e["question_id"] for e in second.events("ask.started")] == [deploy]
    recorded = [(a.id, a.state, a.answer and a.answer.answer, a.settled_by) for a in _asks(journal)]
    assert recorded == [(ask_id, AskState.ANSWERED, *won[ask_id]) for ask_id in ids]


# -- found while building these tests ------------------------------------------------------


@pytest.mark.anyio
async def test_an_ask_placed_while_a_resumed_run_drops_its_superseded_records_asks_anew() -> None:
    from hotseam import Context
    from hotseam.interaction import USER_INTERACTION, AskUserQuestionRequest, ask
    from hotseam.interaction.journal import JournalDaemon
    from hotseam.providers.scripted import ScriptedProvider

    first, second = AskUserQuestionRequest("Which database?"), AskUserQuestionRequest("Name?")
    async with open_journal("memory:") as journal:
        answered = Context("before the kill")
        answered.provide(USER_INTERACTION, ScriptedProvider(lambda request: "recorded"))
        async with JournalDaemon.open(journal, name="killed") as daemon:
            with anyio.CancelScope() as killed:  # cut short: the run stays unfinished
                async with daemon.run("agent"):
                    await ask(first, context=answered)
                    await ask(second, context=answered)
                    killed.cancel()
                    await anyio.lowlevel.checkpoint()

        # The journal is slow to abandon the superseded records (a busy database).
        abandon, slow = journal.abandon_asks, anyio.Event()

        async def slow_abandon(run_id: str, from_seq: int) -> list[AskRecord]:
            await slow.wait()
            return await abandon(run_id, from_seq)

        journal.abandon_asks = slow_abandon  # type: ignore[method-assign]
        anew = Context("after the restart")
        anew.provide(USER_INTERACTION, ScriptedProvider(lambda request: "asked anew"))
        got: dict[str, object] = {}

        async def asking(request: AskUserQuestionRequest) -> None:
            try:
                got[request.question] = (await ask(request, context=anew)).answer
            except Exception as error:
                got[request.question] = error

        async with (
            JournalDaemon.open(journal, name="restarted") as daemon,
            daemon.run("agent"),
            anyio.create_task_group() as group,
        ):
            # The resumed agent asks something else first: replay ends at position 0,
            group.start_soon(asking, AskUserQuestionRequest("Which database, now?"))
            await anyio.wait_all_tasks_blocked()  # (abandoning positions 0 and on...)
            group.start_soon(asking, second)  # ...while its next ask takes position 1
            await anyio.wait_all_tasks_blocked()
            slow.set()
        assert got == {"Which database, now?": "asked anew", "Name?": "asked anew"}


@pytest.mark.anyio
async def test_a_daemon_that_stops_cleanly_is_not_taken_for_replaced_by_its_own_heartbeat(
    tmp_path: Path,
) -> None:
    """Its heartbeat ends before it is marked stopped: a beat landing after the stop was
    read as "another process took this daemon for dead" — an error logged at a clean
    stop, and the daemon registered again, a record left alive after the process ended."""
    from structlog.testing import capture_logs

    from hotseam.interaction.journal import JournalDaemon

    # A heartbeat every millisecond: one falls on nearly every stop.
    async with open_journal(tmp_path / "journal.sqlite3", liveness_timeout=0.003) as journal:
        with capture_logs() as logs:
            for index in range(40):
                async with JournalDaemon.open(journal, name=f"daemon-{index}"):
                    await anyio.sleep(0.004)  # it lives a few heartbeats
        assert [e for e in logs if e["event"] == "journal.daemon_replaced"] == []
        daemons = await journal.daemons()
        assert [d.name for d in daemons] == [f"daemon-{index}" for index in range(40)]
        assert all(daemon.stopped_at is not None for daemon in daemons)
