"""The Reloader's surface: status, events, errors, names, tasks, closing, contexts."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
import structlog
from pydantic import BaseModel
from tests._timing import scaled

import hotseam.reload
from hotseam import CloseReason, Context, DisposalError, Scope
from hotseam.interaction import USER_INTERACTION, ask
from hotseam.providers.scripted import ScriptedProvider
from hotseam.reload import (
    ChangeKind,
    ModuleState,
    ModuleUnloaded,
    ReloadAborted,
    ReloadCommitted,
    Reloader,
    ReloaderClosedError,
    ReloadEvent,
    ReloadPathError,
    ReloadPlanned,
    TaskFailed,
    WatchOptions,
)

from ._support import Probe, ScriptedWatcher, provider_source
from .conftest import QUESTION, write

pytestmark = pytest.mark.anyio


def test_public_names_are_sorted_and_shown_as_hotseam_reload() -> None:
    """__all__ is sorted, complete, and classes name their public module."""
    names = hotseam.reload.__all__
    assert list(names) == sorted(names)
    for name in names:
        assert hasattr(hotseam.reload, name), name
    assert hotseam.reload.Reloader.__module__ == "hotseam.reload"
    assert hotseam.reload.ReloadCommitted.__module__ == "hotseam.reload"


def test_the_errors_module_draws_every_reload_error() -> None:
    """The error tree in hotseam.reload._errors names each error class."""
    from hotseam.reload import _errors

    doc = _errors.__doc__ or ""
    for name in ("ReloadError", "ReloaderClosedError", "ReloadPathError", "ModuleNameClashError"):
        assert name in doc, name


class TestStatusAndEvents:
    async def test_status_reports_each_module(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Path, module name, kind, state, generation, error and load time."""
        ui = write(folder / "my_ui.py", provider_source(1, module_lines=["import words"]))
        words = write(folder / "words.py", "WORD = 1\n")
        async with Reloader(context, [folder], watch=False) as reloader:
            by_path = {status.path: status for status in reloader.status()}
            assert list(by_path) == [ui, words]
            assert by_path[ui].module == "my_ui" and by_path[ui].kind == "provider"
            assert by_path[words].kind == "helper"
            assert by_path[ui].state is ModuleState.ACTIVE and by_path[ui].generation == 1
            assert by_path[ui].error is None and by_path[ui].imports == ("words",)
            load_ms = by_path[ui].load_ms
            assert load_ms is not None and load_ms > 0
            with pytest.raises(KeyError, match=r"nope\.py"):
                reloader.status_of(folder / "nope.py")

    async def test_events_reach_the_stream_the_callback_and_structlog(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Planned, committed (with duration), aborted (with error), unloaded: all three ways."""
        seen: list[ReloadEvent] = []
        ui = write(folder / "my_ui.py", provider_source(1))
        with structlog.testing.capture_logs() as logs:
            async with Reloader(context, [folder], watch=False, on_event=seen.append) as reloader:
                streamed: list[ReloadEvent] = []
                async with reloader.events() as events:
                    write(ui, provider_source(2))
                    await reloader.reload(ui)
                    write(ui, "oops(\n")
                    await reloader.reload(ui)
                    ui.unlink()
                    await reloader.reload(ui)
                    streamed.extend([await events.__anext__() for _ in range(6)])
        kinds = [type(event).__name__ for event in streamed]
        assert kinds == [
            "ReloadPlanned",
            "ReloadCommitted",
            "ReloadPlanned",
            "ReloadAborted",
            "ReloadPlanned",
            "ModuleUnloaded",
        ]
        assert seen[-6:] == streamed
        committed = streamed[1]
        assert isinstance(committed, ReloadCommitted)
        assert committed.duration_ms > 0 and committed.summary.startswith("reloaded ")
        assert "(generation 2) in " in committed.summary
        aborted = streamed[3]
        assert isinstance(aborted, ReloadAborted)
        assert aborted.error.type == "SyntaxError" and "keeping generation 2" in aborted.summary
        names = [entry["event"] for entry in logs if entry["event"].startswith("reload.")]
        assert names.count("reload.committed") == 2  # the initial load and the edit
        assert {"reload.planned", "reload.aborted", "reload.unloaded"} <= set(names)
        logged = next(entry for entry in logs if entry["event"] == "reload.committed")
        assert {"path", "generation", "duration_ms", "summary"} <= logged.keys()

    async def test_a_failing_callback_is_logged_and_does_not_stop_the_reload(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """on_event errors never reach the reloader."""

        def explode(event: ReloadEvent) -> None:
            raise RuntimeError("callback broke")

        ui = write(folder / "my_ui.py", provider_source(1))
        with structlog.testing.capture_logs() as logs:
            async with Reloader(context, [folder], watch=False, on_event=explode) as reloader:
                write(ui, provider_source(2))
                assert (await reloader.reload(ui)).ok
                assert (await ask(QUESTION, context=context)).answer == "answer v2"
        failures = [entry for entry in logs if entry["event"] == "reload.callback_failed"]
        assert failures and "callback broke" in failures[0]["error"]

    async def test_streams_end_when_the_reloader_closes(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """An async for over events() finishes once the reloader is closed."""
        write(folder / "my_ui.py", provider_source(1))
        async with Reloader(context, [folder], watch=False) as reloader:
            events = reloader.events()
        assert [event async for event in events] == []
        with pytest.raises(ReloaderClosedError):
            reloader.events()


class TestBadInput:
    def test_paths_must_exist_and_be_modules_or_folders(
        self, context: Context, tmp_path: Path
    ) -> None:
        """Clear errors naming the path, at construction."""
        with pytest.raises(ReloadPathError, match=r"missing.*does not exist"):
            Reloader(context, [tmp_path / "missing"])
        notes = write(tmp_path / "notes.txt", "hi")
        with pytest.raises(ReloadPathError, match=r"notes\.txt.*not a Python module"):
            Reloader(context, [notes])
        with pytest.raises(ReloadPathError, match="at least one path"):
            Reloader(context, [])
        with pytest.raises(TypeError, match="watch must be True, False or a WatchOptions"):
            Reloader(context, [tmp_path], watch=hotseam.reload.PollingWatcher())  # type: ignore[arg-type]

    async def test_reload_outside_the_watched_paths_and_after_close_fail(
        self, context: Context, folder: Path, tmp_path: Path
    ) -> None:
        """reload(path) names the path; a closed reloader says it is closed."""
        reloader = Reloader(context, [folder], watch=False)
        with pytest.raises(ReloaderClosedError, match="async with"):
            await reloader.reload()
        async with reloader:
            with pytest.raises(ReloadPathError, match=r"elsewhere\.py"):
                await reloader.reload(tmp_path / "elsewhere.py")
        with pytest.raises(ReloaderClosedError, match="closed"):
            await reloader.reload()
        with pytest.raises(ReloaderClosedError, match="only once"):
            await reloader.__aenter__()

    async def test_a_module_name_that_would_shadow_another_module_is_refused(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """``json.py`` (imported) and ``this.py`` (installed): errors naming both files;
        the rest of the folder loads."""
        write(folder / "json.py", "X = 1\n")
        write(folder / "this.py", "X = 1\n")
        ui = write(folder / "my_ui.py", provider_source(1))
        real_json = sys.modules["json"]
        async with Reloader(context, [folder], watch=False) as reloader:
            errors = {s.module: s.error for s in reloader.status() if s.error is not None}
            assert set(errors) == {"json", "this"}
            assert errors["json"].type == "ModuleNameClashError"
            assert errors["json"].location == str(folder / "json.py")
            assert "already imported" in errors["json"].message
            assert "would shadow the installed module" in errors["this"].message
            assert reloader.status_of(ui).state is ModuleState.ACTIVE
        assert sys.modules["json"] is real_json

    async def test_two_live_reloaders_cannot_load_the_same_module_name(
        self, context: Context, tmp_path: Path, probe: Probe
    ) -> None:
        """The second one's module fails, naming the first one's file."""
        first = write(tmp_path / "a" / "shared_name.py", "X = 1\n")
        second = write(tmp_path / "b" / "shared_name.py", "X = 2\n")
        async with (
            Reloader(context, [first], watch=False),
            Reloader(Context("other"), [second], watch=False) as late,
        ):
            error = late.status_of(second).error
            assert error is not None and str(first) in error.message
            assert sys.modules["shared_name"].X == 1


class TestBackgroundTasks:
    async def test_a_crashing_task_is_reported_and_the_generation_stays_active(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """TaskFailed event, error log and status error; the provider serves on."""
        crashing = "async def crash():\n    raise RuntimeError('task crashed')\n"

        def source(version: int) -> str:
            return provider_source(
                version, module_lines=[crashing], setup_lines=["scope.spawn(crash)"]
            )

        ui = write(folder / "my_ui.py", source(1))
        with anyio.fail_after(scaled(5)), structlog.testing.capture_logs() as logs:
            async with (
                Reloader(context, [folder], watch=False) as reloader,
                reloader.events() as events,
            ):
                write(ui, source(2))
                await reloader.reload(ui)
                failed = await events.next(TaskFailed, generation=2)
                assert isinstance(failed, TaskFailed)
                assert failed.generation == 2 and failed.path == ui
                assert failed.error.type == "RuntimeError"
                assert failed.error.location == f"{ui}:{_line(ui, 'task crashed')}"
                status = reloader.status_of(ui)
                assert status.state is ModuleState.ACTIVE and status.generation == 2
                assert status.error == failed.error
                assert (await ask(QUESTION, context=context)).answer == "answer v2"
        assert any(entry["event"] == "reload.task_failed" for entry in logs)
        assert probe.entries("dispose") == [1, 2]


class TestBrokenWatcher:
    async def test_a_failing_watcher_ends_the_block_with_its_error(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Not silent: the error reaches the ``async with``, every generation is disposed."""

        class Broken(ScriptedWatcher):
            async def push(self, *paths: Path, kind: ChangeKind = ChangeKind.MODIFIED) -> None:
                assert self._send is not None
                await self._send.aclose()  # the stream ends: the watcher died

        write(folder / "my_ui.py", provider_source(1))
        watcher = Broken()
        with pytest.raises(ExceptionGroup) as caught:
            async with Reloader(context, [folder], watch=WatchOptions(watcher=watcher)):
                await watcher.push()
                await anyio.sleep_forever()
        assert caught.group_contains(RuntimeError, match="watcher stopped")
        assert probe.entries("dispose") == [1]


class TestClosing:
    async def test_every_generation_learns_why_it_was_disposed(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """RELOAD when replaced, then the reason given to aclose (SHUTDOWN here), once each."""
        reason = "scope.defer_exit(lambda e: reload_probe.log.append(('reason', e.reason)))"
        ui = write(folder / "my_ui.py", provider_source(1, setup_lines=[reason]))
        write(
            folder / "other.py",
            provider_source(1, setup_lines=[reason]).replace(
                "USER_INTERACTION, provider", "reload_probe.probe.seam, provider"
            ),
        )
        async with Reloader(context, [folder], watch=False) as reloader:
            write(ui, provider_source(2, setup_lines=[reason]))
            await reloader.reload(ui)
            await reloader.aclose(CloseReason.SHUTDOWN)
            assert reloader.closed
            assert context.lookup(USER_INTERACTION) is None
            assert context.lookup(probe.seam) is None
            await reloader.aclose()  # idempotent
        assert probe.entries("reason") == [
            CloseReason.RELOAD,
            CloseReason.SHUTDOWN,
            CloseReason.SHUTDOWN,
        ]

    async def test_disposer_failures_at_close_are_raised_after_everything_ran(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """A DisposalError, once every generation was disposed."""
        write(
            folder / "a_ui.py",
            provider_source(1, setup_lines=["scope.defer(reload_probe.probe.fail)"]),
        )
        write(
            folder / "b_other.py",
            provider_source(2).replace(
                "USER_INTERACTION, provider", "reload_probe.probe.seam, provider"
            ),
        )
        with pytest.raises(DisposalError) as caught:
            async with Reloader(context, [folder], watch=False):
                pass
        assert [type(e).__name__ for e in caught.value.exceptions] == ["RuntimeError"]
        assert sorted(probe.entries("dispose")) == [1, 2]


class TestRegistrations:
    async def test_answers_in_a_parent_context_are_a_fallback_the_watched_provider_shadows(
        self, folder: Path, probe: Probe
    ) -> None:
        """The CLI's --answers layout. A reload mid-question re-asks on the new watched
        provider, not on the parent's fallback; once the watched one is gone, the fallback
        answers."""
        parent = Context("cli")
        fallback = ScriptedProvider(["from answers file"] * 5, name="answers")
        parent.provide(USER_INTERACTION, fallback)
        providers = Context("providers", parent=parent)
        ui = write(folder / "my_ui.py", provider_source(1, reply="Reply.never()"))
        answers: list[str] = []
        with anyio.fail_after(scaled(5)):
            async with Reloader(providers, [folder], watch=False) as reloader:
                old = providers.get(USER_INTERACTION)
                assert isinstance(old, ScriptedProvider) and old is not fallback
                async with anyio.create_task_group() as tg:

                    async def asker() -> None:
                        answers.append((await ask(QUESTION, context=providers)).answer)

                    tg.start_soon(asker)
                    await old.wait_for_requests(1)
                    write(ui, provider_source(2))
                    await reloader.reload(ui)
                assert answers == ["answer v2"]
                assert fallback.requests == []
                ui.unlink()
                await reloader.reload(ui)
                assert (await ask(QUESTION, context=providers)).answer == "from answers file"

    async def test_two_modules_providing_one_seam_load_one_and_report_the_other(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """A conflict inside one reload names both registrations."""
        first = write(folder / "a_ui.py", provider_source(1))
        second = write(folder / "b_ui.py", provider_source(2))
        async with Reloader(context, [folder], watch=False) as reloader:
            assert reloader.status_of(first).state is ModuleState.ACTIVE
            error = reloader.status_of(second).error
            assert error is not None and error.type == "ProviderConflictError"
            assert str(first) in error.message and error.location is not None
            assert error.location.startswith(f"{second}:")
            assert (await ask(QUESTION, context=context)).answer == "answer v1"

    async def test_a_seam_can_move_from_one_module_to_another_in_one_reload(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Renaming a provider file (old gone, new added) is one reload, no conflict."""
        old = write(folder / "old_ui.py", provider_source(1))
        async with Reloader(context, [folder], watch=False) as reloader:
            write(folder / "new_ui.py", provider_source(2))
            old.unlink()
            result = await reloader.reload()
            assert [type(e) for e in result.events] == [
                ReloadPlanned,
                ModuleUnloaded,
                ReloadCommitted,
            ]
            assert (await ask(QUESTION, context=context)).answer == "answer v2"

    async def test_removing_setup_turns_a_provider_into_a_helper(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Its generation is disposed; the module now serves as a helper."""
        ui = write(folder / "my_ui.py", provider_source(1))
        async with Reloader(context, [folder], watch=False) as reloader:
            write(ui, "VALUE = 1\n")
            (committed,) = (await reloader.reload(ui)).committed
            assert committed.module_kind == "helper" and committed.generation == 2
            assert context.lookup(USER_INTERACTION) is None
            assert probe.entries("dispose") == [1]

    async def test_tools_registered_by_a_provider_are_replaced_on_reload(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """The old generation's tool leaves as the new one's arrives: no DUPLICATE_TOOL."""
        tool_lines = [
            "from hotseam import Tool",
            "from pydantic import BaseModel",
            "class Empty(BaseModel):",
            "    pass",
            "async def handler(value, call):",
            "    return {'version': VERSION}",
        ]
        ui = write(
            folder / "my_ui.py",
            provider_source(
                1,
                module_lines=tool_lines,
                setup_lines=[
                    "scope.register_tool(Tool('version', 'Which version', Empty, handler))"
                ],
            ),
        )
        async with Reloader(context, [folder], watch=False) as reloader:
            assert (await context.tools.execute("version", {})).output == {"version": 1}
            write(ui, ui.read_text().replace("VERSION = 1", "VERSION = 2"))
            assert (await reloader.reload(ui)).ok
            assert (await context.tools.execute("version", {})).output == {"version": 2}
            async with Scope("squatter", context=context) as squatter:
                squatter.register_tool(hotseam.Tool("other", "x", _Empty, _never))
                write(
                    folder / "dup.py",
                    "from my_ui import *\n"
                    "def setup(scope):\n"
                    "    scope.register_tool(Tool('other', 'x', Empty, handler))\n",
                )
                (aborted,) = (await reloader.reload()).aborted
                assert aborted.error.type == "ToolError"
                assert "already registered" in aborted.error.message
        assert context.tools.get("version") is None


class _Empty(BaseModel):
    pass


async def _never(value: _Empty, call: hotseam.ToolCall) -> None:
    await anyio.sleep_forever()


def _line(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)
