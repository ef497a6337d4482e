"""``hotseam journal list|show|runs|daemons|abandon|purge``: an operator sees and cleans the
ask journal, never reading an answer by accident.

Real processes (``python -m hotseam``) on journals filled by the real store: by ``hotseam
run`` itself (the embedded default), by the store's API (an SQLite file, PostgreSQL).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import stat
import subprocess
from pathlib import Path

import pytest

from cli._support import Process, hotseam, write
from hotseam.interaction import AskUserQuestionAnswer, AskUserQuestionRequest
from hotseam.interaction._journal import Journal, open_journal
from journal.conftest import postgres_server, postgres_url  # noqa: F401 (fixtures)

SECRETS = ["SECRET-postgres-4817", "SECRET-orders-5920"]
QUESTION = "Which database should the orders service use from now on, in every region?"
AGENT = """
from hotseam import Agent

QUESTIONS = [
    ("Database", "Which database should the orders service use from now on, in every region?"),
    ("Name", "Service name?"),
    ("Deploy", "Deploy now?"),
]

async def main(context):
    for header, question in QUESTIONS:
        result = await context.tools.execute(
            "ask_user_question",
            {"question": question, "header": header},
            agent=Agent("deployer", "Deployer"),
        )
        print(header, "answered" if result.ok else result.error["code"], flush=True)
"""


def _journal_file() -> Path:
    """The embedded default journal (tests/conftest.py gives each test its state folder)."""
    return Path(os.environ["XDG_STATE_HOME"]) / "hotseam" / "journal.sqlite3"


def _journal(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return hotseam("journal", *args, cwd=cwd, runtime=cwd / ".hotseam-run")


def _stderr_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line a refusal prints."""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def _modes(path: Path) -> dict[str, int]:
    return {
        p.name: stat.S_IMODE(p.stat().st_mode)
        for p in [path.parent, path, *path.parent.glob(path.name + "-*")]
    }


def _logged_at_info_or_above(lines: list[str]) -> list[str]:
    return [line for line in lines if json.loads(line)["level"] != "debug"]


def test_what_a_daemon_recorded_is_seen_without_its_answers_and_abandon_starts_anew(
    tmp_path: Path,
) -> None:
    write(tmp_path / "agent.py", AGENT)
    (tmp_path / "providers").mkdir()
    (tmp_path / "a1.json").write_text(json.dumps([*SECRETS, {"never": True}]))
    shown: list[str] = []  # everything the journal commands print, stdout and stderr

    def journal(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        done = _journal(tmp_path, *args)
        assert done.returncode == code, (args, done.stdout, done.stderr)
        if "--answer" not in args:
            shown.extend([done.stdout, done.stderr])
        return done

    daemon = Process(
        *("run", "providers", "--agent", "agent.py", "--answers", "a1.json"),
        *("--log-level", "debug"),
        cwd=tmp_path,
        preexec_fn=lambda: os.umask(0),  # what the journal's files get is its own doing
    )
    try:
        for _ in range(3):
            daemon.expect('"ask.started"')  # the third waits, never answered
        listed = journal("list").stdout.splitlines()
        assert listed[0].split() == ["ID", "STATE", "ASKED", "AGENT", "DAEMON", "QUESTION"]
        assert [row.split()[1] for row in listed[1:]] == ["pending", "answered", "answered"]
        assert all("hotseam run (up)" in row for row in listed[1:])
        assert _modes(_journal_file()) == {
            "hotseam": 0o700,
            "journal.sqlite3": 0o600,
            "journal.sqlite3-wal": 0o600,
            "journal.sqlite3-shm": 0o600,
        }
        agent_key = f"{tmp_path / 'agent.py'}:main"
        refused = journal("abandon", agent_key, "--yes", code=2)  # its daemon is up
        assert "is run by a daemon that is up: stop it first" in _stderr_line(refused)
    finally:
        daemon.finish(signal.SIGKILL)
    assert set(_modes(_journal_file()).values()) == {0o700, 0o600}

    listed = journal("list").stdout.splitlines()
    rows = [row.split("  ") for row in listed[1:]]
    assert [row[-1] for row in rows] == [
        "[Deploy] Deploy now?",
        "[Name] Service name?",
        "[Database] Which database should the orders service use from now on,…",
    ]
    # kill -9: its pid runs no more (down too, once its last heartbeat is 15 s old)
    assert all(re.search(r"hotseam run \((gone|down)\)", row) for row in listed[1:])
    pending_id, _, first_id = (row[0] for row in rows)
    answered = json.loads(journal("list", "--json", "--state", "answered").stdout)["asks"]
    assert [(a["id"], a["state"], a["questions"]) for a in answered][1] == (
        first_id,
        "answered",
        [{"id": "q1", "header": "Database", "question": QUESTION}],
    )
    assert all(a["run"]["agent"] == agent_key and "answer" not in a for a in answered)
    detail = journal("show", first_id).stdout
    assert f"question {first_id}: answered" in detail
    assert (
        "question:   Which database should the orders service use from now on, in every region?"
        in detail
    )
    assert "not shown (answers are personal data): --answer shows it" in detail
    assert json.loads(journal("show", first_id, "--json").stdout)["has_answer"] is True
    revealed = journal("show", first_id, "--answer").stdout  # an explicit act
    assert f"answer:     {SECRETS[0]}" in revealed
    runs = journal("runs", "--unfinished").stdout.splitlines()
    assert len(runs) == 2 and re.search(r", (gone|down)  3: 2 answered, 1 pending$", runs[1])
    run_id = runs[1].split()[0]

    refused = journal("abandon", agent_key, code=2)  # no --yes: nothing done
    assert "and its 1 pending question: give --yes to do it" in _stderr_line(refused)
    assert len(journal("runs", "--unfinished").stdout.splitlines()) == 2
    done = journal("abandon", run_id, "--yes")
    assert "1 pending question abandoned; the agent's next start begins a new run" in done.stdout
    assert json.loads(journal("show", pending_id, "--json").stdout)["state"] == "abandoned"

    (tmp_path / "a2.json").write_text(json.dumps(["sqlite", "api", "yes"]))
    again = Process(
        *("run", "providers", "--agent", "agent.py", "--answers", "a2.json"),
        *("--log-level", "debug"),
        cwd=tmp_path,
    )
    assert again.finish() == 0
    assert again.lines["stdout"] == ["Database answered", "Name answered", "Deploy answered"]
    events = [json.loads(line)["event"] for line in again.lines["stderr"]]
    assert "run.resumed" not in events and "journal.run_started" in events  # a new run
    assert events.count("ask.started") == 3 and "ask.replayed" not in events  # asked anew

    logs = daemon.lines["stderr"] + again.lines["stderr"]
    assert any(SECRETS[0] in line for line in logs)  # the debug lines have it...
    for secret in SECRETS:
        assert not [line for line in _logged_at_info_or_above(logs) if secret in line]
        assert not [text for text in shown if secret in text]  # ...nothing else does


def _dump(path: Path) -> dict[str, list[tuple[object, ...]]]:
    with sqlite3.connect(path) as db:
        return {
            table: sorted(db.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
            for table in ("hotseam_daemons", "hotseam_runs", "hotseam_asks")
        }


async def _fill(journal: Journal) -> dict[str, str]:
    """Two daemons: one stopped long ago whose run finished (two questions answered, one
    withdrawn), one up with a run waiting (one question answered, one pending)."""
    question = AskUserQuestionRequest("Deploy now?", header="Deploy")
    old = await journal.register_daemon("old", host="box-1", pid=11, agent="builder")
    ended = await journal.start_run("builder", old.id)
    for seq in range(3):
        await journal.record_ask(f"old-{seq}", ended.id, seq, question)
    for seq in range(2):
        await journal.answer_ask(f"old-{seq}", AskUserQuestionAnswer(SECRETS[seq]))
    await journal.finish_run(ended.id)
    await journal.stop_daemon(old.id)
    live = await journal.register_daemon("live", host="box-2", pid=22, agent="tester")
    waiting = await journal.start_run("tester", live.id)
    await journal.record_ask("new-0", waiting.id, 0, question)
    await journal.answer_ask("new-0", AskUserQuestionAnswer(SECRETS[1]))
    await journal.record_ask("new-1", waiting.id, 1, question)
    return {"old": old.id, "ended": ended.id, "live": live.id, "waiting": waiting.id}


def test_a_purge_says_what_it_would_remove_then_removes_exactly_that(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    path = tmp_path / "state" / "questions.sqlite3"
    write(tmp_path / "pyproject.toml", '[tool.hotseam]\njournal = "state/questions.sqlite3"\n')

    async def fill() -> dict[str, str]:
        async with open_journal(path) as journal:
            return await _fill(journal)

    ids = asyncio.run(fill())
    forty_days = 40 * 86400.0
    with sqlite3.connect(path) as db:  # the old daemon's records, 40 days old
        db.execute(
            "UPDATE hotseam_asks SET created_at = created_at - ?, settled_at = settled_at - ?"
            " WHERE run_id = ?",
            (forty_days, forty_days, ids["ended"]),
        )
        db.execute(
            "UPDATE hotseam_runs SET started_at = started_at - ?, finished_at = finished_at - ?"
            " WHERE id = ?",
            (forty_days, forty_days, ids["ended"]),
        )
        db.execute(
            "UPDATE hotseam_daemons SET heartbeat_at = heartbeat_at - ?,"
            " stopped_at = stopped_at - ? WHERE id = ?",
            (forty_days, forty_days, ids["old"]),
        )
    before = _dump(path)

    only_answered = _journal(tmp_path, "purge", "--older-than", "30d", "--state", "answered")
    assert only_answered.returncode == 0, only_answered.stderr
    assert only_answered.stdout.startswith("would remove 2 questions (answered), 0 runs")
    planned = _journal(tmp_path, "purge", "--older-than", "30d")  # the journal of the file
    assert planned.returncode == 0, planned.stderr
    assert planned.stdout == (
        "would remove 3 questions (abandoned, answered, failed, withdrawn), 1 run and 1 "
        "daemon older than 30d; nothing was removed: give --yes to remove them\n"
    )
    assert _dump(path) == before  # a dry run changes nothing

    done = _journal(tmp_path, "purge", "--older-than", "30d", "--yes", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["removed"], report["asks"], report["runs"], report["daemons"]) == (
        True,
        3,
        1,
        1,
    )
    after = _dump(path)
    assert after == {  # exactly what it said: everything of the old daemon, nothing else
        table: [row for row in rows if ids["old"] not in row and ids["ended"] not in row]
        for table, rows in before.items()
    }
    assert [row[0] for row in after["hotseam_asks"]] == ["new-0", "new-1"]
    listed = _journal(tmp_path, "list", "--journal", str(path))  # --journal after the action
    assert [row.split()[:2] for row in listed.stdout.splitlines()[1:]] == [
        ["new-1", "pending"],
        ["new-0", "answered"],
    ]


def test_on_postgresql_an_operator_lists_shows_and_purges(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
) -> None:
    async def fill() -> dict[str, str]:
        async with open_journal(postgres_url) as journal:
            return await _fill(journal)

    ids = asyncio.run(fill())
    # "live" is up by its heartbeat, which nothing renews here: an hour ahead, it is still
    # fresh when the commands read it, however long a busy machine takes to start them.
    import psycopg  # the postgres_url fixture skips the test when it is missing

    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(
            "UPDATE hotseam_daemons SET heartbeat_at = heartbeat_at + 3600 WHERE id = %s",
            (ids["live"],),
        )
    listed = _journal(tmp_path, "--journal", postgres_url, "list", "--agent", "builder")
    assert listed.returncode == 0, listed.stderr
    rows = [row.split()[:2] for row in listed.stdout.splitlines()[1:]]
    assert rows == [["old-2", "withdrawn"], ["old-1", "answered"], ["old-0", "answered"]]
    runs = _journal(tmp_path, "--journal", postgres_url, "runs", "--json")
    assert [
        (r["id"], r["state"], r["asks"], r["daemon"]["state"])
        for r in json.loads(runs.stdout)["runs"]
    ] == [
        (ids["waiting"], "running", {"answered": 1, "pending": 1}, "up"),
        (ids["ended"], "finished", {"answered": 2, "withdrawn": 1}, "stopped"),
    ]
    shown = _journal(tmp_path, "--journal", postgres_url, "show", "old-0")
    assert "question old-0: answered" in shown.stdout and "daemon:     old on box-1" in shown.stdout
    purged = _journal(tmp_path, "--journal", postgres_url, "purge", "--older-than", "0s", "--yes")
    assert purged.stdout.startswith("removed 4 questions (abandoned, answered, failed, ")
    assert purged.stdout.endswith(", 1 run and 1 daemon older than 0s\n")
    left = _journal(tmp_path, "--journal", postgres_url, "list")
    assert [row.split()[0] for row in left.stdout.splitlines()[1:]] == ["new-1"]
    for done in (listed, runs, shown, purged, left):
        assert not any(secret in done.stdout + done.stderr for secret in SECRETS)


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--journal", "mysql://db/x", "list"], 2, "invalid journal URL mysql://db/x"),
        (["--journal", "memory:", "daemons"], 2, "lives inside one process"),
        (["show", "nope"], 2, "no ask nope in the journal"),
        (["abandon", "nope", "--yes"], 2, "no run 'nope' in the journal"),
        (["purge", "--older-than", "30x"], 2, "bad duration '30x'"),
        (["purge"], 2, "purge needs --older-than DURATION"),
        (["purge", "--older-than", "1d", "--state", "pending"], 2, "pending questions are never"),
        (["list", "--state", "lost"], 2, "unknown state 'lost'"),
        (["list", "--limit", "0"], 2, "--limit must be a whole number >= 1"),
        (["--journal", "postgresql://u@/db?host=/nonexistent", "list"], 1, "cannot connect"),
        (["--journal", "elsewhere.sqlite3", "list"], 1, "no journal at elsewhere.sqlite3"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_an_unreachable_journal_exit_1(
    tmp_path: Path, args: list[str], code: int, words: str
) -> None:
    async def make() -> None:
        async with open_journal(None):  # the embedded default exists, empty
            pass

    asyncio.run(make())
    done = _journal(tmp_path, *args)
    assert done.returncode == code, (done.stdout, done.stderr)
    assert done.stdout == ""
    line = _stderr_line(done)
    assert line.startswith("hotseam journal: ") and words in line, line
    assert not (tmp_path / "elsewhere.sqlite3").exists()  # a look never creates a journal


def test_a_duration_is_read_as_a_person_writes_it() -> None:
    from hotseam.cli._journal_cmd import parse_duration

    assert parse_duration("30d") == 30 * 86400
    assert parse_duration(" 1d12h ") == 36 * 3600
    assert parse_duration("90m") == parse_duration("1.5h") == 5400
    assert parse_duration("0s") == 0
    for bad in ("", "30", "d", "-1d", "1y", "1d x"):
        with pytest.raises(ValueError, match="bad duration"):
            parse_duration(bad)
