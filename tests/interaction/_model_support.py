"""What the model's tests share: three questions of every kind, valid options, and the
checks that a request or an answer is refused with its code."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from hotseam import Agent
from hotseam.interaction import (
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ErrorCode,
    Question,
    UserInteractionError,
    check_answer,
    validate_request,
)

Option = AskUserQuestionOption
Request = AskUserQuestionRequest

DB = Question(
    "Which database?",
    "Database",
    [Option("Postgres", "pg", recommended=True), Option("SQLite")],
    allow_custom=False,
)
FEATURES = Question(
    "Which features?",
    "Features",
    [Option("Auth", "auth"), Option("Billing", "billing"), Option("Search", "search")],
    multi_select=True,
    max_selections=2,
)
NOTES = Question("Anything else?", allow_skip=True)
THREE = validate_request(Request.of([DB, FEATURES, NOTES], agent=Agent("planner", "Planner")))
FEATURES_V = THREE.questions[1]
VALID_OPTIONS = [Option("Postgres", "pg", "Server database", True), Option("SQLite")]


def features(**changes: Any) -> Question:
    """FEATURES with ``changes``."""
    return replace(FEATURES, **changes)


def invalid(request: object) -> str:
    """The message ``validate_request`` refuses ``request`` with (INVALID_REQUEST)."""
    with pytest.raises(UserInteractionError) as caught:
        validate_request(request)
    assert caught.value.code == ErrorCode.INVALID_REQUEST
    return str(caught.value)


def refused(answer: object, request: Request = THREE) -> str:
    """The message ``check_answer`` refuses ``answer`` with (INVALID_ANSWER)."""
    with pytest.raises(UserInteractionError) as caught:
        check_answer(request, answer)
    assert caught.value.code == ErrorCode.INVALID_ANSWER
    return str(caught.value)
