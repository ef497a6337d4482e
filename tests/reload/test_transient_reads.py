"""A module file that cannot be read for a passing reason is read again once it can.

Out of file descriptors (EMFILE) — a provider took them all, a flood of connections — a
module saved or added at that moment cannot be read, and a folder cannot be listed. That is
neither a failed load nor a file that is gone: the read (or the listing) is retried with a
bounded backoff, logged once per episode naming the file and the reason, and the module is
loaded soon after descriptors are free again. The children below run under a low
RLIMIT_NOFILE (soft and hard), and a provider module takes every descriptor left until a
flag file tells it to let them go.
"""

from __future__ import annotations

import errno
import json
import os
import queue
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog
from tests._timing import scaled

from cli._support import Process  # the shared subprocess reader (tests/cli)
from hotseam import Context
from hotseam.reload import (
    ChangeKind,
    FileChange,
    PollingWatcher,
    ReloadCommitted,
    Reloader,
    ReloadEvent,
    WatchOptions,
    WatchRoot,
    _loader,
    _watcher,
)
from hotseam.reload._errors import ModuleTooLargeError, is_transient
from hotseam.reload._loader import read_file
from hotseam.reload._roots import LinkedRoots, Root

from .conftest import write

DESCRIPTORS = 64
"""The children's limit: they idle with a few dozen open."""
RECOVERY_BOUND = 4.0  # seconds on an idle machine, scaled where used
"""Seconds from the release of the descriptors to the load of what was saved meanwhile
(the retry's backoff stops at 1 s; polling scans at least every second)."""

HOG = """
import os
from pathlib import Path

import anyio

FLAGS = Path(os.environ["HOG_FLAGS"])


def setup(scope):
    held = []

    def release():
        while held:
            os.close(held.pop())

    async def obey():
        # Flags are looked at with a stat, which needs no descriptor.
        while not (FLAGS / "grab").exists():
            await anyio.sleep(0.02)
        try:
            while True:
                held.append(os.open(os.devnull, os.O_RDONLY))
        except OSError as error:
            print(f"hog: holding {len(held)} descriptors ({error.strerror})", flush=True)
        while not (FLAGS / "release").exists():
            await anyio.sleep(0.02)
        release()
        print("hog: released", flush=True)

    scope.defer(release)
    scope.spawn(obey)
"""

LIBRARY_CHILD = """
import sys

import anyio

from hotseam import Context
from hotseam.cli._logging import configure_logging
from hotseam.reload import Reloader, WatchOptions


async def main(native, polled):
    configure_logging("json")
    context = Context("transient")
    polling = WatchOptions(polling=True)
    async with Reloader(context, [native]), Reloader(context, [polled], watch=polling):
        print("ready", flush=True)
        await anyio.sleep_forever()


anyio.run(main, sys.argv[1], sys.argv[2])
"""


def announcing(name: str, version: int) -> str:
    """A provider module that says on stdout which version of it was set up."""
    return f"def setup(scope):\n    print('set up {name} v{version}', flush=True)\n"


def limited(descriptors: int) -> Callable[[], None]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (descriptors, descriptors))

    return limit


def logged(process: Process, event: str) -> list[dict[str, object]]:
    """The JSON log lines of ``event`` the child wrote to stderr."""
    return [json.loads(line) for line in process.lines["stderr"] if f'"event": "{event}"' in line]


def event_line(event: str, path: Path) -> str:
    """A pattern of the JSON log line of ``event`` that mentions ``path``."""
    return rf'^(?=.*"event": "{re.escape(event)}")(?=.*"{re.escape(str(path))}")'


def mentioning(entries: list[dict[str, object]], path: Path) -> list[dict[str, object]]:
    return [entry for entry in entries if str(path) in json.dumps(entry)]


class Child(Process):
    """A Python script (not ``python -m hotseam``) in a child under the descriptor limit,
    its output read as a :class:`Process`'s."""

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str]) -> None:
        self.popen = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            preexec_fn=limited(DESCRIPTORS),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines = {"stdout": [], "stderr": []}
        self._queues = {}
        for name in ("stdout", "stderr"):
            self._queues[name] = queue.Queue()
            stream = getattr(self.popen, name)
            threading.Thread(target=self._pump, args=(name, stream), daemon=True).start()


@pytest.fixture(name="flags")
def _flags(tmp_path: Path) -> Path:
    flags = tmp_path / "flags"
    flags.mkdir()
    return flags


def child_env(flags: Path, runtime: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "NO_COLOR": "1",
        "HOTSEAM_RUNTIME_DIR": str(runtime),
        "HOG_FLAGS": str(flags),
    }


def exhaust_save_release(
    process: Process,
    flags: Path,
    saves: dict[Path, str],
    waits: list[str],
) -> float:
    """Let the hog take every descriptor, write ``saves`` (path → the name it announces),
    wait for the ``waits`` log patterns, release; return when the release happened."""
    (flags / "grab").touch()
    process.expect(r"^hog: holding \d+ descriptors \(Too many open files\)$", stream="stdout")
    for path, name in saves.items():
        write(path, announcing(name, 2))
    process.expect_each(*waits)
    (flags / "release").touch()
    process.expect(r"^hog: released$", stream="stdout")
    return time.monotonic()


def test_the_library_reloader_reads_again_what_it_could_not_read_for_want_of_descriptors(
    tmp_path: Path, flags: Path
) -> None:
    """A Reloader with the native watcher and one polling, in a child out of descriptors:
    a module saved and one added meanwhile are loaded soon after descriptors are back; the
    unreadable files (and the folder the polling watcher could not list) are logged once."""
    native, polled = tmp_path / "native", tmp_path / "polled"
    write(native / "hog.py", HOG)
    write(native / "ui_native.py", announcing("ui_native", 1))
    write(polled / "ui_polled.py", announcing("ui_polled", 1))
    script = write(tmp_path / "child.py", LIBRARY_CHILD)
    process = Child(
        [sys.executable, str(script), str(native), str(polled)],
        cwd=tmp_path,
        env=child_env(flags, tmp_path / "rt"),
    )
    try:
        process.expect_each(
            "^ready$", "^set up ui_native v1$", "^set up ui_polled v1$", stream="stdout"
        )
        saves = {
            native / "ui_native.py": "ui_native",
            native / "new_native.py": "new_native",
            polled / "ui_polled.py": "ui_polled",
            polled / "new_polled.py": "new_polled",
        }
        released = exhaust_save_release(
            process,
            flags,
            saves,
            [
                event_line("reload.deferred", native / "ui_native.py"),
                event_line("reload.deferred", native / "new_native.py"),
                event_line("reload.deferred", polled / "ui_polled.py"),
                event_line("reload.scan_deferred", polled),
            ],
        )
        process.expect_each(*(f"^set up {name} v2$" for name in saves.values()), stream="stdout")
        assert time.monotonic() - released < scaled(RECOVERY_BOUND)
        if not logged(process, "reload.scan_recovered"):  # may come after the setups it led to
            process.expect(r'"event": "reload.scan_recovered"')
    finally:
        process.finish(signal.SIGKILL)
    deferred = logged(process, "reload.deferred")
    for path in (native / "ui_native.py", native / "new_native.py", polled / "ui_polled.py"):
        (entry,) = mentioning(deferred, path)
        assert entry["level"] == "warning"
        assert entry["errno"] == "EMFILE"
        assert "Too many open files" in str(entry["summary"])
    (listing,) = logged(process, "reload.scan_deferred")
    assert listing["paths"] == [str(polled)]
    assert listing["errno"] == "EMFILE"
    assert mentioning(logged(process, "reload.recovered"), native / "ui_native.py")
    assert logged(process, "reload.scan_recovered")
    assert not logged(process, "reload.aborted")
    assert not logged(process, "reload.unloaded")


@pytest.mark.parametrize("polling", [False, True], ids=["native", "polling"])
def test_hotseam_run_loads_what_was_saved_while_out_of_descriptors(
    tmp_path: Path, flags: Path, polling: bool
) -> None:
    """``hotseam run`` (native watcher, then --polling) out of descriptors: a module saved
    and one added meanwhile are loaded soon after descriptors are free, nothing is
    unloaded or reported as failed, and each file's trouble is logged once."""
    providers = tmp_path / "providers"
    write(providers / "hog.py", HOG)
    write(providers / "ui.py", announcing("ui", 1))
    process = Process(
        "run",
        "providers",
        *(["--polling"] if polling else []),
        cwd=tmp_path,
        env=child_env(flags, tmp_path / "rt"),
        preexec_fn=limited(DESCRIPTORS),
    )
    try:
        process.expect("^set up ui v1$", stream="stdout")
        process.expect(r'"control socket: ')
        saves = {providers / "ui.py": "ui", providers / "new.py": "new"}
        waits = [event_line("reload.deferred", providers / "ui.py")]
        waits.append(
            event_line("reload.scan_deferred", providers)
            if polling
            else event_line("reload.deferred", providers / "new.py")
        )
        released = exhaust_save_release(process, flags, saves, waits)
        process.expect_each("^set up ui v2$", "^set up new v2$", stream="stdout")
        assert time.monotonic() - released < scaled(RECOVERY_BOUND)
    finally:
        code = process.finish(signal.SIGTERM)
    assert code == 0, process.lines
    assert len(mentioning(logged(process, "reload.deferred"), providers / "ui.py")) == 1
    if polling:
        assert len(logged(process, "reload.scan_deferred")) == 1
    else:
        assert len(mentioning(logged(process, "reload.deferred"), providers / "new.py")) == 1
    assert not logged(process, "reload.aborted")
    assert not logged(process, "reload.unloaded")


# -- In process: each failure injected at its one system call, on asyncio and trio ------------


def test_which_failures_pass() -> None:
    """Out of descriptors, memory or buffers, interrupted, a network file system away: yes;
    a file gone, refused or too large: no. A cause counts (a failed import's read), and so
    does watchfiles' ``(os error N)``."""
    for number in (errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS, errno.EAGAIN):
        assert is_transient(OSError(number, os.strerror(number)))
    assert is_transient(OSError(errno.EIO, "Input/output error"))
    assert is_transient(OSError(errno.ESTALE, "Stale file handle"))
    for number in (errno.ENOENT, errno.EACCES, errno.ENOTDIR, errno.EINVAL):
        assert not is_transient(OSError(number, os.strerror(number)))
    assert not is_transient(ModuleTooLargeError("x.py is 2 MiB, over the limit"))
    try:
        try:
            raise OSError(errno.EMFILE, "Too many open files", "helper.py")
        except OSError as error:
            raise ModuleNotFoundError("cannot read helper.py") from error
    except ModuleNotFoundError as error:
        assert is_transient(error)
    rust = RuntimeError("Error creating recommended watcher: Too many open files (os error 24)")
    assert is_transient(rust)
    assert not is_transient(RuntimeError("OS file watch limit reached. (os error 28)"))


def _failing_for(paths: set[str], times: int, real: Callable[..., Any]) -> Callable[..., Any]:
    """``real`` (``os.scandir``, ``os.stat``...), failing with EMFILE for ``paths`` the first
    ``times`` calls that name one of them."""
    left = [times]

    def call(path: Any, *args: Any, **kwargs: Any) -> Any:
        if os.fspath(path) in paths and left[0] > 0:
            left[0] -= 1
            raise OSError(errno.EMFILE, "Too many open files", os.fspath(path))
        return real(path, *args, **kwargs)

    return call


def _logged(logs: list[MutableMapping[str, Any]], event: str) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry["event"] == event]


@pytest.mark.anyio
async def test_a_folder_that_cannot_be_listed_unloads_nothing_and_is_listed_again(
    context: Context, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reload of everything while the watched folder cannot be listed (EMFILE): nothing is
    unloaded (the listing is not taken for an empty folder), the result names the folder,
    and the listing is tried again until it works: the module saved meanwhile loads."""
    write(folder / "my_ui.py", announcing("my_ui", 1))
    with anyio.fail_after(scaled(10)), structlog.testing.capture_logs() as logs:
        async with (
            Reloader(context, [folder], watch=False) as reloader,
            reloader.events() as events,
        ):
            monkeypatch.setattr(os, "scandir", _failing_for({str(folder)}, 3, os.scandir))
            write(folder / "my_ui.py", announcing("my_ui", 2))
            result = await reloader.reload()
            assert (result.batch, result.events, result.deferred) == (None, (), (folder,))
            assert reloader.status_of(folder / "my_ui.py").generation == 1
            await events.next(ReloadCommitted, module="my_ui", generation=2)
    assert not _logged(logs, "reload.unloaded")
    (deferred,) = _logged(logs, "reload.deferred")
    assert deferred["log_level"] == "warning"
    assert deferred["errno"] == "EMFILE"
    assert deferred["summary"].startswith(
        f"cannot list {folder} (for every watched path) now (EMFILE: Too many open files)"
    )
    (recovered,) = _logged(logs, "reload.recovered")
    assert recovered["attempts"] == 3


@pytest.mark.anyio
async def test_a_module_whose_import_could_not_be_read_is_tried_again(
    context: Context, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watched file's sibling, read when it imports it, cannot be read (EMFILE): the
    importer fails (reported, naming the file), and is tried again on its own a moment
    later, when the read works."""
    ui = write(folder / "my_ui.py", "import helper\n\n" + announcing("my_ui", 1))
    helper = write(folder / "helper.py", "COLOUR = 'teal'\n")
    monkeypatch.setattr(_loader, "read_file", _failing_for({str(helper)}, 1, read_file))
    with anyio.fail_after(scaled(10)), structlog.testing.capture_logs() as logs:
        async with Reloader(context, [ui], watch=False) as reloader, reloader.events() as events:
            failed = reloader.status_of(ui)  # the retry waits a moment
            assert failed.generation is None
            assert "Too many open files" in str(failed.error)
            await events.next(ReloadCommitted, module="my_ui", generation=1)
    (deferred,) = _logged(logs, "reload.deferred")
    assert deferred["paths"] == [str(ui)]
    assert f"cannot read {helper} (for {ui}) now (EMFILE" in deferred["summary"]
    assert _logged(logs, "reload.recovered")


LATER = time.time() + 3600
"""A previous scan's time that makes no file racy: only a changed stat is reported."""


def test_a_polled_folder_that_cannot_be_listed_keeps_its_files(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The polling watcher cannot list a folder (EMFILE) after a file was added to it: its
    known files are neither reported deleted nor forgotten (a save to one is still seen),
    the failure is told once, and the next scan lists the folder and finds the new file."""
    ui = write(folder / "my_ui.py", announcing("my_ui", 1))
    tree = PollingWatcher(racy_window=0)._tree([WatchRoot(folder)])
    assert tree.scan(LATER) == {FileChange(ChangeKind.ADDED, ui)}
    tree.settle()
    added = write(folder / "new.py", announcing("new", 1))
    os.utime(ui, ns=(1, 1))
    monkeypatch.setattr(os, "scandir", _failing_for({str(folder)}, 2, os.scandir))
    assert tree.scan(LATER) == {FileChange(ChangeKind.MODIFIED, ui)}
    began, ended = tree.settle()
    assert (list(began), ended) == ([str(folder)], {})
    assert tree.scan(LATER) == set()  # still failing: told once
    assert tree.settle() == ({}, {})
    assert tree.scan(LATER) == {FileChange(ChangeKind.ADDED, added)}
    began, ended = tree.settle()
    assert (began, list(ended)) == ({}, [str(folder)])


def test_a_polled_folder_that_cannot_be_looked_at_is_not_taken_for_gone(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder's own stat fails for a passing reason (a network file system's EIO):
    its files are not reported deleted."""
    ui = write(folder / "my_ui.py", announcing("my_ui", 1))
    tree = PollingWatcher(racy_window=0)._tree([WatchRoot(folder)])
    tree.scan(LATER)
    monkeypatch.setattr(os, "stat", _failing_for({str(folder)}, 1, os.stat))
    assert tree.scan(LATER) == set()
    assert list(tree.settle()[0]) == [str(folder)]
    os.utime(ui, ns=(1, 1))
    assert tree.scan(LATER) == {FileChange(ChangeKind.MODIFIED, ui)}


@pytest.mark.anyio
async def test_a_native_watch_that_cannot_be_made_for_want_of_descriptors_comes_back(
    context: Context, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The native watch cannot be made (watchfiles' error for EMFILE): the folder is polled
    meanwhile (saves applied), and the native watch is made again once it can (logged),
    after which saves are still applied."""
    import watchfiles._rust_notify

    real = watchfiles._rust_notify.RustNotify
    failures = [2]

    def scarce(*args: Any) -> Any:
        if failures[0]:
            failures[0] -= 1
            raise RuntimeError(
                "Error creating recommended watcher: Too many open files (os error 24)"
            )
        return real(*args)

    monkeypatch.setattr(watchfiles._rust_notify, "RustNotify", scarce)
    monkeypatch.setattr("hotseam.reload._watcher.inotify_available", lambda: False)
    monkeypatch.setattr(_watcher, "LAST_RETRY", 0.05)
    write(folder / "my_ui.py", announcing("my_ui", 1))
    with anyio.fail_after(scaled(10)), structlog.testing.capture_logs() as logs:
        async with Reloader(context, [folder]) as reloader, reloader.events() as events:
            write(folder / "my_ui.py", announcing("my_ui", 2))
            await events.next(ReloadCommitted, module="my_ui", generation=2)
            while not _logged(logs, "reload.watch_restored"):
                await events.next(ReloadEvent)  # the restored watch reports the folder
            write(folder / "my_ui.py", announcing("my_ui", 3))
            await events.next(ReloadCommitted, module="my_ui", generation=3)
    (fallback,) = _logged(logs, "reload.watch_fallback")
    assert "Too many open files" in fallback["summary"]
    assert fallback["summary"].endswith("until the native watch can be made again")
    assert len(_logged(logs, "reload.watch_restored")) == 1


@pytest.mark.anyio
async def test_a_watched_folder_that_cannot_be_looked_at_is_not_taken_for_gone(
    context: Context, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The native watcher's check of the watched folder fails for a passing reason (a
    network file system's EIO): the folder keeps its identity (nothing unloaded, said once),
    is looked at again at the next check (said once), and saves are still applied."""
    real = os.stat
    failures = 3
    recovered = anyio.Event()

    def flaky(path: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal failures
        if path == str(folder):  # the check's stat, by string
            if failures:
                failures -= 1
                raise OSError(errno.EIO, "Input/output error", path)
            recovered.set()
        return real(path, *args, **kwargs)

    write(folder / "my_ui.py", announcing("my_ui", 1))
    with anyio.fail_after(scaled(10)), structlog.testing.capture_logs() as logs:
        reloader = Reloader(context, [folder], watch=WatchOptions(root_check=0.01))
        async with reloader, reloader.events() as events:
            monkeypatch.setattr(os, "stat", flaky)
            await recovered.wait()
            write(folder / "my_ui.py", announcing("my_ui", 2))
            await events.next(ReloadCommitted, module="my_ui", generation=2)
    assert not _logged(logs, "reload.root_gone")
    assert not _logged(logs, "reload.unloaded")
    (deferred,) = _logged(logs, "reload.scan_deferred")
    assert (deferred["paths"], deferred["errno"]) == ([str(folder)], "EIO")
    assert len(_logged(logs, "reload.scan_recovered")) == 1


def test_a_linked_path_that_cannot_be_resolved_now_is_looked_at_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watched path given through a link, pointed elsewhere, whose new target cannot be
    looked at for a passing reason: the check goes on (the reloader's link follower does
    not die) and follows the link at the next check."""
    (tmp_path / "v1").mkdir()
    (tmp_path / "v2").mkdir()
    link = tmp_path / "current"
    link.symlink_to(tmp_path / "v1")
    root = Root.from_path(link)
    link.unlink()
    link.symlink_to(tmp_path / "v2")
    real = Root.from_path

    def unreachable(cls: type[Root], given: Any) -> Root:
        raise OSError(errno.EIO, "Input/output error", str(given))

    linked = LinkedRoots()
    monkeypatch.setattr(Root, "from_path", classmethod(unreachable))
    assert linked.moved((root,)) == {}
    monkeypatch.setattr(Root, "from_path", real)
    assert linked.moved((root,)) == {root: Root.from_path(link)}
