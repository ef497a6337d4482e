"""The event-driven native watch (inotify, read on the event loop) and each way out of it.

Everything here uses the real kernel facility on real folders; a failure of the kernel's
(the watch limit, out of descriptors) is simulated by making ``inotify_simple`` raise the
``OSError`` the kernel gives, since the real limits are per user and shared with the
rest of the machine.
"""

from __future__ import annotations

import errno
import os
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog
from tests._timing import scaled

from hotseam import Context
from hotseam.reload import NativeWatcher, ReloadCommitted, Reloader, WatchfilesWatcher, WatchOptions
from hotseam.reload._watcher import ADDED, DELETED, MODIFIED, InotifyNotifier

from .conftest import write

inotify_simple = pytest.importorskip("inotify_simple", reason="inotify watching is Linux-only")

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(NativeWatcher().backend != "inotify", reason="needs inotify"),
]

SLOW = 60_000
"""A quiet period (ms) no test waits out: a batch that arrives came at once."""


def _notifier(*roots: Path, recursive: bool = True, quiet_ms: float = SLOW) -> InotifyNotifier:
    return InotifyNotifier(
        [str(root) for root in roots], recursive=recursive, quiet_ms=quiet_ms, cap_ms=quiet_ms
    )


def _module(version: int) -> str:
    return f"VERSION = {version}\n\n\ndef setup(scope):\n    scope.defer(lambda: None)\n"


def _queue_limit() -> int:
    with open("/proc/sys/fs/inotify/max_queued_events", encoding="ascii") as file:
        return int(file.read())


def _logged(logs: list[MutableMapping[str, Any]], event: str) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry["event"] == event]


class TestWhenABatchGoes:
    async def test_a_save_and_an_atomic_save_are_reported_at_once(self, folder: Path) -> None:
        """A module written and closed, and one moved into place, are reported without
        waiting out the quiet period; the temporary file is not in the batch."""
        notifier = _notifier(folder)
        try:
            with anyio.fail_after(scaled(5)):
                write(folder / "ui.py", "X = 1\n")
                assert await notifier.changes() == {(ADDED, str(folder / "ui.py"))}
                staging = folder / ".ui.py.tmp"
                staging.write_text("X = 2\n")
                os.replace(staging, folder / "ui.py")
                assert await notifier.changes() == {(ADDED, str(folder / "ui.py"))}
                write(folder / "ui.py", "X = 3\n")
                assert await notifier.changes() == {(MODIFIED, str(folder / "ui.py"))}
        finally:
            notifier.close()

    async def test_a_file_still_open_waits_for_its_close_or_the_quiet_period(
        self, folder: Path
    ) -> None:
        """Half written, a module is not reported on its own (bounded look: 0.3 s); its
        close reports it. With a short quiet period the open file is reported after it."""
        notifier = _notifier(folder)
        try:
            with (folder / "ui.py").open("w") as file:
                file.write("X = ")
                file.flush()
                with anyio.move_on_after(0.3) as waited:
                    await notifier.changes()
                assert waited.cancelled_caught
                file.write("1\n")
            with anyio.fail_after(scaled(5)):
                assert await notifier.changes() == {(ADDED, str(folder / "ui.py"))}
        finally:
            notifier.close()
        quick = _notifier(folder, quiet_ms=20)
        try:
            with (folder / "ui.py").open("a") as file, anyio.fail_after(scaled(5)):
                file.write("Y = 2\n")
                file.flush()
                assert await quick.changes() == {(MODIFIED, str(folder / "ui.py"))}
        finally:
            quick.close()

    async def test_editor_droppings_never_make_a_batch(self, folder: Path) -> None:
        """Swap files, backups and caches are read and dropped; the next save is alone."""
        notifier = _notifier(folder)
        try:
            for name in (".ui.py.swp", "ui.py~", "4913.tmp", "__pycache__/ui.cpython-311.pyc"):
                write(folder / name, "junk\n")
            write(folder / "ui.py", "X = 1\n")
            with anyio.fail_after(scaled(5)):
                assert await notifier.changes() == {(ADDED, str(folder / "ui.py"))}
        finally:
            notifier.close()


class TestFolders:
    async def test_a_new_folder_and_the_files_made_before_its_watch_are_reported(
        self, folder: Path
    ) -> None:
        """``mkdir`` and files written at once (before the watcher read the event: the
        loop is not running): the folder is watched and listed, so its files and its
        sub-folders' are reported (after the quiet period: no close was seen for them);
        later saves there are seen."""
        notifier = _notifier(folder, quiet_ms=20)
        try:
            write(folder / "pkg" / "__init__.py", "")
            write(folder / "pkg" / "deep" / "ui.py", "X = 1\n")
            with anyio.fail_after(scaled(5)):
                seen: set[tuple[int, str]] = set()
                while (ADDED, str(folder / "pkg" / "deep" / "ui.py")) not in seen:
                    seen |= await notifier.changes()
            assert {(ADDED, str(folder / "pkg")), (ADDED, str(folder / "pkg" / "__init__.py"))} <= (
                seen
            )
            write(folder / "pkg" / "deep" / "ui.py", "X = 2\n")
            with anyio.fail_after(scaled(5)):
                assert await notifier.changes() == {
                    (MODIFIED, str(folder / "pkg" / "deep" / "ui.py"))
                }
        finally:
            notifier.close()

    async def test_a_folder_moved_away_is_no_longer_reported(
        self, folder: Path, tmp_path: Path
    ) -> None:
        """A sub-folder moved out of the watched tree is reported deleted, and a save in
        it afterwards is not taken for one under the watched path (barrier: a real save)."""
        write(folder / "pkg" / "ui.py", "X = 1\n")
        notifier = _notifier(folder)
        try:
            os.rename(folder / "pkg", tmp_path / "away")
            write(tmp_path / "away" / "ui.py", "X = 2\n")
            write(folder / "barrier.py", "B = 1\n")
            with anyio.fail_after(scaled(5)):
                assert await notifier.changes() == {
                    (DELETED, str(folder / "pkg")),
                    (ADDED, str(folder / "barrier.py")),
                }
            assert notifier.watches == 1
        finally:
            notifier.close()

    def test_hidden_folders_caches_and_links_are_not_watched(
        self, folder: Path, tmp_path: Path
    ) -> None:
        """Only real, visible folders get a watch: a link to a folder (inside or out) is
        not followed, and a flat root watches no sub-folder."""
        for name in ("a/b", ".git/objects", "__pycache__", "a/.venv/lib"):
            (folder / name).mkdir(parents=True)
        (folder / "again").symlink_to(folder / "a")
        (tmp_path / "outside").mkdir()
        (folder / "out").symlink_to(tmp_path / "outside")
        for recursive, expected in ((True, 3), (False, 1)):
            notifier = _notifier(folder, recursive=recursive)
            try:
                assert notifier.watches == expected
            finally:
                notifier.close()

    async def test_a_queue_overflow_has_every_root_looked_at(
        self, context: Context, folder: Path
    ) -> None:
        """More events than the kernel queues (``fs.inotify.max_queued_events``), then a
        save whose events are lost: the overflow has the reloader look at every module,
        and the save is applied; the overflow is said once, at info."""
        limit = _queue_limit()
        if limit > 100_000:
            pytest.skip(f"max_queued_events is {limit}: too many events to make in a test")
        ui = write(folder / "ui.py", _module(1))
        noise = [folder / "noise-a.txt", folder / "noise-b.txt"]
        for path in noise:
            path.write_text("")
        with anyio.fail_after(scaled(20)), structlog.testing.capture_logs() as logs:
            async with Reloader(context, [folder]) as reloader, reloader.events() as events:
                for count in range(limit + 100):  # alternating: the kernel merges repeats
                    os.utime(noise[count % 2])
                write(ui, _module(2))  # its events are dropped: the queue is full
                await events.next(ReloadCommitted, path=ui, generation=2)
                assert reloader.status_of(ui).generation == 2
        [overflowed] = _logged(logs, "reload.watch_overflowed")  # said once
        assert overflowed["log_level"] == "info"
        assert "fs.inotify.max_queued_events" in overflowed["summary"]
        assert overflowed["roots"] == [str(folder)]


class TestFallback:
    async def test_the_watch_limit_at_start_falls_back_to_polling_loudly(
        self,
        context: Context,
        folder: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """``inotify_add_watch`` fails with ENOSPC (the per-user watch limit): a warning
        names the limit, the folder is polled, and saves are applied."""

        def limited(self: object, path: str, mask: int) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(inotify_simple.INotify, "add_watch", limited)
        ui = write(folder / "ui.py", _module(1))
        with anyio.fail_after(scaled(10)), structlog.testing.capture_logs() as logs:
            async with Reloader(context, [folder]) as reloader, reloader.events() as events:
                write(ui, _module(2))
                await events.next(ReloadCommitted, path=ui, generation=2)
        [fallback] = _logged(logs, "reload.watch_fallback")
        assert fallback["log_level"] == "warning"
        assert "WatchLimitError" in fallback["summary"]
        assert "fs.inotify.max_user_watches" in fallback["summary"]
        assert "polling it instead" in fallback["summary"]
        assert not _logged(logs, "reload.watch_restored")

    async def test_the_watch_limit_reached_by_a_new_folder_falls_back_to_polling(
        self,
        context: Context,
        folder: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """Watching; then a new sub-folder cannot be watched (ENOSPC): a warning, polling
        from then on, and the new folder's module is loaded all the same."""
        real = inotify_simple.INotify.add_watch

        def limited(self: object, path: str, mask: int) -> int:
            if os.path.basename(path) == "more":
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return int(real(self, path, mask))

        monkeypatch.setattr(inotify_simple.INotify, "add_watch", limited)
        write(folder / "ui.py", _module(1))
        more = folder / "more"
        with anyio.fail_after(scaled(10)), structlog.testing.capture_logs() as logs:
            async with Reloader(context, [folder]) as reloader, reloader.events() as events:
                write(more / "__init__.py", "")
                write(more / "extra.py", "X = 1\n")
                await events.next(ReloadCommitted, path=more / "extra.py")
                write(more / "extra.py", "X = 2\n")
                await events.next(ReloadCommitted, path=more / "extra.py", generation=2)
        [fallback] = _logged(logs, "reload.watch_fallback")
        assert "fs.inotify.max_user_watches" in fallback["summary"]

    async def test_out_of_descriptors_polls_until_the_watch_can_be_made_again(
        self,
        context: Context,
        folder: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """``inotify_init1`` fails with EMFILE (a passing failure): polled meanwhile, and
        watched natively again once it works (``reload.watch_restored``)."""
        real = inotify_simple.INotify
        attempts: list[int] = []

        def scarce(*args: object, **kwargs: object) -> object:
            attempts.append(1)
            if len(attempts) == 1:
                raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
            return real(*args, **kwargs)

        monkeypatch.setattr(inotify_simple, "INotify", scarce)
        monkeypatch.setattr("hotseam.reload._watcher.LAST_RETRY", 0.05)
        ui = write(folder / "ui.py", _module(1))
        with anyio.fail_after(scaled(10)), structlog.testing.capture_logs() as logs:
            async with Reloader(context, [folder]) as reloader, reloader.events() as events:
                version = 1
                while not _logged(logs, "reload.watch_restored"):  # saves applied meanwhile
                    version += 1
                    write(ui, _module(version))
                    await events.next(ReloadCommitted, path=ui, generation=version)
                write(ui, _module(version + 1))
                await events.next(ReloadCommitted, path=ui, generation=version + 1)
        [fallback] = _logged(logs, "reload.watch_fallback")
        assert "Too many open files" in fallback["summary"]
        assert fallback["summary"].endswith("until the native watch can be made again")
        assert len(attempts) >= 2

    async def test_without_inotify_watchfiles_watches(
        self,
        context: Context,
        folder: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """Where inotify cannot be used (another platform, ``inotify_simple`` missing),
        ``auto`` is watchfiles and saves are applied; asking for inotify there is an error
        that says what is missing."""
        monkeypatch.setattr("hotseam.reload._watcher.inotify_available", lambda: False)
        watcher = NativeWatcher()
        assert watcher.backend == "watchfiles"
        assert WatchfilesWatcher is NativeWatcher
        with pytest.raises(ValueError, match="needs Linux and the inotify_simple package"):
            NativeWatcher(backend="inotify")
        ui = write(folder / "ui.py", _module(1))
        with anyio.fail_after(scaled(10)):
            async with (
                Reloader(context, [folder], watch=WatchOptions(watcher=watcher)) as reloader,
                reloader.events() as events,
            ):
                write(ui, _module(2))
                await events.next(ReloadCommitted, path=ui, generation=2)
        assert repr(watcher).startswith("NativeWatcher(backend='watchfiles'")


def test_inotify_is_the_default_where_it_is_available() -> None:
    assert NativeWatcher().backend == "inotify"
    assert NativeWatcher(backend="watchfiles").backend == "watchfiles"
    with pytest.raises(ValueError, match="backend must be"):
        NativeWatcher(backend="fsevents")  # type: ignore[arg-type]


async def test_a_folder_change_found_while_a_batch_is_sent_is_acted_on_at_once(
    folder: Path,
) -> None:
    """The periodic check may find a watched folder replaced while the watch loop is away
    sending a batch (its wait is not there to be ended): the next wait must end at once,
    not at the next event under the folder (white-box: the race cannot be timed)."""
    from hotseam.reload import WatchRoot
    from hotseam.reload._watcher import _Group

    group = _Group([WatchRoot(folder)], NativeWatcher(root_check=3600))
    assert group.start()
    try:
        group._changed = True  # as _check sets it
        with anyio.fail_after(scaled(5)):
            assert await group._next() == "stop"
    finally:
        group.close()
