"""The README's runnable examples run, and print what the README says they print."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"```python\n(?P<code>.*?)```\n\nprints\n\n```text\n(?P<out>.*?)```", re.S)


def _examples() -> list[tuple[str, str]]:
    return [(m["code"], m["out"]) for m in BLOCK.finditer(README.read_text(encoding="utf-8"))]


def test_the_readme_has_runnable_examples() -> None:
    """Guard against the pattern silently matching nothing."""
    assert len(_examples()) >= 2


@pytest.mark.parametrize(("code", "expected"), _examples())
def test_readme_example_prints_what_the_readme_says(
    code: str, expected: str, tmp_path: Path
) -> None:
    """Each ```python block followed by 'prints' runs and prints exactly that."""
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, "-W", "error", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == expected
    assert completed.stderr == ""


def _testing_example() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("```python\n# test_my_ui.py")
    return text[start + len("```python\n") : text.index("```\n", start + 10)]


@pytest.mark.parametrize("strict", [False, True], ids=["lenient", "strict"])
def test_the_testing_example_passes_with_the_leak_check(
    pytester: pytest.Pytester, strict: bool
) -> None:
    """The "Testing your provider" file runs as a user would run it, and passes."""
    pytester.makepyfile(test_my_ui=_testing_example())
    options = ["--hotseam-leak-check", "-p", "no:cacheprovider", "-W", "error"]
    if strict:
        options.append("--hotseam-strict")
    result = pytester.runpytest_subprocess(*options)
    result.assert_outcomes(passed=6)
