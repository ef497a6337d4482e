"""The provider protocol and the USER_INTERACTION seam."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .._core import Seam
from ._errors import ErrorCode, UserInteractionError
from ._model import AskUserQuestionAnswer, AskUserQuestionRequest


@runtime_checkable
class UserInteractionProvider(Protocol):
    """A UI surface that can put a question to the human.

    ``ask`` must honour cancellation: when its task is cancelled (the caller's signal fired,
    or a reload replaced the provider) it tears its UI down and lets the cancellation
    propagate. It raises :class:`UserInteractionError` with ``ASK_CANCELLED`` when the human
    dismissed the question and ``ASK_DECLINED`` when they declined to answer.

    The seam accepts any object with an ``ask`` method (the seed's interface); one without
    :attr:`multiple_questions` takes questions one at a time. Subclass this protocol to
    inherit the default, or declare the attribute so that a type checker sees it.
    """

    @property
    def multiple_questions(self) -> bool:
        """True if the provider shows several questions at once (default ``False``): it
        then gets them whole and answers each (``AskUserQuestionAnswer.of``). Only ``True``
        counts, read at each ask, so a property may change its mind (ACP: while the client
        takes forms).
        """
        return False

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        """Ask the human and return their answer."""

    @classmethod
    def __subclasshook__(cls, other: type) -> bool:
        # The run-time check asks for ``ask`` alone, as the seed's interface does: a
        # provider written to it has no multiple_questions, and is still a provider.
        return True if callable(getattr(other, "ask", None)) else NotImplemented


def takes_several(provider: object) -> bool:
    """Whether ``provider`` gets several questions whole (the one reading of
    :attr:`~UserInteractionProvider.multiple_questions`, tolerant of ``ask`` alone)."""
    return getattr(provider, "multiple_questions", False) is True


def _no_provider(message: str) -> UserInteractionError:
    return UserInteractionError(message, ErrorCode.NO_PROVIDER)


USER_INTERACTION: Seam[UserInteractionProvider] = Seam(
    "user-interaction", UserInteractionProvider, missing=_no_provider
)
"""The seam a UI provides so that agents can ask the human."""
