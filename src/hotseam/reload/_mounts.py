"""Which file systems are local, so that a small module file on one can be read on the loop.

A read from a network file system (NFS, SMB, a FUSE mount, 9p...) can block for as long as
the server takes, so only files on a file system known to be local are ever read on the
event loop. On Linux, ``/proc/self/mountinfo`` maps each mount's device number (a file's
``st_dev``) to its type; anything else — another platform, a type not listed as local, a
device number not in the table (a btrfs subvolume reports one of its own), a table that
could not be read — counts as not local, and the file is read in a worker thread.

The table is read in a worker thread (:meth:`Mounts.learn`, called where files are read in
one anyway), never on the event loop. The loop only asks :meth:`Mounts.is_local`, which
costs one ``poll`` with a zero time-out: the kernel marks ``mountinfo`` with ``POLLPRI``
after any mount or unmount, and the table is then dropped until a thread reads it again —
a device number freed by an unmount may be reused by a network mount.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading

from ._transient import is_transient

__all__ = ["LOCAL_TYPES", "MOUNTS", "Mounts", "parse_mountinfo"]

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
