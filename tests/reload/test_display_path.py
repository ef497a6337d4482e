"""Paths in reload lines are shown relative to the working directory, as pathlib would."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hotseam.reload._events import display_path

PARTS = st.lists(st.sampled_from(["a", "b", "ab", "a.py", "b c", "é"]), min_size=0, max_size=4)


def _by_pathlib(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


# No wall-clock bound on an example or on drawing one: a busy machine slowed the drawing
# past Hypothesis's health check (2 valid inputs in 1.9 s).
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cwd_parts=PARTS, path_parts=PARTS)
def test_it_agrees_with_pathlib_relative_to(cwd_parts: list[str], path_parts: list[str]) -> None:
    cwd = Path("/", *cwd_parts)
    path = Path("/", *path_parts)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "getcwd", lambda: str(cwd))
        assert display_path(path) == _by_pathlib(path)


def test_a_sibling_sharing_a_prefix_stays_absolute(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "getcwd", lambda: "/work/app")
    assert display_path(Path("/work/apple/ui.py")) == "/work/apple/ui.py"
    assert display_path(Path("/work/app/ui.py")) == "ui.py"
    assert display_path(Path("/work/app")) == "."


def test_a_deleted_working_directory_shows_the_path_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def gone() -> str:
        raise FileNotFoundError("cwd deleted")

    monkeypatch.setattr(os, "getcwd", gone)
    assert display_path(Path("/work/app/ui.py")) == "/work/app/ui.py"
