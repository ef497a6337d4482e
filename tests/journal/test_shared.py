"""Two journal objects on one SQL journal (what two processes see): each hears the other's
changes, by NOTIFY on PostgreSQL and by polling on SQLite."""

from __future__ import annotations

import time

import anyio
import pytest

from hotseam.interaction import AskUserQuestionAnswer, AskUserQuestionRequest
from hotseam.interaction._journal import AskState, open_journal

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

        with anyio.fail_after(5):
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
        with anyio.fail_after(5):
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
