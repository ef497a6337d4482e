"""The provider protocol and the USER_INTERACTION seam."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .._core import Seam
from ._errors import ErrorCode, UserInteractionError
from ._model import AskUserQuestionAnswer, AskUserQuestionRequest

__all__ = ["USER_INTERACTION", "UserInteractionProvider"]


@runtime_checkable
class UserInteractionProvider(Protocol):
    """A UI surface that can put a question to the human.

    ``ask`` must honour cancellation: when its task is cancelled (the caller's signal fired,
    or a reload replaced the provider) it tears its UI down and lets the cancellation
    propagate. It raises :class:`UserInteractionError` with ``ASK_CANCELLED`` when the human
    dismissed the question and ``ASK_DECLINED`` when they declined to answer.

    A provider that shows several questions at once says so with a class attribute,
    ``multiple_questions = True`` (not part of the protocol: a provider without it is
    asked one question at a time). It then receives requests of several questions
    (``request.questions``) and answers each (``AskUserQuestionAnswer.of``).
    """

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        """Ask the human and return their answer."""


def _no_provider(message: str) -> UserInteractionError:
    return UserInteractionError(message, ErrorCode.NO_PROVIDER)


USER_INTERACTION: Seam[UserInteractionProvider] = Seam(
    "user-interaction", UserInteractionProvider, missing=_no_provider
)
"""The seam a UI provides so that agents can ask the human."""
