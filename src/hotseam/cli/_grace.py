"""A deletion followed by a re-creation is a reload, not an unload.

``git stash``, a branch switch, or an editor that saves by deleting and writing again make
a module file vanish for a moment. Unloading it then would dispose the provider (its
question withdrawn, the UI gone) only to load it again a moment later. :class:`GraceWatcher`
wraps the reloader's watcher and holds each reported deletion back for ``grace`` seconds:
if the file is back by then, the deletion is passed on as a modification, so the reloader
reads the file again (a reload when it changed, nothing when it did not: it compares
content hashes, so a spurious report costs one read); if it is still gone, the deletion is
passed on and the module is unloaded.

A watcher may report the return itself (hotseam's do: ``added``), which ends the hold at
once; but the :class:`~hotseam.reload.Watcher` protocol is public, and one that reports
only the deletion must not lose the return (a folder moved away and back, ``git stash``).
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
from collections.abc import AsyncIterator, Collection, Sequence
from pathlib import Path

import anyio
import anyio.abc

from ..reload import ChangeKind, FileChange, Watcher, WatchRoot

__all__ = ["DEFAULT_GRACE", "GraceWatcher"]

DEFAULT_GRACE = 2.0
"""Seconds a deleted module file has to come back before its module is unloaded."""


class GraceWatcher:
    """A :class:`~hotseam.reload.Watcher` that reports a deletion only once the path has
    stayed gone for ``grace`` seconds."""

    def __init__(self, inner: Watcher, grace: float = DEFAULT_GRACE) -> None:
        if not grace >= 0 or math.isinf(grace):
            raise ValueError(f"grace must be a finite number of seconds >= 0, got {grace!r}")
        self.inner = inner
        self.grace = grace

    def __repr__(self) -> str:
        return f"GraceWatcher({self.inner!r}, grace={self.grace:g})"

    @contextlib.asynccontextmanager
    async def open(
        self, roots: Sequence[WatchRoot]
    ) -> AsyncIterator[AsyncIterator[Collection[FileChange]]]:
        """Watch ``roots`` through the inner watcher, holding deletions back."""
        send, receive = anyio.create_memory_object_stream[Collection[FileChange]](math.inf)

        async def pump(batches: AsyncIterator[Collection[FileChange]]) -> None:
            held: dict[Path, anyio.CancelScope] = {}
            try:
                async with anyio.create_task_group() as waits:
                    async for batch in batches:
                        now: list[FileChange] = []
                        for change in batch:
                            pending = held.pop(change.path, None)
                            if pending is not None:
                                pending.cancel()  # it is back (or changed again)
                            # A path gone by now (saved, then deleted in one batch) is a deletion.
                            if self.grace > 0 and (
                                change.kind is ChangeKind.DELETED or _gone(change.path)
                            ):
                                held[change.path] = await waits.start(
                                    self._hold, change, send, held
                                )
                            else:
                                now.append(change)
                        if now:
                            await send.send(now)
                    waits.cancel_scope.cancel()
            finally:
                send.close()  # the inner watcher ended: so does this one

        try:
            async with self.inner.open(roots) as batches, anyio.create_task_group() as tg:
                tg.start_soon(pump, batches)
                try:
                    yield receive
                finally:
                    tg.cancel_scope.cancel()
        finally:
            send.close()
            receive.close()

    async def _hold(
        self,
        change: FileChange,
        send: anyio.abc.ObjectSendStream[Collection[FileChange]],
        held: dict[Path, anyio.CancelScope],
        *,
        task_status: anyio.abc.TaskStatus[anyio.CancelScope] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        with anyio.CancelScope() as scope:
            task_status.started(scope)
            await anyio.sleep(self.grace)
            if held.get(change.path) is scope:
                del held[change.path]
            # Still gone: the deletion. Back (unreported, or not yet): the reloader looks.
            passed = change if _gone(change.path) else FileChange(ChangeKind.MODIFIED, change.path)
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await send.send([passed])


def _gone(path: Path) -> bool:
    """True when nothing is at ``path`` (a link to nothing, or a loop, counts as nothing,
    as for ``Path.exists``). A ``stat`` that fails otherwise (out of file descriptors, a
    network file system away) tells nothing: the path is not taken for gone, and the
    reloader's read decides."""
    try:
        os.stat(path)
    except OSError as error:
        return error.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)
    return False
