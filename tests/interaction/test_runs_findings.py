"""Findings of the journal's state machine (tests/_journal_machine.py), reduced to tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from hotseam import AbortController, Context
from hotseam.interaction import (
    USER_INTERACTION,
    AskJournal,
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    UserInteractionError,
    ask,
)
from hotseam.interaction._journal import AskState, Journal, open_journal

pytestmark = pytest.mark.anyio

DB = AskUserQuestionRequest(
    "Which database?",
    options=(AskUserQuestionOption("Postgres"), AskUserQuestionOption("SQLite")),
)


@pytest.fixture(params=["memory", "sqlite"])
async def journal(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Journal]:
    url = "memory:" if request.param == "memory" else f"sqlite:///{tmp_path / 'journal.db'}"
    async with open_journal(url) as opened:
        yield opened


class Human:
    """A provider whose human answers when the test says so."""

    def __init__(self) -> None:
        self.asked = anyio.Event()
        self.answers = anyio.Event()
        self.times = 0

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        self.times += 1
        self.asked.set()
        await self.answers.wait()
        return AskUserQuestionAnswer("SQLite", request.choices[1])


async def test_an_answer_given_as_the_process_stops_is_kept_for_the_resume(
    journal: Journal,
) -> None:
    """The human answers in the same event-loop turn as the daemon stops (SIGTERM for a
    deploy): the provider returned the answer, so it is recorded, and the resumed run
    replays it instead of asking again (invariants 6 and 10)."""
    context = Context("daemon")
    human = Human()
    async with (
        AskJournal.open(journal, name="daemon") as journaling,
        context.scope("ui") as scope,
    ):
        scope.provide(USER_INTERACTION, human)
        with anyio.CancelScope() as stopping:
            async with journaling.run("deployer"), anyio.create_task_group() as agent:
                agent.start_soon(lambda: ask(DB, context=context))
                await human.asked.wait()
                human.answers.set()
                stopping.cancel()  # the same turn: nothing ran in between
        (record,) = await journal.list_asks()
        assert record.state is AskState.ANSWERED
        assert record.answer is not None and record.answer.answer == "SQLite"
        async with journaling.run("deployer"):
            assert (await ask(DB, context=context)).answer == "SQLite"
        assert human.times == 1


async def test_an_answer_given_as_the_signal_fires_wins_and_is_recorded(
    journal: Journal,
) -> None:
    """Invariant 6 with a journal: the provider's returned answer wins over an abort of
    the request's signal in the same turn, and it is what the journal records."""
    context = Context("daemon")
    human = Human()
    controller = AbortController()
    request = AskUserQuestionRequest(DB.question, options=DB.options, signal=controller.signal)
    got: list[str] = []
    async with (
        AskJournal.open(journal, name="daemon") as journaling,
        context.scope("ui") as scope,
    ):
        scope.provide(USER_INTERACTION, human)
        async with journaling.run("deployer"), anyio.create_task_group() as agent:

            async def asks() -> None:
                got.append((await ask(request, context=context)).answer)

            agent.start_soon(asks)
            await human.asked.wait()
            human.answers.set()
            controller.abort("the tab was closed")  # the same turn
        (record,) = await journal.list_asks()
    assert got == ["SQLite"]
    assert record.state is AskState.ANSWERED


class Waits:
    """A provider whose human never answers."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        self.asked.append(request.question)
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


async def test_a_swap_closes_a_provider_whose_ask_moved_to_a_child_contexts_own() -> None:
    """Found by the state machine (no journal needed). Two asks wait on C's provider: one
    of C that already moved through a swap, one of child context D, which meanwhile got a
    provider of its own. A second swap closes the provider's scope: both asks are revoked;
    D's moves to D's provider at once. The close must end then (invariant 4), not wait for
    the moved ask's next use of its lease until the scope's dispose timeout."""
    outer = Context("C")
    child = outer.child("D")
    first, second, childs = Waits(), Waits(), Waits()
    ended: list[str] = []

    async def asking(question: str, context: Context) -> None:
        try:
            await ask(AskUserQuestionRequest(question), context=context)
        except UserInteractionError as error:
            ended.append(f"{question}: {error.code}")

    async with anyio.create_task_group() as asks:
        old = outer.scope("old")
        old.provide(USER_INTERACTION, Waits())
        asks.start_soon(asking, "C's question", outer)
        await anyio.wait_all_tasks_blocked()
        async with outer.swap(USER_INTERACTION):  # C's ask moves to the next provider
            await old.aclose()
            replacement = outer.scope("replacement", dispose_timeout=2)
            replacement.provide(USER_INTERACTION, first)
        await anyio.wait_all_tasks_blocked()
        asks.start_soon(asking, "D's question", child)
        await anyio.wait_all_tasks_blocked()
        assert first.asked == ["C's question", "D's question"]
        own = child.provide(USER_INTERACTION, childs)
        latest = outer.scope("latest")
        async with outer.swap(USER_INTERACTION):
            with anyio.fail_after(1):  # well before the dispose timeout (2 s)
                await replacement.aclose()  # DisposerTimeoutError once those 2 s pass
            latest.provide(USER_INTERACTION, second)
        await anyio.wait_all_tasks_blocked()
        assert childs.asked == ["D's question"] and second.asked == ["C's question"]
        assert ended == []
        asks.cancel_scope.cancel()
    await own.dispose()
    await latest.aclose()
