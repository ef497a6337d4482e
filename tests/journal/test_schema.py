"""The journal's schema version: a newer journal is refused, an older one is migrated, on
both SQL engines (through their own drivers, as another hotseam would have left them)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from hotseam.interaction import AskUserQuestionAnswer, AskUserQuestionRequest
from hotseam.interaction._journal import (
    SCHEMA_VERSION,
    AskState,
    JournalError,
    JournalErrorCode,
    open_journal,
    question_digest,
)

pytestmark = pytest.mark.anyio

QUESTION = AskUserQuestionRequest("Rotate the keys?")

# The unreleased first layout ("version 0"): no meta table, asks without settled_by.
VERSION_0 = [
    "CREATE TABLE hotseam_daemons (id TEXT PRIMARY KEY, name TEXT NOT NULL, host TEXT NOT NULL,"
    " pid INTEGER NOT NULL, agent TEXT, started_at {real} NOT NULL,"
    " heartbeat_at {real} NOT NULL, stopped_at {real})",
    "CREATE TABLE hotseam_runs (id TEXT PRIMARY KEY, agent TEXT NOT NULL,"
    " daemon_id TEXT NOT NULL REFERENCES hotseam_daemons (id), state TEXT NOT NULL,"
    " started_at {real} NOT NULL, claimed_at {real} NOT NULL, finished_at {real})",
    "CREATE TABLE hotseam_asks (id TEXT PRIMARY KEY,"
    " run_id TEXT NOT NULL REFERENCES hotseam_runs (id), seq INTEGER NOT NULL,"
    " caller_key TEXT, digest TEXT NOT NULL, request TEXT NOT NULL, state TEXT NOT NULL,"
    " code TEXT, answer TEXT, created_at {real} NOT NULL, settled_at {real})",
    "INSERT INTO hotseam_daemons VALUES ('d0', 'old', 'box', 7, 'agent', 1.0, 1.0, NULL)",
    "INSERT INTO hotseam_runs VALUES ('r0', 'agent', 'd0', 'running', 1.0, 1.0, NULL)",
    "INSERT INTO hotseam_asks VALUES ('a0', 'r0', 0, NULL, '{digest}', '{request}',"
    " 'answered', NULL, '{answer}', 2.0, 3.0)",
    "INSERT INTO hotseam_asks VALUES ('a1', 'r0', 1, 'key', '{digest}', '{request}',"
    " 'pending', NULL, NULL, 4.0, NULL)",
]


def _version_0(real: str) -> list[str]:
    values = {
        "real": real,
        "digest": question_digest(QUESTION),
        "request": json.dumps(QUESTION.to_dict()),
        "answer": json.dumps(AskUserQuestionAnswer("yes").to_dict()),
    }
    return [statement.format(**values) for statement in VERSION_0]


def _sqlite(path: Path) -> Callable[[list[str]], list[tuple[object, ...]]]:
    def run(statements: list[str]) -> list[tuple[object, ...]]:
        with sqlite3.connect(path) as connection:
            rows: list[tuple[object, ...]] = []
            for statement in statements:
                rows = connection.execute(statement).fetchall()
        return rows

    return run


def _postgres(url: str) -> Callable[[list[str]], list[tuple[object, ...]]]:
    import psycopg

    def run(statements: list[str]) -> list[tuple[object, ...]]:
        with psycopg.connect(url, autocommit=True) as connection:
            rows: list[tuple[object, ...]] = []
            for statement in statements:
                cursor = connection.execute(statement)  # type: ignore[arg-type]
                rows = cursor.fetchall() if cursor.description else []
        return rows

    return run


@pytest.fixture
def raw(shared_url: str) -> Callable[[list[str]], list[tuple[object, ...]]]:
    """Statements run on the journal by its driver, bypassing hotseam."""
    if shared_url.startswith("postgresql:"):
        return _postgres(shared_url)
    return _sqlite(Path(shared_url))


async def test_a_new_journal_records_its_schema_version(
    shared_url: str, raw: Callable[[list[str]], list[tuple[object, ...]]]
) -> None:
    async with open_journal(shared_url):
        pass
    version = raw(["SELECT value FROM hotseam_meta WHERE key = 'schema_version'"])
    assert version == [(str(SCHEMA_VERSION),)]


async def test_a_journal_written_by_a_newer_hotseam_is_refused(
    shared_url: str, raw: Callable[[list[str]], list[tuple[object, ...]]]
) -> None:
    async with open_journal(shared_url):
        pass
    raw(
        [
            f"UPDATE hotseam_meta SET value = '{SCHEMA_VERSION + 1}' WHERE key = 'schema_version'",
            "UPDATE hotseam_meta SET value = '9.9.0' WHERE key = 'hotseam_version'",
        ]
    )
    with pytest.raises(JournalError) as newer:
        async with open_journal(shared_url):
            pass
    message = str(newer.value)
    assert newer.value.code == JournalErrorCode.JOURNAL_NEWER
    assert f"schema version is {SCHEMA_VERSION + 1}" in message
    assert f"up to {SCHEMA_VERSION}" in message and "hotseam 9.9.0" in message
    assert shared_url in message  # the file, or the URL (it holds no password here)
    after = raw(["SELECT value FROM hotseam_meta WHERE key = 'schema_version'"])
    assert after == [(str(SCHEMA_VERSION + 1),)]  # left as it was


async def test_a_version_0_journal_is_migrated_and_keeps_its_records(
    shared_url: str, raw: Callable[[list[str]], list[tuple[object, ...]]]
) -> None:
    real = "DOUBLE PRECISION" if shared_url.startswith("postgresql:") else "REAL"
    raw(_version_0(real))
    async with open_journal(shared_url) as journal:
        asks = await journal.run_asks("r0")
        assert [(a.id, a.state, a.key, a.settled_by) for a in asks] == [
            ("a0", AskState.ANSWERED, None, None),
            ("a1", AskState.PENDING, "key", None),
        ]
        assert asks[0].answer == AskUserQuestionAnswer("yes")
        assert asks[1].request == QUESTION
        async with journal.subscribe() as feed:  # the change log works after the migration
            settled = await journal.answer_ask("a1", AskUserQuestionAnswer("no"), by="inbox")
            assert settled.won and settled.ask.settled_by == "inbox"
            event = await anext(aiter(feed))
            assert (event.kind, event.ask_id) == ("settled", "a1")
    version = raw(["SELECT value FROM hotseam_meta WHERE key = 'schema_version'"])
    assert version == [(str(SCHEMA_VERSION),)]
    async with open_journal(shared_url) as journal:  # opening a current journal again
        assert (await journal.get_ask("a1")).answer == AskUserQuestionAnswer("no")


async def test_a_file_that_is_not_a_journal_is_named_in_the_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("these are not the tables you are looking for\n" * 100)
    with pytest.raises(JournalError) as refused:
        async with open_journal(str(path)):
            pass
    assert refused.value.code == JournalErrorCode.JOURNAL_UNAVAILABLE
    assert str(path) in str(refused.value) and "not a database" in str(refused.value)


async def test_a_missing_folder_is_named_in_the_error(tmp_path: Path) -> None:
    path = tmp_path / "no-such-folder" / "journal.sqlite3"
    with pytest.raises(JournalError) as refused:
        async with open_journal(f"sqlite:///{path}"):
            pass
    assert refused.value.code == JournalErrorCode.JOURNAL_UNAVAILABLE
    assert f"the folder {path.parent} does not exist" in str(refused.value)
    assert not path.parent.exists()


async def test_an_ask_left_pending_in_a_finished_run_is_never_answered(
    shared_url: str, raw: Callable[[list[str]], list[tuple[object, ...]]]
) -> None:
    """A journal where a finished run still has a pending ask (left by a crash of an older
    hotseam, or a hand edit): the answer is refused, never recorded."""
    async with open_journal(shared_url) as journal:
        daemon = await journal.register_daemon("d")
        run = await journal.start_run("agent", daemon.id)
        await journal.record_ask("stale", run.id, 0, QUESTION)
    raw([f"UPDATE hotseam_runs SET state = 'finished', finished_at = 5.0 WHERE id = '{run.id}'"])
    async with open_journal(shared_url) as journal:
        with pytest.raises(JournalError) as refused:
            await journal.answer_ask("stale", AskUserQuestionAnswer("yesterday's answer"))
        assert refused.value.code == JournalErrorCode.RUN_FINISHED
        assert run.id in str(refused.value)
        stale = await journal.get_ask("stale")
        assert stale.pending and stale.answer is None
