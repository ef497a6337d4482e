"""The suite's one time factor (tests/_timing.py) and the busy machine of ``make test-loaded``
(tests/_hog.py): the factor is measured when not chosen, shared with the processes the tests
start, follows a load that rises after the start, and stretches pytest-timeout's limits as
well as the deadlines the tests write."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests import _timing
from tests._pytester import run_pytest
from tests._timing import scaled

ROOT = Path(__file__).resolve().parent.parent


VARIABLES = ("HOTSEAM_TEST_TIME_SCALE", "HOTSEAM_TEST_TIME_MEASURED")


def _python(
    code: str, *, scale: str | None, hog: int = 0, measured: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter at the repository root (beside ``hog`` spinners),
    with the factor ``scale`` chosen, or inherited as measured (``measured``), or neither."""
    env = {key: value for key, value in os.environ.items() if key not in VARIABLES}
    if scale is not None:
        env["HOTSEAM_TEST_TIME_SCALE"] = scale
    if measured is not None:
        env["HOTSEAM_TEST_TIME_SCALE"] = env["HOTSEAM_TEST_TIME_MEASURED"] = measured
    command = [sys.executable, "-c", code]
    if hog:
        command = [sys.executable, "tests/_hog.py", "--procs", str(hog), "--settle", "1", "--"]
        command += [sys.executable, "-c", code]
    return subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=scaled(60)
    )


REPORT = "import os, tests._timing as t; print(t.TIME_SCALE, os.environ['HOTSEAM_TEST_TIME_SCALE'])"
# What a deadline set now is stretched by; then the load per core the machine had meanwhile.
NOW = "import tests._timing as t; print(t.scaled(1.0), t.current_load())"


def test_a_chosen_factor_is_used_as_it_is() -> None:
    result = _python(REPORT, scale="2.5")
    assert result.stdout.split() == ["2.5", "2.5"], result.stderr


def test_a_factor_that_is_not_a_number_is_one_line() -> None:
    result = _python(REPORT, scale="fast")
    assert result.returncode != 0
    assert result.stderr.strip() == (
        "HOTSEAM_TEST_TIME_SCALE='fast': expected a number such as 2.5"
    )


def test_a_busy_machine_measures_slower_and_the_factor_is_handed_to_children() -> None:
    """Three spinners per core: the measured factor is well above 1 (about 4 on an otherwise
    idle machine), and exported so the workers and the processes they start use it too."""
    spinners = 3 * (os.cpu_count() or 1)
    loaded = _python(REPORT, scale=None, hog=spinners)
    assert loaded.returncode == 0, loaded.stderr
    factor, exported = loaded.stdout.split()
    assert float(factor) >= 1.5, loaded.stderr
    assert exported == factor
    measured = _python(REPORT + "; print(os.environ['HOTSEAM_TEST_TIME_MEASURED'])", scale=None)
    assert len(set(measured.stdout.split())) == 1, measured.stderr  # marked as measured
    assert f"hog: {spinners} busy processes" in loaded.stderr
    assert "hog: stopped after" in loaded.stderr


def test_a_measured_factor_follows_a_load_that_rises_after_the_start() -> None:
    """A worker inherits the factor its controller measured on an idle machine (1), then
    three spinners per core start (a neighbour's build): a deadline set now is stretched by
    the load it meets (about 3), never below the start's. A chosen factor stays as it is."""
    spinners = 3 * (os.cpu_count() or 1)
    inherited = _python(NOW, scale=None, measured="1.0", hog=spinners)
    assert inherited.returncode == 0, inherited.stderr
    stretch, _ = map(float, inherited.stdout.split())
    assert stretch >= 2.5, inherited.stderr
    chosen = _python(NOW, scale="1.0", hog=spinners)
    assert chosen.returncode == 0, chosen.stderr
    stretch, load = map(float, chosen.stdout.split())
    assert (stretch, load >= 2.5) == (1.0, True), chosen.stderr


def test_the_hog_ends_its_spinners_with_the_command_and_passes_on_its_exit_code() -> None:
    """The command sees the spinners (children of the hog) running; once it ended none is."""
    code = (
        "import os, subprocess, sys; "
        "out = subprocess.run(['ps', '-o', 'pid=', '--ppid', str(os.getppid())], "
        "capture_output=True, text=True).stdout.split(); "
        "print(*[pid for pid in out if int(pid) != os.getpid()]); sys.exit(3)"
    )
    result = _python(code, scale="1", hog=2)
    assert result.returncode == 3, result.stderr
    spinners = [int(pid) for pid in result.stdout.split()]
    assert len(spinners) == 2, result.stderr
    for pid in spinners:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_pytest_timeouts_are_stretched_by_the_factor(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the factor 3, the ini ``timeout = 1`` allows 3 s and ``@pytest.mark.timeout(0.5)``
    1.5 s: a test within those passes, one past them is still stopped."""
    pytester.makeini("[pytest]\ntimeout = 1\n")
    pytester.makeconftest(
        "from tests.conftest import pytest_collection_modifyitems, pytest_configure\n"
    )
    pytester.makepyfile(
        """
        import time

        import pytest

        def test_default():
            time.sleep(1.5)

        @pytest.mark.timeout(0.5)
        def test_marked():
            time.sleep(1.0)

        @pytest.mark.timeout(0.5)
        def test_marked_too_slow():
            time.sleep(5)
        """
    )
    monkeypatch.setenv("HOTSEAM_TEST_TIME_SCALE", "3")
    monkeypatch.delenv("HOTSEAM_TEST_TIME_MEASURED", raising=False)  # chosen: exactly 3
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    result = run_pytest(pytester, timeout=scaled(60))
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*Timeout (>1.5s) from pytest-timeout*"])


STOPPING_THREAD = """
import threading
import time


def test_leaves_a_thread_that_ends_half_a_second_later():
    threading.Thread(target=time.sleep, args=(0.5,)).start()
"""


def test_the_escape_checks_wait_for_a_stopping_thread_is_an_option_the_suite_scales(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread still stopping at a test's end gets 0.2 s: one that needs 0.5 s escapes, unless
    ``--hotseam-thread-grace`` allows more, or the suite's factor (10 here) stretches it."""
    pytester.makeini("[pytest]\nhotseam_escape_check = true\n")
    pytester.makepyfile(STOPPING_THREAD)
    monkeypatch.setenv("HOTSEAM_TEST_TIME_SCALE", "10")
    monkeypatch.delenv("HOTSEAM_TEST_TIME_MEASURED", raising=False)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    plain = run_pytest(pytester, timeout=scaled(60))
    assert plain.ret != 0
    plain.stdout.fnmatch_lines(["*escape 1/1: thread * running sleep()*"])
    allowed = run_pytest(pytester, "--hotseam-thread-grace", "3", timeout=scaled(60))
    allowed.assert_outcomes(passed=1)
    pytester.makeconftest("from tests.conftest import pytest_configure\n")
    stretched = run_pytest(pytester, timeout=scaled(60))
    stretched.assert_outcomes(passed=1)


def test_one_test_sees_one_factor_and_the_next_test_follows_the_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A liveness window of ``scaled(0.3)`` set while the machine is busy and a wait past it
    of ``scaled(0.4)`` set after the load fell must keep their ratio: the factor is pinned
    as a test starts. The next test (a new pin) meets the load of its own start."""
    load = [4.0]
    monkeypatch.setattr(_timing, "_CHOSEN", False)
    monkeypatch.setattr(_timing, "TIME_SCALE", 1.0)
    monkeypatch.setattr(_timing, "current_load", lambda: load[0])
    _timing.pin()  # as the suite's hook does when a test starts
    window = _timing.scaled(0.3)
    load[0] = 1.0  # the neighbour's build ended
    wait = _timing.scaled(0.4)
    assert wait / window == pytest.approx(0.4 / 0.3)
    load[0] = 2.0
    _timing.pin()  # the next test
    assert _timing.scaled(1.0) == 2.0
    _timing.unpin()  # between tests: the load of the moment
    load[0] = 3.0
    assert _timing.scaled(1.0) == 3.0


def _scaled_at_import(tree: ast.AST) -> list[int]:
    """Lines where ``scaled(...)`` runs when the module is imported: module and class
    bodies, default values and decorators (a function's or a lambda's body runs later)."""
    found: list[int] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for part in [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults]:
                if part is not None:
                    visit(part)
            return
        if isinstance(node, ast.Lambda):
            for part in [*node.args.defaults, *node.args.kw_defaults]:
                if part is not None:
                    visit(part)
            return
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else None
            if isinstance(node.func, ast.Name):
                name = node.func.id
            if name == "scaled":
                found.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def test_no_deadline_is_scaled_when_its_module_is_imported() -> None:
    """A deadline scaled at import keeps the factor of the moment the suite collected it,
    not of the test that uses it: a load that rises later would cut it short. Deadlines
    are written as seconds on an idle machine and scaled where they are used."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.name == "_timing.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        offenders += [f"{path.relative_to(ROOT)}:{line}" for line in _scaled_at_import(tree)]
    assert offenders == [], offenders


def test_the_import_time_check_sees_each_place_a_module_runs_at_import() -> None:
    tree = ast.parse(
        "A = scaled(1)\n"
        "def f(x=scaled(2)):\n    return scaled(3)\n"
        "class C:\n    B = t.scaled(4)\n"
        "g = lambda: scaled(5)\n"
    )
    assert _scaled_at_import(tree) == [1, 2, 5]
