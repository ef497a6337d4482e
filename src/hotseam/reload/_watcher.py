"""Watchers: turn file-system activity under the watched folders into batches of changes.

A watcher only *hints*: the reloader re-reads every path it reports and compares content
hashes, so a spurious or duplicated report costs one file read, never a reload (an atomic
save reported as ``added``, watchfiles' one-second mtime precision: ``hot-reload-anchors.md``).
Directories are watched, never single files (an editor's rename-on-save ends a watch on the
file itself, watchfiles #215). The :class:`Watcher` protocol is the seam tests script.

**inotify** (:class:`InotifyNotifier`, waited for with ``anyio.wait_readable``: no thread
hop) reports a completed save (``IN_CLOSE_WRITE``, ``IN_MOVED_TO``) and what must be acted on
(a watched folder gone, an overflow, a folder moved in) at once, anything else after a quiet
period, so a half-written file is never reported on its own. It is not recursive: a new
folder is watched when its event is read, then listed (files made before its watch count).
The watch limit raises :class:`WatchLimitError` and the caller polls instead, loudly. The
binding is ``inotify_simple`` (``asyncinotify`` is asyncio-only, ``pyinotify`` unmaintained).

**A watched folder replaced.** A native watch holds a folder's *inode*, not its path: after
``rm -rf providers`` and a checkout, or an atomic deploy by renames, nothing under the path
is reported again. So the watch is made again when the folder reports its own deletion, or
when its ``(st_dev, st_ino)`` changed (checked every ``root_check`` seconds on the loop).

A failure that passes (:func:`~._errors.is_transient`) is never taken for a folder gone or a
watch lost for good: the folder keeps its identity until it can be looked at, and the watch
is polled for only until it can be made again (every :data:`~._errors.LAST_RETRY` seconds).
"""

from __future__ import annotations

import contextlib
import enum
import errno
import importlib.util
import math
import os
import re
import stat
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, NamedTuple, Protocol, TypeVar

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectSendStream

from .._core import get_logger
from ._errors import LAST_RETRY, describe_errno, file_type, is_transient
from ._events import display_path

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


@dataclass(slots=True)
class _Folder:
    """One folder as the scans know it: its stat when it was listed, its module files with
    the key each had at the previous scan (``None``: new once seen), and its folders."""

    key: tuple[int, int, int]
    files: list[str]
    keys: list[_FileKey | None]
    folders: list[str]


class _Tree:
    """What the scans of one :meth:`PollingWatcher.open` know; used by one thread at a time.

    A path that cannot be looked at for a passing reason is neither empty nor gone: what
    the previous scan knew of it stands (:attr:`failing`).
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
            file_key = (mtime, file_st.st_ctime_ns, file_st.st_size, file_st.st_ino)
            if mtime >= racy_ns or keys[index] != file_key:
                kind = ChangeKind.MODIFIED if keys[index] is not None else ChangeKind.ADDED
                keys[index] = file_key
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
        """List ``folder`` again, reporting files no longer there deleted. A listing that
        fails for a passing reason keeps what was known (``_UNLISTED``: listed next scan)."""
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

    A file is reported when its stat (mtime, ctime, size, inode) changed, and on every scan
    while its mtime is within ``racy_window`` of the previous scan: with coarse timestamps a
    second save in the same second leaves the stat unchanged, so the content hash decides.

    A scan costs one ``stat`` per module file and per folder, in one worker thread, and
    allocates nothing while nothing changes; a folder whose stat did not change is not
    listed again (an entry added, removed or renamed changes it). While idle the pause
    between scans grows by half each time, from ``interval`` to ``max_interval``, and drops
    back at the first change: a change is seen at worst ``max_interval`` plus one scan after.

    Args:
        interval: Seconds between scans while changes keep coming.
        max_interval: The longest pause between scans while idle (default: 1 s, or
            ``interval`` if longer).
        racy_window: How long (seconds) after its last write a file keeps being re-checked;
            2 s covers the coarsest common timestamps (FAT).
        idle_share: While idle, the pause also grows to the last scan's duration divided by
            this, so that scanning a big tree takes at most this share of one core (1.5 %).
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

    @asynccontextmanager
    async def open(
        self, roots: Sequence[WatchRoot]
    ) -> AsyncIterator[AsyncIterator[Collection[FileChange]]]:
        """Take a first snapshot of ``roots`` (so later changes are seen), then poll."""
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


# -- inotify ---------------------------------------------------------------------------------------

ADDED: Final = 1
MODIFIED: Final = 2
DELETED: Final = 3
"""Change kinds, numbered as watchfiles numbers them (the native watcher reads both)."""

# inotify.h; the values are the kernel's ABI.
_MODIFY = 0x2
_ATTRIB = 0x4
_CLOSE_WRITE = 0x8
_MOVED_FROM = 0x40
_MOVED_TO = 0x80
_CREATE = 0x100
_DELETE = 0x200
_DELETE_SELF = 0x400
_MOVE_SELF = 0x800
_UNMOUNT = 0x2000
_Q_OVERFLOW = 0x4000
_IGNORED = 0x8000
_ONLYDIR = 0x01000000
_DONT_FOLLOW = 0x02000000
_EXCL_UNLINK = 0x04000000
_ISDIR = 0x40000000

_MASK: Final = (
    _MODIFY
    | _ATTRIB
    | _CLOSE_WRITE
    | _MOVED_FROM
    | _MOVED_TO
    | _CREATE
    | _DELETE
    | _DELETE_SELF
    | _MOVE_SELF
    | _ONLYDIR
    | _EXCL_UNLINK
)
"""What each watched folder reports: every change of an entry and of the folder itself."""

_GONE = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)
"""A folder that vanished (or became something else) between its listing and its watch."""


def inotify_available() -> bool:
    """True where inotify can be used: Linux, with ``inotify_simple`` installed."""
    if not sys.platform.startswith("linux"):
        return False
    return importlib.util.find_spec("inotify_simple") is not None


class _INotify(Protocol):
    """What is used of ``inotify_simple.INotify`` (the package has no type information)."""

    def fileno(self) -> int: ...
    def add_watch(self, path: str, mask: int) -> int: ...
    def rm_watch(self, wd: int) -> None: ...
    def read(self, timeout: int | None = None) -> Iterable[tuple[int, int, int, str]]: ...
    def close(self) -> None: ...


class WatchLimitError(OSError):
    """The per-user inotify watch limit is reached (``ENOSPC`` from ``inotify_add_watch``)."""


def _watch_limit() -> str:
    try:
        with open("/proc/sys/fs/inotify/max_user_watches", encoding="ascii") as file:
            return file.read().strip()
    except OSError:
        return "?"


class InotifyNotifier:
    """The inotify watch of some folders (all recursive, or all flat), read on the loop.
    Making one raises :class:`OSError` (:class:`WatchLimitError` at the watch limit)."""

    def __init__(
        self, roots: list[str], *, recursive: bool, quiet_ms: float, cap_ms: float
    ) -> None:
        from inotify_simple import INotify  # type: ignore[import-untyped]

        self.recursive = recursive
        self.quiet = quiet_ms / 1000
        self.cap = cap_ms / 1000
        self._roots = set(roots)
        self._dirs: dict[int, str] = {}
        """Watch descriptor → the folder it watches."""
        self._wds: dict[str, int] = {}
        """Folder → its watch descriptor."""
        self._pending: dict[str, int] = {}
        """Path → change kind, gathered and not reported yet."""
        self._first = self._last = 0.0
        """When the first and the latest change of ``_pending`` were read (monotonic)."""
        self._inotify: _INotify | None = INotify(nonblocking=True)
        try:
            for root in roots:
                self._watch_tree(root, None)
        except BaseException:
            self.close()
            raise

    @property
    def watches(self) -> int:
        """How many folders are watched (the tests count them)."""
        return len(self._dirs)

    def close(self) -> None:
        inotify, self._inotify = self._inotify, None
        if inotify is not None:
            inotify.close()

    async def changes(self) -> set[tuple[int, str]]:
        """The next batch: at once after a save completed, else after a quiet period.

        Cancelled, it keeps what it gathered for the next call (or :meth:`take`)."""
        inotify = self._inotify
        assert inotify is not None, "closed"
        pending = self._pending
        while True:
            if not pending:
                await anyio.wait_readable(inotify.fileno())
            else:
                wait = min(self._last + self.quiet, self._first + self.cap) - time.monotonic()
                if wait <= 0:
                    return self.take()
                with anyio.move_on_after(wait):
                    await anyio.wait_readable(inotify.fileno())
            touched, urgent = self._read(inotify, pending)
            if touched:
                self._last = time.monotonic()
                if not self._first:
                    self._first = self._last
            if urgent and pending:
                return self.take()

    def take(self) -> set[tuple[int, str]]:
        """What was gathered and not reported yet (and forget it)."""
        taken = {(kind, path) for path, kind in self._pending.items()}
        self._pending.clear()
        self._first = self._last = 0.0
        return taken

    # -- reading events -------------------------------------------------------------------------

    def _read(self, inotify: _INotify, pending: dict[str, int]) -> tuple[bool, bool]:
        """Fold the queued events into ``pending``: whether any of them mattered, and
        whether the batch must go at once."""
        touched = urgent = False
        for wd, mask, _cookie, name in inotify.read(timeout=0):
            if mask & _Q_OVERFLOW:
                self._overflowed(pending)
                touched = urgent = True
                continue
            folder = self._dirs.get(wd)
            if folder is None:
                continue  # a watch removed meanwhile
            if not name:  # the folder itself: deleted, moved, unmounted, watch removed
                if mask & (_IGNORED | _DELETE_SELF | _MOVE_SELF | _UNMOUNT) and self._ended(
                    wd, folder, mask, pending
                ):
                    touched = urgent = True
                continue
            path = f"{folder}/{name}"
            if mask & _ISDIR:
                if name.startswith(".") or name == "__pycache__":
                    continue
                urgent = self._folder_event(path, mask, pending) or urgent
            elif may_matter(Path(path)):
                urgent = self._file_event(path, name, mask, pending) or urgent
            else:
                continue
            touched = True
        return touched, urgent

    @staticmethod
    def _file_event(path: str, name: str, mask: int, pending: dict[str, int]) -> bool:
        if mask & (_DELETE | _MOVED_FROM):
            pending[path] = DELETED
            return False
        if mask & (_CREATE | _MOVED_TO):
            pending[path] = ADDED
        elif pending.get(path) != ADDED:
            pending[path] = MODIFIED
        # A save is complete: written and closed, or moved into place.
        return bool(mask & (_CLOSE_WRITE | _MOVED_TO)) and is_module_file_name(name)

    def _folder_event(self, path: str, mask: int, pending: dict[str, int]) -> bool:
        if mask & (_DELETE | _MOVED_FROM):
            self._forget_tree(path)
            pending[path] = DELETED
            return False
        if mask & (_CREATE | _MOVED_TO):
            pending[path] = ADDED
            if self.recursive:
                self._watch_tree(path, pending)
            return bool(mask & _MOVED_TO)  # moved in whole: its files are complete
        pending.setdefault(path, MODIFIED)  # its mode (readable again?) or times changed
        return False

    def _ended(self, wd: int, folder: str, mask: int, pending: dict[str, int]) -> bool:
        """A watched folder was deleted, moved, unmounted, or its watch removed; True when
        it is a root (reported deleted: the caller looks at what is there now)."""
        if mask & _IGNORED or mask & _UNMOUNT:
            if self._dirs.get(wd) == folder:
                del self._dirs[wd]
                if self._wds.get(folder) == wd:
                    del self._wds[folder]
        elif mask & _MOVE_SELF and folder not in self._roots:
            return False  # its parent reported the move (and dropped its watches)
        if folder in self._roots:
            pending[folder] = DELETED
            return True
        return False

    def _overflowed(self, pending: dict[str, int]) -> None:
        """Events were lost: watch what is there now, and have every root looked at (said
        once, at info: nothing is lost, but a reload of everything is worth a line)."""
        _log.info(
            "reload.watch_overflowed",
            roots=sorted(self._roots),
            summary="more file events came at once than the kernel queues "
            "(fs.inotify.max_queued_events): looking at every watched module again",
        )
        for root in self._roots:
            if self.recursive:
                self._watch_tree(root, None)
            pending[root] = MODIFIED

    # -- the watch table --------------------------------------------------------------------

    def _watch_tree(self, top: str, found: dict[str, int] | None) -> None:
        """Watch ``top`` (and, when recursive, every folder under it); ``found`` also gets
        the module files and folders there (made before their watch)."""
        inotify = self._inotify
        assert inotify is not None
        stack = [top]
        while stack:
            folder = stack.pop()
            # A watched path may lead through a symbolic link (a folder replaced by a link
            # to another): it is followed, as it was when the reloader resolved it. Below
            # it, no link is (a folder found as one and swapped for a link meanwhile).
            mask = _MASK if folder in self._roots else _MASK | _DONT_FOLLOW
            try:
                wd = inotify.add_watch(folder, mask)
            except OSError as error:
                if error.errno == errno.ENOSPC:
                    raise WatchLimitError(
                        errno.ENOSPC,
                        f"the inotify watch limit is reached (fs.inotify.max_user_watches = "
                        f"{_watch_limit()}), watching {folder}",
                    ) from None
                if error.errno in _GONE or error.errno == errno.EACCES:
                    continue  # gone since it was listed; unreadable: the planner says so
                raise
            stale = self._wds.get(folder)
            if stale is not None and stale != wd:
                self._dirs.pop(stale, None)
            self._dirs[wd] = folder
            self._wds[folder] = wd
            if not self.recursive and folder in self._roots:
                continue
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        entry_name = entry.name
                        try:
                            is_folder = entry.is_dir(follow_symlinks=False)
                        except OSError:
                            continue
                        if is_folder:
                            if entry_name.startswith(".") or entry_name == "__pycache__":
                                continue
                            stack.append(entry.path)
                            if found is not None:
                                found.setdefault(entry.path, ADDED)
                        elif found is not None and is_module_file_name(entry_name):
                            found.setdefault(entry.path, ADDED)
            except OSError as error:
                if error.errno in _GONE or error.errno == errno.EACCES:
                    continue
                raise

    def _forget_tree(self, top: str) -> None:
        """Stop watching ``top`` and everything under it (moved away, or deleted)."""
        inotify = self._inotify
        prefix = top + "/"
        for folder in [f for f in self._wds if f == top or f.startswith(prefix)]:
            wd = self._wds.pop(folder)
            self._dirs.pop(wd, None)
            if inotify is not None:
                with contextlib.suppress(OSError):  # already gone with its folder
                    inotify.rm_watch(wd)


# -- the native watcher ----------------------------------------------------------------------------

_KINDS = {ADDED: ChangeKind.ADDED, MODIFIED: ChangeKind.MODIFIED, DELETED: ChangeKind.DELETED}
_T = TypeVar("_T")
_THREAD_WAIT = 5.0
"""Seconds the watch thread waits for changes before it returns to be called again."""
_Identity = tuple[int, int]
"""A folder's ``(st_dev, st_ino)``: what a native watch is attached to."""
Backend = Literal["auto", "inotify", "watchfiles"]


class NativeWatcher:
    """Native file-system notifications: inotify on Linux, watchfiles elsewhere.

    With inotify (Linux with ``inotify_simple`` installed, the default there) the event loop
    itself waits on the inotify descriptor: a module file closed after a write, or moved
    into place, is reported at once; other changes once they paused for ``step_ms``, at the
    latest ``debounce_ms`` after the first. Nothing wakes while nothing changes.

    With watchfiles a worker thread wakes every ``step_ms`` and reports a batch once it did
    not grow during one step, or ``debounce_ms`` after the first change: latency is one to
    two steps, ``debounce_ms`` only a cap (``hot-reload-anchors.md`` §1.2).

    Args:
        debounce_ms: The longest a batch is held open while changes keep arriving.
        step_ms: How long changes must pause before a batch is reported (inotify: changes
            other than a completed save). With watchfiles it is also how often the watch
            thread wakes while nothing happens: at the default 8 ms a save's batch comes
            about 12 ms after the write, and the wake-ups cost 0.6 to 0.8 % of a core
            while idle (inotify: 0.03 %; see ``docs/performance.md``).
        root_check: Seconds between two checks that each watched folder is still the one
            the native watch is on (see the module's docstring).
        backend: ``"auto"`` (inotify where available, else watchfiles), ``"inotify"`` or
            ``"watchfiles"``.

    Raises:
        ValueError: a bound out of range, or ``backend="inotify"`` where inotify cannot be
            used (not Linux, or ``inotify_simple`` not installed).
    """

    def __init__(
        self,
        *,
        debounce_ms: int = 50,
        step_ms: int = 8,
        root_check: float = 1.0,
        backend: Backend = "auto",
    ) -> None:
        if step_ms <= 0 or debounce_ms < step_ms:
            raise ValueError(
                f"need 0 < step_ms <= debounce_ms, got step_ms={step_ms}, debounce_ms={debounce_ms}"
            )
        if not 0 < root_check < float("inf"):
            raise ValueError(f"root_check must be a number of seconds > 0, got {root_check!r}")
        if backend not in ("auto", "inotify", "watchfiles"):
            raise ValueError(f"backend must be 'auto', 'inotify' or 'watchfiles', got {backend!r}")
        if backend == "inotify" and not inotify_available():
            raise ValueError(
                "backend='inotify' needs Linux and the inotify_simple package "
                "(pip install inotify_simple); 'auto' uses watchfiles where it is missing"
            )
        self.debounce_ms = debounce_ms
        self.step_ms = step_ms
        self.root_check = root_check
        self.backend: Literal["inotify", "watchfiles"] = (
            "watchfiles"
            if backend == "watchfiles" or (backend == "auto" and not inotify_available())
            else "inotify"
        )

    def __repr__(self) -> str:
        return (
            f"NativeWatcher(backend={self.backend!r}, debounce_ms={self.debounce_ms}, "
            f"step_ms={self.step_ms}, root_check={self.root_check:g})"
        )

    @asynccontextmanager
    async def open(
        self, roots: Sequence[WatchRoot]
    ) -> AsyncIterator[AsyncIterator[Collection[FileChange]]]:
        """Start native watches on ``roots`` (recursive and flat ones separately)."""
        minimal = minimal_roots(roots)
        groups = [
            _Group([root for root in minimal if root.recursive == recursive], self)
            for recursive in (True, False)
            if any(root.recursive == recursive for root in minimal)
        ]
        send, receive = anyio.create_memory_object_stream[Collection[FileChange]](_BUFFERED_BATCHES)
        try:
            # Watching by the time this is entered: each group's watch is made here.
            started = [group.start() for group in groups]
            async with anyio.create_task_group() as tg, send, receive:
                for group, native in zip(groups, started, strict=True):
                    # Polling instead: its first scan is taken before this is entered.
                    await tg.start(group.run, send.clone(), native)
                yield receive
                tg.cancel_scope.cancel()
        finally:
            for group in groups:
                group.close()


class _Group:
    """The watched folders of one kind (recursive, or flat) under one native watch."""

    def __init__(self, roots: list[WatchRoot], watcher: NativeWatcher) -> None:
        self.roots = roots
        self.paths = [str(root.directory) for root in roots]
        self.recursive = roots[0].recursive
        self.watcher = watcher
        self.identities: dict[str, _Identity | None] = {}
        self.notifier: Any = None
        self.failure: BaseException | None = None
        self._unreachable: set[str] = set()
        """Folders whose ``stat`` failed for a passing reason (logged once until it works)."""
        self._wake = threading.Event()
        """Ends the thread's wait: the task is cancelled, or a check found a folder changed."""
        self._waiting: anyio.CancelScope | None = None
        """Around the wait on the loop (inotify): a check that found a change cancels it."""
        self._changed = False

    def start(self) -> bool:
        """(Re)make the native watch on the folders present now; False if it cannot be made
        (``failure`` says why). The identities are taken first, so a folder replaced in
        between is seen as replaced once more."""
        self.close()
        watcher = self.watcher
        # RustNotify is what watchfiles.awatch drives; using it directly tells us the moment
        # the watches exist, which awatch never reports. Imported here, at the first start
        # even with no folder present yet (later, descriptors may be short): where inotify
        # watches, watchfiles (and multiprocessing, which it imports) is never needed.
        if watcher.backend != "inotify":
            from watchfiles._rust_notify import RustNotify
        self.identities = self._identify()
        present = [path for path in self.paths if self.identities[path] is not None]
        if not present:
            return True
        # inotify: the watch limit, out of descriptors or instances; watchfiles: those (as
        # OSError) and its own errors.
        expected = OSError if watcher.backend == "inotify" else Exception
        try:
            if watcher.backend == "inotify":
                self.notifier = InotifyNotifier(
                    present,
                    recursive=self.recursive,
                    quiet_ms=watcher.step_ms,
                    cap_ms=watcher.debounce_ms,
                )
            else:
                # ignore_permission_denied: an unreadable sub-folder is reported by the
                # planner (skipped), and must not stop the watch of everything else. It also
                # makes a folder that vanished since its stat a silent no-watch.
                self.notifier = RustNotify(present, False, False, 0, self.recursive, True)
        except expected as error:
            self.failure = error
            return False
        return True

    def close(self) -> None:
        notifier, self.notifier = self.notifier, None
        if notifier is not None:
            notifier.close()

    async def run(
        self,
        send: MemoryObjectSendStream[Collection[FileChange]],
        native: bool,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Report native changes (``native``: the watch is made; else poll from the start);
        make the watch again when a folder's own watch ended or the check found it changed;
        poll while the watch is broken."""
        async with send:
            while True:
                if native:
                    task_status.started()
                    task_status = anyio.TASK_STATUS_IGNORED
                    async with anyio.create_task_group() as checks:
                        checks.start_soon(self._check)
                        await self._watch(send)
                        checks.cancel_scope.cancel()
                native = await self._poll(send, native, task_status)
                task_status = anyio.TASK_STATUS_IGNORED
                _log.info(
                    "reload.watch_restored",
                    paths=self.paths,
                    summary=f"watching {self._shown()} natively again (no longer polled)",
                )
                # What changed between the last scan and the new native watch.
                await send.send({FileChange(ChangeKind.MODIFIED, r.directory) for r in self.roots})

    async def _poll(
        self,
        send: MemoryObjectSendStream[Collection[FileChange]],
        after_native: bool,
        task_status: anyio.abc.TaskStatus[None],
    ) -> bool:
        """Poll the folders, for good — or, when the native watch failed for a passing
        reason, until it can be made again (then True)."""
        self.close()
        error = self.failure
        passing = error is not None and is_transient(error)
        _log.warning(
            "reload.watch_fallback",
            paths=self.paths,
            error=f"{type(error).__name__}: {error}",
            summary=f"cannot watch {self._shown()} natively ({type(error).__name__}: {error}); "
            "polling it instead (changes are seen within about a second)"
            + (", until the native watch can be made again" if passing else ""),
        )
        async with PollingWatcher().open(self.roots) as batches:
            task_status.started()
            if after_native:  # what changed between the native watch's end and the scan
                await send.send({FileChange(ChangeKind.MODIFIED, r.directory) for r in self.roots})
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._forward, batches, send)
                if passing:
                    await self._until_native()
                    tg.cancel_scope.cancel()
                    return True
        raise RuntimeError("polling the watched folders stopped")

    @staticmethod
    async def _forward(
        batches: AsyncIterator[Collection[FileChange]],
        send: MemoryObjectSendStream[Collection[FileChange]],
    ) -> None:
        async for batch in batches:
            await send.send(batch)

    async def _until_native(self) -> None:
        """Try to make the native watch every ``LAST_RETRY`` seconds, until it is made (or
        fails for a reason that does not pass: then poll for good)."""
        while True:
            await anyio.sleep(LAST_RETRY)
            if self.start():
                return
            if self.failure is None or not is_transient(self.failure):
                await anyio.sleep_forever()

    async def _watch(self, send: MemoryObjectSendStream[Collection[FileChange]]) -> None:
        """The native watch's loop; returns when the watch broke (``failure`` says why)."""
        while True:
            try:
                raw = await self._next()
            except Exception as error:  # a watchfiles error; inotify: the watch limit...
                self.failure = error
                return
            if raw == "signal":
                raise RuntimeError("the watch thread unexpectedly received a signal")
            dropped: set[str] = set()
            if isinstance(raw, set):
                # A deletion of the folder itself ends its watch whatever is at the path now
                # (a folder made again at once may even reuse the inode number).
                dropped = {p for kind, p in raw if kind == DELETED and p in self.identities}
                batch = {
                    FileChange(_KINDS[change], Path(path))
                    for change, path in raw
                    if may_matter(Path(path))
                }
                if batch:
                    await send.send(batch)
            if dropped or self._changed:
                self._changed = False
                self._wake.clear()
                before = self.identities
                if not self.start():
                    return
                await send.send(self._report(before, dropped))

    async def _next(self) -> object:
        """The next native batch: ``{(kind, path)}``, ``"stop"`` (a check found a folder
        changed, or the task is cancelled) or ``"timeout"``."""
        notifier = self.notifier
        if isinstance(notifier, InotifyNotifier):
            if not self._changed:  # (a check may have found it while a batch was sent)
                with anyio.CancelScope() as self._waiting:
                    return await notifier.changes()
                self._waiting = None
            # A check found a folder changed: what was gathered so far is reported first.
            return notifier.take() or "stop"
        return await _in_thread(self._wait, self._wake)

    async def _check(self) -> None:
        """Every ``root_check`` seconds, one ``stat`` per folder on the event loop (cheaper
        than waking the watch thread); a change ends the native wait."""
        while True:
            await anyio.sleep(self.watcher.root_check)
            if not self._changed and self._identify() != self.identities:
                self._changed = True
                self._wake.set()
                if self._waiting is not None:
                    self._waiting.cancel()

    def _wait(self, wake: threading.Event) -> object:
        """In the watch thread: the next batch of native changes, or ``"stop"`` once
        ``wake`` is set (or ``"timeout"``)."""
        watcher = self.watcher
        if self.notifier is None:
            return "stop" if wake.wait(_THREAD_WAIT) else "timeout"
        return self.notifier.watch(
            watcher.debounce_ms, watcher.step_ms, round(_THREAD_WAIT * 1000), wake
        )

    def _shown(self) -> str:
        return ", ".join(display_path(Path(path)) for path in self.paths)

    def _identify(self) -> dict[str, _Identity | None]:
        """Each folder's identity; one that cannot be looked at for a passing reason keeps
        the one it had (logged once, and when it can be looked at again)."""
        found: dict[str, _Identity | None] = {}
        for path in self.paths:
            try:
                found[path] = _identity(path)[0]
            except OSError as error:
                found[path] = self.identities.get(path)
                if path not in self._unreachable:
                    self._unreachable.add(path)
                    code, text = describe_errno(error)
                    _log.warning(
                        "reload.scan_deferred",
                        paths=[path],
                        errno=code,
                        error=text,
                        summary=f"cannot look at watched folder {display_path(Path(path))} "
                        f"now ({code}: {text}): taken as unchanged until it can be",
                    )
            else:
                if path in self._unreachable:
                    self._unreachable.discard(path)
                    _log.info(
                        "reload.scan_recovered",
                        paths=[path],
                        summary=f"watched folder {display_path(Path(path))} can be looked at again",
                    )
        return found

    def _report(self, before: dict[str, _Identity | None], dropped: set[str]) -> set[FileChange]:
        """Log and report what happened to each folder whose identity changed or whose watch
        ended."""
        changes: set[FileChange] = set()
        for path in self.paths:
            was, now = before.get(path), self.identities[path]
            if was == now and (path not in dropped or now is None):
                continue
            shown = display_path(Path(path))
            if now is None:
                try:
                    why = _identity(path)[1] or "gone"
                except OSError:  # a passing failure just now: it was gone a moment ago
                    why = "gone"
                _log.warning(
                    "reload.root_gone",
                    path=path,
                    reason=why,
                    summary=f"watched folder {shown} is {why}: its modules are unloaded; "
                    "it is watched for again and loaded when it comes back",
                )
                changes.add(FileChange(ChangeKind.DELETED, Path(path)))
            elif was is None:
                _log.info(
                    "reload.root_back",
                    path=path,
                    summary=f"watched folder {shown} is back: watching it again",
                )
                changes.add(FileChange(ChangeKind.ADDED, Path(path)))
            else:
                _log.info(
                    "reload.root_replaced",
                    path=path,
                    summary=f"watched folder {shown} was replaced by another folder: "
                    "watching the new one",
                )
                changes.add(FileChange(ChangeKind.MODIFIED, Path(path)))
        return changes


def _identity(path: str) -> tuple[_Identity | None, str | None]:
    """The identity of the folder at ``path``, or ``None`` and why there is none.

    Raises:
        OSError: it cannot be looked at for a reason that passes (:func:`~._errors.is_transient`).
    """
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None, "gone (deleted or moved away)"
    except OSError as error:
        if is_transient(error):
            raise
        return None, f"unreachable ({error.strerror or error})"
    if not stat.S_ISDIR(st.st_mode):
        kind = "a file" if stat.S_ISREG(st.st_mode) else file_type(st.st_mode)
        return None, f"no longer a folder (it is {kind})"
    return (st.st_dev, st.st_ino), None


async def _in_thread(function: Callable[[threading.Event], _T], wake: threading.Event) -> _T:
    """Run ``function(wake)`` in a worker thread; cancellation sets ``wake``, which ends a
    native wait within one step."""
    returned = False

    async def wake_when_cancelled() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            if not returned:  # cancelled from outside, not ended below
                wake.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(wake_when_cancelled)
        try:
            outcome = await anyio.to_thread.run_sync(function, wake)
        finally:
            returned = True
            tg.cancel_scope.cancel()
    return outcome


WatchfilesWatcher = NativeWatcher
"""The former name of :class:`NativeWatcher` (it used watchfiles only)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchOptions:
    """The watch tuning of a :class:`Reloader` (``watch=WatchOptions(...)``), validated once
    when it is made.

    Args:
        watcher: A custom :class:`Watcher` (overrides ``polling`` and the native and
            polling timings below).
        polling: Scan the folders instead of using native notifications (network mounts,
            containers); changes are still decided by content hash.
        debounce_ms: Native watching: the longest a batch of changes is held open.
        step_ms: Native watching: how long changes must pause before a batch is reported
            (``0 < step_ms <= debounce_ms``).
        poll_interval: Polling: seconds between scans.
        root_check: Seconds between checks that each watched path still leads to the folder
            watched: a folder replaced at its path (``rm -rf`` and made again, a deploy by
            renames) is watched again, and a symbolic link pointed elsewhere (``ln -sfn``)
            is followed.
        coalesce: Seconds after a reload during which further changes are gathered into
            the next one (a lone change is applied at once).
        deletion_grace: Seconds a loaded module whose file (or folder) is gone keeps
            serving before it is unloaded (default 0: unloaded at once; ``hotseam dev`` and
            ``run`` use 2). A file back within the grace (``git checkout``, ``git stash``,
            an editor that deletes then writes) is reloaded if it changed, and nothing
            happens if it did not; whatever plans a reload meanwhile (a save of a module
            it imports, :meth:`Reloader.reload`) leaves it serving. See ``docs/reload.md``.

    Raises:
        TypeError: a field of the wrong type (the message names it).
        ValueError: a field out of range (the message names it and its range).
    """

    watcher: Watcher | None = None
    polling: bool = False
    debounce_ms: int = 50
    step_ms: int = 8
    poll_interval: float = 0.3
    root_check: float = 1.0
    coalesce: float = 0.1
    deletion_grace: float = 0.0

    def __post_init__(self) -> None:
        if self.watcher is not None and not callable(getattr(self.watcher, "open", None)):
            raise TypeError(f"watcher must be a Watcher (or None), got {self.watcher!r}")
        if not isinstance(self.polling, bool):
            raise TypeError(f"polling must be True or False, got {self.polling!r}")
        for name in ("debounce_ms", "step_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be a whole number of milliseconds, got {value!r}")
        if self.step_ms <= 0:
            raise ValueError(f"step_ms must be > 0, got {self.step_ms!r}")
        if self.debounce_ms < self.step_ms:
            raise ValueError(
                f"debounce_ms must be >= step_ms ({self.step_ms}), got {self.debounce_ms!r}"
            )
        for name, zero in (
            ("poll_interval", False),
            ("root_check", False),
            ("coalesce", True),
            ("deletion_grace", True),
        ):
            value = getattr(self, name)
            bound = ">= 0" if zero else "> 0"
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{name} must be a number of seconds {bound}, got {value!r}")
            if math.isnan(value) or math.isinf(value) or value < 0 or (value == 0 and not zero):
                message = f"{name} must be a finite number of seconds {bound}, got {value!r}"
                raise ValueError(message)

    def make_watcher(self) -> Watcher:
        """The watcher these options describe: the custom one, polling, or native."""
        if self.watcher is not None:
            return self.watcher
        if self.polling:
            return PollingWatcher(interval=self.poll_interval)
        return WatchfilesWatcher(
            debounce_ms=self.debounce_ms, step_ms=self.step_ms, root_check=self.root_check
        )
