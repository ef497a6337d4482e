"""The journal's contract, what an operator uses (``hotseam journal``, a fleet inbox's Clear):
runs with their owner and their asks counted, asks with their run and daemon, clearing an
abandoned ask, and a purge's dry run. Every case on memory, SQLite and PostgreSQL, on
asyncio and trio."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from tests._timing import scaled

from hotseam.interaction import AskUserQuestionAnswer, AskUserQuestionRequest
from hotseam.interaction._journal import (
    AskState,
    JournalError,
    JournalErrorCode,
    JournalEvent,
    RunState,
    open_journal,
)

pytestmark = pytest.mark.anyio

QUESTION = AskUserQuestionRequest("Deploy now?", header="Deploy")
POLL = 0.05


async def test_runs_are_listed_newest_first_with_their_owner_and_asks_by_state(
    journal_url: str,
) -> None:
    async with open_journal(journal_url) as journal:
        alpha = await journal.register_daemon("alpha", host="box-1", pid=11)
        beta = await journal.register_daemon("beta", host="box-2", pid=22)
        done = await journal.start_run("builder", alpha.id)
        for seq in range(3):
            await journal.record_ask(f"done-{seq}", done.id, seq, QUESTION)
        await journal.answer_ask("done-0", AskUserQuestionAnswer("yes"))
        await journal.answer_ask("done-1", AskUserQuestionAnswer("no"))
        await journal.finish_run(done.id)  # done-2 is withdrawn
        waiting = await journal.start_run("tester", beta.id)
        await journal.record_ask("open", waiting.id, 0, QUESTION)
        quiet = await journal.start_run("builder", alpha.id)  # asked nothing yet
        await journal.stop_daemon(beta.id)

        everything = await journal.runs()
        assert [(o.run.id, o.run.state) for o in everything] == [
            (quiet.id, RunState.RUNNING),
            (waiting.id, RunState.RUNNING),
            (done.id, RunState.FINISHED),
        ]
        assert [dict(o.asks) for o in everything] == [
            {},
            {AskState.PENDING: 1},
            {AskState.ANSWERED: 2, AskState.WITHDRAWN: 1},
        ]
        assert [o.total for o in everything] == [0, 1, 3]
        owners = [(o.daemon.name, o.daemon.host, o.daemon.pid, o.daemon.alive) for o in everything]
        assert owners == [("alpha", "box-1", 11, True), ("beta", "box-2", 22, False), owners[2]]
        unfinished = await journal.runs(states={RunState.RUNNING})
        assert [o.run.id for o in unfinished] == [quiet.id, waiting.id]
        assert [o.run.id for o in await journal.runs(agent="builder")] == [quiet.id, done.id]
        assert [o.run.id for o in await journal.runs(limit=1)] == [quiet.id]
        assert await journal.runs(agent="nobody") == []
        assert await journal.runs(states=set()) == []
        with pytest.raises(ValueError, match="limit"):
            await journal.runs(limit=-1)


async def test_asks_are_listed_with_their_run_and_daemon_newest_first(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        alpha = await journal.register_daemon("alpha", host="box-1", pid=11)
        beta = await journal.register_daemon("beta", host="box-2", pid=22)
        builds = await journal.start_run("builder", alpha.id)
        tests = await journal.start_run("tester", beta.id)
        await journal.record_ask("b0", builds.id, 0, QUESTION)
        await journal.record_ask("t0", tests.id, 0, QUESTION)
        await journal.record_ask("b1", builds.id, 1, QUESTION)
        await journal.answer_ask("b0", AskUserQuestionAnswer("yes"))

        entries = await journal.list_entries()
        assert [(e.ask.id, e.run.agent, e.daemon.name) for e in entries] == [
            ("b1", "builder", "alpha"),
            ("t0", "tester", "beta"),
            ("b0", "builder", "alpha"),
        ]
        assert entries[2].ask.answer == AskUserQuestionAnswer("yes")
        assert entries[0].daemon.alive and entries[0].run.id == builds.id
        of_builder = await journal.list_entries(agent="builder")
        assert [e.ask.id for e in of_builder] == ["b1", "b0"]
        pending = await journal.list_entries(states={AskState.PENDING}, agent="builder")
        assert [e.ask.id for e in pending] == ["b1"]
        assert [e.ask.id for e in await journal.list_entries(limit=2)] == ["b1", "t0"]
        assert await journal.list_entries(agent="nobody") == []


async def test_clearing_removes_an_abandoned_ask_and_tells_the_feed(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        daemon = await journal.register_daemon("alpha")
        run = await journal.start_run("builder", daemon.id)
        await journal.record_ask("answered", run.id, 0, QUESTION)
        await journal.answer_ask("answered", AskUserQuestionAnswer("yes"))
        await journal.record_ask("open", run.id, 1, QUESTION)
        await journal.abandon_run(run.id)  # "open" is abandoned: nobody will read it
        other = await journal.start_run("tester", daemon.id)
        await journal.record_ask("pending", other.id, 0, QUESTION)

        seen: list[JournalEvent] = []
        with anyio.fail_after(scaled(5)):
            async with journal.subscribe() as feed:
                cleared = await journal.clear("open")
                async for event in feed:
                    seen.append(event)
                    break
        assert seen == [JournalEvent("cleared", "open", run.id)]
        assert (cleared.id, cleared.state, cleared.run_id) == ("open", AskState.ABANDONED, run.id)
        assert [ask.id for ask in await journal.run_asks(run.id)] == ["answered"]
        for ask_id, code, words in [
            ("open", JournalErrorCode.ASK_UNKNOWN, "no ask open"),  # cleared already
            ("answered", JournalErrorCode.ASK_NOT_ABANDONED, "it was answered"),
            ("pending", JournalErrorCode.ASK_NOT_ABANDONED, "it is pending"),
        ]:
            with pytest.raises(JournalError) as refused:
                await journal.clear(ask_id)
            assert refused.value.code == code
            assert words in str(refused.value)
        assert (await journal.get_ask("answered")).state is AskState.ANSWERED
        assert (await journal.get_ask("pending")).pending


async def test_a_clear_reaches_the_feed_of_another_journal_object(shared_url: str) -> None:
    async with (
        open_journal(shared_url, poll_interval=POLL) as inbox_side,
        open_journal(shared_url, poll_interval=POLL) as operator_side,
    ):
        daemon = await operator_side.register_daemon("alpha")
        run = await operator_side.start_run("builder", daemon.id)
        await operator_side.record_ask("gone", run.id, 0, QUESTION)
        await operator_side.abandon_run(run.id)
        seen = []
        with anyio.fail_after(scaled(5)):
            async with inbox_side.subscribe() as feed:
                await operator_side.clear("gone")
                async for event in feed:
                    seen.append(event)
                    break
        assert seen == [JournalEvent("cleared", "gone", run.id)]


async def test_a_dry_run_purge_counts_what_the_purge_removes_and_removes_nothing(
    journal_url: str,
) -> None:
    async with open_journal(journal_url) as journal:
        old = await journal.register_daemon("old")
        ended = await journal.start_run("ended", old.id)
        await journal.record_ask("done", ended.id, 0, QUESTION)
        await journal.answer_ask("done", AskUserQuestionAnswer("yes"))
        await journal.finish_run(ended.id)
        await journal.stop_daemon(old.id)
        live = await journal.register_daemon("live")
        running = await journal.start_run("running", live.id)
        await journal.record_ask("open", running.id, 0, QUESTION)

        async def contents() -> tuple[object, ...]:
            return (
                await journal.list_asks(),
                [o.run for o in await journal.runs()],
                [d.id for d in await journal.daemons()],
            )

        before = await contents()
        planned = await journal.purge(older_than=0, dry_run=True)
        assert (planned.asks, planned.runs, planned.daemons) == (1, 1, 1)
        assert await contents() == before
        assert await journal.purge(older_than=3600, dry_run=True) == type(planned)(0, 0, 0)
        assert await journal.purge(older_than=0) == planned
        assert [ask.id for ask in await journal.list_asks()] == ["open"]
        assert [d.id for d in await journal.daemons()] == [live.id]


async def test_a_purge_leaves_no_trace_of_an_answer_in_the_sqlite_files(tmp_path: Path) -> None:
    """While a daemon holds the journal open, its write-ahead log keeps former pages: a purge
    empties it, and what it deleted is overwritten in the file."""
    path = tmp_path / "journal.sqlite3"
    secret = "SECRET-answer-5521"

    def traces() -> list[str]:
        files = sorted(tmp_path.glob("journal.sqlite3*"))
        return [file.name for file in files if secret.encode() in file.read_bytes()]

    async with open_journal(path) as daemon_side, open_journal(path) as operator_side:
        daemon = await daemon_side.register_daemon("alpha")
        run = await daemon_side.start_run("builder", daemon.id)
        await daemon_side.record_ask("q", run.id, 0, QUESTION)
        await daemon_side.answer_ask("q", AskUserQuestionAnswer(secret))
        await daemon_side.finish_run(run.id)
        assert traces() == ["journal.sqlite3-wal"]
        report = await operator_side.purge(older_than=0)
        assert report.asks == 1
        assert traces() == []
        await daemon_side.heartbeat(daemon.id)  # the daemon's connection goes on
