"""Two journal objects on one SQL journal (what two processes see): each hears the other's
changes, by NOTIFY on PostgreSQL and by polling on SQLite; and both outlive a restart of the
PostgreSQL server."""

from __future__ import annotations

import time

import anyio
import anyio.to_thread
import pytest
from tests._timing import scaled

from _postgres import PostgresServer
from hotseam.interaction import AskUserQuestionAnswer, AskUserQuestionRequest
from hotseam.interaction._journal import AskState, JournalError, JournalErrorCode, open_journal

pytestmark = pytest.mark.anyio

QUESTION = AskUserQuestionRequest("Ship it?")
POLL = 0.05


async def test_a_waiter_wakes_when_another_journal_object_answers(shared_url: str) -> None:
    async with (
        open_journal(shared_url, poll_interval=POLL) as daemon_side,
        open_journal(shared_url, poll_interval=POLL) as inbox_side,
    ):
        daemon = await daemon_side.register_daemon("d")
        run = await daemon_side.start_run("agent", daemon.id)
        await daemon_side.record_ask("q", run.id, 0, QUESTION)
        woken: list[float] = []

        async def wait() -> None:
            settled = await daemon_side.wait_settled("q")
            woken.append(time.perf_counter())
            assert settled.answer == AskUserQuestionAnswer("from the inbox")

        with anyio.fail_after(scaled(5)):
            async with anyio.create_task_group() as group:
                group.start_soon(wait)
                await anyio.wait_all_tasks_blocked()
                sent = time.perf_counter()
                won = await inbox_side.answer_ask("q", AskUserQuestionAnswer("from the inbox"))
                assert won.won
        bound = 0.5 if daemon_side.engine == "postgresql" else POLL + 0.5
        assert woken[0] - sent < bound


async def test_the_change_feed_tells_another_objects_changes_in_order(shared_url: str) -> None:
    async with (
        open_journal(shared_url, poll_interval=POLL) as inbox_side,
        open_journal(shared_url, poll_interval=POLL) as daemon_side,
    ):
        daemon = await daemon_side.register_daemon("d")
        run = await daemon_side.start_run("agent", daemon.id)
        seen = []
        with anyio.fail_after(scaled(5)):
            async with inbox_side.subscribe() as feed:
                for seq in range(3):
                    await daemon_side.record_ask(f"q{seq}", run.id, seq, QUESTION)
                await daemon_side.answer_ask("q1", AskUserQuestionAnswer("yes"))
                await daemon_side.finish_run(run.id)
                async for event in feed:
                    seen.append((event.kind, event.ask_id, event.state))
                    if len(seen) == 6:
                        break
        assert seen == [
            ("created", "q0", AskState.PENDING),
            ("created", "q1", AskState.PENDING),
            ("created", "q2", AskState.PENDING),
            ("settled", "q1", AskState.ANSWERED),
            ("settled", "q0", AskState.WITHDRAWN),
            ("settled", "q2", AskState.WITHDRAWN),
        ]


async def test_the_journal_comes_back_after_the_postgresql_server_restarts(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    async with (
        open_journal(postgres_url) as daemon_side,
        open_journal(postgres_url) as inbox_side,
    ):
        daemon = await daemon_side.register_daemon("d")
        run = await daemon_side.start_run("agent", daemon.id)
        await daemon_side.record_ask("q", run.id, 0, QUESTION)
        settled = []
        events = []
        with anyio.fail_after(scaled(10)):
            async with daemon_side.subscribe() as feed, anyio.create_task_group() as group:

                async def wait() -> None:
                    settled.append(await daemon_side.wait_settled("q"))

                group.start_soon(wait)
                await anyio.wait_all_tasks_blocked()
                await anyio.to_thread.run_sync(postgres_server.restart)  # connections cut

                assert (await daemon_side.get_ask("q")).pending  # a read: on a new connection
                with pytest.raises(JournalError) as cut:  # a write: not tried again
                    await inbox_side.answer_ask("q", AskUserQuestionAnswer("lost"))
                assert cut.value.code == JournalErrorCode.JOURNAL_UNAVAILABLE
                assert (await daemon_side.get_ask("q")).pending  # and it was not recorded
                # Answered while the listener may still be reconnecting (its NOTIFY lost):
                # the reconnection tells readers to list again and wakes the waiter.
                assert (await inbox_side.answer_ask("q", AskUserQuestionAnswer("after"))).won
                async for event in feed:
                    events.append((event.kind, event.ask_id))
                    if event.kind == "resync":
                        break  # and the task group waits for the waiter
        assert settled[0].answer == AskUserQuestionAnswer("after")
        assert set(events) <= {("resync", None), ("settled", "q")}
