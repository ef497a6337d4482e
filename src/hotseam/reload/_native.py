"""Native watching (watchfiles), kept on the watched folders when they are replaced.

A native watch (inotify, FSEvents, kqueue) holds a folder's *inode*, not its path. When the
folder at a watched path is replaced — ``rm -rf providers`` and a ``git checkout`` that
makes it again, an atomic deploy (``mv providers providers.old && mv providers.new
providers``), the parent folder swapped the same way — the watch stays on the old folder:
nothing done under the path is ever reported again, and saves to the *old* folder are
reported under the watched path. A folder moved away and back keeps its inode, but
reports nothing of its return.

So each watched folder's identity (device and inode) is checked: at once when a change of
the folder itself is reported, and every ``root_check`` seconds (one ``stat`` per folder,
in the watch thread, between two waits for changes). When it changed, the native watch is
made again on what is at the path now and the folder itself is reported — as ``modified``
(replaced) or ``added`` (back), which makes the reloader list it again and apply what
appeared, changed or vanished in the swap — or as ``deleted`` when it is gone (or no longer
a folder), after which its return is waited for. Each of these is logged once. When the
native watch cannot be made (the inotify watch limit, a watchfiles error), a warning says
so and the folders are polled instead (:class:`~._watcher.PollingWatcher`).
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from .._log import get_logger
from ._events import display_path
from ._scan import file_type
from ._watcher import (
    ChangeKind,
    FileChange,
    PollingWatcher,
    WatchRoot,
    may_matter,
    minimal_roots,
)

__all__ = ["WatchfilesWatcher"]

_log = get_logger("hotseam.reload")
_BUFFERED_BATCHES = 256
_KINDS = {1: ChangeKind.ADDED, 2: ChangeKind.MODIFIED, 3: ChangeKind.DELETED}
_T = TypeVar("_T")
_Identity = tuple[int, int]
"""A folder's ``(st_dev, st_ino)``: what a native watch is attached to."""


class WatchfilesWatcher:
    """Native file-system notifications (inotify, FSEvents, ...) through watchfiles.

    watchfiles yields a batch once the set of changed paths did not grow during one
    ``step_ms``, or at the latest ``debounce_ms`` after the first change: latency is about one
    to two steps, and ``debounce_ms`` is only a cap (``hot-reload-anchors.md`` §1.2).

    Args:
        debounce_ms: The longest a batch is held open while changes keep arriving.
        step_ms: How long the set of changes must stay unchanged before it is reported.
            It is also how often the watch thread wakes while nothing happens: the default
            8 ms puts a save's batch out about 12 ms after the write (10 ms: 15 ms) for
            about 1.25 % of a core while idle (10 ms: 1.0 %).
        root_check: Seconds between two checks that each watched folder is still the one
            the native watch is on (see the module's docstring); a replaced folder is seen
            at once when the folder itself reports a change, else within this.
    """

    def __init__(self, *, debounce_ms: int = 50, step_ms: int = 8, root_check: float = 1.0) -> None:
        if step_ms <= 0 or debounce_ms < step_ms:
            raise ValueError(
                f"need 0 < step_ms <= debounce_ms, got step_ms={step_ms}, debounce_ms={debounce_ms}"
            )
        if not 0 < root_check < float("inf"):
            raise ValueError(f"root_check must be a number of seconds > 0, got {root_check!r}")
        self.debounce_ms = debounce_ms
        self.step_ms = step_ms
        self.root_check = root_check

    def __repr__(self) -> str:
        return (
            f"WatchfilesWatcher(debounce_ms={self.debounce_ms}, step_ms={self.step_ms}, "
            f"root_check={self.root_check:g})"
        )

    def open(
        self, roots: Sequence[WatchRoot]
    ) -> AbstractAsyncContextManager[AsyncIterator[Collection[FileChange]]]:
        """Start native watches on ``roots`` (recursive and flat ones separately)."""
        return self._open(roots)

    @asynccontextmanager
    async def _open(
        self, roots: Sequence[WatchRoot]
    ) -> AsyncIterator[AsyncIterator[Collection[FileChange]]]:
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
                for group, ok in zip(groups, started, strict=True):
                    tg.start_soon(group.run if ok else group.poll, send.clone())
                yield receive
                tg.cancel_scope.cancel()
        finally:
            for group in groups:
                group.close()


class _Group:
    """The watched folders of one kind (recursive, or flat) under one native watch."""

    def __init__(self, roots: list[WatchRoot], watcher: WatchfilesWatcher) -> None:
        self.roots = roots
        self.paths = [str(root.directory) for root in roots]
        self.recursive = roots[0].recursive
        self.watcher = watcher
        self.identities: dict[str, _Identity | None] = {}
        self.notifier: Any = None
        self.failure: BaseException | None = None
        self._checked = 0.0

    def start(self) -> bool:
        """(Re)make the native watch on the folders present now; False if it cannot be made
        (``failure`` says why). The identities are taken first: a folder replaced in between
        is then seen as replaced once more, never as the one watched."""
        # RustNotify is what watchfiles.awatch drives; using it directly tells us the moment
        # the watches exist, which awatch never reports.
        from watchfiles._rust_notify import RustNotify

        self.close()
        self.identities = {path: _identity(path)[0] for path in self.paths}
        self._checked = time.monotonic()
        present = [path for path in self.paths if self.identities[path] is not None]
        if not present:
            return True
        try:
            # ignore_permission_denied: an unreadable sub-folder is reported by the planner
            # (skipped), and must not stop the watch of everything else. It also makes a
            # folder that vanished since its stat a silent no-watch: the next check sees it.
            self.notifier = RustNotify(present, False, False, 0, self.recursive, True)
        except Exception as error:  # the watch limit (OSError), a watchfiles error
            self.failure = error
            return False
        return True

    def close(self) -> None:
        notifier, self.notifier = self.notifier, None
        if notifier is not None:
            notifier.close()

    async def run(self, send: MemoryObjectSendStream[Collection[FileChange]]) -> None:
        """Report native changes; make the watch again whenever a folder's identity changed."""
        async with send:
            while True:
                try:
                    raw, identities, dropped = await _in_thread(self._wait)
                except Exception as error:  # the native watch broke: poll instead
                    self.failure = error
                    break
                if raw == "signal":
                    raise RuntimeError("the watch thread unexpectedly received a signal")
                if isinstance(raw, set):
                    batch = {
                        FileChange(_KINDS[change], Path(path))
                        for change, path in raw
                        if may_matter(Path(path))
                    }
                    if batch:
                        await send.send(batch)
                if dropped or (identities is not None and identities != self.identities):
                    before = self.identities
                    if not self.start():
                        break
                    await send.send(self._report(before, dropped))
            await self._poll(send, rescan=True)

    async def poll(self, send: MemoryObjectSendStream[Collection[FileChange]]) -> None:
        """The native watch could not be made at all: poll from the start."""
        async with send:
            await self._poll(send, rescan=False)

    async def _poll(
        self, send: MemoryObjectSendStream[Collection[FileChange]], *, rescan: bool
    ) -> None:
        self.close()
        error = self.failure
        shown = ", ".join(display_path(Path(path)) for path in self.paths)
        _log.warning(
            "reload.watch_fallback",
            paths=self.paths,
            error=f"{type(error).__name__}: {error}",
            summary=f"cannot watch {shown} natively ({type(error).__name__}: {error}); "
            "polling it instead (changes are seen within about a second)",
        )
        async with PollingWatcher().open(self.roots) as batches:
            if rescan:  # what changed between the native watch's end and the first scan
                await send.send({FileChange(ChangeKind.MODIFIED, r.directory) for r in self.roots})
            async for batch in batches:
                await send.send(batch)

    def _wait(
        self, stop: threading.Event
    ) -> tuple[object, dict[str, _Identity | None] | None, set[str]]:
        """In the watch thread: wait for changes (or ``root_check``); then, if it is time or
        a folder's own watch ended, check the folders. Returns the changes, the identities
        (``None``: not checked) and the folders whose watch ended (deleted or moved)."""
        watcher = self.watcher
        if self.notifier is None:
            raw: object = "stop" if stop.wait(watcher.root_check) else "timeout"
        else:
            timeout_ms = max(1, round(watcher.root_check * 1000))
            raw = self.notifier.watch(watcher.debounce_ms, watcher.step_ms, timeout_ms, stop)
        if raw == "stop":
            return raw, None, set()
        # A deletion of the folder itself ends its watch whatever is at the path now (a new
        # folder made at once may even reuse the inode number, so its identity cannot tell).
        dropped = (
            {path for kind, path in raw if kind == 3 and path in self.identities}
            if isinstance(raw, set)
            else set()
        )
        now = time.monotonic()
        if not dropped and now - self._checked < watcher.root_check:
            return raw, None, dropped
        self._checked = now
        return raw, {path: _identity(path)[0] for path in self.paths}, dropped

    def _report(self, before: dict[str, _Identity | None], dropped: set[str]) -> set[FileChange]:
        """Log what happened to each folder whose identity changed or whose watch ended;
        the changes to report."""
        changes: set[FileChange] = set()
        for path in self.paths:
            was, now = before.get(path), self.identities[path]
            if was == now and (path not in dropped or now is None):
                continue
            shown = display_path(Path(path))
            if now is None:
                why = _identity(path)[1] or "gone"
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
    """The identity of the folder at ``path``, or ``None`` and why there is none."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None, "gone (deleted or moved away)"
    except OSError as error:
        return None, f"unreachable ({error.strerror or error})"
    if not stat.S_ISDIR(st.st_mode):
        kind = "a file" if stat.S_ISREG(st.st_mode) else file_type(st.st_mode)
        return None, f"no longer a folder (it is {kind})"
    return (st.st_dev, st.st_ino), None


async def _in_thread(function: Callable[[threading.Event], _T]) -> _T:
    """Run ``function(stop)`` in a worker thread; cancellation sets ``stop``, which ends
    a native wait within one step."""
    stop = threading.Event()

    async def stop_when_cancelled() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            stop.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stop_when_cancelled)
        try:
            outcome = await anyio.to_thread.run_sync(function, stop)
        finally:
            tg.cancel_scope.cancel()
    return outcome
