"""Several questions for a one-question UI: asked one after the other, the answers joined."""

from __future__ import annotations

import pytest

from hotseam.interaction import (
    Agent,
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    validate_request,
)
from hotseam.providers._kit import ask_one_at_a_time

pytestmark = pytest.mark.anyio

DB = Question("Which database?", options=[AskUserQuestionOption("pg")], id="db")
NAME = Question("Project name?", id="name")


async def test_each_question_is_its_own_request_in_order() -> None:
    """Same agent and signal; one question each; the answer has every entry, in order."""
    agent = Agent("planner")
    request = validate_request(AskUserQuestionRequest.of([DB, NAME], agent=agent))
    asked: list[AskUserQuestionRequest] = []

    async def ask(part: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        asked.append(part)
        return (
            AskUserQuestionAnswer("pg", DB.choices[0])
            if part.questions[0] is DB
            else (AskUserQuestionAnswer("hotseam"))
        )

    answer = await ask_one_at_a_time(request, ask)
    assert [part.questions for part in asked] == [(DB,), (NAME,)]
    assert all(part.agent is agent and part.signal is request.signal for part in asked)
    assert [(entry.id, entry.answer) for entry in answer.answers] == [
        ("db", "pg"),
        ("name", "hotseam"),
    ]


async def test_one_question_is_asked_as_it_is() -> None:
    """Nothing to split: the request and its answer pass through unchanged."""
    request = validate_request(AskUserQuestionRequest("Which database?", options=DB.options))
    answer = AskUserQuestionAnswer("pg", DB.choices[0])

    async def ask(part: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        assert part is request
        return answer

    assert await ask_one_at_a_time(request, ask) is answer
