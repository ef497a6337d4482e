"""Native watching (inotify on Linux, else watchfiles), kept on the watched folders when they
are replaced.

On Linux with ``inotify_simple`` installed the watch is event-driven and read on the event
loop (:mod:`._inotify`): a save is reported the moment it completes, and nothing runs while
nothing changes. Elsewhere (macOS, Windows, the BSDs; or ``backend="watchfiles"``)
watchfiles' notifier runs in a worker thread, waking every ``step_ms``.

A native watch (inotify, FSEvents, kqueue) holds a folder's *inode*, not its path. When the
folder at a watched path is replaced — ``rm -rf providers`` and a ``git checkout`` that
makes it again, an atomic deploy (``mv providers providers.old && mv providers.new
providers``), the parent folder swapped the same way — the watch stays on the old folder:
nothing done under the path is ever reported again, and saves to the *old* folder are
reported under the watched path. A folder moved away and back keeps its inode, but
reports nothing of its return.

So the native watch of a folder is made again when a deletion of the folder itself is
reported (a folder made again at once may even reuse the inode number), and when the
folder's identity (device and inode) changed, which is checked every ``root_check``
seconds: one ``stat`` per folder on the event loop (cheaper than waking the watch thread;
idle CPU did not move measurably). The folder itself is then reported — as ``modified``
(replaced) or ``added`` (back), which makes the reloader list it again and apply what
appeared, changed or vanished in the swap — or as ``deleted`` when it is gone (or no longer
a folder), after which its return is waited for. Each of these is logged once. When the
native watch cannot be made (the inotify watch limit, a watchfiles error), a warning says
so and the folders are polled instead (:class:`~._watcher.PollingWatcher`).

A failure that passes (:mod:`._transient`: out of file descriptors — an inotify instance
is one — or a folder's ``stat`` answered ``EIO`` by a network file system) is never taken
for a folder gone or for a watch lost for good: a folder that cannot be looked at keeps its
identity until it can (logged once), and a native watch that cannot be made for such a
reason is polled for only until it can be made again (tried every
:data:`~._transient.LAST_RETRY` seconds; ``reload.watch_restored`` says so).
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectSendStream

from .._core import get_logger
from ._events import display_path
from ._inotify import InotifyNotifier
from ._inotify import available as inotify_available
from ._scan import file_type
from ._transient import LAST_RETRY, describe_errno, is_transient
from ._watcher import (
    ChangeKind,
    FileChange,
    PollingWatcher,
    WatchRoot,
    may_matter,
    minimal_roots,
)

__all__ = ["Backend", "NativeWatcher", "WatchfilesWatcher"]

_log = get_logger("hotseam.reload")
_BUFFERED_BATCHES = 256
_KINDS = {1: ChangeKind.ADDED, 2: ChangeKind.MODIFIED, 3: ChangeKind.DELETED}
_T = TypeVar("_T")
_THREAD_WAIT = 5.0
"""Seconds the watch thread waits for changes before it returns to be called again."""
_Identity = tuple[int, int]
"""A folder's ``(st_dev, st_ino)``: what a native watch is attached to."""
Backend = Literal["auto", "inotify", "watchfiles"]


class NativeWatcher:
    """Native file-system notifications: inotify on Linux, watchfiles elsewhere.

    With inotify (:mod:`._inotify`: Linux with ``inotify_simple`` installed, the default
    there) the event loop itself waits on the inotify descriptor: a module file closed after
    a write, or moved into place, is reported at once (what else was queued goes in the same
    batch); other changes once they paused for ``step_ms``, at the latest ``debounce_ms``
    after the first. Nothing wakes while nothing changes but the ``root_check``.

    With watchfiles (other platforms, or ``backend="watchfiles"``) a worker thread wakes
    every ``step_ms`` and reports a batch once the set of changed paths did not grow during
    one step, or at the latest ``debounce_ms`` after the first change: latency is about one
    to two steps, and ``debounce_ms`` is only a cap (``hot-reload-anchors.md`` §1.2).

    Args:
        debounce_ms: The longest a batch is held open while changes keep arriving.
        step_ms: How long changes must pause before a batch is reported (inotify: changes
            other than a completed save). With watchfiles it is also how often the watch
            thread wakes while nothing happens: at the default 8 ms a save's batch comes
            about 12 ms after the write, and the wake-ups cost 0.6 to 0.8 % of a core
            while idle (inotify: 0.03 %; see ``docs/performance.md``).
        root_check: Seconds between two checks that each watched folder is still the one
            the native watch is on (see the module's docstring); a replaced folder is seen
            at once when the folder itself reports a change, else within this.
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
        """Ends the thread's wait: set when the task is cancelled, or a check found a folder
        changed (then ``_changed`` is set too)."""
        self._waiting: anyio.CancelScope | None = None
        """Around the wait on the loop (inotify): a check that found a folder changed
        cancels it."""
        self._changed = False

    def start(self) -> bool:
        """(Re)make the native watch on the folders present now; False if it cannot be made
        (``failure`` says why). The identities are taken first: a folder replaced in between
        is then seen as replaced once more, never as the one watched."""
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
        if watcher.backend == "inotify":
            try:
                self.notifier = InotifyNotifier(
                    present,
                    recursive=self.recursive,
                    quiet_ms=watcher.step_ms,
                    cap_ms=watcher.debounce_ms,
                )
            except OSError as error:  # the watch limit, out of descriptors or instances
                self.failure = error
                return False
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

    async def run(
        self,
        send: MemoryObjectSendStream[Collection[FileChange]],
        native: bool,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Report native changes (``native``: the watch is made; else poll from the start);
        make the watch again whenever a folder's own watch ended or the periodic check
        found it changed; poll instead if the watch breaks — until it can be made again,
        when what broke it passes."""
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
        async with self._polling() as batches:
            task_status.started()
            if after_native:  # what changed between the native watch's end and the scan
                await send.send({FileChange(ChangeKind.MODIFIED, r.directory) for r in self.roots})
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._forward, batches, send)
                if self.failure is not None and is_transient(self.failure):
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
                dropped = {path for kind, path in raw if kind == 3 and path in self.identities}
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
        """The next native batch: ``{(kind, path)}``, or a word (``"stop"``: a check found
        a folder changed, or the task is cancelled; ``"timeout"``)."""
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

    @asynccontextmanager
    async def _polling(self) -> AsyncIterator[AsyncIterator[Collection[FileChange]]]:
        """Say loudly that the folders are polled from now on, and poll them."""
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
            yield batches

    def _wait(self, wake: threading.Event) -> object:
        """In the watch thread: the next batch of native changes, or ``"stop"`` once
        ``wake`` is set (``"timeout"`` now and then)."""
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
        """Log what happened to each folder whose identity changed or whose watch ended;
        the changes to report."""
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
        OSError: it cannot be looked at for a reason that passes (:mod:`._transient`).
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
