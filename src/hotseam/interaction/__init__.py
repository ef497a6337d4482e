"""The user-interaction seam: let an agent ask the human a question and wait for the answer.

``USER_INTERACTION`` is the seam a UI provides; :func:`ask` asks through whichever provider
is active (waiting out a hot-reload swap, and re-asking on the new provider if the old one
is replaced mid-question); :func:`ask_user_question_tool` is the model-facing tool. A
request holds one question or several (:class:`Question`,
:meth:`~hotseam.interaction.AskUserQuestionRequest.of`), and its answer one
:class:`QuestionAnswer` per question.
:func:`pending_asks` lists the open questions (never their answers) and
:func:`waiting_for_provider` lets questions wait for a provider to appear. With a
:data:`JOURNALING` (a :class:`JournalDaemon` over :func:`open_journal`), asks made inside an
agent run (:meth:`JournalDaemon.run`) are recorded, replayed when the run resumes after a
restart, and answerable from any process's inbox.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._core import Agent, lazy_exports, present_as
from . import _answer, _request
from ._answer import where as where
from ._ask import ask
from ._errors import ErrorCode, UserInteractionError
from ._journal import DEFAULT_LIVENESS_TIMEOUT as DEFAULT_LIVENESS_TIMEOUT
from ._journal import SETTLED_STATES as SETTLED_STATES
from ._journal import (
    AskRecord,
    AskState,
    DaemonRecord,
    InboxEntry,
    Journal,
    JournalError,
    JournalEvent,
    RunRecord,
    RunState,
    Settlement,
    open_journal,
)
from ._journal import JournalErrorCode as JournalErrorCode
from ._journal import RunOverview as RunOverview
from ._journal import default_journal_path as default_journal_path
from ._journal import parse_journal_url as parse_journal_url
from ._model import (
    MAX_QUESTIONS,
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    QuestionAnswer,
    SkipReason,
)
from ._pending import (
    AnsweredElsewhere,
    AskEnded,
    PendingAsk,
    answered_elsewhere,
    ask_deadline,
    ask_id,
    on_ask_ended,
    pending_asks,
    waiting_for_provider,
)
from ._provider import USER_INTERACTION, UserInteractionProvider
from ._runs import JOURNALING, AgentRun, JournalDaemon, current_run
from ._runs import journal_waits as journal_waits
from ._runs import pid_alive as pid_alive
from ._tool import ASK_USER_QUESTION_DESCRIPTION, ask_user_question_tool
from ._validate import validate_request
from ._validate_answer import check_answer, check_partial_answer, check_question_answer

if TYPE_CHECKING:
    from ._inputs import AskUserQuestionInput, AskUserQuestionOptionInput, QuestionInput

# Imported above for hotseam's own layers (the CLI, the web inbox), not public and so left out
# of __all__: where, DEFAULT_LIVENESS_TIMEOUT, SETTLED_STATES, JournalErrorCode, RunOverview,
# default_journal_path, parse_journal_url, journal_waits, pid_alive.
__all__ = [
    "ASK_USER_QUESTION_DESCRIPTION",
    "Agent",
    "AgentRun",
    "AnsweredElsewhere",
    "AskEnded",
    "AskRecord",
    "AskState",
    "AskUserQuestionAnswer",
    "AskUserQuestionInput",
    "AskUserQuestionOption",
    "AskUserQuestionOptionInput",
    "AskUserQuestionRequest",
    "DaemonRecord",
    "ErrorCode",
    "InboxEntry",
    "JOURNALING",
    "Journal",
    "JournalDaemon",
    "JournalError",
    "JournalEvent",
    "MAX_QUESTIONS",
    "PendingAsk",
    "Question",
    "QuestionAnswer",
    "QuestionInput",
    "RunRecord",
    "RunState",
    "Settlement",
    "SkipReason",
    "USER_INTERACTION",
    "UserInteractionError",
    "UserInteractionProvider",
    "answered_elsewhere",
    "ask",
    "ask_deadline",
    "ask_id",
    "ask_user_question_tool",
    "check_answer",
    "check_partial_answer",
    "check_question_answer",
    "current_run",
    "on_ask_ended",
    "open_journal",
    "pending_asks",
    "validate_request",
    "waiting_for_provider",
]

# The tool's input models (pydantic) are imported the first time one is used, here or
# by a dict parsed: ``ask()`` with a request built in code never needs them.
_INPUT_MODELS = ("AskUserQuestionInput", "AskUserQuestionOptionInput", "QuestionInput")


def _input_models() -> _answer.AnswerForms:
    from . import _inputs

    return _inputs


_request.parse_dicts_with(_input_models)
_answer.parse_dicts_with(_input_models)

present_as(__name__, globals(), [name for name in __all__ if name not in _INPUT_MODELS])

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_exports(globals(), dict.fromkeys(_INPUT_MODELS, "._inputs"))


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
