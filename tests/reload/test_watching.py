"""Behaviours 5, 6, 8 and 9: what the watcher sees, and what it makes the reloader do.

Each test that proves something was *ignored* ends with a "barrier": a real change to
another module, saved after the ignored files. Events come in order, so once the barrier's
commit arrives, anything the ignored files could have caused would have arrived before it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import pytest
from tests._timing import scaled

from hotseam import Context
from hotseam.interaction import USER_INTERACTION, ask
from hotseam.reload import (
    ChangeKind,
    FileChange,
    ModuleState,
    ModuleUnloaded,
    PollingWatcher,
    ReloadCommitted,
    Reloader,
    ReloadEvent,
    ReloadPlanned,
    WatchOptions,
)
from hotseam.reload._loader import MOUNTS

from ._support import Probe, ScriptedWatcher, provider_source, virtual_backend
from .conftest import QUESTION, write

pytestmark = pytest.mark.anyio


def _paths_in(events: list[ReloadEvent]) -> set[Path]:
    found: set[Path] = set()
    for event in events:
        if isinstance(event, ReloadPlanned):
            found.update(event.changed + event.modules + event.unloading)
        found.add(getattr(event, "path", Path("/")))
    return found - {Path("/")}


async def _until(events: object, kind: type[ReloadEvent], path: Path) -> list[ReloadEvent]:
    """Collect events until one of ``kind`` for ``path`` arrived; return them all."""
    seen: list[ReloadEvent] = []
    async for event in events:  # type: ignore[attr-defined]
        seen.append(event)
        if isinstance(event, kind) and getattr(event, "path", None) == path:
            return seen
    raise AssertionError("the event stream ended")


class TestSaves:
    async def test_an_atomic_save_counts_and_its_temporary_file_is_ignored(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Write a temporary file, rename it over the module: one change, the temp unseen."""
        ui = write(folder / "my_ui.py", provider_source(1))
        with anyio.fail_after(scaled(10)):
            async with Reloader(context, [folder]) as reloader, reloader.events() as events:
                for version, temporary in ((2, "my_ui.py.tmp"), (3, ".#my_ui.py")):
                    staging = folder / temporary
                    staging.write_text(provider_source(version))
                    os.replace(staging, ui)
                    seen = await _until(events, ReloadCommitted, ui)
                    assert _paths_in(seen) == {ui}
                    assert (await ask(QUESTION, context=context)).answer == f"answer v{version}"
                assert {s.path for s in reloader.status()} == {ui}

    async def test_editor_droppings_and_pycache_are_ignored(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Swap, backup, lock and cache files never plan a reload (barrier: a real edit)."""
        ui = write(folder / "my_ui.py", provider_source(1))
        barrier = write(folder / "barrier.py", "X = 1\n")
        droppings = [
            ".my_ui.py.swp",
            ".my_ui.py.swx",
            "my_ui.py~",
            "#my_ui.py#",
            "4913",
            "my_ui.py___jb_tmp___",
            "my_ui.py.bak",
            "my-ui.py",
            "__pycache__/my_ui.cpython-311.pyc",
            "__pycache__/stray.py",
            ".hidden/ghost.py",
        ]
        with anyio.fail_after(scaled(10)):
            async with Reloader(context, [folder]) as reloader, reloader.events() as events:
                for name in droppings:
                    write(folder / name, provider_source(9))
                (folder / ".my_ui.py.swp").unlink()
                write(barrier, "X = 2\n")
                seen = await _until(events, ReloadCommitted, barrier)
                assert _paths_in(seen) == {barrier}
                assert reloader.status_of(ui).generation == 1
        assert 9 not in probe.entries("exec")

    async def test_deleting_a_provider_unloads_it_and_recreating_it_loads_it(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Deletion disposes the generation (provider removed); the file coming back loads."""
        ui = write(folder / "my_ui.py", provider_source(1))
        with anyio.fail_after(scaled(10)):
            async with Reloader(context, [folder]) as reloader, reloader.events() as events:
                ui.unlink()
                unloaded = await events.next(ModuleUnloaded, path=ui)
                assert unloaded.generation == 1
                assert context.lookup(USER_INTERACTION) is None
                assert probe.entries("dispose") == [1]
                status = reloader.status_of(ui)
                assert status.state is ModuleState.UNLOADED and status.generation is None
                write(ui, provider_source(2))
                committed = await events.next(ReloadCommitted, path=ui)
                assert committed.generation == 2
                assert (await ask(QUESTION, context=context)).answer == "answer v2"

    async def test_a_single_watched_file_survives_rename_on_save(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Watching one file means watching its folder: repeated renames keep being seen."""
        ui = write(folder / "my_ui.py", provider_source(1))
        with anyio.fail_after(scaled(10)):
            async with Reloader(context, [ui]) as reloader, reloader.events() as events:
                for version in (2, 3, 4):
                    staging = folder / "4913"
                    staging.write_text(provider_source(version))
                    os.replace(staging, ui)
                    committed = await events.next(ReloadCommitted, path=ui)
                    assert committed.generation == version
                assert reloader.watcher is not None


class TestBursts:
    async def test_a_burst_of_saves_gives_a_few_serialized_reloads_ending_on_the_last(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """50 saves 10 ms apart, natively watched: no overlap, the last content active, and
        few reloads: never two within ``coalesce`` of each other, on whatever machine.

        Each setup yields to the event loop and counts how many setups are in progress at
        once; the reloads never overlap if that count never exceeds one. How many reloads
        the burst takes depends on how long it lasts here (a busy machine stretches the
        pacing), so it is held to the window it lasted, on the reloader's own clock; the
        exact count is specified on a virtual clock (below).
        """
        probe.values["running"] = 0
        probe.values["most"] = 0
        ui = write(folder / "my_ui.py", _counting_provider(0))
        coalesce = WatchOptions().coalesce
        with anyio.fail_after(scaled(15)):
            async with Reloader(context, [folder]) as reloader, reloader.events() as events:
                started = anyio.current_time()
                for version in range(1, 51):
                    write(ui, _counting_provider(version))
                    await anyio.sleep(0.01)  # pacing the saves, not waiting for anything
                committed: list[ReloadCommitted] = []
                # Until the commit that makes v50 serve (the setup of v50 is logged before its
                # commit, so "the last setup was v50" does not yet mean it serves).
                while not committed or _serving(context) != "v50":
                    event = await events.next(ReloadCommitted, path=ui)
                    assert isinstance(event, ReloadCommitted)
                    committed.append(event)
                lasted = anyio.current_time() - started
                assert probe.entries("setup")[-1] == 50
                assert probe.values["most"] == 1
                assert 1 <= len(committed) <= 1 + lasted / coalesce, (len(committed), lasted)
                assert [c.generation for c in committed] == sorted(c.generation for c in committed)


class TestBurstsOnAVirtualClock:
    """The coalescing window on a clock that moves only when every task waits: the reloads
    a burst gives are exact, on asyncio and trio, however busy the machine."""

    @pytest.fixture(params=["asyncio", "trio"])
    def anyio_backend(self, request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
        return virtual_backend(request.param)

    async def test_a_burst_is_applied_at_once_then_once_per_coalesce_window(
        self, context: Context, folder: Path, probe: Probe, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """50 saves 13 ms apart (0.637 s), ``coalesce`` 0.1 s: the first save is applied at
        once (t=0), then one reload per window loads what was saved last before it ends
        (v8 at 0.1, v16 at 0.2 ... v47 at 0.6), and v50 at 0.7; never two setups at once."""
        # Read on the loop (a small file on a local file system), and the module bodies are
        # inert (run on the loop): no thread whose wait would let the clock jump mid-reload.
        monkeypatch.setattr(MOUNTS, "filesystem_type", lambda device: "ext4")
        probe.values["running"] = 0
        probe.values["most"] = 0
        watcher = ScriptedWatcher()
        ui = write(folder / "my_ui.py", _inert_counting_provider(0))
        options = WatchOptions(watcher=watcher, coalesce=0.1)
        # No deadline of its own: on this clock a wait for a thread (the first read of the
        # module, at the start) would jump straight to it; pytest-timeout bounds the test.
        async with (
            Reloader(context, [folder], watch=options) as reloader,
            reloader.events() as events,
        ):
            started = anyio.current_time()
            for version in range(1, 51):
                write(ui, _inert_counting_provider(version))
                await watcher.push(ui)
                await anyio.sleep(0.013)
            committed: list[int] = []
            while _serving(context) != "v50":
                event = await events.next(ReloadCommitted, path=ui)
                assert isinstance(event, ReloadCommitted)
                committed.append(event.generation)
        assert probe.entries("setup") == [0, 1, 8, 16, 24, 31, 39, 47, 50]
        assert committed == [2, 3, 4, 5, 6, 7, 8, 9]
        at = [round(time - started, 3) for time in probe.values["at"]]
        assert at == [0.0, 0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]  # the start, then the saves
        assert probe.values["most"] == 1


def _inert_counting_provider(version: int) -> str:
    """A provider whose setup counts the setups in progress, and whose module body calls
    nothing and imports only what is imported already (so the loader runs it on the loop,
    not in its thread: see ``hotseam.reload._loader``)."""
    return (
        "import anyio\n"
        "import reload_probe\n"
        "from hotseam.interaction import USER_INTERACTION\n"
        f"VERSION = {version}\n"
        "\n"
        "async def setup(scope):\n"
        "    probe = reload_probe.probe\n"
        "    probe.values['running'] += 1\n"
        "    probe.values['most'] = max(probe.values['most'], probe.values['running'])\n"
        "    await anyio.sleep(0)\n"
        "    reload_probe.log.append(('setup', VERSION))\n"
        "    probe.values.setdefault('at', []).append(anyio.current_time())\n"
        "    from hotseam.providers.scripted import ScriptedProvider\n"
        "\n"
        "    provider = ScriptedProvider(lambda request: 'answer', name=f'v{VERSION}')\n"
        "    scope.provide(USER_INTERACTION, provider)\n"
        "    probe.values['running'] -= 1\n"
    )


def _serving(context: Context) -> str | None:
    return getattr(context.lookup(USER_INTERACTION), "name", None)


def _counting_provider(version: int) -> str:
    return provider_source(
        version,
        setup_lines=[],
        module_lines=[
            "import anyio",
            "async def _setup(scope, inner):",
            "    probe = reload_probe.probe",
            "    probe.values['running'] += 1",
            "    probe.values['most'] = max(probe.values['most'], probe.values['running'])",
            "    await anyio.sleep(0)",
            "    inner(scope)",
            "    probe.values['running'] -= 1",
        ],
    ).replace("def setup(scope):", "def _sync_setup(scope):") + (
        "\n\nasync def setup(scope):\n    await _setup(scope, _sync_setup)\n"
    )


class _CoarseStat(NamedTuple):
    st_mtime_ns: int
    st_ctime_ns: int
    st_size: int
    st_ino: int


class TestPolling:
    async def test_polling_sees_edits_creations_and_deletions(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Forced polling: two edits in quick succession are both applied; add/delete too."""
        ui = write(folder / "my_ui.py", provider_source(1))
        extra = folder / "extra.py"
        with anyio.fail_after(scaled(10)):
            async with (
                Reloader(
                    context, [folder], watch=WatchOptions(polling=True, poll_interval=0.02)
                ) as reloader,
                reloader.events() as events,
            ):
                assert isinstance(reloader.watcher, PollingWatcher)
                for version in (2, 3):
                    write(ui, provider_source(version))
                    await events.next(ReloadCommitted, path=ui)
                    assert (await ask(QUESTION, context=context)).answer == f"answer v{version}"
                write(extra, "X = 1\n")
                await events.next(ReloadCommitted, path=extra)
                extra.unlink()
                await events.next(ModuleUnloaded, path=extra)

    async def test_polling_compares_content_when_the_stat_cannot_tell(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """A file system whose timestamps stay put (second precision, same size, same
        second): every edit leaves the stat unchanged, and the content hash still finds it."""
        frozen = time.time_ns()

        def coarse_stat(path: Path) -> _CoarseStat:
            real = os.stat(path)
            return _CoarseStat(frozen, frozen, 4096, real.st_ino)

        ui = write(folder / "my_ui.py", provider_source(1))
        watcher = PollingWatcher(interval=0.02, stat=coarse_stat)
        with anyio.fail_after(scaled(10)):
            async with (
                Reloader(context, [folder], watch=WatchOptions(watcher=watcher)) as reloader,
                reloader.events() as events,
            ):
                for version in (2, 3):
                    write(ui, provider_source(version))
                    committed = await events.next(ReloadCommitted, path=ui)
                    assert committed.generation == version
                    assert (await ask(QUESTION, context=context)).answer == f"answer v{version}"

    def test_compare_reports_racy_files_until_their_mtime_is_old(self) -> None:
        """Unchanged stat: reported while within racy_window of the previous scan, not after."""
        from hotseam.reload._watcher import _Seen

        watcher = PollingWatcher(interval=1, racy_window=2.0)
        path = Path("/x/my_ui.py")
        seen = {path: _Seen((1, 1, 10, 7), 100.0)}
        assert watcher.compare(seen, seen, scanned_at=101.0) == {
            FileChange(ChangeKind.MODIFIED, path)
        }
        assert watcher.compare(seen, seen, scanned_at=103.0) == set()
        moved = {path: _Seen((2, 2, 10, 7), 100.0)}
        assert watcher.compare(seen, moved, scanned_at=200.0) == {
            FileChange(ChangeKind.MODIFIED, path)
        }
        assert watcher.compare({}, seen, scanned_at=200.0) == {FileChange(ChangeKind.ADDED, path)}
        assert watcher.compare(seen, {}, scanned_at=200.0) == {FileChange(ChangeKind.DELETED, path)}


class TestUnchangedContent:
    async def test_a_save_with_the_same_content_does_not_reload(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Real watcher: rewriting identical bytes and touching are skipped by hash."""
        ui = write(folder / "my_ui.py", provider_source(1))
        barrier = write(folder / "barrier.py", "X = 1\n")
        with anyio.fail_after(scaled(10)):
            async with Reloader(context, [folder]) as reloader, reloader.events() as events:
                ui.write_text(ui.read_text())
                os.utime(ui)
                write(barrier, "X = 2\n")
                seen = await _until(events, ReloadCommitted, barrier)
                assert _paths_in(seen) == {barrier}
                assert probe.entries("exec") == [1]
                assert reloader.status_of(ui).generation == 1

    async def test_reload_by_hand_skips_unchanged_files_unless_forced(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Same hash → nothing happens (batch None); force=True executes and sets up again."""
        ui = write(folder / "my_ui.py", provider_source(1))
        async with Reloader(context, [folder], watch=False) as reloader:
            result = await reloader.reload(ui)
            assert result.batch is None and result.events == ()
            assert (await reloader.reload()).batch is None
            assert probe.entries("exec") == [1]
            forced = await reloader.reload(ui, force=True)
            assert [c.generation for c in forced.committed] == [2]
            assert probe.entries("exec") == [1, 1]

    async def test_scripted_watcher_reports_are_only_hints(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """The injectable watcher seam: reported paths are re-read and hashed, so a spurious
        report costs a read, and a real change is applied."""
        ui = write(folder / "my_ui.py", provider_source(1))
        watcher = ScriptedWatcher()
        with anyio.fail_after(scaled(5)):
            async with (
                Reloader(
                    context, [folder], watch=WatchOptions(watcher=watcher, coalesce=0)
                ) as reloader,
                reloader.events() as events,
            ):
                assert [root.directory for root in watcher.roots] == [folder]
                await watcher.push(ui)
                write(ui, provider_source(2))
                await watcher.push(ui)
                seen = await _until(events, ReloadCommitted, ui)
                assert [type(e) for e in seen] == [ReloadPlanned, ReloadCommitted]
                assert probe.entries("exec") == [1, 2]
