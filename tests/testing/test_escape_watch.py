"""EscapeWatch used directly (without the plugin): a file a Python object holds, watches
inside watches, and bad kinds."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from hotseam.testing._escapes import EscapeWatch, active_watch


def test_a_held_file_is_named_by_its_allocation_line_when_tracemalloc_traces(
    tmp_path: Path,
) -> None:
    tracemalloc.start(5)
    watch = EscapeWatch()
    watch.start()
    try:
        held = open(tmp_path / "held.txt", "w", encoding="utf-8")  # noqa: SIM115  # OPENED-HERE
    finally:
        watch.stop()
    try:
        escapes = watch.escapes()
    finally:
        tracemalloc.stop()
        held.close()
    line = next(
        number
        for number, text in enumerate(Path(__file__).read_text().splitlines(), 1)
        if text.endswith("# OPENED-HERE")
    )
    (escape,) = escapes
    assert escape.kind == "fds"
    assert escape.what.startswith("file descriptor ")
    assert f"({tmp_path / 'held.txt'}) held by " in escape.what
    assert escape.created_at == f"{__file__}:{line}"
    assert watch.escapes() == []  # closed now


def test_a_watch_inside_another_gives_it_back() -> None:
    outer = EscapeWatch()
    outer.start()
    inner = EscapeWatch()
    inner.start()
    assert active_watch() is inner
    inner.stop()
    assert active_watch() is outer
    outer.stop()
    assert active_watch() is not outer


def test_an_unknown_kind_is_refused_naming_the_kinds() -> None:
    with pytest.raises(ValueError, match="unknown kind of leak 'thread'; the kinds are tasks, "):
        EscapeWatch().allow("thread")
