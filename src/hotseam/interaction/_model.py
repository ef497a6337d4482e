"""The request/answer model of the user-interaction seam, in one place: the request side
(:mod:`._request`: options, questions, the request), the answer side (:mod:`._answer`: one
answer per question, and the answer an ask returns) and the input models of the tool
(:mod:`._inputs`: pydantic, imported the first time one of them is used)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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

    def __getattr__(name: str) -> Any:
        if name not in _INPUT_MODELS:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from . import _inputs

        value = getattr(_inputs, name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
