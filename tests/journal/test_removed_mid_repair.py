"""``rm -rf`` of the journal's folder removes the ``-wal`` before the file: the daemon may
notice the log gone, close its connection to reopen, and only then see the file go too. The
view must survive that: it is copied aside before the connection is closed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hotseam.interaction import AskUserQuestionRequest
from hotseam.interaction._journal import AskState, open_journal
from hotseam.interaction._journal._sqlite import SqliteJournal

pytestmark = pytest.mark.anyio


async def test_the_file_removed_while_the_log_repair_reopens_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "journal.sqlite3"
    async with open_journal(path) as journal:
        daemon = await journal.register_daemon("d")
        run = await journal.start_run("deployer", daemon.id)
        await journal.record_ask("a1", run.id, 0, AskUserQuestionRequest("Deploy now?"))
        said = SqliteJournal._log_repair

        def and_then_the_file(self: SqliteJournal, what: str, how: str) -> None:
            said(self, what, how)  # said after the connection was closed to reopen
            if "-wal" in what and path.exists():
                os.unlink(path)  # the rest of the rm -rf

        monkeypatch.setattr(SqliteJournal, "_log_repair", and_then_the_file)
        for suffix in ("-wal", "-shm"):
            os.unlink(f"{path}{suffix}")
        (ask,) = await journal.list_asks(states=[AskState.PENDING])
        assert ask.id == "a1" and (await journal.get_run(run.id)).id == run.id
    async with open_journal(path) as reopened:  # what an inbox opened afterwards sees
        assert [entry.ask.id for entry in await reopened.inbox()] == ["a1"]
