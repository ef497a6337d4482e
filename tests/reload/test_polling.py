"""The polling watcher sees every change, while an idle scan lists nothing and backs off.

A scan stats each module file and each folder, and lists a folder again only when its stat
changed (or is recent enough that a coarse timestamp could hide a change): the property
test below applies random operations to real files, ages the tree now and then (so folders
are skipped), and checks that the next scan reports every module file that changed.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hotseam.reload import ChangeKind, PollingWatcher
from hotseam.reload._watcher import WatchRoot

pytestmark = pytest.mark.anyio

_OLD = time.time() - 3600


def _age(top: Path) -> None:
    """Set every timestamp below ``top`` an hour back: nothing is racy any more."""
    for base, folders, files in os.walk(top):
        for name in [*folders, *files]:
            os.utime(os.path.join(base, name), (_OLD, _OLD))
    os.utime(top, (_OLD, _OLD))


def _tree(top: Path, files: int) -> None:
    for number in range(files):
        folder = top / f"d{number % 5}"
        folder.mkdir(exist_ok=True)
        (folder / f"m{number}.py").write_text("x = 1\n")


def test_an_idle_scan_lists_no_folder_and_stats_each_entry_once(tmp_path: Path) -> None:
    _tree(tmp_path, 40)
    _age(tmp_path)
    watcher = PollingWatcher()
    roots = [WatchRoot(tmp_path)]
    first = watcher._snapshot(roots, time.time())
    listed, stats = watcher.listed, watcher.stats
    assert listed == 6  # the root and its five folders
    second = watcher._snapshot(roots, time.time())
    assert watcher.listed == listed  # nothing listed again
    assert watcher.stats - stats == 40 + 6
    assert watcher.compare(first, second, time.time()) == set()


def test_a_recent_folder_is_listed_again_even_if_its_stat_looks_unchanged(
    tmp_path: Path,
) -> None:
    """A coarse timestamp can hide a creation made in the same tick as the listing."""
    _tree(tmp_path, 3)
    watcher = PollingWatcher(racy_window=2.0)
    roots = [WatchRoot(tmp_path)]
    watcher._snapshot(roots, time.time())
    listed = watcher.listed
    watcher._snapshot(roots, time.time())
    assert watcher.listed == listed * 2


_ACTIONS = st.sampled_from(["create", "rewrite", "same_size", "delete", "rename", "mkdir", "age"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=st.lists(st.tuples(_ACTIONS, st.integers(0, 7)), min_size=1, max_size=10))
def test_every_change_is_reported_by_the_next_scan(actions: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        top = Path(tmp).resolve()
        _tree(top, 6)
        _age(top)
        watcher = PollingWatcher()
        roots = [WatchRoot(top)]
        scanned_at = time.time()
        seen = watcher._snapshot(roots, scanned_at)
        for action, number in actions:
            path = top / f"d{number % 5}" / f"m{number}.py"
            expected: set[Path] = set()
            if action == "create" and not path.exists():
                path.parent.mkdir(exist_ok=True)
                path.write_text("y = 22\n")
                expected = {path}
            elif action in ("rewrite", "same_size") and path.exists():
                path.write_text("x = 2\n" if action == "same_size" else "x = 333\n")
                expected = {path}
            elif action == "delete" and path.exists():
                path.unlink()
                expected = {path}
            elif action == "rename" and path.exists():
                target = path.with_name(f"r{number}.py")
                path.replace(target)
                expected = {path, target}
            elif action == "mkdir":
                folder = top / f"new{number}"
                folder.mkdir(exist_ok=True)
                (folder / "inside.py").write_text("")
                expected = {folder / "inside.py"}
            elif action == "age":
                _age(top)
            now = time.time()
            current = watcher._snapshot(roots, scanned_at)
            reported = {change.path for change in watcher.compare(seen, current, scanned_at)}
            seen, scanned_at = current, now
            assert expected <= reported, (action, number, expected - reported)


async def test_polling_backs_off_while_idle_and_still_sees_a_change(tmp_path: Path) -> None:
    """Pauses grow from ``interval`` to ``max_interval``; a change after a long idle spell
    is still reported."""
    (tmp_path / "a.py").write_text("")
    _age(tmp_path)
    watcher = PollingWatcher(interval=0.01, max_interval=0.05)
    pauses: list[float] = []
    real_sleep = anyio.sleep

    async def recording_sleep(delay: float) -> None:
        pauses.append(delay)
        await real_sleep(delay)

    with anyio.fail_after(10):
        async with watcher.open([WatchRoot(tmp_path)]) as batches:
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(anyio, "sleep", recording_sleep)
                while len(pauses) < 8:
                    await real_sleep(0.01)
                (tmp_path / "a.py").write_text("x = 1\n")
                batch = await batches.__anext__()
    assert {(change.kind, change.path) for change in batch} == {
        (ChangeKind.MODIFIED, tmp_path / "a.py")
    }
    assert pauses[:3] == pytest.approx([0.01, 0.015, 0.0225])
    assert max(pauses) == pytest.approx(0.05)


def test_max_interval_must_not_be_shorter_than_interval() -> None:
    with pytest.raises(ValueError, match="max_interval"):
        PollingWatcher(interval=1.0, max_interval=0.5)
    assert PollingWatcher(interval=2.0).max_interval == 2.0
    assert PollingWatcher().max_interval == 1.0
