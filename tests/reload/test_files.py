"""What the reloader reads: big files off the event loop, only regular files, unreadable
entries skipped, and one policy for symbolic links.

Tests that prove something was *ignored* end with a barrier (a real change to another
module, saved after it): events come in order, so once the barrier's commit arrives anything
the ignored entry could have caused would have arrived before it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
import structlog
from tests._timing import scaled

from hotseam import Context
from hotseam.interaction import ask
from hotseam.reload import ModuleState, ModuleUnloaded, ReloadCommitted, Reloader

from ._support import Probe, provider_source
from .conftest import QUESTION, write

pytestmark = pytest.mark.anyio

_AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def _module(name: str, imports: str = "") -> str:
    """A helper module that logs when it executes."""
    return f"import reload_probe\n{imports}\nreload_probe.log.append(('exec', {name!r}))\n"


def _skipped(logs: Sequence[MutableMapping[str, Any]]) -> dict[str, str]:
    return {entry["path"]: entry["reason"] for entry in logs if entry["event"] == "reload.skipped"}


class _Ticker:
    """Ticks every 10 ms on the event loop and keeps the longest gap between two ticks."""

    def __init__(self) -> None:
        self.longest = 0.0

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        last = time.perf_counter()
        task_status.started()
        while True:
            await anyio.sleep(0.01)
            now = time.perf_counter()
            self.longest = max(self.longest, now - last)
            last = now


class TestBigFiles:
    async def test_reading_and_hashing_a_big_module_never_blocks_the_loop(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """A 64 MB module touched, then reloaded by hand: read and hashed (unchanged, so
        not compiled) while a task ticking every 10 ms never waits more than 100 ms.

        Compiling and executing a huge module is the loader's business, not measured here:
        the module is loaded once before the ticker starts (with no size limit: by default
        a module this big is refused unread, see test_module_size.py).
        """
        big = folder / "big.py"
        line = b"# " + b"x" * 77 + b"\n"
        big.write_bytes(line * (64 * 1024 * 1024 // len(line)))
        barrier = write(folder / "barrier.py", "X = 1\n")
        ticker = _Ticker()
        with anyio.fail_after(scaled(30)):
            async with (
                # Compiling 64 MB (once, before the ticker) takes seconds here and more on a
                # busy machine: the default import_timeout (10 s) is a fixed wall-clock bound.
                Reloader(
                    context, [folder], max_module_size=None, import_timeout=scaled(20)
                ) as reloader,
                reloader.events() as events,
            ):
                assert reloader.status_of(big).generation == 1
                async with anyio.create_task_group() as tg:
                    await tg.start(ticker.run)
                    os.utime(big)  # a save of the same content: the watcher reports it
                    write(barrier, "X = 2\n")
                    await events.next(ReloadCommitted, path=barrier)
                    result = await reloader.reload(big)  # reads and hashes it again
                    tg.cancel_scope.cancel()
                assert result.batch is None
                assert reloader.status_of(big).generation == 1
        assert ticker.longest < scaled(0.1), (
            f"the event loop stalled for {ticker.longest * 1000:.0f} ms"
        )


@contextlib.contextmanager
def _unblock_fifo_after(fifo: Path, seconds: float) -> Iterator[None]:
    """Guard for the code before the fix: a reader blocked on ``fifo`` (the whole event
    loop) gets end-of-file after ``seconds``, so the test fails instead of hanging."""
    done = threading.Event()

    def unblock() -> None:
        while not done.wait(seconds):
            with contextlib.suppress(OSError):  # ENXIO: nobody is reading
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    thread = threading.Thread(target=unblock, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


class TestSpecialFiles:
    async def test_fifos_sockets_and_devices_named_py_are_skipped_and_reported(
        self, context: Context, folder: Path, probe: Probe, tmp_path: Path
    ) -> None:
        """Never opened (a FIFO would block the loop until someone writes to it): each is
        reported once as not a regular file, also when the watcher reports it again."""
        ui = write(folder / "my_ui.py", provider_source(1))
        barrier = write(folder / "barrier.py", "X = 1\n")
        fifo = folder / "evil.py"
        os.mkfifo(fifo)
        sock_path = folder / "sock.py"
        specials = {fifo: "FIFO", sock_path: "socket"}
        device = folder / "null.py"
        with contextlib.suppress(PermissionError):  # creating devices needs CAP_MKNOD
            os.mknod(device, stat.S_IFCHR | 0o600, os.makedev(1, 3))
            specials[device] = "character device"
        with (
            socket.socket(socket.AF_UNIX) as sock,
            _unblock_fifo_after(fifo, 3),
            structlog.testing.capture_logs() as logs,
        ):
            sock.bind(str(sock_path))
            with anyio.fail_after(scaled(10)):
                async with Reloader(context, [folder]) as reloader, reloader.events() as events:
                    assert {s.path for s in reloader.status()} == {ui, barrier}
                    for special in specials:
                        os.utime(special)
                    write(barrier, "X = 2\n")
                    await events.next(ReloadCommitted, path=barrier)
                    assert (await reloader.reload()).batch is None
                    assert (await ask(QUESTION, context=context)).answer == "answer v1"
                    assert {s.path for s in reloader.status()} == {ui, barrier}
        skipped = _skipped(logs)
        assert set(skipped) == {str(path) for path in specials}
        for path, kind in specials.items():
            assert f"not a regular file (a {kind})" in skipped[str(path)]
        assert [e["path"] for e in logs if e["event"] == "reload.skipped"].count(str(fifo)) == 1

    def test_read_file_refuses_a_non_regular_file_without_opening_it(self, tmp_path: Path) -> None:
        """The last line of defence (a file swapped for a FIFO after the listing)."""
        from hotseam.reload._loader import read_file

        fifo = tmp_path / "late.py"
        os.mkfifo(fifo)
        with _unblock_fifo_after(fifo, 3), pytest.raises(OSError, match="FIFO") as caught:
            read_file(fifo)
        assert caught.value.errno == errno.EINVAL


@contextlib.contextmanager
def _deny(monkeypatch: pytest.MonkeyPatch, folder: Path) -> Iterator[None]:
    """Make ``folder`` behave as mode 000 does for a user who is not root: it can be seen
    and stat'ed, but not listed, and nothing inside it can be stat'ed or opened."""
    real_scandir, real_stat = os.scandir, os.stat

    def denied(path: Any, *, strict: bool) -> bool:
        if isinstance(path, int) or path is None:
            return False
        given = Path(os.fspath(path))
        return given.is_relative_to(folder) and (given != folder or not strict)

    def scandir(path: Any = ".") -> Any:
        if denied(path, strict=False):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_scandir(path)

    def stat_(path: Any, *args: Any, **kwargs: Any) -> Any:
        if denied(path, strict=True):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_stat(path, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(os, "scandir", scandir)
        patch.setattr(os, "stat", stat_)
        yield


class TestUnreadable:
    async def test_an_unlistable_sub_folder_is_skipped_and_the_rest_loads(
        self, context: Context, folder: Path, probe: Probe, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Listing a mode-000 folder fails (simulated here: tests may run as root, who can
        read anything): it is reported by name; once readable again, a reload loads it."""
        ui = write(folder / "my_ui.py", provider_source(1))
        locked = folder / "locked"
        write(locked / "__init__.py", _module("locked"))
        with structlog.testing.capture_logs() as logs, contextlib.ExitStack() as denial:
            denial.enter_context(_deny(monkeypatch, locked))
            async with Reloader(context, [folder], watch=False) as reloader:
                assert {s.path for s in reloader.status()} == {ui}
                assert (await reloader.reload()).batch is None
                denial.close()
                skipped = _skipped(logs)
                assert set(skipped) == {str(locked)}
                assert "Permission denied" in skipped[str(locked)]
                result = await reloader.reload()
                assert [c.module for c in result.committed] == ["locked"]

    async def test_an_unreadable_file_is_reported_by_name_and_loads_once_readable(
        self, context: Context, folder: Path, probe: Probe, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Opening it fails (simulated): a failed load naming the file — a module that
        served keeps serving — and the next reload retries it."""
        ui = write(folder / "my_ui.py", provider_source(1))
        helper = write(folder / "helper.py", _module("helper"))
        real_open = os.open

        def open_(path: Any, *args: Any, **kwargs: Any) -> int:
            if Path(os.fspath(path)) == helper:
                raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
            return real_open(path, *args, **kwargs)

        async with Reloader(context, [folder], watch=False) as reloader:
            write(helper, _module("helper v2"))
            with monkeypatch.context() as patch:
                patch.setattr(os, "open", open_)
                result = await reloader.reload()
            (aborted,) = result.aborted
            assert aborted.path == helper and aborted.error.phase == "read"
            assert "Permission denied" in aborted.error.message
            assert reloader.status_of(helper).generation == 1
            assert reloader.status_of(ui).state is ModuleState.ACTIVE
            result = await reloader.reload()
            assert [c.path for c in result.committed] == [helper]
        assert [e for e in probe.entries("exec") if e != 1] == ["helper", "helper v2"]

    @pytest.mark.skipif(_AS_ROOT, reason="root reads mode-000 files and folders")
    async def test_real_mode_000_entries_do_not_stop_the_reloader(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """The same with real permissions, watched: the rest loads and keeps reloading."""
        ui = write(folder / "my_ui.py", provider_source(1))
        locked = folder / "locked"
        write(locked / "__init__.py", _module("locked"))
        secret = write(folder / "secret.py", _module("secret"))
        locked.chmod(0)
        secret.chmod(0)
        try:
            with structlog.testing.capture_logs() as logs, anyio.fail_after(scaled(10)):
                async with Reloader(context, [folder]) as reloader, reloader.events() as events:
                    assert reloader.status_of(secret).state is ModuleState.FAILED
                    write(ui, provider_source(2))
                    await events.next(ReloadCommitted, path=ui)
            assert str(locked) in _skipped(logs)
        finally:
            locked.chmod(0o755)
            secret.chmod(0o644)


class TestSymlinks:
    async def test_a_link_inside_the_watched_path_is_followed_and_its_target_watched(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """``my_ui.py -> versions/ui_v1.py``: the module is ``my_ui`` at the link's path;
        saving the target reloads it, ``status_of``/``reload`` take the link's path, and
        removing the target unloads it."""
        target = write(folder / "versions" / "ui_v1.py", provider_source(1))
        link = folder / "my_ui.py"
        link.symlink_to(Path("versions") / "ui_v1.py")
        with anyio.fail_after(scaled(10)):
            async with Reloader(context, [folder]) as reloader, reloader.events() as events:
                status = reloader.status_of(link)
                assert (status.path, status.module, status.generation) == (link, "my_ui", 1)
                assert reloader.status_of(target).module == "my_ui"
                assert (await ask(QUESTION, context=context)).answer == "answer v1"
                write(target, provider_source(2))
                committed = await events.next(ReloadCommitted, path=link)
                assert committed.generation == 2
                assert (await ask(QUESTION, context=context)).answer == "answer v2"
                forced = await reloader.reload(link, force=True)
                assert [(c.path, c.generation) for c in forced.committed] == [(link, 3)]
                target.unlink()
                unloaded = await events.next(ModuleUnloaded, path=link)
                assert unloaded.generation == 3
        assert probe.entries("exec") == [1, 2, 2]

    async def test_a_link_outside_every_watched_path_is_refused_and_reported(
        self, context: Context, folder: Path, probe: Probe, tmp_path: Path
    ) -> None:
        """Only code under the given paths runs: file and folder links that leave them are
        skipped with a reason, and editing their targets does nothing."""
        outside = tmp_path / "outside"
        evil = write(outside / "evil.py", _module("evil"))
        write(outside / "kit" / "__init__.py", _module("kit"))
        ui = write(folder / "my_ui.py", provider_source(1))
        barrier = write(folder / "barrier.py", "X = 1\n")
        (folder / "evil.py").symlink_to(evil)
        (folder / "kit").symlink_to(outside / "kit")
        (folder / "absolute.py").symlink_to(evil.resolve())
        with structlog.testing.capture_logs() as logs, anyio.fail_after(scaled(10)):
            async with Reloader(context, [folder]) as reloader, reloader.events() as events:
                assert {s.path for s in reloader.status()} == {ui, barrier}
                write(evil, _module("evil v2"))
                write(barrier, "X = 2\n")
                await events.next(ReloadCommitted, path=barrier)
                # Asked about, a refused link says it was refused, and why (not "never
                # loaded"), however it is spelled.
                refused = "outside the watched paths: refused"
                with pytest.raises(KeyError, match=f"is a symbolic link to {evil}, {refused}"):
                    reloader.status_of(folder / "evil.py")
                with contextlib.chdir(folder), pytest.raises(KeyError) as relative:
                    reloader.status_of("absolute.py")
                assert str(relative.value).startswith(
                    f"'absolute.py' is a symbolic link to {evil}, {refused}"
                )
                through = f"goes through the symbolic link {folder / 'kit'} -> {outside / 'kit'}"
                with pytest.raises(KeyError, match=through):
                    reloader.status_of(folder / "kit" / "__init__.py")
                with pytest.raises(KeyError) as unknown:
                    reloader.status_of(folder / "never.py")
                assert (
                    str(unknown.value)
                    == f"no watched module was loaded from {str(folder / 'never.py')!r}"
                )
        skipped = _skipped(logs)
        assert set(skipped) == {str(folder / name) for name in ("evil.py", "kit", "absolute.py")}
        assert all("outside the watched paths" in reason for reason in skipped.values())
        assert probe.entries("exec") == [1]

    async def test_a_link_loop_loads_each_real_file_once(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """``pkg/again -> .``: each module runs once at start and once per save (each ran
        once per path the loop spells), and the loop is reported."""
        write(folder / "pkg" / "__init__.py", _module("pkg"))
        mod = write(folder / "pkg" / "mod.py", _module("pkg.mod"))
        user = write(folder / "user.py", _module("user", "import pkg.mod"))
        (folder / "pkg" / "again").symlink_to(".")
        with structlog.testing.capture_logs() as logs, anyio.fail_after(scaled(10)):
            async with Reloader(context, [folder]) as reloader, reloader.events() as events:
                assert {s.module for s in reloader.status()} == {"pkg", "pkg.mod", "user"}
                assert sorted(probe.entries("exec")) == ["pkg", "pkg.mod", "user"]
                write(mod, _module("pkg.mod v2"))
                await events.next(ReloadCommitted, path=user)
                assert {s.module for s in reloader.status()} == {"pkg", "pkg.mod", "user"}
        assert sorted(probe.entries("exec")) == ["pkg", "pkg.mod", "pkg.mod v2", "user", "user"]
        skipped = _skipped(logs)
        assert set(skipped) == {str(folder / "pkg" / "again")}
        assert "already watched" in skipped[str(folder / "pkg" / "again")]

    async def test_a_link_to_a_watched_module_is_not_loaded_twice(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """``alias.py -> real.py`` (both watched): the real path wins whatever the names'
        order; the alias is reported, and a save of the file reloads the module once."""
        real = write(folder / "real.py", _module("real"))
        (folder / "alias.py").symlink_to("real.py")
        with structlog.testing.capture_logs() as logs:
            async with Reloader(context, [folder], watch=False) as reloader:
                assert {s.path for s in reloader.status()} == {real}
                write(real, _module("real v2"))
                result = await reloader.reload()
                assert [c.path for c in result.committed] == [real]
        assert probe.entries("exec") == ["real", "real v2"]
        assert "already loaded as module 'real'" in _skipped(logs)[str(folder / "alias.py")]


class TestHalfWrittenFiles:
    async def test_a_file_caught_between_truncate_and_write_is_not_loaded_empty(
        self, tmp_path: Path
    ) -> None:
        """A module file that appears empty (an editor's truncate, its write a moment later)
        is re-read: the content is loaded, never an empty module in place of a provider.
        The read runs in a worker thread, so it can land between the two."""
        from hotseam.reload._loader import read_source

        path = tmp_path / "ui.py"
        path.write_bytes(b"")

        async def write_soon() -> None:
            await anyio.sleep(0.015)
            path.write_bytes(b"VALUE = 1\n")

        async with anyio.create_task_group() as tg:
            tg.start_soon(write_soon)
            source = await read_source(path, None)  # a module appearing: no previous digest
        assert source is not None
        assert source.data == b"VALUE = 1\n"

    async def test_a_file_that_stays_empty_is_loaded_empty(self, tmp_path: Path) -> None:
        """An empty ``__init__.py`` is a real module: believed after the brief re-reads."""
        from hotseam.reload._loader import read_source

        path = tmp_path / "__init__.py"
        path.write_bytes(b"")
        source = await read_source(path, None)
        assert source is not None
        assert source.data == b""


@pytest.fixture(name="thread_reads")
def _thread_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the reading functions sent to a worker thread, in order."""
    from hotseam.reload import _loader

    reads: list[str] = []
    real = anyio.to_thread.run_sync

    async def run_sync(func: Any, *args: Any, **kwargs: Any) -> Any:
        if func in (_loader._read_in_thread, _loader.read_many):
            reads.append(func.__name__)
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", run_sync)
    return reads


def _file_system(monkeypatch: pytest.MonkeyPatch, kind: str | None) -> None:
    """Make every file system look like ``kind`` (``None``: not known)."""
    from hotseam.reload._loader import MOUNTS

    monkeypatch.setattr(MOUNTS, "filesystem_type", lambda device: kind)


def _regular_stat(like: Path, size: int = 10) -> os.stat_result:
    """What an ``lstat`` of a small regular file on ``like``'s file system would say."""
    real = os.lstat(like)
    return os.stat_result((stat.S_IFREG | 0o644, real.st_ino, real.st_dev, 1, 0, 0, size, 0, 0, 0))


class TestReadsOnTheLoop:
    """A small file on a local file system is read on the event loop (no worker-thread
    round trip); a big one, one on any other file system, or anything odd goes to a thread."""

    async def test_a_no_op_save_of_a_small_local_file_takes_no_worker_thread(
        self, context: Context, folder: Path, probe: Probe, thread_reads: list[str]
    ) -> None:
        """With the machine's real mount table (skipped where the temporary folder is not
        on a file system known as local)."""
        from hotseam.reload._loader import MOUNTS

        ui = write(folder / "my_ui.py", provider_source(1))
        async with Reloader(context, [folder], watch=False) as reloader:
            if not MOUNTS.is_local(os.stat(folder).st_dev):
                pytest.skip(f"{folder} is not on a file system known as local")
            del thread_reads[:]
            write(ui, provider_source(1))
            assert (await reloader.reload(ui)).batch is None
            write(ui, provider_source(2))
            assert [c.generation for c in (await reloader.reload(ui)).committed] == [2]
            assert (await ask(QUESTION, context=context)).answer == "answer v2"
        assert thread_reads == []

    @pytest.mark.parametrize("over", [0, 1])
    async def test_a_file_larger_than_the_limit_is_read_in_a_worker_thread(
        self,
        context: Context,
        folder: Path,
        probe: Probe,
        thread_reads: list[str],
        monkeypatch: pytest.MonkeyPatch,
        over: int,
    ) -> None:
        """At the limit: on the loop; one byte over: in a thread. Either way the same
        content is seen as unchanged, and a change is loaded."""
        from hotseam.reload._loader import LOOP_READ_LIMIT

        _file_system(monkeypatch, "ext4")
        ui = folder / "my_ui.py"

        def padded(version: int) -> bytes:
            source = provider_source(version).encode()
            return source + b"#" * (LOOP_READ_LIMIT + over - len(source) - 1) + b"\n"

        ui.write_bytes(padded(1))
        assert ui.stat().st_size == LOOP_READ_LIMIT + over
        async with Reloader(context, [folder], watch=False) as reloader:
            del thread_reads[:]
            ui.write_bytes(padded(1))
            assert (await reloader.reload(ui)).batch is None
            ui.write_bytes(padded(2))
            assert [c.generation for c in (await reloader.reload(ui)).committed] == [2]
        assert thread_reads == ["_read_in_thread"] * 2 * over

    @pytest.mark.parametrize("kind", ["nfs4", "cifs", "smb3", "fuse.sshfs", "9p", "ceph", None])
    async def test_a_file_on_a_file_system_not_known_as_local_is_read_in_a_worker_thread(
        self,
        context: Context,
        folder: Path,
        probe: Probe,
        thread_reads: list[str],
        monkeypatch: pytest.MonkeyPatch,
        kind: str | None,
    ) -> None:
        _file_system(monkeypatch, kind)
        ui = write(folder / "my_ui.py", provider_source(1))
        async with Reloader(context, [folder], watch=False) as reloader:
            del thread_reads[:]
            write(ui, provider_source(1))
            assert (await reloader.reload(ui)).batch is None
        assert thread_reads == ["_read_in_thread"]

    def test_the_loop_read_opens_only_a_small_regular_file_on_a_local_file_system(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Whatever the ``lstat`` said a moment ago: a FIFO (never opened: it would block),
        a FIFO swapped in since (opened non-blocking, refused by its ``fstat``), a link
        swapped in (not followed), a file grown past the limit, a file on another file
        system: each is left to the worker thread (``None``)."""
        from hotseam.reload._loader import LOOP_READ_LIMIT, read_on_loop

        _file_system(monkeypatch, "ext4")
        small = tmp_path / "small.py"
        small.write_bytes(b"X = 1\n")
        source = read_on_loop(small, os.lstat(small))
        assert source is not None and source.data == b"X = 1\n"
        assert source.stat == read_file_stat(small)
        fifo = tmp_path / "late.py"
        os.mkfifo(fifo)
        link = tmp_path / "link.py"
        link.symlink_to(small)
        big = tmp_path / "big.py"
        big.write_bytes(b"#" * (LOOP_READ_LIMIT + 1))
        with _unblock_fifo_after(fifo, 3):
            assert read_on_loop(fifo, os.lstat(fifo)) is None
            assert read_on_loop(fifo, _regular_stat(fifo)) is None
        assert read_on_loop(link, _regular_stat(link)) is None
        assert read_on_loop(big, _regular_stat(big)) is None
        assert read_on_loop(big, os.lstat(big)) is None
        elsewhere = _regular_stat(small)
        moved = os.stat_result((*elsewhere[:2], elsewhere.st_dev + 1, *elsewhere[3:]))
        assert read_on_loop(small, moved) is None  # another device than the one it is on
        assert read_on_loop(tmp_path / "gone.py", _regular_stat(small)) is None
        _file_system(monkeypatch, "nfs4")
        assert read_on_loop(small, os.lstat(small)) is None

    async def test_a_fifo_swapped_in_after_the_lstat_is_refused_not_read(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Through :func:`read_source`: the loop leaves it to the thread, whose read refuses
        it as before; nothing blocks."""
        from hotseam.reload._loader import read_source

        _file_system(monkeypatch, "ext4")
        fifo = tmp_path / "late.py"
        os.mkfifo(fifo)
        with (
            _unblock_fifo_after(fifo, 3),
            anyio.fail_after(scaled(5)),
            pytest.raises(OSError, match="FIFO") as caught,
        ):
            await read_source(fifo, None, _regular_stat(fifo))
        assert caught.value.errno == errno.EINVAL

    async def test_an_empty_loop_read_is_retried_in_a_thread(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, thread_reads: list[str]
    ) -> None:
        """The truncate-then-write guard holds on the loop path too."""
        from hotseam.reload._loader import read_source

        _file_system(monkeypatch, "ext4")
        path = tmp_path / "ui.py"
        path.write_bytes(b"")
        seen = os.lstat(path)

        async def write_soon() -> None:
            await anyio.sleep(0.015)
            path.write_bytes(b"VALUE = 1\n")

        async with anyio.create_task_group() as tg:
            tg.start_soon(write_soon)
            source = await read_source(path, None, seen)
        assert source is not None and source.data == b"VALUE = 1\n"
        assert thread_reads and set(thread_reads) == {"_read_in_thread"}


def read_file_stat(path: Path) -> tuple[int, int, int, int] | None:
    """The ``stat`` :func:`read_file` reports for ``path``."""
    from hotseam.reload._loader import read_file

    return read_file(path).stat


_MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
40 27 0:45 / /mnt/my\\040share rw,relatime shared:7 master:3 - nfs4 server:/export rw,vers=4.2
41 27 0:46 / /home/me/remote rw,nosuid,nodev - fuse.sshfs me@host: rw,user_id=0
42 27 0:47 / /tmp rw - tmpfs tmpfs rw
bad line
"""


class TestMounts:
    def test_mountinfo_maps_device_numbers_to_file_system_types(self) -> None:
        from hotseam.reload._loader import parse_mountinfo

        types = parse_mountinfo(_MOUNTINFO)
        assert types == {
            os.makedev(0, 21): "proc",
            os.makedev(254, 0): "ext4",
            os.makedev(0, 45): "nfs4",
            os.makedev(0, 46): "fuse.sshfs",
            os.makedev(0, 47): "tmpfs",
        }

    def test_the_table_is_read_in_a_thread_and_dropped_when_the_mounts_change(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Only :meth:`learn` reads it; once the kernel reports a mount or an unmount, no
        file system is local until it is read again (a freed device number may come back
        as a network mount); a child process starts afresh."""
        from hotseam.reload._loader import Mounts

        table = tmp_path / "mountinfo"
        table.write_text(_MOUNTINFO)
        mounts = Mounts(str(table))
        monkeypatch.setattr(mounts, "_supported", True)
        ext4, nfs = os.makedev(254, 0), os.makedev(0, 45)
        assert mounts.filesystem_type(ext4) is None  # never read: nothing is local
        mounts.learn()
        assert (mounts.filesystem_type(ext4), mounts.filesystem_type(nfs)) == ("ext4", "nfs4")
        assert mounts.is_local(ext4) and not mounts.is_local(nfs)
        assert not mounts.is_local(os.makedev(7, 7))  # not in the table: unknown
        changed = [True]
        monkeypatch.setattr(Mounts, "_changed", staticmethod(lambda watch: bool(changed)))
        assert mounts.filesystem_type(ext4) is None
        changed.clear()
        assert mounts.filesystem_type(ext4) is None  # until it is read again
        mounts.learn()
        assert mounts.is_local(ext4)
        mounts.after_fork()
        assert mounts.filesystem_type(ext4) is None

    def test_a_table_that_cannot_be_read_for_want_of_descriptors_keeps_its_watch(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Out of descriptors, a mount or an unmount elsewhere (the table cannot be read
        again now) leaves nothing local until the next learn reads it, and the watch open:
        closing it handed a descriptor to whatever opened a file next (a module read while
        a provider held every other one, which then did not fail). A failure that does not
        pass (the table refused) closes it, as before."""
        from hotseam.reload import _loader
        from hotseam.reload._loader import Mounts

        table = tmp_path / "mountinfo"
        table.write_text(_MOUNTINFO)
        mounts = Mounts(str(table))
        monkeypatch.setattr(mounts, "_supported", True)
        ext4 = os.makedev(254, 0)
        mounts.learn()
        assert mounts._watch is not None
        watch = mounts._watch[0]
        monkeypatch.setattr(Mounts, "_changed", staticmethod(lambda watch: True))

        def refused(number: int) -> Callable[..., Any]:
            def fail(*args: object, **kwargs: object) -> Any:
                raise OSError(number, os.strerror(number))

            return fail

        monkeypatch.setattr(_loader, "open", refused(errno.EMFILE), raising=False)
        mounts.learn()
        assert mounts.filesystem_type(ext4) is None
        assert mounts._watch is not None and mounts._watch[0] == watch
        os.fstat(watch)  # still open
        monkeypatch.undo()
        monkeypatch.setattr(mounts, "_supported", True)
        monkeypatch.setattr(Mounts, "_changed", staticmethod(lambda watch: False))
        mounts.learn()  # nothing reported since, but it was not read: read now
        assert mounts.is_local(ext4)
        monkeypatch.setattr(Mounts, "_changed", staticmethod(lambda watch: True))
        monkeypatch.setattr(_loader, "open", refused(errno.EACCES), raising=False)
        mounts.learn()
        assert mounts._watch is None and mounts.filesystem_type(ext4) is None

    def test_no_table_means_nothing_is_local(self, tmp_path: Path) -> None:
        from hotseam.reload._loader import Mounts

        missing = Mounts(str(tmp_path / "missing"))
        missing.learn()  # never raises
        assert missing.filesystem_type(os.makedev(254, 0)) is None
        other_platform = Mounts()
        other_platform._supported = False
        other_platform.learn()
        assert other_platform.filesystem_type(os.stat(tmp_path).st_dev) is None
