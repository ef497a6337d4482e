"""A fleet inbox's Clear removes an abandoned question from the journal: every other inbox on
that journal (another journal object, as another process has) drops it at once, and no inbox
started later shows it. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import pytest
from tests._timing import scaled

from hotseam.interaction import AskUserQuestionRequest
from hotseam.interaction._journal import AskState, open_journal
from hotseam.providers._web._answers import InboxError
from hotseam.providers._web._inbox import Subscription
from hotseam.providers._web._journal_inbox import JournalInbox
from journal.conftest import postgres_server, postgres_url, shared_url  # noqa: F401 (fixtures)

pytestmark = pytest.mark.anyio

QUESTION = AskUserQuestionRequest("Which database?", header="Database")


@asynccontextmanager
async def inboxes(url: str, count: int) -> AsyncIterator[list[JournalInbox]]:
    """``count`` inboxes following the journal at ``url``, each on its own journal object."""
    if count == 0:
        yield []
        return
    async with (
        open_journal(url, poll_interval=0.05) as journal,
        anyio.create_task_group() as group,
    ):
        inbox = JournalInbox(journal, by=f"inbox {count}", refresh=60)
        await group.start(inbox.follow)
        async with inboxes(url, count - 1) as others:
            yield [inbox, *others]
        group.cancel_scope.cancel()


async def until(events: Subscription, wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    with anyio.fail_after(scaled(5)):
        while True:
            event = await events.receive()
            assert event is not None, "the stream ended"
            if wanted(event):
                return event


def marked(ask_id: str, state: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: (
        e["type"] == "changed" and e["question"]["id"] == ask_id and e["question"]["state"] == state
    )


def about(ask_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e.get("id") == ask_id


async def test_a_question_cleared_in_one_inbox_leaves_every_inbox_for_good(
    shared_url: str,  # noqa: F811
) -> None:
    async with open_journal(shared_url) as daemon_side, AsyncExitStack() as stack:
        daemon = await daemon_side.register_daemon("alpha")
        run = await daemon_side.start_run("builder", daemon.id)
        for seq, ask_id in enumerate(["first", "second", "third"]):
            await daemon_side.record_ask(ask_id, run.id, seq, QUESTION)
        async with inboxes(shared_url, 2) as (here, there):
            seen_here, seen_there = here.subscribe(), there.subscribe()
            stack.callback(seen_here.release)
            stack.callback(seen_there.release)
            await daemon_side.abandon_run(run.id)  # an operator gave the run up
            for events in (seen_here, seen_there):
                for ask_id in ("first", "second", "third"):
                    await until(events, marked(ask_id, "abandoned"))

            assert await here.submit_clear("first", client="tab-1") == {}
            for events in (seen_here, seen_there):
                gone = await until(events, about("first"))
                assert (gone["type"], gone["reason"]) == ("removed", "cleared")
            assert [q["id"] for q in there.snapshot()] == ["second", "third"]
            # Cleared here first: clearing it there too (a second tab, a late click) is done.
            assert await there.submit_clear("first", client="tab-2") == {}

            # Cleared by an operator (hotseam journal, another process): both drop it.
            await daemon_side.clear("second")
            for events in (seen_here, seen_there):
                removed = await until(events, about("second"))
                assert (removed["type"], removed["reason"]) == ("removed", "cleared")
            with pytest.raises(InboxError) as unknown:
                await here.submit_clear("never-asked", client=None)
            assert unknown.value.status == 404
        async with inboxes(shared_url, 1) as (later,):
            assert later.snapshot() == []  # nothing pending; the cleared are gone for good
        remaining = await daemon_side.list_asks(states={AskState.ABANDONED})
        assert [ask.id for ask in remaining] == ["third"]
