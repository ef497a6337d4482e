"""Behaviours 2 and 3: a failed reload changes nothing; a failing disposer does not stop one."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
import structlog
from tests._timing import scaled

from hotseam import Context
from hotseam.interaction import USER_INTERACTION, ask
from hotseam.providers.scripted import ScriptedProvider
from hotseam.reload import (
    DisposeFailed,
    ModuleState,
    ReloadAborted,
    ReloadCommitted,
    Reloader,
    ReloadError,
)

from ._support import Probe, provider_source
from .conftest import QUESTION, write

pytestmark = pytest.mark.anyio


@dataclass(frozen=True)
class Breakage:
    source: str
    phase: str
    type: str
    marker: str  # text on the line the error must point at


BREAKAGES = {
    "syntax error": Breakage(
        provider_source(2).replace("VERSION = 2", "VERSION = = 2"), "compile", "SyntaxError",
        "VERSION = = 2",
    ),
    "exception while executing": Breakage(
        provider_source(2, module_lines=["raise RuntimeError('exec failed')"]),
        "exec", "RuntimeError", "exec failed",
    ),
    "exception in setup": Breakage(
        provider_source(2, setup_lines=["raise ValueError('setup failed')"]),
        "setup", "ValueError", "setup failed",
    ),
    "setup conflicting with another provider": Breakage(
        provider_source(2, setup_lines=["scope.provide(reload_probe.probe.seam, object())"]),
        "conflict", "ProviderConflictError", "reload_probe.probe.seam",
    ),
}  # fmt: skip

OTHER = """
    import reload_probe

    def setup(scope):
        scope.provide(reload_probe.probe.seam, object())
"""


def _line_of(source: str, marker: str) -> int:
    return next(n for n, line in enumerate(source.splitlines(), 1) if marker in line)


class TestFailedReload:
    @pytest.mark.parametrize("breakage", BREAKAGES.values(), ids=BREAKAGES.keys())
    async def test_a_failed_reload_leaves_the_running_generation_untouched(
        self, context: Context, folder: Path, probe: Probe, breakage: Breakage
    ) -> None:
        """Nothing disposed, the pending ask stays with v1; error with traceback and file:line.

        Saving a fixed file then applies it, and the pending ask moves to it.
        """
        write(folder / "other.py", OTHER)
        ui = write(folder / "my_ui.py", provider_source(1, reply="Reply.never()"))
        answers: list[str] = []
        with anyio.fail_after(scaled(5)), structlog.testing.capture_logs() as logs:
            async with (
                Reloader(context, [folder], watch=False) as reloader,
                anyio.create_task_group() as tg,
            ):
                old = context.get(USER_INTERACTION)
                assert isinstance(old, ScriptedProvider)
                registration = context.registration(USER_INTERACTION)
                scripted: ScriptedProvider = old

                async def asker() -> None:
                    answers.append((await ask(QUESTION, context=context)).answer)

                tg.start_soon(asker)
                await old.wait_for_requests(1)

                write(ui, breakage.source)
                result = await reloader.reload(ui)

                (aborted,) = result.aborted
                assert not result.ok and result.committed == ()
                error = aborted.error
                line = _line_of(breakage.source, breakage.marker)
                assert (error.phase, error.type) == (breakage.phase, breakage.type)
                assert error.location == f"{ui}:{line}"
                assert f'File "{ui}", line {line}' in error.traceback
                assert aborted.kept_generation == 1
                status = reloader.status_of(ui)
                assert status.state is ModuleState.FAILED
                assert status.generation == 1 and status.error == error
                # Untouched: same registration, still active, its ask still open.
                assert context.registration(USER_INTERACTION) is registration
                assert registration is not None and registration.active
                assert old.cancelled == [] and answers == []
                assert 1 not in probe.entries("dispose")
                assert sys.modules["my_ui"].VERSION == 1
                with pytest.raises(ReloadError, match=r"my_ui\.py"):
                    result.raise_for_errors()

                write(ui, provider_source(3, reply="'fixed'"))
                fixed = await reloader.reload(ui)
                assert [c.generation for c in fixed.committed] == [2]
                assert reloader.status_of(ui).state is ModuleState.ACTIVE
                assert reloader.status_of(ui).error is None
        assert answers == ["fixed"]
        assert scripted.cancelled == [QUESTION]
        # v1 disposed once, by the fixed reload; a staged v2 (set up, then refused) was
        # disposed without ever being active.
        disposed = probe.entries("dispose")
        assert disposed.count(1) == 1 and disposed[-2:] == [1, 3]
        (logged,) = [entry for entry in logs if entry["event"] == "reload.aborted"]
        assert logged["log_level"] == "error"
        assert logged["location"] == f"{ui}:{line}"
        assert logged["error_type"] == breakage.type
        assert f"line {line}" in logged["traceback"]
        assert "keeping generation 1" in logged["summary"]

    async def test_a_broken_save_then_a_fixed_save_through_the_watcher(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Real watcher: the broken save is reported and skipped, the fixed one applied."""
        ui = write(folder / "my_ui.py", provider_source(1))
        with anyio.fail_after(scaled(10)):
            async with (
                Reloader(context, [folder]) as reloader,
                reloader.events() as events,
            ):
                write(ui, "def setup(scope:\n")
                aborted = await events.next(ReloadAborted, path=ui)
                assert aborted.error.type == "SyntaxError"
                assert aborted.error.location == f"{ui}:1"
                assert (await ask(QUESTION, context=context)).answer == "answer v1"
                write(ui, provider_source(2))
                committed = await events.next(ReloadCommitted, path=ui)
                assert committed.generation == 2
                assert (await ask(QUESTION, context=context)).answer == "answer v2"

    async def test_a_failed_execution_never_leaves_a_half_updated_namespace(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """The serving module object is not the one the failed code ran in (fresh objects)."""
        ui = write(folder / "my_ui.py", provider_source(1, module_lines=["ONLY_IN_V1 = True"]))
        async with Reloader(context, [folder], watch=False) as reloader:
            serving = sys.modules["my_ui"]
            write(
                ui,
                provider_source(
                    2, module_lines=["ONLY_IN_V2 = True", "raise RuntimeError('half way')"]
                ),
            )
            assert not (await reloader.reload(ui)).ok
            assert sys.modules["my_ui"] is serving
            assert serving.VERSION == 1 and serving.ONLY_IN_V1
            assert not hasattr(serving, "ONLY_IN_V2")
            assert (await ask(QUESTION, context=context)).answer == "answer v1"

    async def test_a_module_that_fails_on_first_load_is_loaded_once_fixed(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Startup failures are reported, not raised; nothing of the module is active."""
        exits = ["import sys", "sys.exit(3)"]
        ui = write(folder / "my_ui.py", provider_source(1, module_lines=exits))
        helper = write(folder / "fine.py", "VALUE = 1\n")
        async with Reloader(context, [folder], watch=False) as reloader:
            status = reloader.status_of(ui)
            assert status.state is ModuleState.FAILED and status.generation is None
            assert status.error is not None and status.error.type == "SystemExit"
            assert reloader.status_of(helper).state is ModuleState.ACTIVE
            assert context.lookup(USER_INTERACTION) is None
            assert "my_ui" not in sys.modules
            write(ui, provider_source(2))
            result = await reloader.reload(ui)
            assert [c.generation for c in result.committed] == [1]
            assert result.committed[0].summary.startswith("loaded ")
            assert (await ask(QUESTION, context=context)).answer == "answer v2"

    async def test_a_setup_that_does_not_finish_times_out(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """A hanging async setup is abandoned after setup_timeout; v1 keeps serving."""
        ui = write(folder / "my_ui.py", provider_source(1))
        hanging = """
            import anyio

            async def setup(scope):
                scope.defer(lambda: print("never activated, still disposed"))
                await anyio.sleep_forever()
        """
        async with Reloader(context, [folder], watch=False, setup_timeout=0.2) as reloader:
            write(ui, hanging)
            (aborted,) = (await reloader.reload(ui)).aborted
            assert aborted.error.type == "TimeoutError"
            assert "did not finish within 0.2 s" in aborted.error.message
            assert aborted.error.location == f"{ui}:5"  # the line it was stuck at
            assert (await ask(QUESTION, context=context)).answer == "answer v1"

    async def test_an_importer_of_a_failed_helper_fails_with_the_helpers_location(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """The dependent keeps its generation; its error points at the helper's bad line."""
        helper = write(folder / "words.py", "WORD = 'one'\n")
        ui = write(
            folder / "my_ui.py",
            provider_source(1, reply="words.WORD", module_lines=["import words"]),
        )
        async with Reloader(context, [folder], watch=False) as reloader:
            write(helper, "WORD = (\n")
            result = await reloader.reload(helper)
            by_path = {event.path: event.error for event in result.aborted}
            assert by_path[helper].phase == "compile"
            assert by_path[ui].phase == "dependency"
            assert by_path[ui].location == by_path[helper].location
            location = by_path[ui].location
            assert location is not None and location.startswith(f"{helper}:")
            assert (await ask(QUESTION, context=context)).answer == "one"


class TestDisposerFailures:
    async def test_failing_and_overrunning_disposers_are_reported_and_the_commit_completes(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """A raising disposer and one that overruns dispose_timeout: reported, v2 active."""
        ui = write(
            folder / "my_ui.py",
            provider_source(
                1,
                setup_lines=[
                    "scope.defer(reload_probe.probe.fail)",
                    "scope.defer(reload_probe.probe.overrun)",
                ],
            ),
        )
        with anyio.fail_after(scaled(5)), structlog.testing.capture_logs() as logs:
            async with Reloader(context, [folder], watch=False, dispose_timeout=0.2) as reloader:
                write(ui, provider_source(2))
                result = await reloader.reload(ui)
                assert [c.generation for c in result.committed] == [2]
                (failed,) = [e for e in result.events if isinstance(e, DisposeFailed)]
                assert failed.generation == 1 and failed.path == ui
                assert sorted(error.type for error in failed.errors) == [
                    "DisposerTimeoutError",
                    "RuntimeError",
                ]
                assert (await ask(QUESTION, context=context)).answer == "answer v2"
                assert reloader.status_of(ui).state is ModuleState.ACTIVE
        assert probe.entries("dispose") == [1, 2]  # the other disposers of v1 ran too
        assert probe.entries("overrun cancelled") == [1]
        (logged,) = [entry for entry in logs if entry["event"] == "reload.dispose_failed"]
        assert logged["log_level"] == "warning" and logged["generation"] == 1
