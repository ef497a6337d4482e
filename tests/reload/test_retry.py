"""Failed modules are retried: on a save or touch, and when the registration that refused
them (a conflict) goes."""

from __future__ import annotations

import os
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests._timing import scaled

from hotseam import Context
from hotseam.interaction import USER_INTERACTION, ask
from hotseam.providers.scripted import ScriptedProvider
from hotseam.reload import (
    EventStream,
    ModuleState,
    ReloadAborted,
    ReloadCommitted,
    Reloader,
    ReloadEvent,
    ReloadPlanned,
    WatchOptions,
)

from ._support import Probe, ScriptedWatcher, provider_source
from .conftest import QUESTION, write

pytestmark = pytest.mark.anyio

# A module that fails to execute until the test says its environment is ready.
NOT_READY = [
    "if not reload_probe.probe.values.get('ready'):",
    "    raise RuntimeError('service down')",
]
ENV_NOT_READY = [
    "import os",
    "if not os.environ.get('HOTSEAM_TEST_RETRY_READY'):",
    "    raise RuntimeError('service down')",
]
HEALTHY = """
    import reload_probe

    def setup(scope):
        reload_probe.log.append(("setup", "h"))
"""


def _touch(path: Path, seconds: int = 1) -> None:
    """Move the mtime forward (a touch whose tick cannot coincide with the last write)."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + seconds * 1_000_000_000))


def _paths_in(events: list[ReloadEvent]) -> set[Path]:
    found: set[Path] = set()
    for event in events:
        if isinstance(event, ReloadPlanned):
            found.update(event.changed + event.modules + event.unloading)
        path = getattr(event, "path", None)
        if path is not None:
            found.add(path)
    return found


async def _until(events: EventStream, kind: type[ReloadEvent], path: Path) -> list[ReloadEvent]:
    """Collect events until one of ``kind`` for ``path`` arrived; return them all."""
    seen: list[ReloadEvent] = []
    async for event in events:
        seen.append(event)
        if isinstance(event, kind) and getattr(event, "path", None) == path:
            return seen
    raise AssertionError("the event stream ended")


def _asker(context: Context, answers: list[str]) -> Callable[[], Coroutine[Any, Any, None]]:
    async def asker() -> None:
        answers.append((await ask(QUESTION, context=context)).answer)

    return asker


class TestSameContent:
    async def test_an_identical_save_retries_a_failed_module(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Same failure: reported again. Environment fixed, same bytes saved: it commits."""
        source = provider_source(1, module_lines=NOT_READY)
        ui = write(folder / "my_ui.py", source)
        async with Reloader(context, [folder], watch=False) as reloader:
            assert reloader.status_of(ui).state is ModuleState.FAILED
            write(ui, source)
            (again,) = (await reloader.reload(ui)).aborted
            assert again.error.message == "service down"
            probe.values["ready"] = True
            write(ui, source)
            result = await reloader.reload(ui)
            assert [(c.path, c.generation) for c in result.committed] == [(ui, 1)]
            assert reloader.status_of(ui).error is None
            assert (await ask(QUESTION, context=context)).answer == "answer v1"
        assert probe.entries("exec") == [1, 1, 1]

    async def test_an_identical_save_or_touch_of_a_healthy_module_does_nothing(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        ui = write(folder / "my_ui.py", provider_source(1))
        async with Reloader(context, [folder], watch=False) as reloader:
            write(ui, provider_source(1))
            assert (await reloader.reload(ui)).batch is None
            _touch(ui)
            assert (await reloader.reload(ui)).batch is None
            assert (await reloader.reload()).batch is None
            assert reloader.status_of(ui).generation == 1
        assert probe.entries("setup") == [1]

    async def test_a_touch_retries_a_failed_module_a_watchers_rereport_does_not(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Scripted watcher: a report of the file with its stat unchanged (what the polling
        watcher does for a recently written file) is not a retry; a touch is."""
        ui = write(folder / "my_ui.py", provider_source(1, module_lines=NOT_READY))
        barrier = write(folder / "barrier.py", "X = 1\n")
        watcher = ScriptedWatcher()
        with anyio.fail_after(scaled(5)):
            async with (
                Reloader(
                    context, [folder], watch=WatchOptions(watcher=watcher, coalesce=0)
                ) as reloader,
                reloader.events() as events,
            ):
                await watcher.push(ui)
                write(barrier, "X = 2\n")
                await watcher.push(barrier)
                seen = await _until(events, ReloadCommitted, barrier)
                assert ui not in _paths_in(seen)

                _touch(ui)
                await watcher.push(ui)
                again = await events.next(ReloadAborted, path=ui)
                assert again.error.message == "service down"

                probe.values["ready"] = True
                _touch(ui, 2)
                await watcher.push(ui)
                committed = await events.next(ReloadCommitted, path=ui)
                assert committed.generation == 1
        assert probe.entries("exec") == [1, 1, 1]

    async def test_real_watcher_touch_and_identical_save_retry_a_failed_module(
        self, context: Context, folder: Path, probe: Probe, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Real watcher: a touch retries (same failure, reported again; the healthy module
        touched with it is not re-run); an identical save once the variable is set commits."""
        monkeypatch.delenv("HOTSEAM_TEST_RETRY_READY", raising=False)
        source = provider_source(1, module_lines=ENV_NOT_READY)
        ui = write(folder / "my_ui.py", source)
        healthy = write(folder / "healthy.py", HEALTHY)
        with anyio.fail_after(scaled(10)):
            async with Reloader(context, [folder]) as reloader, reloader.events() as events:
                assert reloader.status_of(ui).state is ModuleState.FAILED
                _touch(healthy)
                _touch(ui)
                seen = await _until(events, ReloadAborted, ui)
                assert healthy not in _paths_in(seen)
                assert seen[-1].error.message == "service down"  # type: ignore[attr-defined]

                monkeypatch.setenv("HOTSEAM_TEST_RETRY_READY", "1")
                ui.write_text(source)
                committed = await events.next(ReloadCommitted, path=ui)
                assert committed.generation == 1
                assert (await ask(QUESTION, context=context)).answer == "answer v1"
        assert probe.entries("setup") == ["h", 1]


class TestConflictRetry:
    async def test_deleting_the_conflicting_module_installs_the_refused_one_in_that_reload(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """b was refused (a provides the seam); a is deleted: b is loaded in the same reload,
        inside the same swap, and the ask pending on a is answered by b."""
        a = write(folder / "a.py", provider_source(1, reply="Reply.never()"))
        b = write(folder / "b.py", provider_source(2))
        answers: list[str] = []
        with anyio.fail_after(scaled(5)):
            async with (
                Reloader(context, [folder], watch=False) as reloader,
                anyio.create_task_group() as tg,
            ):
                refused = reloader.status_of(b)
                assert refused.state is ModuleState.FAILED and refused.error is not None
                assert refused.error.phase == "conflict" and f"{a}:" in refused.error.message
                serving = context.get(USER_INTERACTION)
                assert isinstance(serving, ScriptedProvider)
                old: ScriptedProvider = serving
                tg.start_soon(_asker(context, answers))
                await old.wait_for_requests(1)

                a.unlink()
                result = await reloader.reload(a)
                assert [e.path for e in result.unloaded] == [a]
                assert [(c.path, c.generation) for c in result.committed] == [(b, 1)]
                (planned,) = [e for e in result.events if isinstance(e, ReloadPlanned)]
                assert planned.unloading == (a,) and planned.modules == (b,)
        assert answers == ["answer v2"]
        assert old.cancelled == [QUESTION]
        assert reloader.status_of(b).error is None

    async def test_an_edit_that_drops_the_seam_hands_it_to_the_refused_module(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        a = write(folder / "a.py", provider_source(1))
        b = write(folder / "b.py", provider_source(2))
        async with Reloader(context, [folder], watch=False) as reloader:
            assert reloader.status_of(b).state is ModuleState.FAILED
            provides_other_seam = provider_source(3).replace(
                "scope.provide(USER_INTERACTION, provider)",
                "scope.provide(reload_probe.probe.seam, object())",
            )
            write(a, provides_other_seam)
            result = await reloader.reload(a)
            assert result.ok
            assert sorted((c.path.name, c.generation) for c in result.committed) == [
                ("a.py", 2),
                ("b.py", 1),
            ]
            assert (await ask(QUESTION, context=context)).answer == "answer v2"

    async def test_an_edited_module_that_keeps_the_seam_keeps_it(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """z serves; a (sorted first) is refused. Editing z retries a in the same reload, but
        a yields to z and is reported again; deleting z then hands the seam to a."""
        z = write(folder / "z.py", provider_source(1))
        async with Reloader(context, [folder], watch=False) as reloader:
            a = write(folder / "a.py", provider_source(2))
            (refused,) = (await reloader.reload(a)).aborted
            assert refused.error.phase == "conflict"
            write(z, provider_source(3))
            result = await reloader.reload(z)
            assert [(c.path, c.generation) for c in result.committed] == [(z, 2)]
            (again,) = result.aborted
            assert again.path == a and again.error.phase == "conflict"
            assert f"{z}:" in again.error.message
            assert (await ask(QUESTION, context=context)).answer == "answer v3"
            z.unlink()
            result = await reloader.reload(z)
            assert [(c.path, c.generation) for c in result.committed] == [(a, 1)]
            assert (await ask(QUESTION, context=context)).answer == "answer v2"

    async def test_a_retry_that_fails_for_another_reason_is_reported(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        a = write(folder / "a.py", provider_source(1))
        b = write(
            folder / "b.py",
            provider_source(
                2,
                setup_lines=[
                    "if reload_probe.probe.values.get('broken'):",
                    "    raise RuntimeError('b broke')",
                ],
            ),
        )
        async with Reloader(context, [folder], watch=False) as reloader:
            assert reloader.status_of(b).state is ModuleState.FAILED
            probe.values["broken"] = True
            a.unlink()
            result = await reloader.reload(a)
            assert [e.path for e in result.unloaded] == [a]
            # Retried in the swap that unloads a, then once more after it (its setup ran
            # while a was alive, and a may have held what it needs): reported each time.
            assert [(e.path, e.error.phase, e.error.message) for e in result.aborted] == [
                (b, "setup", "b broke"),
                (b, "setup", "b broke"),
            ]
            assert context.lookup(USER_INTERACTION) is None
            error = reloader.status_of(b).error
            assert error is not None and error.message == "b broke"
            # No longer refused for a conflict: nothing retries it until it is touched.
            probe.values["broken"] = False
            assert (await reloader.reload(a)).batch is None
            _touch(b)
            assert [c.path for c in (await reloader.reload(b)).committed] == [b]

    async def test_refused_by_an_app_registration_retried_at_the_next_reload(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """No watcher: any reload after the application disposed its registration retries."""
        registration = context.provide(USER_INTERACTION, ScriptedProvider(["app"], name="app"))
        b = write(folder / "b.py", provider_source(2))
        helper = write(folder / "helper.py", "X = 1\n")
        async with Reloader(context, [folder], watch=False) as reloader:
            error = reloader.status_of(b).error
            assert error is not None and error.phase == "conflict"
            assert __file__ in error.message  # the app's registration, made here
            assert (await reloader.reload(helper)).batch is None  # still blocked: nothing
            await registration.dispose()
            result = await reloader.reload(helper)
            assert [(c.path, c.generation) for c in result.committed] == [(b, 1)]
            assert (await ask(QUESTION, context=context)).answer == "answer v2"

    async def test_refused_by_an_app_registration_retried_soon_after_it_is_disposed(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Watching, with no file event: the reloader notices the disposal by itself.

        The core reports no disposal of a registration, so today the reloader checks the
        blocking registration every 0.1 s; a hook in the core would make this immediate.
        """
        registration = context.provide(USER_INTERACTION, ScriptedProvider(["app"], name="app"))
        b = write(folder / "b.py", provider_source(2))
        with anyio.fail_after(scaled(5)):
            async with (
                Reloader(
                    context, [folder], watch=WatchOptions(watcher=ScriptedWatcher())
                ) as reloader,
                reloader.events() as events,
            ):
                assert reloader.status_of(b).state is ModuleState.FAILED
                await registration.dispose()
                committed = await events.next(ReloadCommitted, path=b)
                assert committed.generation == 1
                assert (await ask(QUESTION, context=context)).answer == "answer v2"
