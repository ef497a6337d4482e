"""The user-interaction seam: let an agent ask the human a question and wait for the answer.

``USER_INTERACTION`` is the seam a UI provides; :func:`ask` asks through whichever provider
is active (waiting out a hot-reload swap, and re-asking on the new provider if the old one
is replaced mid-question); :func:`ask_user_question_tool` is the model-facing tool. A
request holds one question or several (:class:`Question`,
:meth:`~hotseam.interaction.AskUserQuestionRequest.of`), and its answer one
:class:`QuestionAnswer` per question.
:func:`pending_asks` lists the open questions (never their answers), :func:`current_ask`
is the one a provider is serving, and :func:`waiting_for_provider` lets questions wait for a
provider to appear. The ask journal (questions that outlive the process, agent runs that
resume) is ``hotseam.interaction.journal``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._core import Agent, lazy_exports, present_as
from ._ask import ask
from ._errors import ErrorCode, UserInteractionError
from ._limits import MAX_QUESTIONS, SkipReason
from ._model import (
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    QuestionAnswer,
    check_answer,
    check_partial_answer,
    check_question_answer,
    validate_request,
)
from ._model import where as where
from ._pending import (
    AnsweredElsewhere,
    AskEnded,
    PendingAsk,
    current_ask,
    on_ask_ended,
    pending_asks,
    waiting_for_provider,
)
from ._provider import USER_INTERACTION, UserInteractionProvider
from ._provider import takes_several as takes_several
from ._tool import ASK_USER_QUESTION_DESCRIPTION, ask_user_question_tool

if TYPE_CHECKING:
    from ._inputs import AskUserQuestionInput, AskUserQuestionOptionInput, QuestionInput

# Imported above for hotseam's own layers (the CLI, the web inbox), not public and so left out
# of __all__: where, takes_several.
__all__ = [
    "ASK_USER_QUESTION_DESCRIPTION",
    "Agent",
    "AnsweredElsewhere",
    "AskEnded",
    "AskUserQuestionAnswer",
    "AskUserQuestionInput",
    "AskUserQuestionOption",
    "AskUserQuestionOptionInput",
    "AskUserQuestionRequest",
    "ErrorCode",
    "MAX_QUESTIONS",
    "PendingAsk",
    "Question",
    "QuestionAnswer",
    "QuestionInput",
    "SkipReason",
    "USER_INTERACTION",
    "UserInteractionError",
    "UserInteractionProvider",
    "ask",
    "ask_user_question_tool",
    "check_answer",
    "check_partial_answer",
    "check_question_answer",
    "current_ask",
    "on_ask_ended",
    "pending_asks",
    "validate_request",
    "waiting_for_provider",
]

# The tool's input models (pydantic) are imported the first time one is used, here or
# by a dict parsed: ``ask()`` with a request built in code never needs them.
_INPUT_MODELS = ("AskUserQuestionInput", "AskUserQuestionOptionInput", "QuestionInput")

present_as(__name__, globals(), [name for name in __all__ if name not in _INPUT_MODELS])

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_exports(globals(), dict.fromkeys(_INPUT_MODELS, "._inputs"))


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
