"""The journal's contract, daemons and runs: every case on memory, SQLite and PostgreSQL,
on asyncio and trio."""

from __future__ import annotations

import os
import socket

import anyio
import pytest
from tests._timing import scaled

from hotseam.interaction import AskUserQuestionAnswer, AskUserQuestionRequest
from hotseam.interaction._journal import (
    AskState,
    DaemonRecord,
    JournalError,
    JournalErrorCode,
    RunState,
    open_journal,
)

pytestmark = pytest.mark.anyio

QUESTION = AskUserQuestionRequest("Deploy now?", header="Deploy")


async def test_a_registered_daemon_is_alive_and_listed(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        here = await journal.register_daemon("builder", agent="deployer")
        there = await journal.register_daemon("other", host="box-2", pid=4242)
        assert (here.name, here.agent, here.host, here.pid) == (
            "builder",
            "deployer",
            socket.gethostname(),
            os.getpid(),
        )
        assert here.alive and here.stopped_at is None
        assert here.heartbeat_at == pytest.approx(here.started_at, abs=0.5)
        assert (there.host, there.pid, there.agent) == ("box-2", 4242, None)
        assert [daemon.id for daemon in await journal.daemons()] == [here.id, there.id]
        assert await journal.get_daemon(there.id) == there


async def test_a_stopped_daemon_is_dead_and_its_heartbeats_are_refused(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        daemon = await journal.register_daemon("stopping")
        stopped = await journal.stop_daemon(daemon.id)
        assert not stopped.alive and stopped.stopped_at is not None
        assert await journal.stop_daemon(daemon.id) == stopped  # a second stop changes nothing
        with pytest.raises(JournalError) as refused:
            await journal.heartbeat(daemon.id)
        assert refused.value.code == JournalErrorCode.DAEMON_STOPPED
        with pytest.raises(JournalError) as no_run:
            await journal.start_run("agent", daemon.id)
        assert no_run.value.code == JournalErrorCode.DAEMON_STOPPED


async def test_an_unknown_daemon_is_named_in_the_error(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        for call in (journal.get_daemon, journal.heartbeat, journal.stop_daemon):
            with pytest.raises(JournalError) as unknown:
                await call("nobody")
            assert unknown.value.code == JournalErrorCode.DAEMON_UNKNOWN
            assert "nobody" in str(unknown.value)
        with pytest.raises(JournalError) as no_run:
            await journal.start_run("agent", "nobody")
        assert no_run.value.code == JournalErrorCode.DAEMON_UNKNOWN


async def test_an_agent_has_at_most_one_unfinished_run(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        daemon = await journal.register_daemon("d")
        assert await journal.unfinished_run("deployer") is None
        run = await journal.start_run("deployer", daemon.id)
        assert (run.agent, run.daemon_id, run.state, run.finished_at) == (
            "deployer",
            daemon.id,
            RunState.RUNNING,
            None,
        )
        assert run.unfinished
        assert await journal.unfinished_run("deployer") == run
        assert await journal.get_run(run.id) == run
        with pytest.raises(JournalError) as exists:
            await journal.start_run("deployer", daemon.id)
        assert exists.value.code == JournalErrorCode.RUN_EXISTS
        assert exists.value.details["run_id"] == run.id
        other = await journal.start_run("reviewer", daemon.id)
        assert other.id != run.id
        with pytest.raises(JournalError) as unknown:
            await journal.get_run("no-such-run")
        assert unknown.value.code == JournalErrorCode.RUN_UNKNOWN


async def test_a_silent_daemon_dies_and_its_run_can_then_be_claimed(journal_url: str) -> None:
    async with open_journal(journal_url, liveness_timeout=scaled(0.3)) as journal:
        owner = await journal.register_daemon("first")
        heir = await journal.register_daemon("second")
        run = await journal.start_run("deployer", owner.id)
        with pytest.raises(JournalError) as claimed:
            await journal.claim_run(run.id, heir.id)
        assert claimed.value.code == JournalErrorCode.RUN_CLAIMED
        assert claimed.value.details["owner"] == owner.id
        assert await journal.claim_run(run.id, owner.id) == await journal.get_run(run.id)

        # The lapse of time itself is the behaviour under test (the journal's clock is the
        # database's): the liveness bound and the wait past it are stretched alike.
        await anyio.sleep(scaled(0.4))
        lapsed = await journal.get_daemon(owner.id)
        assert not lapsed.alive and not (await journal.get_daemon(heir.id)).alive
        taken = await journal.claim_run(run.id, heir.id)
        assert taken.daemon_id == heir.id and taken.claimed_at >= run.claimed_at
        assert (await journal.get_daemon(heir.id)).alive  # claiming is a sign of life
        with pytest.raises(JournalError) as back:
            await journal.claim_run(run.id, owner.id)  # the heir is alive now
        assert back.value.code == JournalErrorCode.RUN_CLAIMED
        beaten = await journal.heartbeat(owner.id)
        assert beaten.alive and beaten.heartbeat_at > lapsed.heartbeat_at


async def test_a_stopped_owners_run_can_be_claimed_at_once(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        owner = await journal.register_daemon("killed")
        heir = await journal.register_daemon("restarted")
        run = await journal.start_run("deployer", owner.id)
        await journal.stop_daemon(owner.id)  # a restart found the old pid gone
        assert (await journal.claim_run(run.id, heir.id)).daemon_id == heir.id
        with pytest.raises(JournalError) as stopped:
            await journal.claim_run(run.id, owner.id)
        assert stopped.value.code == JournalErrorCode.DAEMON_STOPPED


async def test_a_finished_run_withdraws_its_pending_asks_and_takes_nothing_more(
    journal_url: str,
) -> None:
    async with open_journal(journal_url) as journal:
        daemon = await journal.register_daemon("d")
        run = await journal.start_run("looper", daemon.id)
        await journal.record_ask("answered", run.id, 0, QUESTION)
        await journal.answer_ask("answered", AskUserQuestionAnswer("yes"))
        await journal.record_ask("open", run.id, 1, QUESTION)

        finished = await journal.finish_run(run.id)
        assert finished.state is RunState.FINISHED and finished.finished_at is not None
        states = {ask.id: ask.state for ask in await journal.run_asks(run.id)}
        assert states == {"answered": AskState.ANSWERED, "open": AskState.WITHDRAWN}
        late = await journal.answer_ask("open", AskUserQuestionAnswer("yesterday's answer"))
        assert not late.won and late.ask.answer is None
        assert late.error().code == JournalErrorCode.ASK_NOT_PENDING
        for attempt in (
            lambda: journal.record_ask("new", run.id, 2, QUESTION),
            lambda: journal.finish_run(run.id),
            lambda: journal.abandon_run(run.id),
            lambda: journal.claim_run(run.id, daemon.id),
            lambda: journal.abandon_asks(run.id, 0),
        ):
            with pytest.raises(JournalError) as refused:
                await attempt()
            assert refused.value.code == JournalErrorCode.RUN_FINISHED
        assert await journal.unfinished_run("looper") is None
        assert (await journal.start_run("looper", daemon.id)).id != run.id  # a fresh run


async def test_a_failed_run_is_recorded_as_failed(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        daemon = await journal.register_daemon("d")
        run = await journal.start_run("crasher", daemon.id)
        assert (await journal.finish_run(run.id, failed=True)).state is RunState.FAILED
        assert await journal.unfinished_run("crasher") is None


async def test_an_abandoned_run_abandons_its_pending_asks_and_refuses_answers(
    journal_url: str,
) -> None:
    async with open_journal(journal_url) as journal:
        daemon = await journal.register_daemon("d")
        run = await journal.start_run("deployer", daemon.id)
        await journal.record_ask("q", run.id, 0, QUESTION)
        abandoned = await journal.abandon_run(run.id)
        assert abandoned.state is RunState.ABANDONED
        assert (await journal.get_ask("q")).state is AskState.ABANDONED
        late = await journal.answer_ask("q", AskUserQuestionAnswer("yes"))
        assert not late.won and late.ask.state is AskState.ABANDONED
        assert await journal.unfinished_run("deployer") is None


async def test_a_daemon_that_lost_its_run_cannot_ask_in_it_or_end_it(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        stalled = await journal.register_daemon("stalled")
        heir = await journal.register_daemon("heir")
        run = await journal.start_run("deployer", stalled.id)
        await journal.record_ask("q0", run.id, 0, QUESTION, owner=stalled.id)
        await journal.stop_daemon(stalled.id)
        await journal.claim_run(run.id, heir.id)
        for attempt in (
            lambda: journal.record_ask("q1", run.id, 1, QUESTION, owner=stalled.id),
            lambda: journal.finish_run(run.id, owner=stalled.id),
        ):
            with pytest.raises(JournalError) as fenced:
                await attempt()
            assert fenced.value.code == JournalErrorCode.RUN_CLAIMED
        await journal.record_ask("q1", run.id, 1, QUESTION, owner=heir.id)
        assert (await journal.finish_run(run.id, owner=heir.id)).state is RunState.FINISHED


async def test_a_closed_journal_refuses_every_call(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        pass
    with pytest.raises(JournalError) as closed:
        await journal.daemons()
    assert closed.value.code == JournalErrorCode.JOURNAL_UNAVAILABLE
    assert "closed" in str(closed.value)


async def test_keep_alive_heartbeats_until_its_daemon_is_marked_stopped(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        daemon = await journal.register_daemon("beating")
        beats: list[float] = []
        real_heartbeat = journal.heartbeat

        async def counted(daemon_id: str) -> DaemonRecord:
            beat = await real_heartbeat(daemon_id)
            beats.append(beat.heartbeat_at)
            if len(beats) == 3:
                await journal.stop_daemon(daemon_id)  # another process found it dead
            return beat

        journal.heartbeat = counted  # type: ignore[method-assign]
        with anyio.fail_after(scaled(5)), pytest.raises(JournalError) as lost:
            await journal.keep_alive(daemon.id, interval=0.01)
        assert lost.value.code == JournalErrorCode.DAEMON_STOPPED
        assert len(beats) == 3 and beats == sorted(beats) and beats[0] > daemon.heartbeat_at
