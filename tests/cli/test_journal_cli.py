"""``hotseam run``/``dev`` with the journal (on by default): a daemon killed while it waits for
an answer resumes its agent's run — the answered questions replay without being asked, the
open one is answered once, even when the answer was given while the daemon was down.

Real processes, real signals (SIGKILL, SIGTERM), the embedded journal file.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
from pathlib import Path

import pytest

from cli._support import Process, hotseam, write
from hotseam.interaction import AskUserQuestionAnswer
from hotseam.interaction.journal import open_journal

AGENT = """
from hotseam import Agent

QUESTIONS = ["Which database?", "Service name?", "Deploy now?"]

async def main(context):
    for question in QUESTIONS:
        result = await context.tools.execute(
            "ask_user_question", {"question": question}, agent=Agent("deployer", "Deployer")
        )
        shown = result.output["answer"] if result.ok else result.error["code"]
        print(f"{question} -> {shown}", flush=True)
"""


def _journal(tmp_path: Path) -> Path:
    """The embedded journal of the test's state folder (tests/conftest.py sets it)."""
    import os

    return Path(os.environ["XDG_STATE_HOME"]) / "hotseam" / "journal.sqlite3"


def _answers(tmp_path: Path, name: str, answers: list[object]) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(answers))
    return str(path)


def _events(process: Process, name: str) -> list[dict[str, object]]:
    found = []
    for line in process.lines["stderr"]:
        if line.startswith("{"):
            event = json.loads(line)
            if event["event"] == name:
                found.append(event)
    return found


def _start(tmp_path: Path, answers: str, *extra: str) -> Process:
    return Process(
        "run", "providers", "--agent", "agent.py", "--answers", answers, *extra, cwd=tmp_path
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path / "agent.py", AGENT)
    (tmp_path / "providers").mkdir()
    return tmp_path


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_a_daemon_stopped_while_waiting_resumes_with_the_answer_given_meanwhile(
    project: Path, stop: signal.Signals
) -> None:
    first = _start(project, _answers(project, "a1.json", ["Postgres", "orders", {"never": True}]))
    try:
        first.expect("Service name\\? -> orders", stream="stdout")
        first.expect('"ask.started"')  # the third question is open (and recorded)
        first.expect('"ask.started"')
        first.expect('"ask.started"')
    finally:
        code = first.finish(stop)
    if stop == signal.SIGTERM:
        assert code == 0
    pending = _pending(project)
    assert [question for question, _ in pending] == ["Deploy now?"]
    _answer_while_down(project, pending[0][1], "yes, now")
    # Restarted: nothing is asked — the two answered questions replay, the third was
    # answered while the daemon was down. The new answers file would answer otherwise.
    second = _start(project, _answers(project, "a2.json", ["WRONG", "WRONG", "WRONG"]))
    try:
        second.expect("Deploy now\\? -> yes, now", stream="stdout")
    finally:
        assert second.finish() == 0
    out = second.lines["stdout"]
    assert out == [
        "Which database? -> Postgres",
        "Service name? -> orders",
        "Deploy now? -> yes, now",
    ]
    assert [e["position"] for e in _events(second, "ask.replayed")] == [0, 1, 2]
    assert not _events(second, "ask.started")  # nobody was asked anything
    replayed = json.dumps(_events(second, "ask.replayed"))
    assert "Postgres" not in replayed and "orders" not in replayed  # never the answers
    # The run finished: the next start asks everything anew.
    third = _start(project, _answers(project, "a3.json", ["SQLite", "api", "no"]))
    assert third.finish() == 0
    assert third.lines["stdout"] == [
        "Which database? -> SQLite",
        "Service name? -> api",
        "Deploy now? -> no",
    ]


def _pending(project: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(_journal(project)) as db:
        rows = db.execute(
            "SELECT request, id FROM hotseam_asks WHERE state = 'pending' ORDER BY seq"
        ).fetchall()
    return [(json.loads(request)["question"], ask_id) for request, ask_id in rows]


def _answer_while_down(project: Path, ask_id: str, text: str) -> None:
    """Another process (an operator's inbox) answers while the daemon is down."""

    async def answer() -> None:
        async with open_journal(str(_journal(project))) as journal:
            outcome = await journal.answer_ask(
                ask_id, AskUserQuestionAnswer(text, None), by="an inbox"
            )
            assert outcome.won

    asyncio.run(answer())


def test_fresh_starts_over_and_no_journal_keeps_nothing(project: Path) -> None:
    first = _start(project, _answers(project, "a1.json", ["Postgres", {"never": True}]))
    try:
        first.expect("Which database\\? -> Postgres", stream="stdout")
    finally:
        first.finish(signal.SIGKILL)
    fresh = _start(project, _answers(project, "a2.json", ["SQLite", "api", "no"]), "--fresh")
    assert fresh.finish() == 0
    assert fresh.lines["stdout"][0] == "Which database? -> SQLite"
    assert not _events(fresh, "ask.replayed")
    assert len(_events(fresh, "ask.started")) == 3
    modified = _journal(project).stat().st_mtime_ns
    plain = _start(project, _answers(project, "a3.json", ["MySQL", "x", "y"]), "--no-journal")
    assert plain.finish() == 0
    assert plain.lines["stdout"][0] == "Which database? -> MySQL"
    assert _journal(project).stat().st_mtime_ns == modified  # not even opened


def test_the_journal_file_is_the_owners_alone(project: Path) -> None:
    run = _start(project, _answers(project, "a.json", ["a", "b", "c"]))
    assert run.finish() == 0
    assert _journal(project).stat().st_mode & 0o777 == 0o600
    assert _journal(project).parent.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://localhost/x", "journal"),
        ("sqlite://relative/but/wrong", "journal"),
    ],
)
def test_a_bad_journal_is_one_line_and_exit_2(project: Path, url: str, message: str) -> None:
    done = hotseam(
        "run", "providers", "--agent", "agent.py", "--journal", url,
        cwd=project, runtime=project / "rt",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr
    assert url.split("://")[0] in done.stderr


def test_a_journal_written_by_a_newer_hotseam_is_refused(project: Path) -> None:
    path = project / "newer.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE hotseam_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("INSERT INTO hotseam_meta VALUES ('schema_version', '99')")
    done = hotseam(
        "run", "providers", "--agent", "agent.py", "--journal", str(path),
        cwd=project, runtime=project / "rt",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "99" in done.stderr and str(path) in done.stderr


def test_status_names_the_journal_and_the_run(project: Path) -> None:
    runtime = project / "rt"
    process = Process(
        "run", "providers", "--agent", "agent.py", "--name", "deployer",
        "--answers", _answers(project, "a.json", [{"never": True}]),
        cwd=project, runtime=runtime,
    )  # fmt: skip
    try:
        process.expect('"ask.started"')
        done = hotseam("status", "deployer", cwd=project, runtime=runtime)
        assert done.returncode == 0, done.stderr
        assert f"journal: {_journal(project)}, run " in done.stdout
        as_json = json.loads(
            hotseam("status", "deployer", "--json", cwd=project, runtime=runtime).stdout
        )
        assert as_json["journal"]["url"] == str(_journal(project))
    finally:
        assert process.finish(signal.SIGTERM) == 0


def test_two_daemons_cannot_run_the_same_agent_at_once(project: Path) -> None:
    """The agent's run belongs to a live daemon: a second one for the same agent says so
    and exits 2, and leaves the first one's run alone."""
    first = _start(project, _answers(project, "a1.json", [{"never": True}]))
    try:
        first.expect('"ask.started"')
        second = hotseam(
            "run", "providers", "--agent", "agent.py", cwd=project, runtime=project / "rt2"
        )
        assert second.returncode == 2, second.stderr
        plain = [line for line in second.stderr.splitlines() if not line.startswith("{")]
        assert len(plain) == 1, second.stderr
        (line,) = plain
        assert "is run by" in line and f"pid {first.popen.pid}" in line, second.stderr
    finally:
        assert first.finish(signal.SIGTERM) == 0
    assert len(_pending(project)) == 1  # still waiting for its answer, for the resume


def test_dev_replays_what_was_answered_when_the_agent_is_saved(project: Path) -> None:
    """Developing an agent no longer means answering its first questions after each edit:
    a save re-runs it, and what this run already answered is replayed."""
    dev = Process(
        "dev", "providers", "--agent", "agent.py", "--log-format", "json", "--verbose",
        "--answers", _answers(project, "a.json", ["Postgres", {"never": True}, {"never": True}]),
        cwd=project,
    )  # fmt: skip
    try:
        dev.expect("Which database\\? -> Postgres", stream="stdout")
        dev.expect('"ask.started"')
        dev.expect('"ask.started"')  # the second question is open
        write(project / "agent.py", AGENT.replace("-> {shown}", "=> {shown}"))  # an edit
        dev.expect("Which database\\? => Postgres", stream="stdout")  # the new code, at once
        replayed = dev.expect('"ask.replayed"')
        assert '"position": 0' in replayed.string
        # The service name again, left open (an answer would let the agent ask a third
        # question before the stop, on a machine slow to send it).
        dev.expect('"ask.started"')
    finally:
        dev.finish(signal.SIGTERM)
    started = [json.loads(line) for line in dev.lines["stderr"] if '"ask.started"' in line]
    # Asked live: the database once, the service name before the save, and again after it
    # (re-attached: the same question id), never the database a second time.
    assert len({event["question_id"] for event in started}) == 2
