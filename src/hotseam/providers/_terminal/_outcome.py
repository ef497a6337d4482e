"""How a question ended without an answer, as the human reads it and as the model does."""

from __future__ import annotations

import math
import time

__all__ = ["WITHDRAWN", "DismissedError", "time_left", "timeout_marker"]

WITHDRAWN = "(question withdrawn)"
"""The marker left when the asking side withdrew the question (its task was cancelled)."""


class DismissedError(Exception):
    """The human dismissed the question (a key, or the end of the input).

    ``marker`` is the one line left in the scrollback; ``message`` is what the model reads.
    """

    def __init__(self, marker: str, message: str) -> None:
        super().__init__(message)
        self.marker = marker
        self.message = message


def timeout_marker(seconds: float) -> str:
    """The marker left when the optional time limit passed."""
    return f"(no answer within {seconds:g} s; nothing was chosen)"


def time_left(deadline: float) -> int:
    """Whole seconds until ``deadline`` (``time.monotonic()`` seconds), rounded up, >= 0."""
    return max(0, math.ceil(deadline - time.monotonic()))
