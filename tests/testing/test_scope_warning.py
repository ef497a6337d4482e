"""A scope garbage-collected while open: its warning says where it was created."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tests._timing import scaled

from hotseam import Scope

from .conftest import USERS_TESTS


def _line_of(marker: str, source: str) -> int:
    return next(number for number, text in enumerate(source.splitlines(), 1) if marker in text)


def _drop_an_open_scope() -> None:
    scope = Scope("forgotten")  # CREATED-HERE
    scope.defer(lambda: None)


def _drop_an_open_tree() -> None:
    root = Scope("tree")  # TREE-HERE
    root.child("branch")


@pytest.mark.hotseam_leak_check(False)  # the leak is the point
def test_the_warning_names_the_creating_line_and_stack() -> None:
    with pytest.warns(ResourceWarning) as caught:
        _drop_an_open_scope()
        gc.collect()
    (message,) = (str(warning.message) for warning in caught if "forgotten" in str(warning.message))
    line = _line_of("# CREATED-HERE", Path(__file__).read_text(encoding="utf-8"))
    assert message.startswith(
        "hotseam scope 'forgotten' was garbage-collected while still open (1 effects, 0 child "
        "scopes never undone); close it with 'async with' or 'await scope.aclose()'; created "
        f"at {__file__}:{line} (in _drop_an_open_scope)\ncreation stack (most recent call "
        "last):\n"
    ), message
    assert f'  File "{__file__}", line {line}, in _drop_an_open_scope' in message


@pytest.mark.hotseam_leak_check(False)
def test_a_child_scope_names_where_its_tree_was_created() -> None:
    with pytest.warns(ResourceWarning) as caught:
        _drop_an_open_tree()
        gc.collect()
    line = _line_of("# TREE-HERE", Path(__file__).read_text(encoding="utf-8"))
    branch = next(str(w.message) for w in caught if "'branch'" in str(w.message))
    assert f"created inside Scope 'tree' at {__file__}:{line} (in _drop_an_open_tree)" in branch


def test_without_the_plugin_tracemalloc_gives_the_line() -> None:
    script = textwrap.dedent(
        """
        import gc, warnings
        warnings.simplefilter("always")
        from hotseam import Scope

        def make():
            Scope("untracked")  # MADE-HERE

        make()
        gc.collect()
        """
    )
    done = subprocess.run(
        [sys.executable, "-X", "tracemalloc=5", "-c", script],
        capture_output=True,
        text=True,
        timeout=scaled(60),
        check=True,
    )
    line = _line_of("# MADE-HERE", script)
    assert "hotseam scope 'untracked' was garbage-collected while still open" in done.stderr
    assert f'File "<string>", line {line}' in done.stderr, done.stderr


def test_the_users_run_shows_the_warning_and_the_leak_with_the_line(
    planted_report: dict[str, str],
) -> None:
    line = _line_of("# DROPPED-HERE", USERS_TESTS.lstrip("\n")) + 1  # the file's first line
    users = "test_users.py"
    leak = planted_report["test_scope_dropped"]
    assert "Scope 'dropped'" in leak
    assert f"{users}:{line} (in test_scope_dropped)" in leak
    assert "it was garbage-collected without being disposed" in leak
    warning = planted_report["<all>"]
    assert "hotseam scope 'dropped' was garbage-collected while still open" in warning
    assert f"{users}:{line} (in test_scope_dropped)\n" in warning
