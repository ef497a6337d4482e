"""The module index updated in place from reported paths equals a fresh listing, always.

Each test applies file-system operations, reports the paths a watcher would report (the
native watcher: every path touched, folders included; the polling watcher: module files
only), and compares the index with one built by a full listing. A save of one module among
many costs one ``lstat`` and no listing, whatever the number of modules.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hotseam import Context
from hotseam.reload import Reloader, _planner
from hotseam.reload._loader import Loader
from hotseam.reload._planner import ModuleIndex
from hotseam.reload._roots import Root

pytestmark = pytest.mark.anyio


def _state(index: ModuleIndex) -> dict[str, Any]:
    """Everything the reloader reads from an index."""
    return {
        "paths": dict(index.paths),
        "names": dict(index.names),
        "autoload": set(index.autoload),
        "tops": set(index.tops),
        "clashes": dict(index.clashes),
        "skipped": dict(index.skipped),
        "real_paths": dict(index.real_paths),
    }


def _differences(state: dict[str, Any], fresh: dict[str, Any]) -> dict[str, Any]:
    return {key: (state[key], fresh[key]) for key in state if state[key] != fresh[key]}


def _fresh(roots: tuple[Root, ...]) -> ModuleIndex:
    index = ModuleIndex(roots)
    index.rescan()
    return index


def _files(top: Path) -> list[Path]:
    """Every file and folder below ``top`` (what the polling watcher would compare)."""
    return [Path(base, name) for base, dirs, files in os.walk(top) for name in [*dirs, *files]]


@pytest.fixture(name="counted")
def _counted(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every ``lstat`` the index makes, in order."""
    calls: list[Path] = []
    real = _planner._lstat

    def lstat(path: Path) -> os.stat_result:
        calls.append(path)
        return real(path)

    monkeypatch.setattr(_planner, "_lstat", lstat)
    return calls


@pytest.mark.parametrize("modules", [10, 400])
def test_a_save_costs_one_lstat_and_no_listing_whatever_the_number_of_modules(
    tmp_path: Path, counted: list[Path], modules: int
) -> None:
    for number in range(modules):
        (tmp_path / f"m{number}.py").write_text("x = 1\n")
    index = ModuleIndex((Root.from_path(tmp_path),))
    index.refresh(None)
    assert index.scans == 1
    target = tmp_path / "m3.py"
    target.write_text("x = 2\n")
    index.refresh([target])
    created = tmp_path / "new.py"
    created.write_text("")
    index.refresh([created])
    created.unlink()
    index.refresh([created])
    assert index.scans == 1
    assert counted == [target, created, created]
    assert _state(index) == _state(_fresh(index.roots))


def test_folder_events_and_a_reload_of_everything_list_again(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("")
    index = ModuleIndex((Root.from_path(tmp_path),))
    index.refresh(None)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    index.refresh([tmp_path / "pkg"])
    assert index.scans == 2
    assert index.path_of("pkg") == tmp_path / "pkg" / "__init__.py"
    index.refresh(None)
    assert index.scans == 3


def test_events_outside_the_watched_paths_and_in_hidden_folders_change_nothing(
    tmp_path: Path, counted: list[Path]
) -> None:
    watched = tmp_path / "watched"
    (watched / ".hidden").mkdir(parents=True)
    (watched / "a.py").write_text("")
    index = ModuleIndex((Root.from_path(watched),))
    index.refresh(None)
    (tmp_path / "outside.py").write_text("")
    (watched / ".hidden" / "b.py").write_text("")
    (watched / "__pycache__").mkdir()
    index.refresh(
        [
            tmp_path / "outside.py",
            tmp_path,
            Path("/elsewhere/x.py"),
            watched / ".hidden" / "b.py",
            watched / "__pycache__",
        ]
    )
    assert index.scans == 1
    assert counted == []
    assert _state(index) == _state(_fresh(index.roots))


def test_a_deleted_module_keeps_its_former_name_for_the_planner(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("")
    index = ModuleIndex((Root.from_path(tmp_path),))
    index.refresh(None)
    (tmp_path / "a.py").unlink()
    index.refresh([tmp_path / "a.py"])
    assert index.name_of(tmp_path / "a.py") is None
    assert index.former[tmp_path / "a.py"] == "a"
    assert index.under(tmp_path / "a.py") == []
    (tmp_path / "a.py").write_text("")
    index.refresh([tmp_path / "a.py"])
    assert tmp_path / "a.py" not in index.former


def test_watched_files_is_a_live_view_of_the_index(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("")
    index = ModuleIndex((Root.from_path(tmp_path),))
    index.refresh(None)
    files = index.watched_files()
    assert str(tmp_path / "a.py") in files
    assert str(tmp_path / "b.py") not in files
    (tmp_path / "b.py").write_text("")
    index.refresh([tmp_path / "b.py"])
    assert str(tmp_path / "b.py") in files
    assert sorted(files) == [str(tmp_path / "a.py"), str(tmp_path / "b.py")]
    assert len(files) == 2


async def test_a_reloader_save_among_many_modules_lists_nothing(tmp_path: Path) -> None:
    for number in range(50):
        (tmp_path / f"m{number}.py").write_text("def setup(scope):\n    pass\n")
    async with Reloader(Context("index"), [tmp_path], watch=False) as reloader:
        index = reloader._index
        scans = index.scans
        (tmp_path / "m7.py").write_text("def setup(scope):\n    x = 2\n")
        result = await reloader.reload(tmp_path / "m7.py")
        assert [event.path for event in result.committed] == [tmp_path / "m7.py"]
        (tmp_path / "m8.py").unlink()
        result = await reloader.reload(tmp_path / "m8.py")
        assert [event.path for event in result.unloaded] == [tmp_path / "m8.py"]
        assert index.scans == scans
        await reloader.reload()
        assert index.scans == scans + 1


# -- operations that try to break the index -------------------------------------------------------

_NAMES = st.sampled_from(["a", "b", "c", "pkg", "sub", "x-y", "_p", "9z"])
_FOLDERS = st.sampled_from(["", "pkg", "sub", "pkg/inner", "sub/deep", "new", ".hidden"])


def _op(draw: st.DrawFn) -> tuple[str, str, str]:
    kind = draw(
        st.sampled_from(
            [
                "write",
                "write",
                "write",
                "delete",
                "atomic",
                "mkdir",
                "rmtree",
                "rename_dir",
                "init",
                "drop_init",
                "rename_file",
                "burst",
                "outside",
                "move_in",
                "link",
            ]
        )
    )
    return kind, draw(_FOLDERS), draw(_NAMES)


_OPS = st.lists(st.composite(_op)(), min_size=1, max_size=12)


class _World:
    """A watched folder plus a sibling outside it; applies operations and says what a
    watcher would report."""

    def __init__(self, top: Path, *, links: bool, polling: bool) -> None:
        self.top = top
        self.root = top / "root"
        self.outside = top / "outside"
        self.root.mkdir()
        self.outside.mkdir()
        self.links = links
        self.polling = polling
        (self.root / "pkg").mkdir()
        (self.root / "pkg" / "__init__.py").write_text("")
        (self.root / "pkg" / "m.py").write_text("")
        (self.root / "a.py").write_text("")

    def apply(self, kind: str, folder: str, name: str) -> list[Path]:
        base = self.root / folder
        path = base / f"{name}.py"
        reported: list[Path] = []
        operations: dict[str, Callable[[], None]] = {
            "write": lambda: self._write(path, reported),
            "delete": lambda: self._delete(path, reported),
            "atomic": lambda: self._atomic(path, reported),
            "mkdir": lambda: self._mkdir(base / name, reported),
            "rmtree": lambda: self._rmtree(base, reported),
            "rename_dir": lambda: self._rename_dir(base, self.root / f"{name}_moved", reported),
            "init": lambda: self._write(base / "__init__.py", reported),
            "drop_init": lambda: self._delete(base / "__init__.py", reported),
            "rename_file": lambda: self._rename_file(path, base / "zz.py", reported),
            "burst": lambda: self._burst(path, reported),
            "outside": lambda: self._write(self.outside / f"{name}.py", reported),
            "move_in": lambda: self._move_in(base / f"{name}_in", reported),
            "link": lambda: self._link(path, reported),
        }
        operations[kind]()
        return reported

    def _write(self, path: Path, reported: list[Path]) -> None:
        for folder in reversed(path.parents):
            if folder.is_relative_to(self.top) and not folder.exists():
                self._mkdir(folder, reported)
        if not path.parent.is_dir() or path.is_dir():
            return
        path.write_text("x = 1\n")
        reported.append(path)

    def _delete(self, path: Path, reported: list[Path]) -> None:
        if path.is_file() or path.is_symlink():
            path.unlink()
            reported.append(path)

    def _atomic(self, path: Path, reported: list[Path]) -> None:
        if not path.parent.is_dir() or path.is_dir():
            return
        temporary = path.parent / f".{path.name}.tmp"
        temporary.write_text("x = 2\n")
        temporary.replace(path)
        reported.extend([temporary, path])

    def _mkdir(self, path: Path, reported: list[Path]) -> None:
        if path.exists() or not path.parent.is_dir():
            return
        path.mkdir()
        reported.append(path)

    def _rmtree(self, path: Path, reported: list[Path]) -> None:
        if path == self.root or not path.is_dir():
            return
        inside = _files(path)
        shutil.rmtree(path)
        reported.extend([*inside, path])

    def _rename_dir(self, source: Path, target: Path, reported: list[Path]) -> None:
        if source == self.root or not source.is_dir() or target.exists():
            return
        # Files change inside while the folder moves: one written before, one after.
        (source / "during.py").write_text("")
        before = _files(source)
        source.rename(target)
        (target / "after.py").write_text("")
        reported.extend([source, target, *before, *_files(target)])

    def _rename_file(self, source: Path, target: Path, reported: list[Path]) -> None:
        if source.is_file() and not target.is_dir():
            source.replace(target)
            reported.extend([source, target])

    def _burst(self, path: Path, reported: list[Path]) -> None:
        if not path.parent.is_dir() or path.is_dir():
            return
        for round_ in range(3):
            path.write_text(f"x = {round_}\n")
            sibling = path.parent / f"burst{round_}.py"
            sibling.write_text("")
            sibling.unlink()
            reported.extend([path, sibling])
        path.unlink()
        reported.append(path)

    def _move_in(self, target: Path, reported: list[Path]) -> None:
        """A package made elsewhere and moved in: the native watcher reports the folder only."""
        if not target.parent.is_dir() or target.exists() or not target.name.isidentifier():
            return
        made = self.outside / "made"
        made.mkdir()
        (made / "__init__.py").write_text("")
        (made / "inside.py").write_text("")
        made.rename(target)
        reported.append(target)
        if self.polling:
            reported.extend(_files(target))

    def _link(self, path: Path, reported: list[Path]) -> None:
        if not self.links or not path.parent.is_dir() or path.exists() or path.is_symlink():
            return
        path.symlink_to(self.root / "a.py")
        reported.append(path)


def _check(
    ops: list[tuple[str, str, str]], *, links: bool, polling: bool, mixed: bool = False
) -> None:
    """``mixed``: a package root and a single-file root instead of one folder."""
    with tempfile.TemporaryDirectory() as top:
        world = _World(Path(top).resolve(), links=links, polling=polling)
        roots = (
            (Root.from_path(world.root / "pkg"), Root.from_path(world.root / "a.py"))
            if mixed
            else (Root.from_path(world.root),)
        )
        index = ModuleIndex(roots)
        index.refresh(None)
        for kind, folder, name in ops:
            reported = world.apply(kind, folder, name)
            if polling:  # module files only, never folders
                reported = [path for path in reported if path.suffix == ".py"]
            index.refresh(reported)
            state, fresh = _state(index), _state(_fresh(index.roots))
            assert state == fresh, (kind, folder, name, _differences(state, fresh))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_OPS)
def test_native_reports_keep_the_index_equal_to_a_fresh_listing(
    ops: list[tuple[str, str, str]],
) -> None:
    _check(ops, links=True, polling=False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_OPS, polling=st.booleans())
# Found by this test: a package root that lost its __init__.py, then its folder.
@example(ops=[("drop_init", "pkg", "a"), ("rmtree", "pkg", "a")], polling=True)
def test_a_package_root_and_a_file_root_stay_equal_to_a_fresh_listing(
    ops: list[tuple[str, str, str]], polling: bool
) -> None:
    _check(ops, links=not polling, polling=polling, mixed=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_OPS)
def test_polling_reports_keep_the_index_equal_to_a_fresh_listing(
    ops: list[tuple[str, str, str]],
) -> None:
    """The polling watcher reports files only: a folder's creation shows as new files in a
    folder never listed, its removal as deleted files (and of an ``__init__.py``)."""
    _check(ops, links=False, polling=True)


def _hotseam_lines(counter: dict[str, int]) -> Any:
    """A tracer counting the lines of hotseam's own code executed (this thread only)."""

    def local(frame: Any, event: str, arg: object) -> Any:
        if event == "line":
            counter["lines"] += 1
        return local

    def tracer(frame: Any, event: str, arg: object) -> Any:
        return local if "/hotseam/" in frame.f_code.co_filename else None

    return tracer


async def _lines_per_save(folder: Path, modules: int) -> tuple[int, int]:
    """Lines of hotseam code run by ``reload(path)`` of an edited module and of an unchanged
    save, among ``modules`` modules."""
    for number in range(modules):
        (folder / f"m{number}.py").write_text("def setup(scope):\n    scope.defer(dict)\n")
    target = folder / "m0.py"
    counts = []
    async with Reloader(Context("index"), [folder], watch=False) as reloader:
        # The first save after the start rebuilds the import graph once (the start changed
        # every module's imports); the saves after it are what a session is made of.
        target.write_text("def setup(scope):\n    scope.defer(set)\n")
        await reloader.reload(target)
        for text in ("def setup(scope):\n    scope.defer(list)\n", None):
            if text is not None:
                target.write_text(text)
            counter = {"lines": 0}
            sys.settrace(_hotseam_lines(counter))
            try:
                await reloader.reload(target)
            finally:
                sys.settrace(None)
            counts.append(counter["lines"])
    return counts[0], counts[1]


async def test_a_save_runs_as_much_hotseam_code_among_150_modules_as_among_3(
    tmp_path: Path,
) -> None:
    """What a save costs follows what changed: no pass over every module (counted in lines
    of hotseam code executed, which, unlike a clock, does not depend on the machine's load)."""
    (tmp_path / "few").mkdir()
    (tmp_path / "many").mkdir()
    few = await _lines_per_save(tmp_path / "few", 3)
    many = await _lines_per_save(tmp_path / "many", 150)
    for small, big in zip(few, many, strict=True):
        assert big <= small * 1.05 + 20, (few, many)


class _Unlisted(dict[Path, str]):
    """The index's files, refusing to be listed."""

    def __iter__(self) -> Any:
        raise AssertionError("the watched files were listed")

    def keys(self) -> Any:
        raise AssertionError("the watched files were listed")

    def items(self) -> Any:
        raise AssertionError("the watched files were listed")


def test_asking_for_the_watched_files_lists_nothing(tmp_path: Path) -> None:
    """Each setup asks for them, to locate an error it might raise; building the set of all
    of them every time made a start O(N²) and a helper's reload O(K·N)."""
    (tmp_path / "a.py").write_text("")
    index = ModuleIndex((Root.from_path(tmp_path),))
    index.refresh(None)
    index.names = _Unlisted(index.names)
    watched = Loader(index).watched_files()
    assert str(tmp_path / "a.py") in watched
    assert str(tmp_path / "b.py") not in watched
