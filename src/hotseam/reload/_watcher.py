"""Watchers: turn file-system activity under the watched folders into batches of changes.

A watcher only *hints*: the reloader re-reads every path it reports and compares content
hashes, so a spurious or duplicated report costs one file read, never a reload. That is what
makes two facts measured in ``hot-reload-anchors.md`` harmless:

* an atomic save (write a temporary file, rename it over the module) arrives as ``added``
  with no ``modified``; any report of the module's path is enough;
* watchfiles' polling compares mtimes at one-second precision and misses a second edit in
  the same second; :class:`PollingWatcher` re-reports recently written files ("racy" ones, as
  git calls them) until their mtime is safely in the past, so the content hash decides.

Directories are watched, never single files (an editor's rename-on-save ends a watch on the
file itself, watchfiles #215). The :class:`Watcher` protocol is the seam tests use to script
changes: ``open(roots)`` must be watching by the time it has been entered. The native
watcher, which also follows a watched folder that is replaced, is in :mod:`._native`.
"""

from __future__ import annotations

import enum
import math
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Protocol, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from .._core import get_logger
from ._events import display_path
from ._transient import describe_errno, is_transient

__all__ = [
    "ChangeKind",
    "FileChange",
    "PollingWatcher",
    "WatchRoot",
    "Watcher",
    "is_ignored",
    "is_module_file_name",
    "may_matter",
    "minimal_roots",
]

_log = get_logger("hotseam.reload")
_MODULE_FILE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\.py$")
_BUFFERED_BATCHES = 256


class ChangeKind(enum.Enum):
    """What happened to a path (watchfiles' ``Change``, named)."""

    ADDED = "added"
    MODIFIED = "modified"
    DELETED = "deleted"


class FileChange(NamedTuple):
    """One reported change: its kind and the absolute path."""

    kind: ChangeKind
    path: Path


@dataclass(frozen=True, slots=True)
class WatchRoot:
    """A directory to watch; ``recursive=False`` watches only its direct entries."""

    directory: Path
    recursive: bool = True


class Watcher(Protocol):
    """Reports batches of changes under some directories.

    ``open(roots)`` is an async context manager that is watching once it has been entered
    and yields an async iterator of batches; leaving it stops watching.
    """

    def open(
        self, roots: Sequence[WatchRoot]
    ) -> AbstractAsyncContextManager[AsyncIterator[Collection[FileChange]]]:
        """Start watching ``roots``."""


def is_module_file_name(name: str) -> bool:
    """True for ``name.py`` where ``name`` is an identifier: the only files that can be imported.

    Every editor temporary is excluded by this alone: ``.#x.py``, ``#x.py#``, ``x.py~``,
    ``.x.py.swp``, ``x.py.tmp``, ``x.py___jb_tmp___``, ``4913``...
    """
    return _MODULE_FILE.match(name) is not None


def is_ignored(path: Path, base: Path) -> bool:
    """True for paths below ``base`` that never hold watched code (caches, hidden folders)."""
    try:
        parts = path.relative_to(base).parts
    except ValueError:
        return True
    return any(part == "__pycache__" or part.startswith(".") for part in parts[:-1])


def may_matter(path: Path) -> bool:
    """Cheap pre-filter: module files, and directories (whose removal hides modules)."""
    name = path.name
    if name == "__pycache__" or name.startswith("."):
        return False
    return is_module_file_name(name) or "." not in name


def minimal_roots(roots: Sequence[WatchRoot]) -> list[WatchRoot]:
    """Drop roots already covered by a recursive root, so no event is reported twice."""
    result: list[WatchRoot] = []
    for root in sorted(roots, key=lambda r: (not r.recursive, len(r.directory.parts))):
        covered = any(
            other.recursive and root.directory.is_relative_to(other.directory) for other in result
        ) or any(other.directory == root.directory for other in result)
        if not covered:
            result.append(root)
    return result


class _StatLike(Protocol):
    @property
    def st_mtime_ns(self) -> int: ...
    @property
    def st_ctime_ns(self) -> int: ...
    @property
    def st_size(self) -> int: ...
    @property
    def st_ino(self) -> int: ...


class _Seen(NamedTuple):
    key: tuple[int, int, int, int]
    mtime: float


_Key = TypeVar("_Key", str, Path)
_FileKey = tuple[int, int, int, int]
"""A file's ``(mtime_ns, ctime_ns, size, inode)``."""
_UNLISTED = (-1, -1, -1)
"""The key of a folder that could not be listed (or looked at) for a passing reason: no
stat has it, so the next scan lists the folder again."""


class _Folder:
    """One folder as the scans know it: its stat when it was listed, its module files with
    the key each had at the previous scan (``None``: not seen, so it is new once seen), and
    its folders. ``keys`` is updated in place by the scans."""

    __slots__ = ("files", "folders", "key", "keys")

    def __init__(
        self,
        key: tuple[int, int, int],
        files: list[str],
        keys: list[_FileKey | None],
        folders: list[str],
    ) -> None:
        self.key = key
        self.files = files
        self.keys = keys
        self.folders = folders


class _Tree:
    """What the scans of one :meth:`PollingWatcher.open` know; used by one thread at a time.

    :meth:`scan` stats every folder and module file and returns what changed since the
    previous scan. A quiet scan allocates nothing that outlives it: per file one ``stat``
    call, one comparison with the previous key, and the racy test.

    A folder that cannot be listed, or a file or folder that cannot be stat-ed, for a
    passing reason (out of file descriptors: see :mod:`._transient`) is neither empty nor
    gone: what the previous scan knew of it stands, and it is looked at again by the next
    scan. :attr:`failing` holds those paths (:meth:`settle` tells the episodes).
    """

    def __init__(
        self,
        roots: Sequence[WatchRoot],
        stat: Callable[[str], _StatLike],
        racy_window: float,
    ) -> None:
        self._roots = [(str(root.directory), root.recursive) for root in roots]
        self._stat = stat
        self._racy_window = racy_window
        self._folders: dict[str, _Folder] = {}
        self.stats = 0
        """``stat`` calls made so far (the tests count them)."""
        self.listed = 0
        """Folders listed so far (the tests count them)."""
        self.failing: dict[str, OSError] = {}
        """Paths the latest scan could not look at for a passing reason → why."""
        self._episodes: dict[str, float] = {}

    def settle(self) -> tuple[dict[str, OSError], dict[str, float]]:
        """After a scan: the paths that began failing (→ why) and those that stopped
        (→ seconds since they began)."""
        now = time.monotonic()
        began = {path: e for path, e in self.failing.items() if path not in self._episodes}
        ended = {
            path: now - self._episodes.pop(path)
            for path in list(self._episodes)
            if path not in self.failing
        }
        self._episodes.update(dict.fromkeys(began, now))
        return began, ended

    def scan(self, previous_scan: float) -> set[FileChange]:
        """The module files added, modified (or racy) and deleted since the previous scan,
        which started at ``previous_scan``."""
        self.failing = {}
        racy_ns = int((previous_scan - self._racy_window) * 1e9)
        changes: list[tuple[ChangeKind, str]] = []
        folders: dict[str, _Folder] = {}
        for folder, recursive in self._roots:
            self._visit(folder, recursive, racy_ns, folders, changes)
        for folder, gone in self._folders.items():
            if folder not in folders:  # removed, or no longer below a watched folder
                changes.extend(
                    (ChangeKind.DELETED, path)
                    for path, key in zip(gone.files, gone.keys, strict=True)
                    if key is not None
                )
        self._folders = folders
        return {FileChange(kind, Path(path)) for kind, path in changes}

    def _visit(
        self,
        folder: str,
        recursive: bool,
        racy_ns: int,
        folders: dict[str, _Folder],
        changes: list[tuple[ChangeKind, str]],
    ) -> None:
        if folder in folders:
            return
        known = self._folders.get(folder)
        try:
            st = os.stat(folder)
        except OSError as error:
            if known is None or not is_transient(error):
                return  # gone: the end of the scan reports its files deleted
            self.failing[folder] = error
            known.key = _UNLISTED  # as it was; listed again once it can be
        else:
            self.stats += 1
            key = (st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            if known is None or known.key != key or st.st_mtime_ns >= racy_ns:
                known = self._list(folder, key, known, changes)
        folders[folder] = known
        # The loop of every scan. A folder's stat does not change when a file in it is
        # written in place, so every file is stat-ed; while nothing changes, nothing is
        # allocated that outlives the iteration.
        stat = self._stat
        files, keys = known.files, known.keys
        for index, path in enumerate(files):
            try:
                file_st = stat(path)
            except OSError as error:
                if is_transient(error):
                    self.failing[path] = error  # as it was: looked at again next scan
                elif keys[index] is not None:  # vanished since it was listed
                    keys[index] = None
                    changes.append((ChangeKind.DELETED, path))
                continue
            mtime = file_st.st_mtime_ns
            if mtime >= racy_ns or keys[index] != (
                mtime,
                file_st.st_ctime_ns,
                file_st.st_size,
                file_st.st_ino,
            ):
                kind = ChangeKind.MODIFIED if keys[index] is not None else ChangeKind.ADDED
                keys[index] = (mtime, file_st.st_ctime_ns, file_st.st_size, file_st.st_ino)
                changes.append((kind, path))
        self.stats += len(files)
        if recursive:
            for sub in known.folders:
                self._visit(sub, recursive, racy_ns, folders, changes)

    def _list(
        self,
        folder: str,
        key: tuple[int, int, int],
        known: _Folder | None,
        changes: list[tuple[ChangeKind, str]],
    ) -> _Folder:
        """List ``folder`` again: the importable-looking ``.py`` files and the folders
        (hidden ones and caches left out); files no longer there are reported deleted. A
        listing that fails for a passing reason keeps what was known (``_UNLISTED``: it
        is listed again by the next scan)."""
        self.listed += 1
        files: list[str] = []
        folders: list[str] = []
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    name = entry.name
                    if name.startswith(".") or name == "__pycache__":
                        continue
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            folders.append(entry.path)
                        elif is_module_file_name(name):
                            files.append(entry.path)
                    except OSError as error:
                        if is_transient(error):
                            raise
                        continue
        except OSError as error:
            if is_transient(error):
                self.failing[folder] = error
                if known is None:
                    return _Folder(_UNLISTED, [], [], [])
                known.key = _UNLISTED
                return known
        previous: dict[str, _FileKey | None] = (
            dict(zip(known.files, known.keys, strict=True)) if known is not None else {}
        )
        keys = [previous.pop(path, None) for path in files]
        changes.extend((ChangeKind.DELETED, path) for path, k in previous.items() if k is not None)
        return _Folder(key, files, keys, folders)


def _report_failing(tree: _Tree) -> None:
    """Log, once per episode, each path a scan could not look at for a passing reason, and
    each that it can look at again."""
    began, ended = tree.settle()
    for path, error in began.items():
        code, text = describe_errno(error)
        _log.warning(
            "reload.scan_deferred",
            paths=[path],
            errno=code,
            error=text,
            summary=f"cannot look at {display_path(Path(path))} now ({code}: {text}): "
            "polling tries again at each scan, and reports what changed there once it can",
        )
    for path, seconds in ended.items():
        _log.info(
            "reload.scan_recovered",
            paths=[path],
            seconds=round(seconds, 3),
            summary=f"{display_path(Path(path))} can be looked at again (after {seconds:.1f} s)",
        )


def _timed_scan(tree: _Tree, previous_scan: float) -> tuple[set[FileChange], float]:
    """A scan and how long it took in its thread (not counting the hand-off to it)."""
    started = time.perf_counter()
    changes = tree.scan(previous_scan)
    return changes, time.perf_counter() - started


class PollingWatcher:
    """Scans the watched folders, for file systems without notifications (network mounts,
    some container volumes, WSL).

    A file is reported when its stat (mtime, ctime, size, inode) changed, and also on every
    scan while its mtime is within ``racy_window`` seconds of the previous scan: on a file
    system with coarse timestamps a second save in the same second leaves the stat
    unchanged, so the reloader's content hash has to decide. Creation and deletion are found
    by listing the folders.

    A scan costs one ``stat`` per module file and per folder, in one worker thread, and
    compares each file's stat with the previous scan's in place (nothing else is kept, and
    nothing is allocated while nothing changes): a folder whose stat did not change since
    it was listed (and is not racy, as above) is not listed again, since adding, removing
    or renaming an entry changes it; its files are still stat-ed, since writing a file in
    place does not change its folder. While nothing changes the pause between scans grows
    by half each time, from ``interval`` up to ``max_interval``, and drops back to
    ``interval`` at the first change seen: a change is reported at worst ``max_interval``
    plus one scan after it happened (and on a coarse file system, one scan more) — or, for
    a tree so big that one scan takes longer than ``idle_share`` of ``max_interval``, the
    pause that keeps scanning within ``idle_share`` of a core.

    Args:
        interval: Seconds between scans while changes keep coming.
        max_interval: The longest pause between scans while idle (default: 1 s, or
            ``interval`` if longer).
        racy_window: How long (seconds) after its last write a file keeps being re-checked;
            2 s covers the coarsest common timestamps (FAT).
        idle_share: While idle, the pause between scans also grows to the last scan's
            duration divided by this, so that scanning takes at most this share of one core
            (1.5 %): a tree whose scan takes over 15 ms is scanned less often than every
            ``max_interval`` while nothing changes.
        stat: ``os.stat`` by default; injectable to simulate coarse file systems in tests.
    """

    def __init__(
        self,
        *,
        interval: float = 0.3,
        max_interval: float | None = None,
        racy_window: float = 2.0,
        idle_share: float = 0.015,
        stat: Callable[[Path], _StatLike] = os.stat,
    ) -> None:
        if not interval > 0 or math.isinf(interval):
            raise ValueError(f"interval must be a positive number of seconds, got {interval!r}")
        if max_interval is None:
            max_interval = max(interval, _IDLE_INTERVAL)
        if not max_interval >= interval or math.isinf(max_interval):
            raise ValueError(
                f"max_interval must be a number of seconds >= interval, got {max_interval!r}"
            )
        if racy_window < 0:
            raise ValueError(f"racy_window must be >= 0 seconds, got {racy_window!r}")
        if not 0 < idle_share <= 1:
            raise ValueError(f"idle_share must be in (0, 1], got {idle_share!r}")
        self.interval = interval
        self.max_interval = max_interval
        self.racy_window = racy_window
        self.idle_share = idle_share
        self._stat = stat

    def __repr__(self) -> str:
        return (
            f"PollingWatcher(interval={self.interval}, max_interval={self.max_interval}, "
            f"racy_window={self.racy_window}, idle_share={self.idle_share})"
        )

    def open(
        self, roots: Sequence[WatchRoot]
    ) -> AbstractAsyncContextManager[AsyncIterator[Collection[FileChange]]]:
        """Take a first snapshot of ``roots`` (so later changes are seen), then poll."""
        return self._open(roots)

    @asynccontextmanager
    async def _open(
        self, roots: Sequence[WatchRoot]
    ) -> AsyncIterator[AsyncIterator[Collection[FileChange]]]:
        tree = self._tree(roots)
        scanned_at = time.time()
        await anyio.to_thread.run_sync(tree.scan, scanned_at)
        _report_failing(tree)
        send, receive = anyio.create_memory_object_stream[Collection[FileChange]](_BUFFERED_BATCHES)
        async with anyio.create_task_group() as tg, receive:
            tg.start_soon(self._poll, tree, scanned_at, send)
            yield receive
            tg.cancel_scope.cancel()

    def _tree(self, roots: Sequence[WatchRoot]) -> _Tree:
        """A fresh scan state for ``roots`` (its first scan reports every file as added)."""
        stat = os.stat if self._stat is os.stat else self._stat_path
        return _Tree(minimal_roots(roots), stat, self.racy_window)

    async def _poll(
        self,
        tree: _Tree,
        scanned_at: float,
        send: MemoryObjectSendStream[Collection[FileChange]],
    ) -> None:
        delay = self.interval
        async with send:
            while True:
                await anyio.sleep(delay)
                now = time.time()
                batch, took = await anyio.to_thread.run_sync(_timed_scan, tree, scanned_at)
                scanned_at = now
                _report_failing(tree)
                if batch:
                    delay = self.interval
                    await send.send(batch)
                else:
                    # A big tree on a slow disk stretches the idle pause instead of taking
                    # more than ``idle_share`` of a core.
                    ceiling = max(self.max_interval, took / self.idle_share)
                    delay = min(delay * _BACKOFF, ceiling)

    def compare(
        self, before: dict[_Key, _Seen], after: dict[_Key, _Seen], scanned_at: float
    ) -> set[FileChange]:
        """The changes between two full snapshots; ``scanned_at`` is when ``before`` was taken.

        The rule a scan applies file by file (the tests check scans against it).
        """
        changes: set[FileChange] = set()
        racy = scanned_at - self.racy_window
        for path, now in after.items():
            then = before.get(path)
            if then is None:
                changes.add(FileChange(ChangeKind.ADDED, Path(path)))
            elif then.key != now.key or now.mtime >= racy:
                changes.add(FileChange(ChangeKind.MODIFIED, Path(path)))
        for path in before.keys() - after.keys():
            changes.add(FileChange(ChangeKind.DELETED, Path(path)))
        return changes

    def _stat_path(self, path: str) -> _StatLike:
        return self._stat(Path(path))


_BACKOFF = 1.5
_IDLE_INTERVAL = 1.0
