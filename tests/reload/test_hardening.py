"""Provider code cannot kill, freeze or outlive the reloader (invariant 7).

* a ``BaseException`` (``SystemExit``, a ``KeyboardInterrupt`` raised by code, a custom
  subclass) in a module body, in ``setup``, in a spawned task or in a disposer is reported
  like any failure, and the reloader keeps running; a real cancellation still propagates;
* ``setup_timeout`` and ``dispose_timeout`` hold even for code blocked in a worker thread or
  under a shielded cancel scope, and the error names the line it was stuck at;
* a module body that blocks its thread does not freeze the event loop; ``import_timeout``
  fails it, naming the line.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from tests._timing import scaled

from hotseam import Context
from hotseam.interaction import ask
from hotseam.reload import DisposeFailed, ModuleState, Reloader, TaskFailed

from ._support import Probe, provider_source
from .conftest import QUESTION, write

pytestmark = pytest.mark.anyio

RAISES = {
    "SystemExit": "raise SystemExit(3)",
    "KeyboardInterrupt": "raise KeyboardInterrupt('from code')",
    "custom BaseException": "raise reload_probe.Custom('custom')",
}


class Custom(BaseException):
    """A BaseException subclass that is neither an exit nor an interrupt."""


@pytest.fixture(name="custom_probe")
def _custom_probe(probe: Probe) -> Probe:
    sys.modules["reload_probe"].Custom = Custom  # type: ignore[attr-defined]
    return probe


@contextmanager
def routed_sigint() -> Iterator[None]:
    """SIGINT goes to a signal receiver, as in ``hotseam dev``: a KeyboardInterrupt on the
    event-loop thread can then only come from code."""
    with anyio.open_signal_receiver(signal.SIGINT):
        yield


def _line(path: Path, marker: str) -> str:
    number = next(n for n, line in enumerate(path.read_text().splitlines(), 1) if marker in line)
    return f"{path}:{number}"


class TestBaseExceptions:
    @pytest.mark.parametrize("statement", RAISES.values(), ids=RAISES.keys())
    async def test_in_a_module_body_or_setup_it_is_a_failed_load(
        self, context: Context, folder: Path, custom_probe: Probe, statement: str
    ) -> None:
        """Reported as an aborted reload (v1 keeps serving); the reloader keeps running."""
        ui = write(folder / "my_ui.py", provider_source(1))
        with routed_sigint():
            async with Reloader(context, [folder], watch=False) as reloader:
                for source in (
                    provider_source(2, module_lines=[statement]),
                    provider_source(3, setup_lines=[statement]),
                ):
                    write(ui, source)
                    (aborted,) = (await reloader.reload(ui)).aborted
                    assert aborted.error.location == _line(ui, statement)
                    assert aborted.kept_generation == 1
                    assert (await ask(QUESTION, context=context)).answer == "answer v1"
                write(ui, provider_source(4))
                assert (await reloader.reload(ui)).ok
                assert (await ask(QUESTION, context=context)).answer == "answer v4"

    @pytest.mark.parametrize("statement", RAISES.values(), ids=RAISES.keys())
    async def test_in_a_spawned_task_it_is_a_task_failure(
        self, context: Context, folder: Path, custom_probe: Probe, statement: str
    ) -> None:
        """TaskFailed; the generation stays active and keeps serving."""
        ui = write(folder / "my_ui.py", provider_source(1))
        crash = ["async def crash():", f"    {statement}"]
        with routed_sigint():
            async with Reloader(context, [folder], watch=False) as reloader:
                write(
                    ui, provider_source(2, module_lines=crash, setup_lines=["scope.spawn(crash)"])
                )
                async with reloader.events() as events:
                    assert (await reloader.reload(ui)).ok
                    failed = await events.next(TaskFailed)
                assert failed.error.location == _line(ui, statement)
                assert reloader.status_of(ui).state is ModuleState.ACTIVE
                assert (await ask(QUESTION, context=context)).answer == "answer v2"

    @pytest.mark.parametrize("statement", RAISES.values(), ids=RAISES.keys())
    async def test_in_a_disposer_it_is_a_dispose_failure(
        self, context: Context, folder: Path, custom_probe: Probe, statement: str
    ) -> None:
        """DisposeFailed at the reload, v2 active; at the close a DisposalError, not a crash."""
        disposer = ["def boom():", f"    {statement}"]
        ui = write(
            folder / "my_ui.py",
            provider_source(1, module_lines=disposer, setup_lines=["scope.defer(boom)"]),
        )
        with routed_sigint():
            reloader = Reloader(context, [folder], watch=False)
            async with reloader:
                write(
                    ui, provider_source(2, module_lines=disposer, setup_lines=["scope.defer(boom)"])
                )
                result = await reloader.reload(ui)
                assert result.ok
                (failed,) = [e for e in result.events if isinstance(e, DisposeFailed)]
                assert failed.errors[0].location == _line(ui, statement)
                assert (await ask(QUESTION, context=context)).answer == "answer v2"
                write(ui, provider_source(3))
                assert (await reloader.reload(ui)).ok
            assert custom_probe.entries("dispose") == [1, 2, 3]

    async def test_a_real_cancellation_still_propagates(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Cancelling a reload waiting for a setup cancels it; nothing is committed."""
        ui = write(folder / "my_ui.py", provider_source(1))
        async with Reloader(context, [folder], watch=False) as reloader:
            write(
                ui,
                provider_source(2, setup_lines=["await anyio.sleep_forever()"])
                .replace("def setup", "async def setup")
                .replace("import reload_probe", "import anyio, reload_probe"),
            )
            with anyio.move_on_after(0.2) as waited:
                await reloader.reload(ui)
            assert waited.cancelled_caught
            assert reloader.status_of(ui).generation == 1
            assert (await ask(QUESTION, context=context)).answer == "answer v1"


def _async_setup(version: int, awaiting: str, *after: str) -> str:
    return (
        provider_source(version, setup_lines=[awaiting, *after])
        .replace("def setup", "async def setup")
        .replace("import reload_probe", "import anyio, reload_probe")
    )


class TestStuckInAThread:
    @pytest.mark.parametrize(
        "awaiting",
        [
            "await anyio.to_thread.run_sync(reload_probe.probe.values['gate'].wait)",
            "with anyio.CancelScope(shield=True): await reload_probe.probe.values['event'].wait()",
        ],
        ids=["worker thread", "shielded"],
    )
    async def test_a_stuck_setup_fails_at_its_timeout_naming_the_line(
        self, context: Context, folder: Path, probe: Probe, awaiting: str
    ) -> None:
        """Failed within about setup_timeout; v1 serves meanwhile and after."""
        gate, event, released = threading.Event(), anyio.Event(), anyio.Event()
        probe.values.update(gate=gate, event=event, released=released)
        ui = write(folder / "my_ui.py", provider_source(1))
        done = "reload_probe.probe.values['released'].set()"
        try:
            async with Reloader(context, [folder], watch=False, setup_timeout=0.3) as reloader:
                write(ui, _async_setup(2, awaiting, done))
                started = time.monotonic()
                (aborted,) = (await reloader.reload(ui)).aborted
                assert time.monotonic() - started < scaled(2)
                assert aborted.error.type == "TimeoutError"
                assert aborted.error.location == _line(ui, awaiting)
                assert (await ask(QUESTION, context=context)).answer == "answer v1"
                assert reloader.still_running() == [f"setup of {ui} (at {_line(ui, awaiting)})"]
        finally:
            gate.set()
            event.set()
            # The abandoned setup runs on once released; the test waits for it rather than
            # leave it to the loop's shutdown (the escape check would see it).
            with anyio.move_on_after(scaled(5)):
                await released.wait()

    async def test_a_stuck_disposer_holds_neither_the_reload_nor_asks(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """The swap goes on after dispose_timeout plus a margin; DisposeFailed names the line."""
        gate = threading.Event()
        probe.values["gate"] = gate
        released = probe.values["released"] = anyio.Event()
        stuck = "    await anyio.to_thread.run_sync(reload_probe.probe.values['gate'].wait)"
        done = "    reload_probe.probe.values['released'].set()"
        disposer = ["import anyio", "async def stuck():", stuck, done]
        ui = write(
            folder / "my_ui.py",
            provider_source(1, module_lines=disposer, setup_lines=["scope.defer(stuck)"]),
        )
        expected = _line(ui, stuck.strip())
        try:
            async with Reloader(context, [folder], watch=False, dispose_timeout=0.2) as reloader:
                write(ui, provider_source(2))
                started = time.monotonic()
                result = await reloader.reload(ui)
                assert time.monotonic() - started < scaled(2)
                assert result.ok
                (failed,) = [e for e in result.events if isinstance(e, DisposeFailed)]
                assert failed.errors[0].type == "DisposerTimeoutError"
                assert failed.errors[0].location == expected
                assert (await ask(QUESTION, context=context)).answer == "answer v2"
        finally:
            gate.set()
            # The abandoned close runs on once its thread returns; the test waits for it
            # rather than leave it to the loop's shutdown (the escape check would see it).
            with anyio.move_on_after(scaled(5)):
                await released.wait()


class TestBlockingModuleBodies:
    @pytest.mark.parametrize(
        "body",
        [
            "while not reload_probe.probe.values['gate'].is_set(): pass",
            "reload_probe.probe.values['gate'].wait(60)",
        ],
        ids=["busy loop", "blocking call"],
    )
    async def test_the_loop_keeps_serving_and_the_body_fails_at_import_timeout(
        self, context: Context, folder: Path, probe: Probe, body: str
    ) -> None:
        """Asks are answered by v1 while the body blocks (before its ``import_timeout``: the
        reload is still running); the failure names file:line. The bound and the ask's
        deadline are scaled alike: on a busy machine the ask may take longer, never the
        body less."""
        gate, entered = threading.Event(), threading.Event()
        probe.values.update(gate=gate, entered=entered)
        ui = write(folder / "my_ui.py", provider_source(1))
        bound = scaled(0.5)
        try:
            async with Reloader(context, [folder], watch=False, import_timeout=bound) as reloader:
                enter = "reload_probe.probe.values['entered'].set()"
                write(ui, provider_source(2, module_lines=[enter, body]))
                async with anyio.create_task_group() as tg:
                    results = []

                    async def reload() -> None:
                        results.append(await reloader.reload(ui))

                    tg.start_soon(reload)
                    await anyio.to_thread.run_sync(entered.wait)
                    with anyio.fail_after(bound * 0.8):  # before import_timeout: it serves
                        assert (await ask(QUESTION, context=context)).answer == "answer v1"
                    assert not results  # answered while the body was still blocked
                (aborted,) = results[0].aborted
                assert aborted.error.type == "TimeoutError"
                assert aborted.error.location == _line(ui, body)
                assert str(ui) in aborted.error.message
                assert "--import-timeout" in aborted.error.message  # how to raise the bound
                assert reloader.status_of(ui).generation == 1
                assert (await ask(QUESTION, context=context)).answer == "answer v1"
                assert probe.entries("exec") == [1, 2]
        finally:
            gate.set()

    async def test_a_body_runs_in_the_reloaders_context(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """current_context() at import is the reloader's context, as before (contextvars)."""
        line = (
            "import hotseam; reload_probe.log.append(('context', hotseam.current_context().name))"
        )
        write(folder / "my_ui.py", provider_source(1, module_lines=[line]))
        async with Reloader(context, [folder], watch=False):
            assert probe.entries("context") == [context.name]


class TestTheModuleBodyThread:
    """Module bodies share one reused worker thread; a body abandoned at its bound takes that
    thread with it, and the modules after it run in a new one."""

    async def test_bodies_of_a_start_and_of_later_reloads_share_one_thread(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        line = "import threading; reload_probe.log.append(('thread', threading.get_ident()))"
        paths = [write(folder / f"m{n}.py", f"import reload_probe\n{line}\n") for n in range(5)]
        async with Reloader(context, [folder], watch=False) as reloader:
            for path in paths[:2]:
                write(path, f"import reload_probe\n{line}\nX = 1\n")
                assert (await reloader.reload(path)).ok
        threads = probe.entries("thread")
        assert len(threads) == 7
        assert set(threads) != {threading.get_ident()}  # not on the event loop's thread
        assert len(set(threads)) == 1

    async def test_a_body_abandoned_mid_batch_leaves_the_rest_of_the_batch_to_a_new_thread(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """m1 blocks past import_timeout: m0 and m2 load, m2 in a new thread, and m1's thread
        runs no further body when it is released; the next reload gets a working thread."""
        gate, left = threading.Event(), threading.Event()
        probe.values.update(gate=gate, left=left)
        note = (
            "import threading; reload_probe.log.append(('thread', (NAME, threading.get_ident())))"
        )
        for number in range(3):
            block = (
                "reload_probe.probe.values['gate'].wait(60)\n"
                "reload_probe.probe.values['left'].set()"
                if number == 1
                else ""
            )
            write(
                folder / f"m{number}.py",
                f"import reload_probe\nNAME = 'm{number}'\n{note}\n{block}\n",
            )
        try:
            # Scaled: m0's and m2's bodies (m2's in a thread just started) must end within it.
            bound = scaled(0.5)
            async with Reloader(context, [folder], watch=False, import_timeout=bound) as reloader:
                states = {status.module: status.state for status in reloader.status()}
                assert states == {
                    "m0": ModuleState.ACTIVE,
                    "m1": ModuleState.FAILED,
                    "m2": ModuleState.ACTIVE,
                }
                assert reloader.status_of(folder / "m1.py").error.type == "TimeoutError"  # type: ignore[union-attr]
                threads = dict(probe.entries("thread"))
                assert threads["m0"] == threads["m1"] != threads["m2"]
                assert [label.split(" (at ")[0] for label in reloader.still_running()] == [
                    "executing m1"
                ]
                gate.set()
                await anyio.to_thread.run_sync(left.wait, 10)
                write(folder / "m0.py", "import reload_probe\nNAME = 'm0'\n" + note + "\nX = 2\n")
                assert (await reloader.reload(folder / "m0.py")).ok
                assert [name for name, _ in probe.entries("thread")] == ["m0", "m1", "m2", "m0"]
        finally:
            gate.set()

    async def test_each_slow_body_of_a_batch_gets_its_own_progress_line(
        self, context: Context, folder: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The slow notice follows the body that is running, not the first of the batch."""
        import structlog

        from hotseam.reload import _loader

        monkeypatch.setattr(_loader, "SLOW_NOTICE", 0.05)
        for number in range(3):
            pause = "import time\ntime.sleep(0.15)\n" if number != 1 else ""
            write(folder / f"s{number}.py", pause + f"N = {number}\n")
        with structlog.testing.capture_logs() as logs:
            async with Reloader(context, [folder], watch=False):
                pass
        slow = [(log["module"], log["phase"]) for log in logs if log["event"] == "reload.slow"]
        assert slow == [("s0", "executing"), ("s2", "executing")]


async def test_a_plain_setup_s_context_changes_stay_its_own(
    context: Context, folder: Path, probe: Probe
) -> None:
    """A ``def setup`` runs without a task of its own, but in a copy of the context: a
    context variable it sets is not seen by the next module's setup nor by the reloader."""
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("probe_var", default="unset")
    probe.values["var"] = var
    write(
        folder / "c1.py",
        "import reload_probe\n\ndef setup(scope):\n"
        "    reload_probe.probe.values['var'].set('c1')\n",
    )
    write(
        folder / "c2.py",
        "import reload_probe\n\ndef setup(scope):\n"
        "    reload_probe.log.append(('seen', reload_probe.probe.values['var'].get()))\n",
    )
    async with Reloader(context, [folder], watch=False):
        assert probe.entries("seen") == ["unset"]
        assert var.get() == "unset"


async def test_a_reload_cancelled_while_a_body_runs_abandons_it_and_the_next_one_works(
    context: Context, folder: Path, probe: Probe
) -> None:
    """Cancelling ``reload()`` mid-body: the body's thread is left to finish on its own, its
    module is never installed, and the next reload runs in a new thread."""
    gate, entered = threading.Event(), threading.Event()
    probe.values.update(gate=gate, entered=entered)
    ui = write(folder / "my_ui.py", provider_source(1))
    try:
        async with Reloader(context, [folder], watch=False) as reloader:
            write(
                ui,
                provider_source(
                    2,
                    module_lines=[
                        "reload_probe.probe.values['entered'].set()",
                        "reload_probe.probe.values['gate'].wait(60)",
                    ],
                ),
            )
            async with anyio.create_task_group() as tg:
                tg.start_soon(reloader.reload, ui)
                await anyio.to_thread.run_sync(entered.wait, 10)
                tg.cancel_scope.cancel()
            assert reloader.status_of(ui).generation == 1
            assert (await ask(QUESTION, context=context)).answer == "answer v1"
            write(ui, provider_source(3))
            assert (await reloader.reload(ui)).ok
            assert (await ask(QUESTION, context=context)).answer == "answer v3"
            gate.set()  # the abandoned v2 body ends now; nothing of it is installed
        assert probe.entries("setup") == [1, 3]
    finally:
        gate.set()
