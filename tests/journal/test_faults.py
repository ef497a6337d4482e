"""A journal out of reach under a real ``hotseam run``: a full disk, a server down.

The journal's disk fills (a real 2 MiB tmpfs, filled by a file until ``ENOSPC``) while the
agent's first question waits, and the answer comes then; PostgreSQL (a throw-away server
of this test) is stopped for about 3 s while the agent asks. Either way nothing fails and
nothing is asked twice: the answer is returned once the journal took it, the next
questions wait for it (logged once at error level, shown by ``hotseam status``), and the
run's end is recorded — so the next ``hotseam run`` of the agent starts a new run instead
of resuming this one and asking its first question again.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import queue
import shutil
import signal
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests._timing import scaled

from _postgres import PostgresServer
from cli._support import Process, hotseam, write
from hotseam.interaction import AskUserQuestionAnswer
from hotseam.interaction._journal import JournalError, RunState, open_journal

QUESTIONS = ["Which database?", "Service name?", "Deploy now?"]
AGENT_NAME = "deployer"

AGENT = """
import json
from hotseam.interaction.journal import current_run

QUESTIONS = __QUESTIONS__

async def main(context):
    run = current_run()
    for seq, question in enumerate(QUESTIONS):
        result = await context.tools.execute("ask_user_question", {"question": question})
        answer = result.output["answer"] if result.ok else result.error["code"]
        print(json.dumps({"run": run.id, "seq": seq, "answer": answer}), flush=True)
""".replace("__QUESTIONS__", repr(QUESTIONS))

PROVIDER = """
import pathlib
import anyio
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.scripted import ScriptedProvider

QUESTIONS = __QUESTIONS__

async def reply(request):
    # The human: the answer to question N is the text of the file answer-N, once it exists.
    answer = pathlib.Path(f"answer-{QUESTIONS.index(request.question)}")
    while not answer.exists():
        await anyio.sleep(0.02)
    return answer.read_text()

def setup(scope):
    scope.provide(USER_INTERACTION, ScriptedProvider(reply))
""".replace("__QUESTIONS__", repr(QUESTIONS))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path / "agent.py", AGENT)
    write(tmp_path / "providers" / "human.py", PROVIDER)
    return tmp_path


@pytest.fixture
def started() -> Iterator[list[Process]]:
    processes: list[Process] = []
    yield processes
    for process in processes:
        if process.popen.poll() is None:
            process.popen.kill()
        process.popen.wait()
        for stream in (process.popen.stdout, process.popen.stderr):
            if stream is not None:
                stream.close()


def _daemon(project: Path, journal: str, started: list[Process]) -> Process:
    process = Process(
        "run", "providers", "--agent", "agent.py", "--name", AGENT_NAME,
        "--journal", journal, "--stall-warning", "0",
        cwd=project,
    )  # fmt: skip
    started.append(process)
    return process


def _fill(folder: Path) -> Path:
    """Write a file in ``folder`` until its file system is full (down to the last page);
    the file."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (65536, 4096, 512):
            chunk = b"\0" * size
            while True:
                try:
                    os.write(fd, chunk)
                except OSError as error:
                    assert error.errno == errno.ENOSPC, error
                    break
    finally:
        os.close(fd)
    return filler


def _events(process: Process, name: str) -> list[dict[str, Any]]:
    return [
        event
        for event in (json.loads(line) for line in process.lines["stderr"] if line[:1] == "{")
        if event.get("event") == name
    ]


def _got(process: Process) -> list[tuple[int, str]]:
    """What the agent printed so far: (position, answer)."""
    lines = process._queues["stdout"]
    with contextlib.suppress(queue.Empty):
        while (line := lines.get_nowait()) is not None:
            process.lines["stdout"].append(line)
    return [
        (line["seq"], line["answer"])
        for line in map(json.loads, process.lines["stdout"])
        if "seq" in line
    ]


def _status(project: Path) -> dict[str, Any]:
    done = hotseam("status", AGENT_NAME, "--json", cwd=project, runtime=project / ".hotseam-run")
    assert done.returncode == 0, done.stderr
    reply: dict[str, Any] = json.loads(done.stdout)
    return reply


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + scaled(20)
    while not check():
        assert time.monotonic() < deadline, f"never {what}"
        time.sleep(0.05)


def _run_states(url: str) -> list[RunState]:
    async def read() -> list[RunState]:
        async with open_journal(url) as journal:
            return [item.run.state for item in await journal.runs(agent=AGENT_NAME)]

    return anyio.run(read)


def _ends_without_resuming(project: Path, journal: str, started: list[Process]) -> None:
    """The next ``hotseam run`` of the agent starts a new run: its first question is asked
    (not replayed), and nothing resumes."""
    for seq in range(len(QUESTIONS)):
        (project / f"answer-{seq}").unlink()
    again = _daemon(project, journal, started)
    again.expect(r'"ask\.started"')
    assert not _events(again, "run.resumed")
    assert not _events(again, "ask.replayed")
    assert again.finish(signal.SIGTERM) == 0


def test_a_full_disk_delays_the_questions_and_the_run_still_ends(
    project: Path, small_disk: Path, started: list[Process]
) -> None:
    journal = str(small_disk / "journal.sqlite3")
    daemon = _daemon(project, journal, started)
    daemon.expect(r'"ask\.started"')
    filler = _fill(small_disk)
    (project / "answer-0").write_text("postgres")
    (project / "answer-1").write_text("billing")
    (project / "answer-2").write_text("yes")
    # The answer cannot be recorded: it waits, said once at error level and in the status.
    daemon.expect(r'"journal\.unreachable"')
    _until(
        lambda: bool(_status(project)["journal"]["unreachable"]),
        "shown as out of reach by hotseam status",
    )
    wait = _status(project)["journal"]["unreachable"][0]
    assert any("answer to question 1" in what for what in wait["waiting"]), wait
    shown = hotseam("status", AGENT_NAME, cwd=project, runtime=project / ".hotseam-run")
    assert "OUT OF REACH" in shown.stdout, shown.stdout
    assert _got(daemon) == []  # nothing returned unrecorded, nothing failed
    filler.unlink()
    assert daemon.finish() == 0  # every question answered, the run's end recorded
    assert _got(daemon) == [(0, "postgres"), (1, "billing"), (2, "yes")]
    errors = [e for e in _events(daemon, "journal.unreachable") if e.get("level") == "error"]
    assert len(_events(daemon, "journal.unreachable")) == len(errors) == 1
    assert not _events(daemon, "run.not_finished")
    assert _run_states(journal) == [RunState.FINISHED]
    _ends_without_resuming(project, journal, started)


def test_postgres_down_for_three_seconds_delays_the_questions_and_the_run_still_ends(
    project: Path, own_postgres: PostgresServer, started: list[Process]
) -> None:
    journal = own_postgres.new_schema()
    daemon = _daemon(project, journal, started)
    daemon.expect(r'"ask\.started"')
    own_postgres._pg_ctl("stop", "-m", "fast")  # a failover, a restart
    (project / "answer-0").write_text("postgres")
    (project / "answer-1").write_text("billing")
    (project / "answer-2").write_text("yes")
    daemon.expect(r'"journal\.unreachable"')
    time.sleep(3)  # the outage itself: how long the server stays down
    assert _got(daemon) == []
    own_postgres._pg_ctl("start")
    assert daemon.finish() == 0
    assert _got(daemon) == [(0, "postgres"), (1, "billing"), (2, "yes")]
    assert len(_events(daemon, "journal.unreachable")) == 1
    assert _events(daemon, "journal.reachable")
    assert not _events(daemon, "run.not_finished")
    assert _run_states(journal) == [RunState.FINISHED]
    _ends_without_resuming(project, journal, started)


# -- the journal's files removed under a live daemon ----------------------------------------

ASKING_AGENT = """
import json
from hotseam.interaction.journal import current_run

async def main(context):
    result = await context.tools.execute("ask_user_question", {"question": "Deploy now?"})
    answer = result.output["answer"] if result.ok else result.error["code"]
    print(json.dumps({"run": current_run().id, "seq": 0, "answer": answer}), flush=True)
"""


def _pending_questions(url: str) -> list[str]:
    """What an inbox opened now lists (a fleet inbox started after the removal)."""

    async def read() -> list[str]:
        async with open_journal(url) as journal:
            return [entry.ask.request.question for entry in await journal.inbox()]

    return anyio.run(read)


def _answer_all(url: str, text: str) -> int:
    async def answer() -> int:
        async with open_journal(url) as journal:
            entries = await journal.inbox()
            for entry in entries:
                settlement = await journal.answer_ask(
                    entry.ask.id, AskUserQuestionAnswer(text), by="the test"
                )
                assert settlement.won
            return len(entries)

    return anyio.run(answer)


@pytest.mark.parametrize("removed", ["-wal and -shm", "the folder"])
def test_journal_files_removed_under_a_live_daemon_are_noticed_and_repaired(
    tmp_path: Path, started: list[Process], removed: str
) -> None:
    write(tmp_path / "agent.py", ASKING_AGENT)
    (tmp_path / "providers").mkdir()  # no provider: the answer comes from an inbox
    folder = tmp_path / "journal"
    folder.mkdir()
    journal = str(folder / "journal.sqlite3")
    daemon = _daemon(tmp_path, journal, started)
    daemon.expect(r'"ask\.started"')
    assert _pending_questions(journal) == ["Deploy now?"]
    if removed == "the folder":
        shutil.rmtree(folder)  # a tmp cleaner, an operator's clean-up
    else:
        for suffix in ("-wal", "-shm"):
            os.unlink(journal + suffix)
    found = daemon.expect(r'"journal\.files_removed"')
    event = json.loads(found.string)
    assert event["level"] == "error"
    assert journal in event["what"]
    # An inbox opened afterwards lists the question, and its answer reaches the agent.
    assert _pending_questions(journal) == ["Deploy now?"]
    assert _answer_all(journal, "yes") == 1
    assert daemon.finish() == 0
    assert _got(daemon) == [(0, "yes")]
    assert _run_states(journal) == [RunState.FINISHED]
    assert stat.S_IMODE(os.stat(journal).st_mode) == 0o600
    if removed == "the folder":  # made again owner-only
        assert stat.S_IMODE(os.stat(folder).st_mode) & 0o077 == 0


def _asking_daemon(tmp_path: Path, started: list[Process]) -> tuple[Process, Path, str]:
    """A daemon whose agent asks one question and no provider answers it (an inbox does):
    the daemon, the journal's folder and the journal, once the question is asked."""
    write(tmp_path / "agent.py", ASKING_AGENT)
    (tmp_path / "providers").mkdir()
    folder = tmp_path / "journal"
    folder.mkdir()
    journal = str(folder / "journal.sqlite3")
    daemon = _daemon(tmp_path, journal, started)
    daemon.expect(r'"ask\.started"')
    return daemon, folder, journal


def _held_removed(pid: int, journal: str) -> list[str]:
    """The removed journal files process ``pid`` still holds open (their space not freed)."""
    held = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith(journal) and target.endswith("(deleted)"):
                held.append(target)
    return held


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_a_repaired_daemon_holds_no_removed_file_open(
    tmp_path: Path, started: list[Process]
) -> None:
    """After its folder is removed the daemon makes the journal again from its copy and
    closes the removed files, so their space is freed: on a small disk (a tmpfs) a daemon
    that kept them would fill it, and every question would wait for a journal that cannot
    take it (before, the removed file stayed open until the daemon stopped)."""
    daemon, folder, journal = _asking_daemon(tmp_path, started)
    shutil.rmtree(folder)
    daemon.expect(r'"journal\.files_removed"')
    assert _pending_questions(journal) == ["Deploy now?"]
    assert _held_removed(daemon.popen.pid, journal) == []
    assert _answer_all(journal, "yes") == 1
    assert daemon.finish() == 0
    assert _got(daemon) == [(0, "yes")]


def test_a_journal_another_process_made_again_first_gets_the_daemon_records(
    tmp_path: Path, started: list[Process]
) -> None:
    """The folder is removed while the daemon is stopped (SIGSTOP: a stall, a busy
    machine), and an inbox opened meanwhile makes a new, empty journal at the path. Woken,
    the daemon finds the path naming a file it does not hold: it merges what it holds into
    that file, so the question is listed and answerable there (before, it switched to the
    empty file and dropped its own records: its question, its run and itself unknown)."""
    daemon, folder, journal = _asking_daemon(tmp_path, started)
    os.kill(daemon.popen.pid, signal.SIGSTOP)
    try:
        shutil.rmtree(folder)
        folder.mkdir(mode=0o700)
        assert _pending_questions(journal) == []  # the inbox made a new journal
    finally:
        os.kill(daemon.popen.pid, signal.SIGCONT)
    found = daemon.expect(r'"journal\.files_removed"')
    event = json.loads(found.string)
    assert event["level"] == "error" and "merged into it" in event["summary"]
    assert _pending_questions(journal) == ["Deploy now?"]  # merged before it was said
    assert _answer_all(journal, "yes") == 1
    assert daemon.finish() == 0
    assert _got(daemon) == [(0, "yes")]
    assert _run_states(journal) == [RunState.FINISHED]


def test_an_inbox_holding_the_journal_open_follows_the_daemon_repair(
    tmp_path: Path, started: list[Process]
) -> None:
    """A fleet inbox that had the journal open when its folder was removed: the daemon
    makes the journal again, and the inbox switches to it (its feed says resync)."""
    daemon, folder, journal = _asking_daemon(tmp_path, started)

    async def inbox() -> None:
        async with open_journal(journal) as held:
            assert [entry.ask.request.question for entry in await held.inbox()] == ["Deploy now?"]
            shutil.rmtree(folder)
            with anyio.fail_after(scaled(20)):
                # The daemon's repair, in another process: nothing here to wait on.
                while not (folder / "journal.sqlite3").exists():  # noqa: ASYNC110
                    await anyio.sleep(0.02)
                entries = await held.inbox()
            assert [entry.ask.request.question for entry in entries] == ["Deploy now?"]
            settlement = await held.answer_ask(
                entries[0].ask.id, AskUserQuestionAnswer("yes"), by="the test"
            )
            assert settlement.won

    anyio.run(inbox)
    daemon.expect(r'"journal\.files_removed"')
    assert daemon.finish() == 0
    assert _got(daemon) == [(0, "yes")]


def test_heartbeats_resume_as_soon_as_postgres_is_back(own_postgres: PostgresServer) -> None:
    """A beat missed during an outage is tried again with back-off, not a whole period
    later: a daemon whose beats lapse past the liveness would have its runs taken."""
    url = own_postgres.new_schema()
    period = 10.0

    async def beating() -> float:
        async with (
            open_journal(url) as journal,
            open_journal(url) as reader,
            anyio.create_task_group() as tasks,
        ):
            daemon = await journal.register_daemon("beating")
            tasks.start_soon(lambda: journal.keep_alive(daemon.id, interval=period))
            await anyio.to_thread.run_sync(own_postgres._pg_ctl, "stop", "-m", "fast")
            await anyio.sleep(period + 1)  # the beat due meanwhile failed
            await anyio.to_thread.run_sync(own_postgres._pg_ctl, "start")
            back = time.time()
            with anyio.fail_after(scaled(period)):
                while True:
                    try:
                        seen = (await reader.get_daemon(daemon.id)).heartbeat_at
                    except JournalError:
                        seen = 0.0  # the reader's own connection, cut by the stop
                    if seen >= back:
                        tasks.cancel_scope.cancel()
                        return seen - back
                    await anyio.sleep(0.05)
        raise AssertionError("unreachable")

    assert anyio.run(beating) < period / 2  # about 1 s; a whole period before
