"""The provider contract: every case against every surface (``conftest.SURFACES``), on
asyncio and trio where the provider is backend-neutral.

A question answered is the answer the human gave, returned once; one the agent stops
waiting for (its signal, or its task cancelled) is withdrawn from the surface, and an
answer given to it after that reaches no one, not even the same question asked afresh;
one waiting when its provider's generation is disposed (a real reload: ``_generations``)
is asked again on the next generation and answered once, and the answers an ask of
several already has are kept; what the human answers is in no log line above debug
(``ask.answer_text`` is the one debug line that holds it); and a surface that shows one
question at a time still answers an ask of several.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog

from hotseam import AbortController
from hotseam.interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ErrorCode,
    Question,
    QuestionAnswer,
    UserInteractionError,
)

from ._generations import generations
from ._surface import Choose, Opener, Reply, Shown, Surface, Type, asking, shown_while

pytestmark = pytest.mark.anyio

POSTGRES = AskUserQuestionOption("Postgres", "pg", "Server database", recommended=True)
SQLITE = AskUserQuestionOption("SQLite", description="One file, zero setup")
DUCKDB = AskUserQuestionOption("DuckDB")
DB = AskUserQuestionRequest("Which database?", header="Storage", options=(POSTGRES, SQLITE, DUCKDB))
EUROPE = AskUserQuestionOption("Europe", "eu")
AMERICA = AskUserQuestionOption("America", "us")
DB_QUESTION = Question("Which database?", header="Storage", options=DB.options, id="db")
REGION = Question("Which region?", header="Region", options=(EUROPE, AMERICA), id="region")
NOTES = Question("Anything else?", header="Notes", id="notes")
STACK = AskUserQuestionRequest.of([DB_QUESTION, REGION, NOTES])
CHOICES = AskUserQuestionRequest.of([DB_QUESTION, REGION])
SECRET = "Zanzibar-7f3a9c-my-bank-pin"


async def _answered_once(
    surface: Surface, request: AskUserQuestionRequest, replies: Sequence[Reply]
) -> tuple[AskUserQuestionAnswer, list[Shown]]:
    """Ask ``request``; the human answers each question shown, in turn, with ``replies``
    (in question order); the ask's answer and what was shown. Nothing else is shown."""
    shown: list[Shown] = []
    given = 0
    async with anyio.create_task_group() as tasks:
        pending = asking(surface, request, tasks)
        while given < len(replies):
            shown.append(await shown_while(surface, pending))
            count = _count(shown[-1], request)
            await surface.answer(shown[-1], replies[given : given + count])
            given += count
        outcome = await pending.result()
    assert isinstance(outcome, AskUserQuestionAnswer), outcome
    return outcome, shown


def _count(shown: Shown, request: AskUserQuestionRequest) -> int:
    """How many questions ``shown`` shows: all of them, or one at a time."""
    return len(request.questions) if shown.count is None else shown.count


async def _withdrawn_by_the_agent(surface: Surface, request: AskUserQuestionRequest) -> Shown:
    """Ask, see it shown, then stop waiting (the agent's signal): ASK_ABORTED, and the
    surface shows it withdrawn."""
    controller = AbortController()
    asked = AskUserQuestionRequest.of(request.questions, signal=controller.signal)
    async with anyio.create_task_group() as tasks:
        pending = asking(surface, asked, tasks)
        shown = await shown_while(surface, pending)
        controller.abort("the agent moved on")
        outcome = await pending.result()
    assert isinstance(outcome, UserInteractionError), outcome
    assert outcome.code == ErrorCode.ASK_ABORTED
    await surface.withdrawn(shown)
    return shown


async def _withdrawn_by_cancelling(surface: Surface, request: AskUserQuestionRequest) -> Shown:
    """Ask, see it shown, then cancel the asking task (the agent stops): the surface shows
    the question withdrawn."""
    async with anyio.create_task_group() as tasks:
        pending = asking(surface, request, tasks)
        shown = await shown_while(surface, pending)
        tasks.cancel_scope.cancel()
    assert pending.outcome is None  # cancelled, not ended
    await surface.withdrawn(shown)
    return shown


async def test_a_question_answered_is_returned_once_with_its_option(
    surface: Opener, tmp_path: Path
) -> None:
    """The option the human picked, its model value as the answer; the ask returns once
    and nothing else is shown."""
    async with surface() as s, generations(s, tmp_path / "ui"):
        answer, shown = await _answered_once(s, DB, [Choose(1)])
        assert answer == AskUserQuestionAnswer("SQLite", SQLITE)
        assert len(shown) == 1
        answer, _ = await _answered_once(s, DB, [Choose(0)])  # the surface serves on
        assert answer == AskUserQuestionAnswer("pg", POSTGRES)


async def test_a_typed_answer_is_returned_once_without_an_option(
    surface: Opener, tmp_path: Path
) -> None:
    """The human's own text is the answer, with no option."""
    async with surface() as s, generations(s, tmp_path / "ui"):
        answer, _ = await _answered_once(s, DB, [Type("MySQL 8")])
        assert answer == AskUserQuestionAnswer("MySQL 8")


async def test_several_questions_answered_are_returned_once_in_question_order(
    surface: Opener, tmp_path: Path
) -> None:
    """An ask of several questions: each answer with its option, in question order."""
    async with surface() as s, generations(s, tmp_path / "ui"):
        answer, _ = await _answered_once(s, STACK, [Choose(1), Choose(0), Type("Ship it Friday")])
        assert answer.answers == (
            QuestionAnswer("db", "SQLite", (SQLITE,)),
            QuestionAnswer("region", "eu", (EUROPE,)),
            QuestionAnswer("notes", "Ship it Friday", custom="Ship it Friday"),
        )


async def test_a_surface_of_one_question_at_a_time_answers_an_ask_of_several(
    surface: Opener, tmp_path: Path
) -> None:
    """Several questions of choices: a surface that shows one question at a time shows
    each in turn (the one-at-a-time split), the others show them together; either way
    the ask gets every answer, once, in question order."""
    async with surface() as s, generations(s, tmp_path / "ui"):
        answer, shown = await _answered_once(s, CHOICES, [Choose(2), Choose(1)])
        assert answer.answers == (
            QuestionAnswer("db", "DuckDB", (DUCKDB,)),
            QuestionAnswer("region", "us", (AMERICA,)),
        )
        assert [_count(item, CHOICES) for item in shown] == (
            [1, 1] if getattr(s, "one_at_a_time", False) else [2]
        )


async def test_a_question_the_agent_stops_waiting_for_is_withdrawn_from_the_surface(
    surface: Opener, tmp_path: Path
) -> None:
    """The agent's signal fires: ASK_ABORTED, and the surface shows the question withdrawn
    (its client is told); the next question is shown and answered as usual."""
    async with surface() as s, generations(s, tmp_path / "ui"):
        await _withdrawn_by_the_agent(s, DB)
        answer, _ = await _answered_once(s, DB, [Choose(2)])
        assert answer == AskUserQuestionAnswer("DuckDB", DUCKDB)


async def test_a_late_answer_to_a_withdrawn_question_reaches_no_one(
    surface: Opener, tmp_path: Path
) -> None:
    """The human answers the withdrawn question anyway: it is not the answer of the ask
    that was withdrawn, nor of the same question asked afresh."""
    async with surface() as s, generations(s, tmp_path / "ui"):
        withdrawn = await _withdrawn_by_the_agent(s, DB)
        await s.answer_late(withdrawn, [Choose(1)])
        answer, shown = await _answered_once(s, DB, [Choose(2)])
        assert answer == AskUserQuestionAnswer("DuckDB", DUCKDB)
        assert shown[0] is not withdrawn


async def test_a_late_answer_is_not_the_answer_of_the_same_question_asked_afresh(
    surface: Opener, tmp_path: Path
) -> None:
    """The agent stopped waiting (its task cancelled), then asks the same question anew;
    while that one is shown, the human answers the withdrawn one: the new ask's answer is
    the one the human gives it, not the late one (only a reload's re-ask takes over a
    withdrawn question)."""
    async with surface() as s, generations(s, tmp_path / "ui"):
        withdrawn = await _withdrawn_by_cancelling(s, DB)
        async with anyio.create_task_group() as tasks:
            pending = asking(s, DB, tasks)
            fresh = await shown_while(s, pending)
            await s.answer_late(withdrawn, [Choose(1)])
            if not pending.done.is_set():
                await s.answer(fresh, [Choose(2)])
            outcome = await pending.result()
        assert outcome == AskUserQuestionAnswer("DuckDB", DUCKDB)


async def test_a_question_waiting_when_its_generation_is_disposed_is_asked_again_once(
    surface: Opener, tmp_path: Path
) -> None:
    """A reload disposes the generation showing the question: it is withdrawn there,
    asked again on the new generation, and the human's answer there is the answer, once."""
    async with surface() as s, generations(s, tmp_path / "ui") as reloads:
        async with anyio.create_task_group() as tasks:
            pending = asking(s, DB, tasks)
            first = await shown_while(s, pending)
            assert first.generation == 1
            await reloads.reload()
            await s.withdrawn(first)
            again = await shown_while(s, pending)
            assert again.generation == 2
            await s.answer(again, [Choose(1)])
            outcome = await pending.result()
        assert outcome == AskUserQuestionAnswer("SQLite", SQLITE)
        answer, _ = await _answered_once(s, DB, [Choose(0)])  # the new generation serves on
        assert answer == AskUserQuestionAnswer("pg", POSTGRES)


async def test_a_reload_in_the_middle_of_an_ask_of_several_keeps_the_answers_given(
    surface: Opener, tmp_path: Path
) -> None:
    """Several questions: on a surface of one question at a time, the first is answered,
    a reload disposes the generation showing the second, and only the second is asked
    again; a surface that shows them together shows them all again. Either way the ask
    gets each answer once."""
    async with surface() as s, generations(s, tmp_path / "ui") as reloads:
        async with anyio.create_task_group() as tasks:
            pending = asking(s, CHOICES, tasks)
            showing = await shown_while(s, pending)
            rest: list[Reply] = [Choose(2), Choose(1)]
            if _count(showing, CHOICES) == 1:
                await s.answer(showing, rest[:1])
                rest = rest[1:]
                showing = await shown_while(s, pending)
            await reloads.reload()
            await s.withdrawn(showing)
            again = await shown_while(s, pending)
            assert (again.generation, _count(again, CHOICES)) == (2, len(rest))
            await s.answer(again, rest)
            outcome = await pending.result()
        assert isinstance(outcome, AskUserQuestionAnswer), outcome
        assert outcome.answers == (
            QuestionAnswer("db", "DuckDB", (DUCKDB,)),
            QuestionAnswer("region", "us", (AMERICA,)),
        )


def _leaks(
    events: Sequence[Mapping[str, Any]], records: Sequence[logging.LogRecord]
) -> list[object]:
    """The log lines above debug (structlog's, and the standard library's: the SDKs')
    that contain the secret."""
    leaks: list[object] = [
        event
        for event in events
        if event.get("log_level") not in ("debug", "notset") and SECRET in repr(event)
    ]
    leaks += [
        record.getMessage()
        for record in records
        if record.levelno > logging.DEBUG and SECRET in f"{record.getMessage()}{record.__dict__}"
    ]
    return leaks


async def test_the_answer_text_is_in_no_log_line_above_debug(
    surface: Opener, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The human types a secret, as the answer of one question and of one of several: the
    asks return it, and no log line above debug holds it."""
    caplog.set_level(logging.DEBUG)
    with structlog.testing.capture_logs() as events:
        async with surface() as s, generations(s, tmp_path / "ui"):
            answer, _ = await _answered_once(s, DB, [Type(SECRET)])
            assert answer == AskUserQuestionAnswer(SECRET)
            answer, _ = await _answered_once(s, STACK, [Choose(0), Choose(1), Type(SECRET)])
            assert answer.answers[2].custom == SECRET
    assert [event for event in events if event["event"] == "ask.answered"]
    assert _leaks(events, caplog.records) == []


async def test_the_answer_text_is_in_no_log_line_when_asked_again_after_a_reload(
    surface: Opener, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A question withdrawn by a reload and answered with a secret on the next generation
    (what the surfaces log of a withdrawal and a re-ask): no log line above debug holds
    it."""
    caplog.set_level(logging.DEBUG)
    with structlog.testing.capture_logs() as events:
        async with surface() as s, generations(s, tmp_path / "ui") as reloads:
            async with anyio.create_task_group() as tasks:
                pending = asking(s, STACK, tasks)
                first = await shown_while(s, pending)
                await reloads.reload()
                await s.withdrawn(first)
                again = await shown_while(s, pending)
                await s.answer(again, [Choose(0), Choose(1), Type(SECRET)])
                outcome = await pending.result()
            assert isinstance(outcome, AskUserQuestionAnswer), outcome
            assert outcome.answers[2].custom == SECRET
    assert [event for event in events if event["event"] == "ask.migrated"]
    assert _leaks(events, caplog.records) == []
