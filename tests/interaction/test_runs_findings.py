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
