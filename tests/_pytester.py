"""A pytest run in a fresh process, as a user's project starts one: the tests of the pytest
plugin, the testing kit and the suite's own timing run their subject this way."""

from __future__ import annotations

import pytest


def run_pytest(
    pytester: pytest.Pytester, *args: str, hypothesis: bool = False, timeout: float | None = None
) -> pytest.RunResult:
    """``pytest ARGS`` in ``pytester``'s folder, without the cache plugin, and without
    Hypothesis's plugin unless the run's tests use Hypothesis: importing it is half of a
    run's start-up CPU (1.1 of 2.2 CPU-seconds on the 2-core reference machine), and the
    suite makes about 30 such runs."""
    options = ["-p", "no:cacheprovider"]
    if not hypothesis:
        options += ["-p", "no:hypothesispytest"]
    return pytester.runpytest_subprocess(*args, *options, timeout=timeout)
