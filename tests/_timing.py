"""One factor for every wall-clock deadline the tests set.

A deadline in a test is a guard against a hang, never a claim about speed: each is written
for an idle machine and multiplied by ``TIME_SCALE``, so a busy machine (a CI box, the
suite's own workers, ``make test-loaded``) stretches every one of them alike. Set
``HOTSEAM_TEST_TIME_SCALE`` to choose the factor.
"""

from __future__ import annotations

import os

TIME_SCALE = float(os.environ.get("HOTSEAM_TEST_TIME_SCALE", "1") or "1")


def scaled(seconds: float) -> float:
    """``seconds`` stretched by the suite's one time factor."""
    return seconds * TIME_SCALE
