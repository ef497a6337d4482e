"""No test is orphaned by the split of the suite: whatever markers a test carries, `make
test` or `make test-stress` selects it, and CI (.ci/run) runs both; the stress target runs
the costly property tests with more examples than `make test`."""

from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path

from _pytest.mark.expression import Expression
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]


def _recipe(target: str) -> tuple[list[str], list[str]]:
    """The prerequisites of a Makefile target and the lines of its recipe."""
    lines = (ROOT / "Makefile").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{target}:"))
    prerequisites = lines[start].split(":", 1)[1].split()
    recipe = list(itertools.takewhile(lambda line: line.startswith("\t"), lines[start + 1 :]))
    return prerequisites, recipe


def _pytest_args(target: str) -> list[str]:
    """The arguments of the one pytest command of a target's recipe."""
    (command,) = [line for line in _recipe(target)[1] if "$(PYTEST)" in line]
    return shlex.split(command.split("$(PYTEST)", 1)[1])


def _marker_expression(args: list[str]) -> str:
    return args[args.index("-m") + 1]


def test_every_combination_of_markers_is_run_by_make_test_or_make_test_stress() -> None:
    quick = _marker_expression(_pytest_args("unit"))
    stress = _marker_expression(_pytest_args("test-stress"))
    assert "$(MAKE) --no-print-directory unit" in "\n".join(_recipe("test")[1])
    names = sorted(set(re.findall(r"\w+", quick + " " + stress)) - {"and", "or", "not"})
    assert {"stress", "examples"} <= set(names)
    for carried in itertools.product([False, True], repeat=len(names)):
        markers = dict(zip(names, carried, strict=True))
        selected = [
            Expression.compile(expression).evaluate(markers.__getitem__)
            for expression in (quick, stress)
        ]
        assert any(selected), f"a test marked {markers} is run by neither target"


def test_ci_runs_both_targets_and_the_stress_profile_has_more_examples() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert "make test" in ci
    assert "make test-stress" in ci
    assert "--hypothesis-profile=stress" in _pytest_args("test-stress")
    assert "--hypothesis-profile" not in " ".join(_pytest_args("unit"))
    quick, full = settings.get_profile("hotseam"), settings.get_profile("stress")
    assert full.max_examples >= 4 * quick.max_examples
