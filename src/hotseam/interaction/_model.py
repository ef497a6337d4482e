"""The request/answer model of the user-interaction seam, in one place: the request side
(:mod:`._request`: options, questions, the request), the answer side (:mod:`._answer`: one
answer per question, and the answer an ask returns) and the input models of the tool
(:mod:`._inputs`: pydantic, imported the first time one of them is used)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._core import lazy_exports
from ._answer import AskUserQuestionAnswer, QuestionAnswer
from ._request import (
    MAX_QUESTIONS,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    SkipReason,
)

if TYPE_CHECKING:
    from ._inputs import AskUserQuestionInput, AskUserQuestionOptionInput, QuestionInput

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

_INPUT_MODELS = ("AskUserQuestionInput", "AskUserQuestionOptionInput", "QuestionInput")

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_exports(globals(), dict.fromkeys(_INPUT_MODELS, "._inputs"))


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
