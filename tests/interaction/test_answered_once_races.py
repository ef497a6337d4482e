"""A recorded answer is delivered to one ask only (invariant 10), however the asks come.

The journal machine (tests/test_invariants.py) once reported one answer "delivered live to
several asks"; that was its model's fault (see
``test_the_same_question_answered_alike_in_two_runs_is_two_answers`` there). These pin the
paths by which the product itself could hand one record to two asks: a key asked twice in
a resumed run (the resumed records are replayed once each, as positions are), and another
process's answer arriving in the same turn as this process's provider's, in either order.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from hotseam import Context
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ask,
)
from hotseam.interaction._journal import AskState, Journal, JournalError, open_journal
from hotseam.interaction.journal import JOURNALING, JournalDaemon
from hotseam.providers.scripted import ScriptedProvider

pytestmark = pytest.mark.anyio

DEPLOY = AskUserQuestionRequest(
    "Deploy now?", options=(AskUserQuestionOption("Yes"), AskUserQuestionOption("No"))
)


@pytest.fixture(params=["memory", "sqlite"])
async def journal(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Journal]:
    url = "memory:" if request.param == "memory" else f"sqlite:///{tmp_path / 'journal.db'}"
    async with open_journal(url) as opened:
        yield opened


async def _keyed_twice(
    journal: Journal, replies: list[str], looks: list[object] | None = None
) -> list[str | JournalError]:
    """A run of ``deployer`` that asks DEPLOY under the key ``deploy`` twice: what each
    ask returned, or the journal's refusal. With ``looks``, the agent looks at the record
    it would replay before each ask (``recorded_at``), and what it saw is put there."""
    context = Context("daemon")
    got: list[str | JournalError] = []
    async with (
        JournalDaemon.open(journal, name="daemon-test") as journaling,
        context.scope("ui") as scope,
    ):
        scope.provide(USER_INTERACTION, ScriptedProvider(replies))
        scope.provide(JOURNALING, journaling)
        async with journaling.run("deployer") as run:
            for _ in range(2):
                if looks is not None:
                    seen = run.recorded_at(0, "deploy")
                    looks.append(None if seen is None else seen.id)
                try:
                    got.append((await ask(DEPLOY, context=context, key="deploy")).answer)
                except JournalError as error:
                    got.append(error)
    return got


async def _leave_keyed(journal: Journal, *, answered: bool) -> str:
    """A run that recorded DEPLOY under ``deploy`` (``answered`` Yes, or left pending) and
    was left unfinished, as a stopped process leaves it; the record's id."""
    gone = await journal.register_daemon("gone")
    run = await journal.start_run("deployer", gone.id)
    record = await journal.record_ask("a1", run.id, 0, DEPLOY, key="deploy")
    if answered:
        await journal.answer_ask(record.id, AskUserQuestionAnswer("Yes", DEPLOY.choices[0]))
    await journal.stop_daemon(gone.id)
    return record.id


@pytest.mark.parametrize("answered", [True, False], ids=["answered", "pending"])
async def test_a_key_asked_twice_in_a_resumed_run_gets_its_record_once(
    journal: Journal, answered: bool
) -> None:
    """The record of a key replays (answered: Yes) or re-attaches (pending: the provider
    answers No, live) for the first ask under that key; a second ask under it is refused,
    as it is in a new run — never the same record's answer again."""
    await _leave_keyed(journal, answered=answered)
    first, second = await _keyed_twice(journal, ["No", "No"])
    assert first == ("Yes" if answered else "No")
    assert isinstance(second, JournalError) and second.code == "ASK_CONFLICT", second
    # The same as in a run that never stopped:
    fresh = await _keyed_twice(journal, ["No", "No"])
    assert fresh[0] == "No"
    assert isinstance(fresh[1], JournalError) and fresh[1].code == "ASK_CONFLICT"


@pytest.mark.parametrize("answered", [True, False], ids=["answered", "pending"])
async def test_looking_at_the_record_before_asking_takes_nothing_from_the_ask(
    journal: Journal, answered: bool
) -> None:
    """An agent may look at what its next ask would replay (``recorded_at``) before it
    asks: the look is no hand-out — the ask still gets the record, and once the ask has
    taken it the look finds nothing."""
    record_id = await _leave_keyed(journal, answered=answered)
    looks: list[object] = []
    first, second = await _keyed_twice(journal, ["No", "No"], looks)
    assert first == ("Yes" if answered else "No")
    assert isinstance(second, JournalError) and second.code == "ASK_CONFLICT", second
    assert looks == [record_id, None]


@pytest.mark.parametrize("other_first", [True, False], ids=["elsewhere-first", "here-first"])
async def test_an_answer_here_and_one_elsewhere_in_the_same_turn_settle_one_ask_once(
    journal: Journal, other_first: bool
) -> None:
    """This process's provider and another process answer the same recorded question in
    one turn (the order forced by checkpoints): one answer wins, the ask returns what the
    record holds, and the next ask of the run is a new record that neither answer reaches."""
    context = Context("daemon")
    shown = anyio.Event()
    release = anyio.Event()

    async def human(request: AskUserQuestionRequest) -> str:
        if request.question != DEPLOY.question or shown.is_set():
            return "later"
        shown.set()
        await release.wait()
        return "here"

    got: list[str] = []
    async with (
        JournalDaemon.open(journal, name="daemon-test") as journaling,
        context.scope("ui") as scope,
    ):
        scope.provide(USER_INTERACTION, ScriptedProvider(human))
        scope.provide(JOURNALING, journaling)
        async with anyio.create_task_group() as tg, journaling.run("deployer") as run:

            async def other_process() -> None:
                await shown.wait()
                (record,) = await journal.run_asks(run.id)
                if not other_first:
                    release.set()
                    await anyio.lowlevel.checkpoint()
                await journal.answer_ask(record.id, AskUserQuestionAnswer("elsewhere"), by="inbox")
                release.set()

            tg.start_soon(other_process)
            got.append((await ask(DEPLOY, context=context)).answer)
            got.append((await ask(DEPLOY, context=context)).answer)
    first, second = await journal.run_asks(run.id)
    assert first.state is AskState.ANSWERED and second.state is AskState.ANSWERED
    assert first.answer is not None and got[0] == first.answer.answer
    assert got[0] in ("here", "elsewhere")
    assert got[1] == "later" and first.id != second.id
