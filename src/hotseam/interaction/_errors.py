"""UserInteractionError and its codes."""

from __future__ import annotations

import enum

from .._core import HarnessError

__all__ = [
    "ASK_ABORTED",
    "ASK_CANCELLED",
    "ASK_DECLINED",
    "ASK_TIMEOUT",
    "INVALID_ANSWER",
    "INVALID_REQUEST",
    "NO_PROVIDER",
    "PROVIDER_FAILED",
    "ErrorCode",
    "UserInteractionError",
]


class ErrorCode(enum.StrEnum):
    """Why an ask did not produce an answer; the value is the wire ``code``."""

    NO_PROVIDER = "NO_PROVIDER"
    """No user-interaction provider is active (or the swap in progress ended without one)."""
    ASK_ABORTED = "ASK_ABORTED"
    """The caller's signal fired, or the provider was disposed with nothing to take over."""
    ASK_CANCELLED = "ASK_CANCELLED"
    """The human dismissed the question in the UI, or the client side cancelled it."""
    ASK_DECLINED = "ASK_DECLINED"
    """The human explicitly declined to answer."""
    ASK_TIMEOUT = "ASK_TIMEOUT"
    """An optional time limit passed; nothing was answered on the human's behalf."""
    INVALID_REQUEST = "INVALID_REQUEST"
    """The request broke a rule (blank question, duplicate option...); nothing was asked."""
    INVALID_ANSWER = "INVALID_ANSWER"
    """The provider returned an answer that does not fit the request."""
    PROVIDER_FAILED = "PROVIDER_FAILED"
    """The provider raised an unexpected error (the original is the cause)."""


NO_PROVIDER = ErrorCode.NO_PROVIDER.value
ASK_ABORTED = ErrorCode.ASK_ABORTED.value
ASK_CANCELLED = ErrorCode.ASK_CANCELLED.value
ASK_DECLINED = ErrorCode.ASK_DECLINED.value
ASK_TIMEOUT = ErrorCode.ASK_TIMEOUT.value
INVALID_REQUEST = ErrorCode.INVALID_REQUEST.value
INVALID_ANSWER = ErrorCode.INVALID_ANSWER.value
PROVIDER_FAILED = ErrorCode.PROVIDER_FAILED.value


class UserInteractionError(HarnessError):
    """An ask that ended without an answer; ``code`` says why (see :class:`ErrorCode`).

    Through ``ctx.tools.execute`` it reaches the model as
    ``{"name": "UserInteractionError", "code": ..., "message": ...}``.
    """

    default_code = PROVIDER_FAILED
    reason: object = None
    """For ``ASK_ABORTED`` by a signal: the signal's reason (any value given to ``abort``)."""
