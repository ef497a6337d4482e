"""The journal's contract, asks: every case on memory, SQLite and PostgreSQL, on asyncio and
trio."""

from __future__ import annotations

import anyio
import pytest
from tests._timing import scaled

from hotseam import Agent
from hotseam.interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    QuestionAnswer,
    validate_request,
)
from hotseam.interaction._journal import (
    AskState,
    Journal,
    JournalError,
    JournalErrorCode,
    RunRecord,
    open_journal,
    question_digest,
)

pytestmark = pytest.mark.anyio

CHOICE = AskUserQuestionRequest(
    "Which region?",
    header="Region",
    options=[
        AskUserQuestionOption("Europe", "eu", "Frankfurt", recommended=True),
        AskUserQuestionOption("America", "us"),
    ],
    allow_custom=False,
    agent=Agent("deployer", "Deployer"),
)
FREE = AskUserQuestionRequest("Release notes?")


async def _run(journal: Journal, agent: str = "deployer") -> RunRecord:
    daemon = await journal.register_daemon(f"daemon-of-{agent}", agent=agent)
    return await journal.start_run(agent, daemon.id)


async def test_recording_an_ask_keeps_the_question_and_twice_is_once(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        run = await _run(journal)
        ask = await journal.record_ask("a1", run.id, 0, CHOICE, key="region")
        assert (ask.id, ask.run_id, ask.seq, ask.key, ask.state) == (
            "a1",
            run.id,
            0,
            "region",
            AskState.PENDING,
        )
        assert ask.request == validate_request(CHOICE)  # options, header, agent: all kept
        assert ask.digest == question_digest(CHOICE)
        assert (ask.answer, ask.code, ask.settled_at, ask.settled_by) == (None, None, None, None)
        again = await journal.record_ask("a1", run.id, 0, FREE)  # the same id: the record
        assert again == ask
        assert await journal.get_ask("a1") == ask
        assert await journal.run_asks(run.id) == [ask]


async def test_a_position_of_a_run_holds_one_live_ask(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        run = await _run(journal)
        first = await journal.record_ask("first", run.id, 0, CHOICE)
        await journal.answer_ask("first", AskUserQuestionAnswer("eu"))
        with pytest.raises(JournalError) as taken:
            await journal.record_ask("reworded", run.id, 0, FREE)
        assert taken.value.code == JournalErrorCode.ASK_CONFLICT
        await journal.record_ask("second", run.id, 1, FREE)
        abandoned = await journal.abandon_asks(run.id, 0)  # the agent changed from 0 on
        assert [(ask.id, ask.state) for ask in abandoned] == [
            ("first", AskState.ABANDONED),
            ("second", AskState.ABANDONED),
        ]
        assert abandoned[0].answer == AskUserQuestionAnswer("eu")  # kept, never replayed
        replaced = await journal.record_ask("reworded", run.id, 0, FREE)
        assert [ask.id for ask in await journal.run_asks(run.id)] == [
            "first",
            "reworded",
            "second",
        ]
        assert replaced.pending and first.seq == replaced.seq
        assert await journal.abandon_asks(run.id, 5) == []


async def test_abandoning_from_a_position_leaves_the_asks_before_it(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        run = await _run(journal)
        for seq in range(3):
            await journal.record_ask(f"q{seq}", run.id, seq, FREE)
        await journal.answer_ask("q0", AskUserQuestionAnswer("kept"))
        await journal.answer_ask("q1", AskUserQuestionAnswer("superseded"))
        assert [ask.id for ask in await journal.abandon_asks(run.id, 1)] == ["q1", "q2"]
        states = [ask.state for ask in await journal.run_asks(run.id)]
        assert states == [AskState.ANSWERED, AskState.ABANDONED, AskState.ABANDONED]


async def test_the_first_answer_wins_and_the_loser_learns_what_won(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        run = await _run(journal)
        await journal.record_ask("q", run.id, 0, CHOICE)
        answers = {
            "tab-1": AskUserQuestionAnswer("eu", CHOICE.choices[0]),
            "tab-2": AskUserQuestionAnswer("us", CHOICE.choices[1]),
        }
        settlements = {}

        async def answer(by: str) -> None:
            settlements[by] = await journal.answer_ask("q", answers[by], by=by)

        async with anyio.create_task_group() as group:
            for by in answers:
                group.start_soon(answer, by)
        winners = [by for by, settlement in settlements.items() if settlement.won]
        assert len(winners) == 1
        winner = winners[0]
        recorded = await journal.get_ask("q")
        assert recorded.state is AskState.ANSWERED
        assert recorded.answer == answers[winner]  # the option travels with the answer
        assert recorded.settled_by == winner and recorded.settled_at is not None
        for settlement in settlements.values():
            assert settlement.ask == recorded  # the loser sees what was answered, when, by whom
        loser = next(s for by, s in settlements.items() if by != winner)
        error = loser.error()
        assert error.code == JournalErrorCode.ALREADY_ANSWERED
        assert error.details["settled_by"] == winner
        assert answers[winner].answer not in str(error.to_dict())  # never the answer itself
        await journal.record_ask("personal", run.id, 1, FREE)
        private = await journal.answer_ask("personal", AskUserQuestionAnswer("my home address"))
        assert "my home address" not in repr(private) + repr(await journal.inbox())


async def test_a_pending_ask_keeps_the_answers_given_so_far_until_it_settles(
    journal_url: str,
) -> None:
    """The answers to some questions of an ask of several are kept (each keep replaces the
    last), read back with the ask after a reopen, kept out of ``repr``, and never written
    once the ask is settled."""
    two = AskUserQuestionRequest(
        questions=[
            Question("Which region?", id="region", options=[AskUserQuestionOption("Europe")]),
            Question("Release notes?", id="notes"),
        ]
    )
    region = QuestionAnswer.chosen(two.questions[0], ["Europe"])
    notes = QuestionAnswer.chosen(two.questions[1], custom="my private notes")
    async with open_journal(journal_url) as journal:
        run = await _run(journal)
        await journal.record_ask("q", run.id, 0, two)
        assert (await journal.get_ask("q")).partial == ()
        assert await journal.keep_partial("q", [region])
        assert await journal.keep_partial("q", [region, notes])
        kept = await journal.get_ask("q")
        assert kept.partial == (region, notes) and kept.pending
        assert "my private notes" not in repr(kept)
        await journal.answer_ask("q", AskUserQuestionAnswer.of([region, notes], two))
        assert not await journal.keep_partial("q", [region])  # settled: nothing written
        assert (await journal.get_ask("q")).partial == (region, notes)
    if journal_url != "memory:":
        async with open_journal(journal_url) as reopened:
            assert (await reopened.get_ask("q")).partial == (region, notes)


async def test_an_ask_settles_once_whatever_settles_it(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        run = await _run(journal)
        for seq, ask_id in enumerate(("failed", "withdrawn", "abandoned")):
            await journal.record_ask(ask_id, run.id, seq, FREE)
        failed = await journal.settle_ask("failed", AskState.FAILED, code="ASK_TIMEOUT", by="me")
        assert failed.won
        assert (failed.ask.state, failed.ask.code, failed.ask.settled_by) == (
            AskState.FAILED,
            "ASK_TIMEOUT",
            "me",
        )
        assert (await journal.settle_ask("withdrawn", AskState.WITHDRAWN)).won
        assert (await journal.settle_ask("abandoned", AskState.ABANDONED)).won
        for ask_id in ("failed", "withdrawn", "abandoned"):
            late = await journal.answer_ask(ask_id, AskUserQuestionAnswer("too late"))
            assert not late.won and late.ask.answer is None
            assert late.error().code == JournalErrorCode.ASK_NOT_PENDING
            again = await journal.settle_ask(ask_id, AskState.WITHDRAWN)
            assert not again.won and again.ask == late.ask
        with pytest.raises(ValueError, match="answer_ask"):
            await journal.settle_ask("failed", AskState.ANSWERED)
        with pytest.raises(ValueError, match="code"):
            await journal.settle_ask("failed", AskState.FAILED)


async def test_an_unknown_ask_is_named_in_the_error(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        for attempt in (
            lambda: journal.get_ask("ghost"),
            lambda: journal.answer_ask("ghost", AskUserQuestionAnswer("x")),
            lambda: journal.settle_ask("ghost", AskState.WITHDRAWN),
            lambda: journal.wait_settled("ghost"),
        ):
            with pytest.raises(JournalError) as unknown:
                await attempt()
            assert unknown.value.code == JournalErrorCode.ASK_UNKNOWN
            assert "ghost" in str(unknown.value)
        for no_such_run in (
            lambda: journal.record_ask("a", "no-run", 0, FREE),
            lambda: journal.abandon_asks("no-run", 0),
        ):
            with pytest.raises(JournalError) as no_run:
                await no_such_run()
            assert no_run.value.code == JournalErrorCode.RUN_UNKNOWN


async def test_a_waiter_wakes_when_its_ask_is_answered_and_only_then(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        run = await _run(journal)
        await journal.record_ask("mine", run.id, 0, FREE)
        await journal.record_ask("other", run.id, 1, FREE)
        woken = anyio.Event()
        settled = []

        async def wait() -> None:
            settled.append(await journal.wait_settled("mine"))
            woken.set()

        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            await journal.answer_ask("other", AskUserQuestionAnswer("not yours"))
            await anyio.wait_all_tasks_blocked()
            assert not woken.is_set()
            await journal.answer_ask("mine", AskUserQuestionAnswer("yours"))
            with anyio.fail_after(scaled(5)):
                await woken.wait()
        assert settled[0].answer == AskUserQuestionAnswer("yours")
        assert await journal.wait_settled("mine") == settled[0]  # settled: returns at once


async def test_a_finished_run_wakes_its_waiters_with_the_withdrawal(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        run = await _run(journal)
        await journal.record_ask("q", run.id, 0, FREE)
        with anyio.fail_after(scaled(5)):
            async with anyio.create_task_group() as group:
                results = []

                async def wait() -> None:
                    results.append(await journal.wait_settled("q"))

                group.start_soon(wait)
                await anyio.wait_all_tasks_blocked()
                await journal.finish_run(run.id)
        assert results[0].state is AskState.WITHDRAWN


async def test_closing_the_journal_wakes_its_waiters_with_an_error(journal_url: str) -> None:
    errors: list[str] = []
    with anyio.fail_after(scaled(5)):
        async with open_journal(journal_url) as journal:
            run = await _run(journal)
            await journal.record_ask("q", run.id, 0, FREE)

            async def wait() -> None:
                try:
                    await journal.wait_settled("q")
                except JournalError as error:
                    errors.append(error.code)

            async with anyio.create_task_group() as group:
                group.start_soon(wait)
                await anyio.wait_all_tasks_blocked()
                await journal._closing()  # what leaving the block does first
    assert errors == [JournalErrorCode.JOURNAL_UNAVAILABLE]


async def test_the_inbox_lists_pending_asks_of_every_daemon_with_its_liveness(
    journal_url: str,
) -> None:
    async with open_journal(journal_url) as journal:
        up = await journal.register_daemon("up", host="box-1", pid=11, agent="a")
        down = await journal.register_daemon("down", host="box-2", pid=22, agent="b")
        run_up = await journal.start_run("a", up.id)
        run_down = await journal.start_run("b", down.id)
        await journal.record_ask("up-0", run_up.id, 0, CHOICE)
        await journal.record_ask("down-0", run_down.id, 0, FREE)
        await journal.record_ask("up-1", run_up.id, 1, FREE)
        await journal.answer_ask("up-1", AskUserQuestionAnswer("done"))
        await journal.stop_daemon(down.id)

        entries = await journal.inbox()
        assert [entry.ask.id for entry in entries] == ["up-0", "down-0"]  # oldest first
        first, second = entries
        assert (first.run.id, first.daemon.name, first.daemon.host, first.daemon.pid) == (
            run_up.id,
            "up",
            "box-1",
            11,
        )
        assert first.daemon.alive and not second.daemon.alive
        assert first.ask.request == validate_request(CHOICE)
        held = await journal.answer_ask("down-0", AskUserQuestionAnswer("held for its resume"))
        assert held.won  # a question whose daemon is down still takes an answer
        assert [entry.ask.id for entry in await journal.inbox()] == ["up-0"]


async def test_the_change_feed_tells_the_changes_after_subscribing_in_order(
    journal_url: str,
) -> None:
    async with open_journal(journal_url) as journal:
        run = await _run(journal)
        earlier = await _run(journal, "earlier")
        for seq in range(30):
            await journal.record_ask(f"earlier-{seq}", earlier.id, seq, FREE)
        await journal.record_ask("before", run.id, 0, FREE)
        # 30 changes committed just before subscribing, still being relayed on PostgreSQL:
        # none of them may reach the new reader.
        await journal.finish_run(earlier.id)
        seen = []
        with anyio.fail_after(scaled(5)):
            async with journal.subscribe() as feed:
                await journal.record_ask("q1", run.id, 1, FREE)
                await journal.answer_ask("q1", AskUserQuestionAnswer("yes"))
                await journal.settle_ask("before", AskState.WITHDRAWN)
                async for event in feed:
                    seen.append((event.kind, event.ask_id, event.run_id, event.state))
                    if len(seen) == 3:
                        break
        assert seen == [
            ("created", "q1", run.id, AskState.PENDING),
            ("settled", "q1", run.id, AskState.ANSWERED),
            ("settled", "before", run.id, AskState.WITHDRAWN),
        ]


async def test_asks_are_listed_newest_first_by_state(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        run = await _run(journal)
        for seq in range(4):
            await journal.record_ask(f"q{seq}", run.id, seq, FREE)
        await journal.answer_ask("q1", AskUserQuestionAnswer("yes"))
        await journal.answer_ask("q3", AskUserQuestionAnswer("no"))
        assert [a.id for a in await journal.list_asks()] == ["q3", "q2", "q1", "q0"]
        answered = await journal.list_asks(states={AskState.ANSWERED})
        assert [a.id for a in answered] == ["q3", "q1"]
        assert [a.id for a in await journal.list_asks(limit=1)] == ["q3"]
        assert await journal.list_asks(states=set()) == []


async def test_a_purge_removes_old_settled_records_and_keeps_live_ones(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        old = await journal.register_daemon("old")
        ended = await journal.start_run("ended", old.id)
        await journal.record_ask("done", ended.id, 0, FREE)
        await journal.answer_ask("done", AskUserQuestionAnswer("yes"))
        await journal.finish_run(ended.id)
        live = await journal.register_daemon("live")
        running = await journal.start_run("running", live.id)
        await journal.record_ask("open", running.id, 0, FREE)
        await journal.record_ask("failed", running.id, 1, FREE)
        await journal.settle_ask("failed", AskState.FAILED, code="ASK_TIMEOUT")
        await journal.stop_daemon(old.id)

        kept = await journal.purge(older_than=3600)
        assert (kept.asks, kept.runs, kept.daemons) == (0, 0, 0)
        only_failed = await journal.purge(older_than=0, states={AskState.FAILED})
        assert (only_failed.asks, only_failed.runs, only_failed.daemons) == (1, 0, 0)
        report = await journal.purge(older_than=0)
        assert (report.asks, report.runs, report.daemons) == (1, 1, 1)
        assert [ask.id for ask in await journal.list_asks()] == ["open"]
        assert [daemon.id for daemon in await journal.daemons()] == [live.id]
        assert (await journal.get_run(running.id)).unfinished
        with pytest.raises(ValueError, match="pending"):
            await journal.purge(older_than=0, states={AskState.PENDING})
