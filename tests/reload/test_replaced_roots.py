"""A watched folder replaced, moved away and back, or made a file: never blind for good.

A native watch holds the watched folder's inode, not its path (issue 21, items 3 and 4).
Every test here uses the real native watcher and real folder operations; ``root_check`` is
shortened only where nothing but the periodic check can see what happened (a return after
the deletion grace, a parent swapped, a link pointed elsewhere).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog
from tests._timing import scaled

from hotseam import Context
from hotseam.interaction import USER_INTERACTION, ask, waiting_for_provider
from hotseam.reload import (
    ModuleState,
    ModuleUnloaded,
    ReloadCommitted,
    Reloader,
    ReloadEvent,
    WatchfilesWatcher,
    WatchOptions,
)
from hotseam.reload._events import EventStream

from ._support import Probe, provider_source
from .conftest import QUESTION, write

pytestmark = pytest.mark.anyio

FAST = 0.1
"""``root_check`` of the tests that wait for the periodic check."""


def _helper(value: int) -> str:
    return f"VALUE = {value}\n"


async def _settle(events: EventStream, *expected: tuple[type[ReloadEvent], str]) -> None:
    """Wait until one event of each ``(kind, module)`` arrived, in any order."""
    waiting = set(expected)
    async for event in events:
        waiting.discard((type(event), getattr(event, "module", "")))
        if not waiting:
            return
    raise AssertionError(f"the event stream ended while waiting for {waiting}")


def _logged(logs: list[MutableMapping[str, Any]], event: str) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry["event"] == event]


class TestReplaced:
    async def test_a_folder_deleted_and_made_again_is_watched_again(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """``rm -rf providers`` then a new ``providers`` (a ``git checkout``): what changed,
        appeared and vanished in the swap is applied, and later saves are seen."""
        write(folder / "kept.py", _helper(1))
        write(folder / "changed.py", _helper(1))
        write(folder / "vanished.py", _helper(1))
        with anyio.fail_after(scaled(10)):
            async with Reloader(context, [folder]) as reloader, reloader.events() as events:
                shutil.rmtree(folder)
                write(folder / "kept.py", _helper(1))
                write(folder / "changed.py", _helper(2))
                write(folder / "new.py", _helper(1))
                await _settle(
                    events,
                    (ReloadCommitted, "changed"),
                    (ReloadCommitted, "new"),
                    (ModuleUnloaded, "vanished"),
                )
                write(folder / "kept.py", _helper(3))
                committed = await events.next(ReloadCommitted, module="kept")
                assert committed.generation == 2
                generations = {s.module: (s.state, s.generation) for s in reloader.status()}
        assert generations == {
            "kept": (ModuleState.ACTIVE, 2),
            "changed": (ModuleState.ACTIVE, 2),
            "new": (ModuleState.ACTIVE, 1),
            "vanished": (ModuleState.UNLOADED, None),
        }

    async def test_an_atomic_deploy_by_renames_watches_the_new_folder(
        self, context: Context, folder: Path, probe: Probe, tmp_path: Path
    ) -> None:
        """``mv providers providers.old && mv providers.new providers``: the new folder's
        modules are loaded and its saves seen; a save to the old folder is not taken for
        one of the watched path (the old watch reported it under the watched path)."""
        write(folder / "my_ui.py", provider_source(1))
        new = tmp_path / "providers.new"
        write(new / "my_ui.py", provider_source(2))
        write(new / "barrier.py", _helper(1))
        old = tmp_path / "providers.old"
        with (
            anyio.fail_after(scaled(10)),
            structlog.testing.capture_logs() as logs,
        ):
            async with Reloader(context, [folder]) as reloader, reloader.events() as events:
                os.rename(folder, old)
                os.rename(new, folder)
                await _settle(events, (ReloadCommitted, "my_ui"), (ReloadCommitted, "barrier"))
                assert (await ask(QUESTION, context=context)).answer == "answer v2"
                write(old / "my_ui.py", provider_source(9))
                write(folder / "barrier.py", _helper(2))
                await events.next(ReloadCommitted, module="barrier")
                write(folder / "my_ui.py", provider_source(3))
                committed = await events.next(ReloadCommitted, module="my_ui")
                assert committed.generation == 3
                assert (await ask(QUESTION, context=context)).answer == "answer v3"
        assert 9 not in probe.entries("exec")
        assert [entry["path"] for entry in _logged(logs, "reload.root_replaced")] == [str(folder)]

    async def test_git_checkout_and_stash_of_the_folder_are_followed(
        self, context: Context, tmp_path: Path, probe: Probe
    ) -> None:
        """In a real repository: ``rm -rf providers && git checkout providers``, then
        ``git stash -u`` (the folder goes) and ``git stash pop`` (it is back, changed)."""
        git = shutil.which("git")
        if git is None:
            pytest.skip("git is not installed")
        repo = tmp_path / "repo"
        folder = repo / "providers"
        write(folder / "my_ui.py", provider_source(1))

        def run(*args: str) -> None:
            subprocess.run(
                [git, "-c", "user.name=t", "-c", "user.email=t@t", *args],
                cwd=repo,
                check=True,
                capture_output=True,
            )

        run("init", "-q")
        run("add", "providers")
        run("commit", "-q", "-m", "v1")
        watcher = WatchfilesWatcher(root_check=FAST)
        with anyio.fail_after(scaled(15)):
            async with (
                Reloader(
                    context, [folder], watch=WatchOptions(watcher=watcher, deletion_grace=0.2)
                ) as reloader,
                reloader.events() as events,
            ):
                shutil.rmtree(folder)
                run("checkout", "providers")
                write(folder / "extra.py", _helper(1))  # a save after the checkout
                committed = await events.next(ReloadCommitted, module="extra")
                assert committed.generation == 1
                assert reloader.status_of(folder / "my_ui.py").generation == 1  # same content
                # Untracked now, and changed: the stash takes the whole folder away.
                run("rm", "-q", "-r", "--cached", "providers")
                run("commit", "-q", "-m", "untracked")
                write(folder / "my_ui.py", provider_source(2))
                await events.next(ReloadCommitted, module="my_ui")
                run("stash", "-u", "-q")
                assert not folder.exists()
                await _settle(events, (ModuleUnloaded, "my_ui"), (ModuleUnloaded, "extra"))
                assert context.lookup(USER_INTERACTION) is None
                run("stash", "pop", "-q")
                await _settle(events, (ReloadCommitted, "my_ui"), (ReloadCommitted, "extra"))
                assert (await ask(QUESTION, context=context)).answer == "answer v2"


class TestAwayAndBack:
    async def test_a_folder_back_after_the_grace_is_loaded_again(
        self, context: Context, folder: Path, probe: Probe, tmp_path: Path
    ) -> None:
        """``mv providers p.away``, past the deletion grace, ``mv p.away providers``: the
        modules are unloaded, then loaded again, and a question waiting meanwhile is
        answered by the provider that came back."""
        write(folder / "my_ui.py", provider_source(1))
        away = tmp_path / "p.away"
        watcher = WatchfilesWatcher(root_check=FAST)
        with anyio.fail_after(scaled(10)), structlog.testing.capture_logs() as logs:
            async with (
                Reloader(
                    context, [folder], watch=WatchOptions(watcher=watcher, deletion_grace=0.2)
                ) as reloader,
                reloader.events() as events,
                anyio.create_task_group() as tg,
            ):
                os.rename(folder, away)
                await events.next(ModuleUnloaded, module="my_ui")
                answers: list[str] = []

                async def asker() -> None:
                    with waiting_for_provider():
                        answers.append((await ask(QUESTION, context=context)).answer)

                tg.start_soon(asker)
                await anyio.sleep(3 * FAST)  # several checks while it is away: logged once
                os.rename(away, folder)
                committed = await events.next(ReloadCommitted, module="my_ui")
                assert committed.generation == 2
        assert answers == ["answer v1"]
        assert len(_logged(logs, "reload.root_gone")) == 1
        assert len(_logged(logs, "reload.root_back")) == 1

    async def test_a_folder_replaced_by_a_file_unloads_and_waits_for_a_folder(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """The folder's path becomes a file: its modules are unloaded (not failed reads),
        one warning says so, and a folder made there later is watched and loaded."""
        write(folder / "my_ui.py", provider_source(1))
        watcher = WatchfilesWatcher(root_check=FAST)
        with anyio.fail_after(scaled(10)), structlog.testing.capture_logs() as logs:
            async with (
                Reloader(context, [folder], watch=WatchOptions(watcher=watcher)) as reloader,
                reloader.events() as events,
            ):
                shutil.rmtree(folder)
                write(folder, "not a folder\n")
                await events.next(ModuleUnloaded, module="my_ui")
                await anyio.sleep(3 * FAST)
                os.unlink(folder)
                write(folder / "my_ui.py", provider_source(2))
                committed = await events.next(ReloadCommitted, module="my_ui")
                assert committed.generation == 2
                write(folder / "my_ui.py", provider_source(3))
                await events.next(ReloadCommitted, module="my_ui", generation=3)
        gone = _logged(logs, "reload.root_gone")
        assert len(gone) == 1
        assert "no longer a folder (it is a file)" in gone[0]["summary"]
        assert not _logged(logs, "reload.aborted")

    async def test_a_folder_gone_for_good_is_reported_once_and_the_rest_serves(
        self, context: Context, tmp_path: Path, probe: Probe
    ) -> None:
        """One of two watched folders is deleted and stays gone: one warning, its modules
        unloaded, the other folder's saves still applied; made again, it is loaded."""
        ui = write(tmp_path / "ui" / "my_ui.py", provider_source(1))
        tools = write(tmp_path / "tools" / "helper.py", _helper(1))
        watcher = WatchfilesWatcher(root_check=FAST)
        with anyio.fail_after(scaled(10)), structlog.testing.capture_logs() as logs:
            async with (
                Reloader(
                    context, [ui.parent, tools.parent], watch=WatchOptions(watcher=watcher)
                ) as reloader,
                reloader.events() as events,
            ):
                shutil.rmtree(ui.parent)
                await events.next(ModuleUnloaded, module="my_ui")
                for value in (2, 3, 4):  # well past several checks
                    write(tools, _helper(value))
                    await events.next(ReloadCommitted, module="helper")
                    await anyio.sleep(FAST)
                write(ui, provider_source(2))
                await events.next(ReloadCommitted, module="my_ui", generation=2)
                assert (await ask(QUESTION, context=context)).answer == "answer v2"
        assert [entry["path"] for entry in _logged(logs, "reload.root_gone")] == [str(ui.parent)]


class TestAroundTheFolder:
    async def test_the_parent_swapped_by_renames_is_followed(
        self, context: Context, tmp_path: Path, probe: Probe
    ) -> None:
        """``mv app app.old && mv app.new app`` with ``app/providers`` watched: nothing is
        reported natively; the periodic check sees the new folder and loads it."""
        folder = tmp_path / "app" / "providers"
        write(folder / "my_ui.py", provider_source(1))
        write(tmp_path / "app.new" / "providers" / "my_ui.py", provider_source(2))
        watcher = WatchfilesWatcher(root_check=FAST)
        with anyio.fail_after(scaled(10)):
            async with (
                Reloader(context, [folder], watch=WatchOptions(watcher=watcher)) as reloader,
                reloader.events() as events,
            ):
                os.rename(tmp_path / "app", tmp_path / "app.old")
                os.rename(tmp_path / "app.new", tmp_path / "app")
                await events.next(ReloadCommitted, module="my_ui", generation=2)
                write(folder / "my_ui.py", provider_source(3))
                await events.next(ReloadCommitted, module="my_ui", generation=3)
                assert (await ask(QUESTION, context=context)).answer == "answer v3"

    async def test_a_linked_folder_pointed_elsewhere_is_followed(
        self, context: Context, tmp_path: Path, probe: Probe
    ) -> None:
        """``current -> releases/v1``, watched as ``current/providers``; the link is pointed
        at ``releases/v2`` atomically (a new link renamed over it, as ``ln -sfn`` plus
        ``mv -T`` does): v2's modules serve, its saves are seen, v1's are not."""
        v1 = write(tmp_path / "releases" / "v1" / "providers" / "my_ui.py", provider_source(1))
        v2 = write(tmp_path / "releases" / "v2" / "providers" / "my_ui.py", provider_source(2))
        write(v1.parent / "old_only.py", _helper(1))
        current = tmp_path / "current"
        current.symlink_to(tmp_path / "releases" / "v1")
        with anyio.fail_after(scaled(10)):
            async with (
                Reloader(
                    context, [current / "providers"], watch=WatchOptions(root_check=FAST)
                ) as reloader,
                reloader.events() as events,
            ):
                assert reloader.paths == (v1.parent,)
                (tmp_path / "next").symlink_to(tmp_path / "releases" / "v2")
                os.replace(tmp_path / "next", current)
                await _settle(events, (ReloadCommitted, "my_ui"), (ModuleUnloaded, "old_only"))
                assert reloader.paths == (v2.parent,)
                assert reloader.status_of(v2).generation == 2
                assert (await ask(QUESTION, context=context)).answer == "answer v2"
                write(v1, provider_source(9))
                write(v2, provider_source(3))
                await events.next(ReloadCommitted, module="my_ui", generation=3)
        assert 9 not in probe.entries("exec")

    async def test_a_folder_replaced_by_a_link_to_another_is_followed(
        self, context: Context, folder: Path, probe: Probe, tmp_path: Path
    ) -> None:
        """``mv providers providers.old && ln -s releases/v2 providers``: the watched path
        now leads through a link; the folder it leads to is watched and loaded."""
        write(folder / "my_ui.py", provider_source(1))
        v2 = write(tmp_path / "releases" / "v2" / "my_ui.py", provider_source(2))
        with anyio.fail_after(scaled(10)):
            async with Reloader(context, [folder]) as reloader, reloader.events() as events:
                os.rename(folder, tmp_path / "providers.old")
                os.symlink(v2.parent, folder)
                await events.next(ReloadCommitted, module="my_ui", generation=2)
                write(v2, provider_source(3))
                await events.next(ReloadCommitted, module="my_ui", generation=3)
                assert (await ask(QUESTION, context=context)).answer == "answer v3"


class TestFallback:
    async def test_a_native_watch_that_cannot_be_made_falls_back_to_polling(
        self, context: Context, folder: Path, probe: Probe, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The inotify watch limit reached (simulated: watchfiles raises as it does then):
        a warning names the folder and the error, and saves are still applied."""
        import watchfiles._rust_notify

        class Limited:
            def __init__(self, *args: object) -> None:
                raise OSError("OS file watch limit reached. about [...]")

        monkeypatch.setattr(watchfiles._rust_notify, "RustNotify", Limited)
        monkeypatch.setattr("hotseam.reload._watcher.inotify_available", lambda: False)
        write(folder / "my_ui.py", provider_source(1))
        with anyio.fail_after(scaled(10)), structlog.testing.capture_logs() as logs:
            async with Reloader(context, [folder]) as reloader, reloader.events() as events:
                write(folder / "my_ui.py", provider_source(2))
                await events.next(ReloadCommitted, module="my_ui", generation=2)
        [fallback] = _logged(logs, "reload.watch_fallback")
        assert fallback["log_level"] == "warning"
        assert "OS file watch limit reached" in fallback["summary"]
        assert "polling it instead" in fallback["summary"]

    async def test_a_watch_that_cannot_be_made_again_falls_back_to_polling(
        self, context: Context, folder: Path, probe: Probe, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The folder is replaced and its new native watch cannot be made (the watch limit
        reached meanwhile): a warning, and the new folder is polled; nothing is missed."""
        import watchfiles._rust_notify

        real = watchfiles._rust_notify.RustNotify
        made: list[object] = []

        def first_only(*args: object) -> object:
            if made:
                raise OSError("OS file watch limit reached.")
            made.append(real(*args))
            return made[-1]

        monkeypatch.setattr(watchfiles._rust_notify, "RustNotify", first_only)
        monkeypatch.setattr("hotseam.reload._watcher.inotify_available", lambda: False)
        write(folder / "my_ui.py", provider_source(1))
        with anyio.fail_after(scaled(10)), structlog.testing.capture_logs() as logs:
            async with Reloader(context, [folder]) as reloader, reloader.events() as events:
                shutil.rmtree(folder)
                write(folder / "my_ui.py", provider_source(2))
                await events.next(ReloadCommitted, module="my_ui", generation=2)
                write(folder / "my_ui.py", provider_source(3))
                await events.next(ReloadCommitted, module="my_ui", generation=3)
        [fallback] = _logged(logs, "reload.watch_fallback")
        assert "OS file watch limit reached" in fallback["summary"]


class TestSingleFile:
    async def test_the_folder_of_a_watched_file_replaced_is_watched_again(
        self, context: Context, folder: Path, probe: Probe, tmp_path: Path
    ) -> None:
        """A single watched file: its folder (what is watched) swapped by renames for one
        with a new version of the file; it is reloaded, and later saves are seen."""
        ui = write(folder / "my_ui.py", provider_source(1))
        write(tmp_path / "next" / "my_ui.py", provider_source(2))
        with anyio.fail_after(scaled(10)):
            async with Reloader(context, [ui]) as reloader, reloader.events() as events:
                os.rename(folder, tmp_path / "old")
                os.rename(tmp_path / "next", folder)
                await events.next(ReloadCommitted, module="my_ui", generation=2)
                write(ui, provider_source(3))
                await events.next(ReloadCommitted, module="my_ui", generation=3)
                assert (await ask(QUESTION, context=context)).answer == "answer v3"
