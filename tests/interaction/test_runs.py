"""Agent runs in a journal: asks recorded, replayed on resume, answered from anywhere once.

These run on the in-memory and the SQLite engine (both backends); the kill tests with real
processes are in tests/cli/test_journal_cli.py and the PostgreSQL fleet in tests/journal/.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog

from hotseam import AbortSignal, Context
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ErrorCode,
    UserInteractionError,
    ask,
    waiting_for_provider,
)
from hotseam.interaction._journal import AskState, Journal, JournalError, open_journal
from hotseam.interaction.journal import JOURNALING, JournalDaemon, current_run
from hotseam.providers.scripted import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio

DB = AskUserQuestionRequest(
    "Which database?",
    header="Storage",
    options=(AskUserQuestionOption("Postgres"), AskUserQuestionOption("SQLite")),
    allow_custom=False,
)
NAME = AskUserQuestionRequest("What should the service be called?")
DEPLOY = AskUserQuestionRequest(
    "Deploy now?", options=(AskUserQuestionOption("Yes"), AskUserQuestionOption("No"))
)


@pytest.fixture(params=["memory", "sqlite"])
async def journal(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Journal]:
    url = "memory:" if request.param == "memory" else f"sqlite:///{tmp_path / 'journal.db'}"
    async with open_journal(url) as opened:
        yield opened


async def run_agent(
    journal: Journal,
    replies: list[Any],
    questions: list[AskUserQuestionRequest],
    *,
    agent: str = "deployer",
    fresh: bool = False,
    keys: list[str | None] | None = None,
    stop_after: int | None = None,
) -> tuple[list[str], ScriptedProvider]:
    """One daemon process: ask ``questions`` in a run of ``agent``; with ``stop_after`` the
    run is cancelled (the process stopping) once that many were answered."""
    context = Context("daemon")
    provider = ScriptedProvider(replies)
    answers: list[str] = []
    async with (
        JournalDaemon.open(journal, name="daemon-test") as journaling,
        context.scope("ui") as scope,
    ):
        scope.provide(USER_INTERACTION, provider)
        scope.provide(JOURNALING, journaling)
        with anyio.CancelScope() as stopping:
            async with journaling.run(agent, fresh=fresh):
                for index, question in enumerate(questions):
                    key = keys[index] if keys else None
                    answer = await ask(question, context=context, key=key)
                    answers.append(answer.answer)
                    if stop_after is not None and len(answers) == stop_after:
                        stopping.cancel()
                        await anyio.sleep_forever()
    return answers, provider


async def test_a_resumed_run_replays_its_answers_in_order_without_asking(
    journal: Journal,
) -> None:
    first, asked = await run_agent(journal, ["SQLite", "api"], [DB, NAME, DEPLOY], stop_after=2)
    assert first == ["SQLite", "api"] and len(asked.requests) == 2
    with structlog.testing.capture_logs() as logs:
        again, asked = await run_agent(journal, ["Yes"], [DB, NAME, DEPLOY])
    assert again == ["SQLite", "api", "Yes"]
    assert [request.question for request in asked.requests] == ["Deploy now?"]  # only new
    replayed = [entry for entry in logs if entry["event"] == "ask.replayed"]
    assert [entry["position"] for entry in replayed] == [0, 1]
    assert "SQLite" not in repr(replayed) and "api" not in repr(replayed)
    # The run finished: a third start asks everything anew.
    fresh, asked = await run_agent(journal, ["Postgres", "web", "No"], [DB, NAME, DEPLOY])
    assert fresh == ["Postgres", "web", "No"] and len(asked.requests) == 3


async def test_a_finished_run_never_receives_an_answer_again(journal: Journal) -> None:
    """An agent that loops asks "Deploy now?" in each run: yesterday's answer never comes."""
    for reply in ["Yes", "No", "Yes"]:
        answers, asked = await run_agent(journal, [reply], [DEPLOY])
        assert answers == [reply] and len(asked.requests) == 1
    runs = {ask.run_id for ask in await journal.list_asks()}
    assert len(runs) == 3


async def test_replay_stops_where_the_agent_asks_something_else(journal: Journal) -> None:
    await run_agent(journal, ["SQLite", "api"], [DB, NAME, DEPLOY], stop_after=2)
    changed = AskUserQuestionRequest("What should the service be named, in kebab-case?")
    answers, asked = await run_agent(journal, ["orders-api", "Yes"], [DB, changed, DEPLOY])
    assert answers == ["SQLite", "orders-api", "Yes"]
    assert [r.question for r in asked.requests] == [changed.question, "Deploy now?"]
    states = sorted((ask.seq, ask.state.value) for ask in await journal.list_asks())
    assert (1, "abandoned") in states and (1, "answered") in states  # superseded, then anew


async def test_keyed_asks_replay_wherever_they_come(journal: Journal) -> None:
    await run_agent(journal, ["Yes"], [DEPLOY], keys=["deploy-approval"], stop_after=1)
    answers, asked = await run_agent(
        journal, ["SQLite"], [DB, DEPLOY], keys=[None, "deploy-approval"]
    )
    assert answers == ["SQLite", "Yes"] and [r.question for r in asked.requests] == [DB.question]


async def test_a_fresh_start_abandons_the_unfinished_run(journal: Journal) -> None:
    await run_agent(journal, ["SQLite"], [DB, NAME], stop_after=1)
    answers, asked = await run_agent(journal, ["Postgres", "api"], [DB, NAME], fresh=True)
    assert answers == ["Postgres", "api"] and len(asked.requests) == 2


async def test_an_answer_given_elsewhere_wins_and_withdraws_the_prompt_here(
    journal: Journal,
) -> None:
    """Another process's inbox answers while this daemon's provider shows the question: the
    agent gets that answer, once, and the provider's prompt is withdrawn."""
    context = Context("daemon")
    provider = ScriptedProvider([Reply.never()])
    async with (
        JournalDaemon.open(journal, name="daemon-a") as journaling,
        context.scope("ui") as scope,
    ):
        scope.provide(USER_INTERACTION, provider)
        async with journaling.run("deployer"), anyio.create_task_group() as tasks:
            got: list[AskUserQuestionAnswer] = []

            async def agent() -> None:
                got.append(await ask(DB, context=context))

            tasks.start_soon(agent)
            await provider.wait_for_requests(1)
            (pending,) = [ask for ask in await journal.list_asks() if ask.pending]
            outcome = await journal.answer_ask(
                pending.id, AskUserQuestionAnswer("Postgres", DB.choices[0]), by="fleet inbox"
            )
            assert outcome.won
        assert [answer.answer for answer in got] == ["Postgres"]
        record = await journal.get_ask(pending.id)
        assert record.state is AskState.ANSWERED and record.settled_by == "fleet inbox"


async def test_an_answer_given_here_is_recorded_and_a_late_one_elsewhere_loses(
    journal: Journal,
) -> None:
    await run_agent(journal, ["SQLite"], [DB])
    (record,) = await journal.list_asks()
    assert record.state is AskState.ANSWERED and record.answer is not None
    assert record.answer.answer == "SQLite" and "daemon-test" in str(record.settled_by)
    late = await journal.answer_ask(record.id, AskUserQuestionAnswer("Postgres", None), by="x")
    assert not late.won and late.error().code == "ALREADY_ANSWERED"
    assert late.ask.answer is not None and late.ask.answer.answer == "SQLite"


async def test_with_no_provider_here_an_answer_elsewhere_wins_while_the_ask_waits(
    journal: Journal,
) -> None:
    """No provider in this process (a daemon answered from a fleet inbox): while the ask
    waits for one (``waiting_for_provider``), an answer written to the journal wins."""
    context = Context("daemon")  # no user-interaction provider at all
    async with JournalDaemon.open(journal, name="headless") as journaling:
        async with journaling.run("deployer"), anyio.create_task_group() as tasks:
            got: list[str] = []

            async def agent() -> None:
                with waiting_for_provider():
                    got.append((await ask(NAME, context=context)).answer)

            tasks.start_soon(agent)
            pending: list[Any] = []
            while not pending:
                await anyio.sleep(0.005)  # another "process" polls the journal
                pending = [ask for ask in await journal.list_asks() if ask.pending]
            await journal.answer_ask(pending[0].id, AskUserQuestionAnswer("api", None))
        assert got == ["api"]


async def test_with_no_provider_and_no_wait_the_ask_fails_and_is_recorded(
    journal: Journal,
) -> None:
    context = Context("daemon")
    async with JournalDaemon.open(journal, name="headless") as journaling:
        with anyio.CancelScope() as stop:
            async with journaling.run("deployer"):
                with pytest.raises(UserInteractionError) as missing:
                    await ask(NAME, context=context)
                assert missing.value.code == ErrorCode.NO_PROVIDER
                stop.cancel()
        (record,) = await journal.list_asks()
        assert record.state is AskState.FAILED and record.code == ErrorCode.NO_PROVIDER


async def test_a_timeout_and_a_signal_are_recorded_and_replayed(journal: Journal) -> None:
    context = Context("daemon")
    async with (
        JournalDaemon.open(journal, name="d") as journaling,
        context.scope("ui") as scope,
    ):
        scope.provide(USER_INTERACTION, ScriptedProvider([Reply.never(), Reply.never()]))
        with anyio.CancelScope() as stopping:
            async with journaling.run("deployer"):
                with pytest.raises(UserInteractionError) as late:
                    await ask(DB, context=context, timeout=0.05)
                assert late.value.code == ErrorCode.ASK_TIMEOUT
                with pytest.raises(UserInteractionError) as cut:
                    await ask(
                        AskUserQuestionRequest(NAME.question, signal=AbortSignal.timeout(0.05)),
                        context=context,
                    )
                assert cut.value.code == ErrorCode.ASK_ABORTED
                stopping.cancel()
                await anyio.sleep_forever()
        states = sorted((a.seq, a.state.value, a.code) for a in await journal.list_asks())
        assert states == [(0, "failed", "ASK_TIMEOUT"), (1, "withdrawn", None)]
        # The resumed run replays both outcomes, without asking.
        async with journaling.run("deployer"):
            with pytest.raises(UserInteractionError) as again:
                await ask(DB, context=context, timeout=0.05)
            assert again.value.code == ErrorCode.ASK_TIMEOUT
            with pytest.raises(UserInteractionError) as again_cut:
                await ask(NAME, context=context)
            assert again_cut.value.code == ErrorCode.ASK_ABORTED


async def test_a_dismissed_question_is_replayed_as_dismissed(journal: Journal) -> None:
    with pytest.raises(UserInteractionError) as dismissed:
        await run_agent(journal, [Reply.fail(ErrorCode.ASK_CANCELLED)], [DB])
    assert dismissed.value.code == ErrorCode.ASK_CANCELLED
    (record,) = await journal.list_asks()
    assert record.state is AskState.FAILED and record.code == ErrorCode.ASK_CANCELLED


async def test_a_cancelled_ask_stays_pending_for_the_resume(journal: Journal) -> None:
    context = Context("daemon")
    async with (
        JournalDaemon.open(journal, name="d") as journaling,
        context.scope("ui") as scope,
    ):
        shown = anyio.Event()

        def never(request: object) -> Reply:
            shown.set()
            return Reply.never()

        scope.provide(USER_INTERACTION, ScriptedProvider(never))
        async with anyio.create_task_group() as agent:

            async def cancel_once_shown() -> None:
                # Cancelled once the question is up (recorded, then shown), however long
                # a busy machine takes to get there.
                await shown.wait()
                agent.cancel_scope.cancel()

            agent.start_soon(cancel_once_shown)
            async with journaling.run("deployer"):
                assert current_run() is not None
                await ask(DB, context=context)
        assert current_run() is None
        (record,) = await journal.list_asks()
        assert record.pending
        run = await journal.get_run(record.run_id)
        assert run.unfinished
        # Answered while "down"; the resumed run gets it at once, under the same id.
        await journal.answer_ask(record.id, AskUserQuestionAnswer("SQLite", DB.choices[1]))
        async with journaling.run("deployer"):
            assert (await ask(DB, context=context)).answer == "SQLite"
        assert (await journal.get_run(record.run_id)).state.value == "finished"


async def test_a_run_a_live_daemon_owns_is_refused_and_a_dead_ones_taken_over(
    journal: Journal,
) -> None:
    async with JournalDaemon.open(journal, name="first") as first:
        with anyio.CancelScope() as stop:
            async with first.run("deployer"):
                async with JournalDaemon.open(journal, name="second") as second:
                    with pytest.raises(JournalError) as taken:
                        async with second.run("deployer"):
                            pass
                    assert taken.value.code == "RUN_CLAIMED"
                stop.cancel()
    # The first daemon stopped (its block ended): its unfinished run is taken over.
    async with JournalDaemon.open(journal, name="third") as third, third.run("deployer") as run:
        assert run.resumed or run.record.daemon_id == third.daemon.id


async def test_a_web_inbox_here_says_who_answered_elsewhere(journal: Journal) -> None:
    """The daemon's own inbox shows the question; a fleet inbox answers it: the daemon's
    pages hear "answered elsewhere (by ...)" with the answer, not "withdrawn"."""
    from hotseam.providers.web import WebProvider

    context = Context("daemon")
    async with (
        JournalDaemon.open(journal, name="daemon-a") as journaling,
        context.scope("ui") as scope,
    ):
        web = WebProvider.serve(scope, port=0, token="test-token-0123456789abcdef")
        scope.provide(USER_INTERACTION, web)
        async with journaling.run("deployer"), anyio.create_task_group() as tasks:
            got: list[str] = []

            async def agent() -> None:
                got.append((await ask(DB, context=context)).answer)

            events = web.inbox.subscribe()
            try:
                tasks.start_soon(agent)
                added = await events.receive()
                while added is not None and added.get("type") != "added":
                    added = await events.receive()
                (pending,) = [ask for ask in await journal.list_asks() if ask.pending]
                await journal.answer_ask(
                    pending.id, AskUserQuestionAnswer("SQLite", DB.choices[1]), by="fleet"
                )
                removed = await events.receive()
                while removed is not None and removed.get("type") != "removed":
                    removed = await events.receive()
            finally:
                events.release()
        assert got == ["SQLite"]
        assert removed is not None
        assert removed["reason"] == "answered" and removed["by"] == "fleet"
        assert removed["answer"] == {
            "answers": [{"id": "q1", "question": "Which database?", "labels": ["SQLite"]}]
        }
