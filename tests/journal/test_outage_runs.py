"""A daemon's or an inbox's start that meets a journal outage waits for it (a real
PostgreSQL server, stopped and started again).

The journal was opened — so its URL, password and schema are right — and then its server
stops (a restart, a failover) while the daemon registers or looks for the agent's run. Those
steps are tried again with back-off until the server is back, as a question's are: before,
they raised ``JOURNAL_UNAVAILABLE`` and the daemon exited 1 (a racer cut by an outage
exited 1 instead of 2, a daemon registering just then died with one line). So does a
subscription (an inbox starting): it raised, and the inbox died with a traceback.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
import pytest
import structlog
from tests._timing import scaled

from _postgres import PostgresServer
from hotseam import Context
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    Question,
    QuestionAnswer,
    _runs,
    ask,
)
from hotseam.interaction._journal import AskState, JournalError, RunState, open_journal
from hotseam.interaction.journal import JournalDaemon

T = TypeVar("T")

pytestmark = pytest.mark.anyio


async def test_a_daemon_registering_during_an_outage_waits_and_runs(
    own_postgres: PostgresServer,
) -> None:
    url = own_postgres.new_schema()
    async with open_journal(url) as journal:
        await anyio.to_thread.run_sync(own_postgres._pg_ctl, "stop", "-m", "fast")
        async with anyio.create_task_group() as tasks:

            async def back_soon() -> None:
                await anyio.sleep(1.0)
                await anyio.to_thread.run_sync(own_postgres._pg_ctl, "start")

            tasks.start_soon(back_soon)
            with anyio.fail_after(scaled(30)):
                async with JournalDaemon.open(
                    journal, name="started-in-an-outage", agent="a"
                ) as aj:
                    assert await aj.running_elsewhere("a") is None
                    async with aj.run("a") as run:
                        pass
        assert (await journal.get_run(run.id)).state is RunState.FINISHED


async def test_a_look_for_the_agents_run_during_an_outage_waits(
    own_postgres: PostgresServer,
) -> None:
    url = own_postgres.new_schema()
    async with (
        open_journal(url) as journal,
        JournalDaemon.open(journal, name="looking", agent="a") as aj,
        anyio.create_task_group() as tasks,
    ):
        await anyio.to_thread.run_sync(own_postgres._pg_ctl, "stop", "-m", "fast")

        async def back_soon() -> None:
            await anyio.sleep(1.0)
            await anyio.to_thread.run_sync(own_postgres._pg_ctl, "start")

        tasks.start_soon(back_soon)
        with anyio.fail_after(scaled(30)):
            assert await aj.running_elsewhere("a") is None


async def test_a_subscription_made_during_an_outage_waits_and_hears_changes(
    own_postgres: PostgresServer,
) -> None:
    """An inbox starting (it subscribes, then lists) while the server restarts: it waits
    for it rather than failing with a traceback, then hears what is committed."""
    url = own_postgres.new_schema()
    async with (
        open_journal(url) as journal,
        open_journal(url) as writer,
        anyio.create_task_group() as tasks,
    ):
        await anyio.to_thread.run_sync(own_postgres._pg_ctl, "stop", "-m", "fast")

        async def back_soon() -> None:
            await anyio.sleep(1.0)
            await anyio.to_thread.run_sync(own_postgres._pg_ctl, "start")

        tasks.start_soon(back_soon)
        with anyio.fail_after(scaled(30)):
            async with journal.subscribe() as feed:
                daemon = await _reached(lambda: writer.register_daemon("writer", agent="a"))
                await _reached(lambda: writer.start_run("a", daemon.id))
                run = await writer.unfinished_run("a")
                assert run is not None
                await writer.finish_run(run.id)
                async for _event in feed:
                    break  # a resync (the listener came back) or the change itself


async def _reached(call: Callable[[], Awaitable[T]]) -> T:
    """The test's own writes, tried again until the restarted server takes them."""
    while True:
        try:
            return await call()
        except JournalError as error:
            if error.code != "JOURNAL_UNAVAILABLE":
                raise
            await anyio.sleep(0.1)


class _StopsTheServerAfterTheFirst:
    """Shows one question at a time: the first is answered as the server stops, the second
    is asked (during the outage) and answered once the server is back."""

    def __init__(self, server: PostgresServer) -> None:
        self.server = server
        self.asked: list[str] = []

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        (item,) = request.questions
        self.asked.append(str(item.id))
        if len(self.asked) == 1:
            await anyio.to_thread.run_sync(self.server._pg_ctl, "stop", "-m", "fast")
        else:
            await anyio.to_thread.run_sync(self.server._pg_ctl, "start")
        entry = QuestionAnswer.chosen(item, custom=f"{item.id} answered")
        return AskUserQuestionAnswer.of([entry], request)


async def test_an_answer_to_one_question_of_several_in_an_outage_does_not_hold_the_next(
    own_postgres: PostgresServer,
) -> None:
    """The server stops as the first of two questions shown one at a time is answered:
    keeping that answer fails, which is said at warning, the second question is asked at
    once all the same, and the whole answer is recorded once the server is back."""
    url = own_postgres.new_schema()
    two = AskUserQuestionRequest.of(
        [Question("Which region?", id="region"), Question("Release notes?", id="notes")]
    )
    provider = _StopsTheServerAfterTheFirst(own_postgres)
    context = Context("daemon")
    with structlog.testing.capture_logs() as logs, anyio.fail_after(scaled(60)):
        async with (
            open_journal(url) as journal,
            JournalDaemon.open(journal, name="daemon") as journaling,
            context.scope("ui") as scope,
        ):
            scope.provide(USER_INTERACTION, provider)
            async with journaling.run("deployer") as run:
                answer = await ask(two, context=context)
            (recorded,) = await journal.run_asks(run.id)
    assert provider.asked == ["region", "notes"]
    assert [(e.id, e.answer) for e in answer.answers] == [
        ("region", "region answered"),
        ("notes", "notes answered"),
    ]
    assert recorded.state is AskState.ANSWERED and recorded.answer == answer
    (lost,) = [e for e in logs if e["event"] == "ask.partial_not_recorded"]
    assert lost["log_level"] == "warning" and lost["answered"] == 1
    assert "region answered" not in str(lost)  # what was answered is not logged


async def test_a_daemon_stopping_in_an_outage_records_its_stop_once_the_server_is_back(
    own_postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server stops just before the daemon does: its stop is tried again until the server
    is back, so the next daemon (in this process too: the same pid) takes its runs over at
    once instead of waiting for its heartbeat to age."""
    monkeypatch.setattr(_runs, "STOP_RETRY_FOR", scaled(30))
    url = own_postgres.new_schema()
    async with open_journal(url) as journal, anyio.create_task_group() as tasks:
        with anyio.fail_after(scaled(40)):
            async with JournalDaemon.open(journal, name="stopping", agent="a") as aj:
                daemon_id = aj.daemon.id
                await anyio.to_thread.run_sync(own_postgres._pg_ctl, "stop", "-m", "fast")

                async def back_soon() -> None:
                    await anyio.sleep(1.0)
                    await anyio.to_thread.run_sync(own_postgres._pg_ctl, "start")

                tasks.start_soon(back_soon)
        stopped = await journal.get_daemon(daemon_id)
    assert stopped.stopped_at is not None and not stopped.alive


async def test_a_stop_the_journal_never_takes_is_said_and_does_not_hang_the_exit(
    own_postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server stays down: the daemon's exit gives up after the bound and says so at
    warning (before, the failure was swallowed without a word)."""
    monkeypatch.setattr(_runs, "STOP_RETRY_FOR", 0.5)
    url = own_postgres.new_schema()
    with structlog.testing.capture_logs() as logs, anyio.fail_after(scaled(30)):
        async with (
            open_journal(url) as journal,
            JournalDaemon.open(journal, name="stopping", agent="a"),
        ):
            await anyio.to_thread.run_sync(own_postgres._pg_ctl, "stop", "-m", "fast")
    (said,) = [e for e in logs if e["event"] == "journal.stop_not_recorded"]
    assert said["log_level"] == "warning" and "liveness timeout" in said["summary"]


async def test_the_next_daemon_of_this_process_takes_over_a_run_whose_stop_went_unrecorded(
    own_postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server is down as a daemon closes, and for longer than its stop is tried: the
    stop is never recorded, and the daemon's record looks alive (its pid is this process's,
    its heartbeat fresh). A daemon of the same process started next is not told the run
    belongs to another: a daemon of this process no longer open is gone, and its run is
    taken over at once (before, every start failed RUN_CLAIMED until the heartbeat aged
    past the liveness timeout)."""
    monkeypatch.setattr(_runs, "STOP_RETRY_FOR", 0.5)
    url = own_postgres.new_schema()
    with anyio.fail_after(scaled(60)):
        async with open_journal(url) as journal:
            with structlog.testing.capture_logs() as logs:
                async with JournalDaemon.open(journal, name="first") as first:
                    started = await first.persist(
                        "a start", lambda: first.journal.start_run("deployer", first.daemon.id)
                    )
                    await anyio.to_thread.run_sync(own_postgres._pg_ctl, "stop", "-m", "fast")
            assert [e for e in logs if e["event"] == "journal.stop_not_recorded"]
            await anyio.to_thread.run_sync(own_postgres._pg_ctl, "start")
            owner = await _reached(lambda: journal.get_daemon(first.daemon.id))
            assert owner.alive  # as the next daemon finds it
            async with JournalDaemon.open(journal, name="second") as second:
                assert await second.running_elsewhere("deployer") is None
                async with second.run("deployer") as run:
                    assert run.record.id == started.id  # resumed, not refused
            assert not (await journal.get_daemon(first.daemon.id)).alive


class _AnswersAsTheServerStops:
    """Answers the question just after stopping the server: the answer cannot be recorded
    yet."""

    def __init__(self, server: PostgresServer) -> None:
        self.server = server
        self.asked = 0

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        self.asked += 1
        if self.asked == 1:
            await anyio.to_thread.run_sync(self.server._pg_ctl, "stop", "-m", "fast")
        return AskUserQuestionAnswer("yes")


async def test_an_answer_waiting_for_the_journal_as_the_daemon_stops_is_recorded_for_the_resume(
    own_postgres: PostgresServer,
) -> None:
    """The human answers, the server is down, and the daemon stops (its agent cancelled)
    while the answer waits to be recorded. The stop gives the answer the time it gives its
    own mark: once the server is back the answer is recorded, and the resumed run replays
    it instead of asking the human again (before, it was dropped at once:
    ``ask.answer_not_recorded``)."""
    url = own_postgres.new_schema()
    provider = _AnswersAsTheServerStops(own_postgres)
    context = Context("daemon")
    with structlog.testing.capture_logs() as logs, anyio.fail_after(scaled(60)):
        async with open_journal(url) as journal:
            async with (
                JournalDaemon.open(journal, name="first") as first,
                context.scope("ui") as scope,
            ):
                scope.provide(USER_INTERACTION, provider)
                async with anyio.create_task_group() as tasks:

                    async def agent() -> None:
                        async with first.run("deployer"):
                            await ask(
                                AskUserQuestionRequest.of([Question("Deploy now?")]),
                                context=context,
                            )

                    async def stop_then_restart_the_server() -> None:
                        given = "the answer to question 1, given and not yet recorded"
                        # What the daemon waits for, as `hotseam status` shows it: nothing
                        # to await in this process.
                        while given not in ((first.waits() or {}).get("waiting") or []):  # noqa: ASYNC110
                            await anyio.sleep(0.02)
                        tasks.cancel_scope.cancel()  # the daemon stops, the answer unrecorded
                        with anyio.CancelScope(shield=True):
                            await anyio.sleep(0.5)
                            await anyio.to_thread.run_sync(own_postgres._pg_ctl, "start")

                    tasks.start_soon(agent)
                    tasks.start_soon(stop_then_restart_the_server)
            async with (
                JournalDaemon.open(journal, name="second") as second,
                context.scope("ui") as scope,
            ):
                scope.provide(USER_INTERACTION, provider)
                async with second.run("deployer"):
                    answer = await ask(
                        AskUserQuestionRequest.of([Question("Deploy now?")]), context=context
                    )
    assert answer.answers[0].answer == "yes"
    assert provider.asked == 1  # replayed, not asked again
    assert not [e for e in logs if e["event"] == "ask.answer_not_recorded"]
