"""Reading module files: off the event loop, only regular files, never beyond a size limit.

A module is read and hashed in a worker thread, in chunks, so that neither a big file nor a
slow file system holds up the event loop; only a small file on a local file system is read
on the loop (the thread's round trip is most of a save that changed nothing).

Compiling is another matter: ``compile()`` holds the interpreter lock from start to end, so
a module of many megabytes (a generated table, a mistake) stalls the event loop while it
compiles even in the reloader's worker thread — seconds for tens of megabytes. A file over
the reloader's ``max_module_size`` is therefore refused before it is even opened: its load
fails with :class:`ModuleTooLargeError` naming the file, its size and the limit, like any
failed load (the running generation keeps serving).

**Which file systems are local.** A read from a network file system (NFS, SMB, a FUSE mount,
9p...) can block for as long as the server takes, so only files on a file system known to
be local are ever read on the event loop. On Linux, ``/proc/self/mountinfo`` maps each
mount's device number (a file's ``st_dev``) to its type; anything else — another platform, a
type not listed as local, a device number not in the table (a btrfs subvolume reports one of
its own), a table that could not be read — counts as not local, and the file is read in a
worker thread. The table is read in a worker thread (:meth:`Mounts.learn`, called where
files are read in one anyway), never on the event loop. The loop only asks
:meth:`Mounts.is_local`, which costs one ``poll`` with a zero time-out: the kernel marks
``mountinfo`` with ``POLLPRI`` after any mount or unmount, and the table is then dropped
until a thread reads it again — a device number freed by an unmount may be reused by a
network mount.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import select
import stat
import sys
import threading
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import anyio

from ._errors import ModuleTooLargeError, is_transient
from ._events import display_path

__all__ = [
    "LOCAL_TYPES",
    "LOOP_READ_LIMIT",
    "MAX_MODULE_SIZE",
    "MOUNTS",
    "FileStat",
    "Mounts",
    "Source",
    "check_size",
    "digest",
    "file_type",
    "parse_mountinfo",
    "read_file",
    "read_many",
    "read_on_loop",
    "read_source",
]

MAX_MODULE_SIZE = 1024 * 1024
"""The default largest module file, in bytes (1 MiB). Hand-written modules are far below it;
of 56,365 ``.py`` files on a development machine (site-packages, a cloud SDK) 11 were over
it, all generated code (API clients, data tables) of 1 to 6 MB. Compiling holds the
interpreter lock for about 40 ms per MB of such a client (mostly strings), up to 450 ms per
MB for thousands of small functions, and grows faster than the size (a 26 MB literal
table: 19 s); so a module just under the limit stalls the loop 0.05 to 0.5 s."""

# A file caught between an editor's truncate and its write reads as empty (Vite #610): an empty
# read is re-read a few times before it is believed, unless the module was empty before. A
# file that appears (created, renamed back) is no exception: loading its empty moment would
# replace a provider with an empty helper module until the write lands.
_EMPTY_RETRIES = 5
_EMPTY_RETRY_DELAY = 0.01
_DIGEST_SIZE = 16
_CHUNK = 1 << 20
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
LOOP_READ_LIMIT = 64 * 1024
"""Files of at most this many bytes on a local file system are read on the event loop."""

FileStat = tuple[int, int, int, int]
"""A file's ``(mtime_ns, ctime_ns, size, inode)``: changes on a save or a touch, not on a read."""


@dataclass(frozen=True, slots=True)
class Source:
    """The content of one module file at planning time (``stat``: the file's, as read)."""

    path: Path
    data: bytes
    digest: str
    stat: FileStat | None = None


def digest(data: bytes) -> str:
    """The content hash used to tell a real change from a touch."""
    return hashlib.blake2b(data, digest_size=_DIGEST_SIZE).hexdigest()


def check_size(path: Path, size: int, limit: int | None) -> None:
    """Refuse a module file of ``size`` bytes over ``limit`` (``None``: no limit).

    Raises:
        ModuleTooLargeError: naming the file, its size and the limit.
    """
    if limit is not None and size > limit:
        raise ModuleTooLargeError(
            f"{display_path(path)} is {_size(size)}, over the limit of {_size(limit)} for a "
            "module file: compiling it would stall the event loop, so it is not loaded (the "
            "limit: Reloader(max_module_size=...), hotseam --max-module-size, [tool.hotseam] "
            "max-module-size)"
        )


def _size(count: int) -> str:
    """``26.2 MiB (27,482,112 bytes)``, or ``1 MiB`` for an exact power."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            if count % scale == 0:
                return f"{count // scale} {unit}"
            return f"{count / scale:.1f} {unit} ({count:,} bytes)"
    return f"{count} bytes"


def read_file(path: Path, limit: int | None = None) -> Source:
    """Read ``path`` and the stat of the file read (one open, so the two agree).

    Only a regular file is ever opened: a FIFO, a socket or a device named ``x.py`` would
    block the read (or act on the device), so it is refused from its stat; the open is
    non-blocking and the opened file checked again, in case it was swapped in between. A
    file over ``limit`` bytes is refused from its stat too (or as soon as it has grown past
    it). Blocking: call it in a worker thread (:func:`read_source` does).

    Raises:
        OSError: the file cannot be read, or is not a regular file (``FileNotFoundError``:
            it is gone; :class:`ModuleTooLargeError`: it is over ``limit``).
    """
    seen = os.stat(path)
    _require_regular(path, seen.st_mode)
    check_size(path, seen.st_size, limit)
    fd = os.open(path, _OPEN_FLAGS)
    try:
        st = os.fstat(fd)
        _require_regular(path, st.st_mode)
        check_size(path, st.st_size, limit)
        # In chunks, hashed as they come: a single huge read (and the copies around it)
        # would hold the GIL, and so stall the event loop, for as long as it takes.
        hasher = hashlib.blake2b(digest_size=_DIGEST_SIZE)
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, _CHUNK):
            total += len(chunk)
            check_size(path, total, limit)
            hasher.update(chunk)
            chunks.append(chunk)
    finally:
        os.close(fd)
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    return Source(
        path, data, hasher.hexdigest(), (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
    )


def file_type(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, what in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return what
    return "an unknown kind of file"


def _require_regular(path: Path, mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise OSError(errno.EINVAL, f"not a regular file ({file_type(mode)})", str(path))


def read_on_loop(path: Path, seen: os.stat_result, limit: int | None = None) -> Source | None:
    """Read ``path`` at once, on the event loop, if that cannot block; ``None``: read it in
    a worker thread instead (:func:`read_file`, which also reports every failure).

    ``seen`` is the ``lstat`` of ``path`` just taken (by the index): only a regular file of
    at most :data:`LOOP_READ_LIMIT` bytes (and at most ``limit``) on a file system known to
    be local (:data:`MOUNTS`) is opened, without following a link, non-blocking; the
    opened file must still be a regular file of that size on that file system, or it is
    left to the thread. Saves the worker-thread round trip (most of a save that changed
    nothing).
    """
    most = LOOP_READ_LIMIT if limit is None else min(limit, LOOP_READ_LIMIT)
    if not stat.S_ISREG(seen.st_mode) or seen.st_size > most or not MOUNTS.is_local(seen.st_dev):
        return None
    try:
        fd = os.open(path, _OPEN_FLAGS | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_dev != seen.st_dev or st.st_size > most:
            return None
        data = os.read(fd, st.st_size + 1)
        while len(data) <= most and (more := os.read(fd, most + 1)):
            data += more  # it grew since the fstat
        if len(data) > most:
            return None
    except OSError:
        return None
    finally:
        os.close(fd)
    return Source(path, data, digest(data), (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino))


def _read_in_thread(path: Path, limit: int | None) -> Source:
    """:func:`read_file` in a worker thread, which also brings the mount table up to date
    (it is never read on the event loop)."""
    MOUNTS.learn()
    return read_file(path, limit)


async def read_source(
    path: Path,
    previous: str | None,
    seen: os.stat_result | None = None,
    limit: int | None = None,
) -> Source | None:
    """Read ``path``; ``None`` if it is gone. An unexpectedly empty read is retried briefly.

    The read and the hash run in a worker thread, so a big file (or a slow file system)
    never blocks the event loop — except a small file on a local file system, read at once
    when ``seen`` (its ``lstat``, just taken) allows it: see :func:`read_on_loop`.
    ``previous`` (the digest last loaded) only decides whether an empty read is believed at
    once: only when the module was empty before. A file over ``limit`` bytes is refused
    (:class:`ModuleTooLargeError`) without being read.
    """
    for attempt in range(_EMPTY_RETRIES + 1):
        source = read_on_loop(path, seen, limit) if seen is not None and not attempt else None
        if source is None:
            try:
                source = await anyio.to_thread.run_sync(_read_in_thread, path, limit)
            except FileNotFoundError:
                return None
        empty_ok = previous == _EMPTY_DIGEST or attempt == _EMPTY_RETRIES
        if source.data or empty_ok:
            return source
        await anyio.sleep(_EMPTY_RETRY_DELAY)
    raise AssertionError("unreachable")  # pragma: no cover


_EMPTY_DIGEST = digest(b"")


def read_many(paths: Collection[Path], limit: int | None = None) -> dict[Path, Source | OSError]:
    """Read every file of ``paths`` (blocking: one worker thread for all, where
    :func:`read_source` would take one hop per file). An empty read is left out, for
    :func:`read_source` to retry and decide."""
    MOUNTS.learn()
    found: dict[Path, Source | OSError] = {}
    for path in paths:
        try:
            source = read_file(path, limit)
        except OSError as error:
            found[path] = error
            continue
        if source.data:
            found[path] = source
    return found


# -- which file systems are local ------------------------------------------------------------------

LOCAL_TYPES = frozenset(
    {
        "bcachefs",
        "btrfs",
        "erofs",
        "exfat",
        "ext2",
        "ext3",
        "ext4",
        "f2fs",
        "hfsplus",
        "jfs",
        "nilfs2",
        "overlay",
        "ramfs",
        "reiserfs",
        "squashfs",
        "tmpfs",
        "vfat",
        "xfs",
        "zfs",
    }
)
"""File-system types whose reads never wait on a network or another process. Everything
else (``nfs*``, ``cifs``, ``smb3``, ``fuse.*``, ``fuseblk``, ``9p``, ``ceph``,
``glusterfs``, ``afs``, ``virtiofs``, ``autofs``...) counts as not local."""

_MOUNTINFO = "/proc/self/mountinfo"
_CHANGED = select.POLLPRI | select.POLLERR if hasattr(select, "poll") else 0


def parse_mountinfo(text: str) -> dict[int, str]:
    """Device number → file-system type, from the text of ``/proc/<pid>/mountinfo``.

    A line reads ``id parent major:minor root mount-point options [optional...] - type
    source super-options``; fields are separated by single spaces (spaces inside paths are
    escaped as ``\\040``). A device mounted with two types (it cannot be, but a malformed
    line might say so) is left out.
    """
    types: dict[int, str] = {}
    conflicting: set[int] = set()
    for line in text.splitlines():
        fields = line.split(" ")
        try:
            separator = fields.index("-", 6)
            major, minor = fields[2].split(":")
            device = os.makedev(int(major), int(minor))
            kind = fields[separator + 1]
        except (ValueError, IndexError):
            continue
        if types.setdefault(device, kind) != kind:
            conflicting.add(device)
    for device in conflicting:
        del types[device]
    return types


class Mounts:
    """The mount table of this process, as far as the event loop may trust it."""

    def __init__(self, path: str = _MOUNTINFO) -> None:
        self._path = path
        self._supported = sys.platform.startswith("linux") and hasattr(select, "poll")
        self._lock = threading.Lock()
        self._types: dict[int, str] | None = None
        """Device number → type; ``None``: not known (never read, or changed since)."""
        self._watch: tuple[int, select.poll] | None = None
        """The open ``mountinfo`` and a poller of it, told of mounts and unmounts."""

    def filesystem_type(self, device: int) -> str | None:
        """The type of the file system with ``device`` as ``st_dev``; ``None`` when not
        known right now (never read, changed since, being read, another platform).

        For the event loop: never waits (a ``poll`` with a zero time-out, under a lock it
        does not wait for) and never reads the table.
        """
        if self._types is None or not self._lock.acquire(blocking=False):
            return None
        try:
            if self._watch is None or self._changed(self._watch):
                self._types = None
                return None
            return self._types.get(device)
        finally:
            self._lock.release()

    def is_local(self, device: int) -> bool:
        """True when the file system with ``device`` as ``st_dev`` is known to be local."""
        return self.filesystem_type(device) in LOCAL_TYPES

    def learn(self) -> None:
        """Read the mount table if it was never read or changed since. Blocking: call it in
        a worker thread. Never raises: a failure leaves every file system not local."""
        if not self._supported:
            return
        with self._lock:
            try:
                if self._watch is None:
                    fd = os.open(self._path, os.O_RDONLY | os.O_CLOEXEC)
                    poller = select.poll()
                    poller.register(fd, _CHANGED)
                    self._watch = (fd, poller)  # it reports changes after this open
                elif not self._changed(self._watch) and self._types is not None:
                    return
                # Any change reported so far is in what is read now; a later one is
                # reported to the next poll.
                with open(self._path, encoding="utf-8", errors="replace") as file:
                    self._types = parse_mountinfo(file.read())
            except (OSError, ValueError) as error:
                self._types = None  # the next learn reads it again, whatever the poll says
                # Out of descriptors the watch is kept: closing it would hand a descriptor
                # to whatever opens a file next, and opening it again would take one.
                if not is_transient(error):
                    self._close()

    def after_fork(self) -> None:
        """In a child process: start afresh (the lock may have been held by a thread that
        does not exist here, and the open file is shared with the parent, which would take
        the mount changes reported to it)."""
        self._lock = threading.Lock()
        self._types = None
        self._close()

    @staticmethod
    def _changed(watch: tuple[int, select.poll]) -> bool:
        """True when the mount table changed since the last poll (the lock is held)."""
        return any(events & _CHANGED for _, events in watch[1].poll(0))

    def _close(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            with contextlib.suppress(OSError):
                os.close(watch[0])


MOUNTS = Mounts()
"""The process's mount table (one per process: it is the same for every reloader)."""

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=MOUNTS.after_fork)
