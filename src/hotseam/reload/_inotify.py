"""Event-driven native watching on Linux: inotify, read on the event loop itself.

watchfiles' notifier wakes every ``step_ms`` and reports a batch only once a whole step went
by without a new change (``hot-reload-anchors.md`` §1.2): a save waits one to two steps
(about 12 ms at the default 8 ms step), and the idle process still wakes 125 times a
second. An inotify descriptor, by contrast, becomes readable the moment the kernel queues
an event — before the writer's ``close()`` has even returned. :class:`InotifyNotifier`
waits for that on the event loop (``anyio.wait_readable``: epoll under asyncio and trio),
so no thread hands anything over and nothing runs while nothing happens.

When to report:

* **at once** on a close after writing (``IN_CLOSE_WRITE``) or a move into place
  (``IN_MOVED_TO``) of a module file — the end of an ordinary save and of an atomic one —
  and on what the reloader must act on without delay (a watched folder deleted or moved, a
  queue overflow, a folder moved in whole). What else was queued by then goes in the same
  batch; what follows is coalesced by the reloader;
* **after a quiet period** for everything else (a creation, a write whose file is still
  open, a deletion, a touch): once no further event came for ``quiet_ms``, or at the latest
  ``cap_ms`` after the first. A half-written file is never reported on its own.

Folders are watched one by one (inotify is not recursive). A folder created or moved in
under a recursive root is watched as soon as its event is read, then listed: files made in
it before its watch existed are reported too (the race every inotify watcher has). Hidden
folders and ``__pycache__`` are not watched (they never hold watched code); symbolic links
are not followed (a link to a folder inside the watched paths is watched where it leads,
one outside is refused by the reloader anyway). A queue overflow (``IN_Q_OVERFLOW``)
re-lists every watched folder and reports each root, which makes the reloader look at
every module (one line at info, ``reload.watch_overflowed``). The per-user watch limit
(``ENOSPC``, ``fs.inotify.max_user_watches``) raises :class:`WatchLimitError`: the caller
falls back to polling, loudly.

The binding is `inotify_simple <https://pypi.org/project/inotify-simple/>`_: ``inotify_init1``,
``inotify_add_watch`` and ``inotify_rm_watch`` through ctypes and the event parser, no event
loop or thread of its own (``asyncinotify`` is asyncio-only, ``pyinotify`` unmaintained).
It is a Linux-only, optional dependency: without it (or elsewhere) watchfiles watches.
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Final, Protocol

import anyio

from .._core import get_logger
from ._watcher import is_module_file_name, may_matter

__all__ = ["ADDED", "DELETED", "MODIFIED", "InotifyNotifier", "WatchLimitError", "available"]

ADDED: Final = 1
MODIFIED: Final = 2
DELETED: Final = 3
"""Change kinds, numbered as watchfiles numbers them (the native watcher reads both)."""

_log = get_logger("hotseam.reload")

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


def available() -> bool:
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

    Making one watches every folder (raises :class:`OSError`: :class:`WatchLimitError`
    at the watch limit, ``EMFILE`` out of descriptors or inotify instances);
    :meth:`changes` returns the next batch as ``{(kind, path)}``; :meth:`close` ends it.
    """

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
        """Watch ``top`` (and, when recursive, every folder under it); with ``found``, also
        report the module files and folders found there (made before their watch)."""
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
