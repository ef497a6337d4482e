"""UserInteractionError and its codes.

A code has one spelling in hotseam's API: a member of :class:`ErrorCode`
(``ErrorCode.ASK_TIMEOUT``), as the journal's codes are members of ``JournalErrorCode``. An
enum rather than module constants because it is one name to import and document, it lists
the codes (``list(ErrorCode)``, ``ErrorCode.__members__``), and it types a ``code``. A
``StrEnum`` member *is* its string, so the seed's vocabulary holds verbatim: ``error.code ==
"NO_PROVIDER"``, ``UserInteractionError("...", "ASK_DECLINED")`` and ``{name, code}`` on the
wire and in the journal carry the same values as before.
"""

from __future__ import annotations

import enum

from .._core import HarnessError


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


class UserInteractionError(HarnessError):
    """An ask that ended without an answer; ``code`` says why (see :class:`ErrorCode`).

    Through ``ctx.tools.execute`` it reaches the model as
    ``{"name": "UserInteractionError", "code": ..., "message": ...}``.
    """

    default_code = ErrorCode.PROVIDER_FAILED.value
    reason: object = None
    """For ``ASK_ABORTED`` by a signal: the signal's reason (any value given to ``abort``)."""
