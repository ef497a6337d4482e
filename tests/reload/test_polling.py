"""The polling watcher sees every change, while an idle scan lists nothing and backs off.

A scan stats each module file and each folder, compares each file's stat with the previous
scan's in place, and lists a folder again only when its stat changed (or is recent enough
that a coarse timestamp could hide a change): the property test below applies random
operations to real files, ages the tree now and then (so folders are skipped), and checks
that the next scan reports every module file that changed, and exactly what comparing two
full snapshots (``PollingWatcher.compare``) reports.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests._timing import scaled

from hotseam.reload import ChangeKind, FileChange, PollingWatcher
from hotseam.reload._watcher import WatchRoot, _Seen, is_module_file_name

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


def _full_snapshot(top: Path) -> dict[str, _Seen]:
    """Every module file below ``top`` with its stat: what a scan that kept nothing would see."""
    snapshot: dict[str, _Seen] = {}
    for base, folders, files in os.walk(top):
        folders[:] = [name for name in folders if name != "__pycache__" and name[0] != "."]
        for name in files:
            if is_module_file_name(name):
                path = os.path.join(base, name)
                st = os.stat(path)
                key = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
                snapshot[path] = _Seen(key, st.st_mtime_ns / 1e9)
    return snapshot


def test_an_idle_scan_lists_no_folder_and_stats_each_entry_once(tmp_path: Path) -> None:
    _tree(tmp_path, 40)
    _age(tmp_path)
    tree = PollingWatcher()._tree([WatchRoot(tmp_path)])
    assert len(tree.scan(time.time())) == 40  # the first scan: everything is new
    listed, stats = tree.listed, tree.stats
    assert listed == 6  # the root and its five folders
    assert tree.scan(time.time()) == set()
    assert tree.listed == listed  # nothing listed again
    assert tree.stats - stats == 40 + 6


def test_a_recent_folder_is_listed_again_even_if_its_stat_looks_unchanged(
    tmp_path: Path,
) -> None:
    """A coarse timestamp can hide a creation made in the same tick as the listing."""
    _tree(tmp_path, 3)
    tree = PollingWatcher(racy_window=2.0)._tree([WatchRoot(tmp_path)])
    tree.scan(time.time())
    listed = tree.listed
    tree.scan(time.time())
    assert tree.listed == listed * 2


def _same_stamps(path: Path) -> None:
    """Rewrite in place, same size, mtime put back: as within one tick of a coarse clock."""
    before = path.stat()
    path.write_text("x = 3\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _touch(path: Path) -> None:
    """Only the mtime changes, to another time in the past (``touch -d``, ``cp -p``)."""
    os.utime(path, (_OLD - 60, _OLD - 60))


def _replace(path: Path) -> None:
    """An atomic save of a file with the old size and mtime: a new inode."""
    before = path.stat()
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text("x = 4\n")
    os.utime(temporary, ns=(before.st_atime_ns, before.st_mtime_ns))
    temporary.replace(path)


_CHANGES = {"same_stamps": _same_stamps, "touch": _touch, "replace": _replace}
_ACTIONS = st.sampled_from(
    [
        "create",
        "rewrite",
        "same_size",
        *_CHANGES,
        "delete",
        "rename",
        "mkdir",
        "rmdir",
        "age",
    ]
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=st.lists(st.tuples(_ACTIONS, st.integers(0, 7)), min_size=1, max_size=10))
def test_every_change_is_reported_by_the_next_scan(actions: list[tuple[str, int]]) -> None:
    """Each scan reports what changed since the previous one, whatever folders it skipped,
    and exactly what comparing two full snapshots reports."""
    with tempfile.TemporaryDirectory() as tmp:
        top = Path(tmp).resolve()
        _tree(top, 6)
        _age(top)
        watcher = PollingWatcher()
        tree = watcher._tree([WatchRoot(top)])
        scanned_at = time.time()
        tree.scan(scanned_at)
        seen = _full_snapshot(top)
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
            elif action in _CHANGES and path.exists():
                _CHANGES[action](path)
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
            elif action == "rmdir" and path.parent.exists():
                expected = {Path(name) for name in _full_snapshot(path.parent)}
                shutil.rmtree(path.parent)
            elif action == "age":
                _age(top)
            now = time.time()
            reported = tree.scan(scanned_at)
            current = _full_snapshot(top)
            assert reported == watcher.compare(seen, current, scanned_at), (action, number)
            assert expected <= {change.path for change in reported}, (action, number)
            seen, scanned_at = current, now


def test_a_racy_file_is_reported_until_its_mtime_is_old(tmp_path: Path) -> None:
    """A file system whose stat shows no change at all: the file is reported by every scan
    while its mtime is within ``racy_window`` of the previous scan, then no more."""
    path = tmp_path / "m.py"
    path.write_text("")
    _age(tmp_path)
    frozen = 100 * 10**9

    class Frozen(NamedTuple):
        st_mtime_ns: int = frozen
        st_ctime_ns: int = frozen
        st_size: int = 10
        st_ino: int = 7

    tree = PollingWatcher(racy_window=2.0, stat=lambda _: Frozen())._tree([WatchRoot(tmp_path)])
    assert tree.scan(99.0) == {FileChange(ChangeKind.ADDED, path)}
    for previous_scan in (100.5, 101.0, 101.9):
        assert tree.scan(previous_scan) == {FileChange(ChangeKind.MODIFIED, path)}
    assert tree.scan(102.5) == set()
    assert tree.scan(200.0) == set()


async def test_an_idle_watcher_sees_changes_its_folders_do_not_show(tmp_path: Path) -> None:
    """After quiet scans (old files, folders not listed again), a change that leaves the
    size and the mtime, or the folder, as they were is still reported, and only it."""
    _tree(tmp_path, 15)
    _age(tmp_path)
    watcher = PollingWatcher(interval=0.01, max_interval=0.02)
    cases = [(_same_stamps, "d1/m1.py"), (_touch, "d3/m8.py"), (_replace, "d2/m12.py")]
    with anyio.fail_after(scaled(20)):
        async with watcher.open([WatchRoot(tmp_path)]) as batches:
            for change, name in cases:
                path = tmp_path / name
                with anyio.move_on_after(0.2):  # quiet scans: nothing to report
                    async for batch in batches:
                        raise AssertionError(f"nothing changed, yet {batch}")
                change(path)
                reported = await batches.__anext__()
                # A scan between the write and the utime may see the file twice.
                with anyio.move_on_after(0.1):
                    async for batch in batches:
                        reported = {*reported, *batch}
                assert reported == {FileChange(ChangeKind.MODIFIED, path)}, change.__name__


async def test_polling_backs_off_while_idle_and_still_sees_a_change(tmp_path: Path) -> None:
    """Pauses grow from ``interval`` to ``max_interval``; a change after a long idle spell
    is still reported. (``idle_share=1``: a scan slowed by a busy machine does not stretch
    the pause; that rule has its own test below.)"""
    (tmp_path / "a.py").write_text("")
    _age(tmp_path)
    watcher = PollingWatcher(interval=0.01, max_interval=0.05, idle_share=1.0)
    pauses: list[float] = []
    real_sleep = anyio.sleep

    async def recording_sleep(delay: float) -> None:
        pauses.append(delay)
        await real_sleep(delay)

    with anyio.fail_after(scaled(10)):
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


async def test_a_slow_scan_stretches_the_idle_pause_to_keep_its_share_of_a_core(
    tmp_path: Path,
) -> None:
    """A scan taking ~5 ms with ``idle_share=0.05``: pauses grow past ``max_interval`` (20 ms)
    towards 5 ms / 0.05 = 100 ms, so scanning stays within 5 % of a core."""
    (tmp_path / "a.py").write_text("")
    _age(tmp_path)

    def slow_stat(path: Path) -> os.stat_result:
        time.sleep(0.005)
        return os.stat(path)

    watcher = PollingWatcher(interval=0.01, max_interval=0.02, idle_share=0.05, stat=slow_stat)
    pauses: list[float] = []
    real_sleep = anyio.sleep

    async def recording_sleep(delay: float) -> None:
        pauses.append(delay)
        await real_sleep(delay)

    with anyio.fail_after(scaled(10)):
        async with watcher.open([WatchRoot(tmp_path)]):
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(anyio, "sleep", recording_sleep)
                while len(pauses) < 9:
                    await real_sleep(0.01)
    assert pauses[:2] == pytest.approx([0.01, 0.015])
    assert max(pauses) > 0.05  # past max_interval: the scan's own duration sets the ceiling
    for before, after in itertools.pairwise(pauses):
        assert after <= before * 1.5 + 1e-9  # still growing by half at most


def test_idle_share_must_be_a_share() -> None:
    for wrong in (0, -0.1, 1.5):
        with pytest.raises(ValueError, match="idle_share"):
            PollingWatcher(idle_share=wrong)
