"""Agent runs whose SQLite journal's disk is full (a real 2 MiB tmpfs, filled to the last
page): an ask waits for the journal, its signal ends that wait, what waits is listed for
``hotseam status``, and a stop during the wait for the run's end says the run will resume.

The same faults under a real ``hotseam run`` (and PostgreSQL stopped) are in
tests/journal/test_faults.py.
"""

from __future__ import annotations

import errno
import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
import structlog
from tests._timing import scaled

from hotseam import AbortController, Context
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionRequest,
    ErrorCode,
    UserInteractionError,
    ask,
)
from hotseam.interaction._journal import AskState, Journal, RunState, open_journal
from hotseam.interaction._runs import journal_waits
from hotseam.interaction.journal import JOURNALING, JournalDaemon
from hotseam.providers.scripted import ScriptedProvider

pytestmark = pytest.mark.anyio

QUESTION = AskUserQuestionRequest("Deploy now?")


@pytest.fixture
async def journal(small_disk: Path) -> AsyncIterator[Journal]:
    async with open_journal(small_disk / "journal.sqlite3") as opened:
        yield opened


class Full:
    """The disk filled by a file, to the last page, until :meth:`free`."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "filler"
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            for size in (65536, 4096, 512):
                while True:
                    try:
                        os.write(fd, b"\0" * size)
                    except OSError as error:
                        assert error.errno == errno.ENOSPC, error
                        break
        finally:
            os.close(fd)

    def free(self) -> None:
        self.path.unlink()


async def _until_waiting(what: str) -> dict[str, object]:
    """Until :func:`journal_waits` lists something containing ``what``."""
    with anyio.fail_after(scaled(10)):
        while True:
            for wait in journal_waits():
                if any(what in item for item in wait["waiting"]):  # type: ignore[attr-defined]
                    return wait
            await anyio.sleep(0.01)


async def test_an_ask_waits_for_a_full_disk_and_its_signal_ends_the_wait(
    journal: Journal, small_disk: Path
) -> None:
    context = Context("daemon")
    provider = ScriptedProvider(["yes", "no"])
    async with (
        JournalDaemon.open(journal, name="daemon") as journaling,
        context.scope("ui") as scope,
    ):
        scope.provide(USER_INTERACTION, provider)
        scope.provide(JOURNALING, journaling)
        async with journaling.run("deployer") as run:
            full = Full(small_disk)
            controller = AbortController()
            outcome: list[object] = []

            async def asking() -> None:
                try:
                    outcome.append(
                        await ask(QUESTION.with_signal(controller.signal), context=context)
                    )
                except UserInteractionError as error:
                    outcome.append(error.code)

            with structlog.testing.capture_logs() as logs:
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(asking)
                    wait = await _until_waiting("question 1 of run")
                    assert wait["url"] == journal.url
                    assert outcome == []  # not failed: waiting
                    controller.abort("the agent moved on")
            assert outcome == [ErrorCode.ASK_ABORTED]
            assert provider.requests == []  # never put to anyone
            assert await journal.run_asks(run.id) == []  # and never recorded
            unreachable = [log for log in logs if log["event"] == "journal.unreachable"]
            assert [log["log_level"] for log in unreachable] == ["error"]
            # Room again: the next ask is recorded and answered.
            full.free()
            with anyio.fail_after(scaled(10)):
                answer = await ask(QUESTION, context=context)
            assert answer.answer == "yes"
            (record,) = await journal.run_asks(run.id)
            assert record.state is AskState.ANSWERED
            assert journal_waits() == []


async def test_the_runs_end_waits_for_room_and_a_stop_meanwhile_says_it_resumes(
    journal: Journal, small_disk: Path
) -> None:
    async with JournalDaemon.open(journal, name="daemon") as journaling:
        # The run's end waits for the journal, and is recorded once there is room.
        with anyio.fail_after(scaled(10)):
            async with anyio.create_task_group() as tasks:
                full: list[Full] = []

                async def free_later() -> None:
                    await _until_waiting("the end of run")
                    full[0].free()

                async with journaling.run("deployer") as run:
                    full.append(Full(small_disk))
                    tasks.start_soon(free_later)
        assert (await journal.get_run(run.id)).state is RunState.FINISHED
        # Stopped while the end waits: said at error level; the run is left to resume.
        with structlog.testing.capture_logs() as logs, anyio.CancelScope() as stop:
            async with anyio.create_task_group() as tasks:

                async def stop_when_waiting() -> None:
                    await _until_waiting("the end of run")
                    stop.cancel()

                async with journaling.run("deployer") as second:
                    filled = Full(small_disk)
                    tasks.start_soon(stop_when_waiting)
        filled.free()
        assert (await journal.get_run(second.id)).state is RunState.RUNNING
        (said,) = [log for log in logs if log["event"] == "run.not_finished"]
        assert said["log_level"] == "error"
        assert "resumes it" in said["summary"]
