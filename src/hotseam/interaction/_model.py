"""The request/answer model of the user-interaction seam, in one place: the request side
(:mod:`._request`: options, questions, the request, the input models of the tool) and the
answer side (:mod:`._answer`: one answer per question, and the answer an ask returns)."""

from __future__ import annotations

from ._answer import AskUserQuestionAnswer, QuestionAnswer
from ._request import (
    MAX_QUESTIONS,
    AskUserQuestionInput,
    AskUserQuestionOption,
    AskUserQuestionOptionInput,
    AskUserQuestionRequest,
    Question,
    QuestionInput,
    SkipReason,
)

__all__ = [
    "MAX_QUESTIONS",
    "AskUserQuestionAnswer",
    "AskUserQuestionInput",
    "AskUserQuestionOption",
    "AskUserQuestionOptionInput",
    "AskUserQuestionRequest",
    "Question",
    "QuestionAnswer",
    "QuestionInput",
    "SkipReason",
]
