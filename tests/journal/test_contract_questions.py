"""The journal's contract for asks of several questions (#24): the whole request and its
whole answer round-trip through memory, SQLite and PostgreSQL, on asyncio and trio; the
digest covers every question; a one-question ask keeps the stored form it always had."""

from __future__ import annotations

import json

import pytest

from hotseam import Agent
from hotseam.interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    QuestionAnswer,
    check_answer,
    validate_request,
)
from hotseam.interaction._journal import AskState, Journal, RunRecord, open_journal

pytestmark = pytest.mark.anyio

Option = AskUserQuestionOption
STACK = validate_request(
    AskUserQuestionRequest.of(
        [
            Question("Which database?", "Database", [Option("Postgres", "pg"), Option("SQLite")]),
            Question(
                "Which features?",
                "Features",
                [Option("Auth", "auth", recommended=True), Option("Billing"), Option("Search")],
                multi_select=True,
                min_selections=0,
                max_selections=2,
                id="features",
            ),
            Question("Anything else?", allow_skip=True, id="notes"),
        ],
        agent=Agent("planner", "Planner"),
    )
)
ANSWER = check_answer(
    STACK,
    AskUserQuestionAnswer.of(
        [
            QuestionAnswer.chosen(STACK.questions[0], ["pg"]),
            QuestionAnswer.chosen(STACK.questions[1], ["auth"], custom="Dark mode"),
            QuestionAnswer.skip(STACK.questions[2], "dismissed"),
        ]
    ),
)


async def _run(journal: Journal) -> RunRecord:
    daemon = await journal.register_daemon("daemon-of-planner", agent="planner")
    return await journal.start_run("planner", daemon.id)


async def test_an_ask_of_several_questions_round_trips(journal_url: str) -> None:
    """Recorded and answered: what comes back equals what went in, on every engine."""
    async with open_journal(journal_url) as journal:
        run = await _run(journal)
        recorded = await journal.record_ask("stack", run.id, 0, STACK)
        assert recorded.request == STACK
        assert [item.id for item in recorded.request.questions] == ["q1", "features", "notes"]
        (waiting,) = await journal.inbox()  # what a fleet inbox reads
        assert waiting.ask.request == STACK
        settlement = await journal.answer_ask("stack", ANSWER, by="inbox")
        assert settlement.won
        stored = await journal.get_ask("stack")
        assert stored.state is AskState.ANSWERED
        assert stored.answer == ANSWER
        assert stored.answer is not None
        assert [entry.skipped for entry in stored.answer.answers] == [None, None, "dismissed"]
        assert stored.answer.answers[1].values == ("auth", "Dark mode")
        assert check_answer(STACK, stored.answer) == ANSWER  # a replay gives it back as is


async def test_the_digest_covers_every_question(journal_url: str) -> None:
    """A resumed run replays only the same questions: the third changed is another ask."""
    changed = validate_request(
        AskUserQuestionRequest.of(
            [*STACK.questions[:2], Question("Anything more?", allow_skip=True, id="notes")]
        )
    )
    async with open_journal(journal_url) as journal:
        run = await _run(journal)
        first = await journal.record_ask("a", run.id, 0, STACK)
        second = await journal.record_ask("b", run.id, 1, changed)
        assert first.digest != second.digest


async def test_a_one_question_ask_is_stored_as_before(journal_url: str) -> None:
    """No `questions` in the stored request of the seed's shape, nor `answers` in its
    answer: journals written before #24 and after read the same."""
    one = AskUserQuestionRequest("Deploy now?", options=[Option("Yes"), Option("No")])
    async with open_journal(journal_url) as journal:
        run = await _run(journal)
        recorded = await journal.record_ask("one", run.id, 0, one)
        assert "questions" not in recorded.request.to_dict()
        await journal.answer_ask("one", AskUserQuestionAnswer("Yes", Option("Yes")))
        stored = await journal.get_ask("one")
        assert stored.answer is not None
        assert json.loads(json.dumps(stored.answer.to_dict())) == {
            "answer": "Yes",
            "option": {"label": "Yes"},
        }
