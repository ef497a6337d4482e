"""Moved to the surface kit (:mod:`hotseam.providers._kit`): the names ``_conversation``
still imports from here, until it imports them from the kit (then this module goes)."""

from __future__ import annotations

from collections.abc import Sequence

from ...interaction import AskUserQuestionAnswer, AskUserQuestionRequest, QuestionAnswer
from .._kit import RECOMMENDED_SUFFIX

__all__ = ["RECOMMENDED_SUFFIX", "assemble"]


def assemble(
    request: AskUserQuestionRequest, entries: Sequence[QuestionAnswer]
) -> AskUserQuestionAnswer:
    """The answer of ``entries`` (``AskUserQuestionAnswer.of``)."""
    return AskUserQuestionAnswer.of(entries, request)
