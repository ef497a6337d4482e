"""Module bodies that cannot block or spin execute on the event loop's thread; the rest still
go to the worker thread, where one that blocks or spins is abandoned at its bound while the
loop serves.

An inert body (straight-line code that calls nothing but ``class X:`` and imports only what
is imported: ``inert()`` in ``hotseam.reload._loader``) needs no thread hop: it runs at once,
and the worker thread is never started for it. A save that makes the same module block or
spin is told apart from its bytecode and goes to the thread as before; a broken save keeps
the serving generation; the events of a save are the same either way.
"""

from __future__ import annotations

import sys
import threading
import uuid
from pathlib import Path
from types import ModuleType

import anyio
import pytest
from tests._timing import scaled

from hotseam import Context
from hotseam.interaction import ask
from hotseam.reload import Reloader, ReloadEvent
from hotseam.reload import _loader as loader_module
from hotseam.reload._loader import inert

from ._support import Probe
from .conftest import QUESTION, write

pytestmark = pytest.mark.anyio

INERT = """\
import hotseam.interaction as interaction
from hotseam.interaction import USER_INTERACTION

AskUserQuestionAnswer = interaction.AskUserQuestionAnswer
VERSION = {version}
__all__ = ["Provider", "setup"]


class Provider:
    async def ask(self, request):
        return AskUserQuestionAnswer(f"answer v{{VERSION}}")


def setup(scope):
    scope.provide(USER_INTERACTION, Provider())
"""


def _worker_started(reloader: Reloader) -> bool:
    """True once the loader's module-body thread was started (it starts at its first body)."""
    return reloader._loader._worker._jobs is not None


def _line(path: Path, marker: str) -> str:
    number = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if marker in text)
    return f"{path}:{number}"


async def test_an_inert_body_runs_on_the_loops_thread_without_the_worker(
    context: Context, folder: Path
) -> None:
    ui = write(folder / "inert_ui.py", INERT.format(version=1))
    async with Reloader(context, [folder], watch=False) as reloader:
        assert (await ask(QUESTION, context=context)).answer == "answer v1"
        write(ui, INERT.format(version=2))
        assert (await reloader.reload(ui)).ok
        assert (await ask(QUESTION, context=context)).answer == "answer v2"
        assert not _worker_started(reloader)


@pytest.mark.parametrize(
    "line",
    [
        "import reload_probe; reload_probe.log.append(('ran', 1))",  # a call
        "for _ in (): pass",  # a loop
        "import {fresh}",  # an import that executes a module
    ],
    ids=["a call", "a loop", "a new import"],
)
async def test_a_body_that_could_run_code_still_goes_to_the_thread(
    context: Context,
    folder: Path,
    probe: Probe,
    line: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fresh = f"fresh_{uuid.uuid4().hex}"  # never imported before, on either backend
    write(tmp_path / "lib" / f"{fresh}.py", "VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    monkeypatch.delitem(sys.modules, fresh, raising=False)
    line = line.format(fresh=fresh)
    ui = write(folder / "inert_ui.py", INERT.format(version=1))
    async with Reloader(context, [folder], watch=False) as reloader:
        assert not _worker_started(reloader)
        write(ui, INERT.format(version=2) + line + "\n")
        assert (await reloader.reload(ui)).ok
        assert _worker_started(reloader)
        assert (await ask(QUESTION, context=context)).answer == "answer v2"


@pytest.mark.parametrize(
    "body",
    [
        "while not reload_probe.probe.values['gate'].is_set(): pass",
        "reload_probe.probe.values['gate'].wait(3600)",
    ],
    ids=["spins", "blocks"],
)
async def test_a_save_that_blocks_or_spins_is_abandoned_while_the_loop_serves(
    context: Context, folder: Path, probe: Probe, body: str
) -> None:
    """v1 is inert (no thread); v2 blocks or spins until the test ends: it fails at the
    import bound naming its line, v1 answers meanwhile and after, and v3 (inert) loads."""
    gate, entered = threading.Event(), threading.Event()
    probe.values.update(gate=gate, entered=entered)
    ui = write(folder / "inert_ui.py", INERT.format(version=1))
    try:
        async with Reloader(context, [folder], watch=False, import_timeout=scaled(0.5)) as reloader:
            write(
                ui,
                INERT.format(version=2)
                + "import reload_probe\nreload_probe.probe.values['entered'].set()\n"
                + body
                + "\n",
            )
            results = []

            async def reload() -> None:
                results.append(await reloader.reload(ui))

            async with anyio.create_task_group() as tg:
                tg.start_soon(reload)
                with anyio.fail_after(scaled(10)):
                    await anyio.to_thread.run_sync(entered.wait)
                with anyio.fail_after(scaled(0.4)):  # before the import bound: the loop serves
                    assert (await ask(QUESTION, context=context)).answer == "answer v1"
            (aborted,) = results[0].aborted
            assert aborted.error.type == "TimeoutError"
            assert aborted.error.location == _line(ui, body)
            assert reloader.status_of(ui).generation == 1
            assert (await ask(QUESTION, context=context)).answer == "answer v1"
            write(ui, INERT.format(version=3))
            assert (await reloader.reload(ui)).ok
            assert (await ask(QUESTION, context=context)).answer == "answer v3"
            gate.set()
            with anyio.fail_after(scaled(10)):  # the abandoned body ends once released
                for run in reloader._loader.abandoned:
                    await run.done.wait()
    finally:
        gate.set()


@pytest.mark.parametrize(
    ("broken", "error_type"),
    [("VALUE = UNDEFINED_NAME\n", "NameError"), ("from os import not_there_at_all\n", None)],
    ids=["a NameError", "a missing name"],
)
async def test_a_broken_inert_save_keeps_the_serving_generation(
    context: Context, folder: Path, broken: str, error_type: str | None
) -> None:
    ui = write(folder / "inert_ui.py", INERT.format(version=1))
    async with Reloader(context, [folder], watch=False) as reloader:
        write(ui, INERT.format(version=2) + broken)
        result = await reloader.reload(ui)
        (aborted,) = result.aborted
        if error_type is not None:
            assert aborted.error.type == error_type
            assert aborted.error.location == _line(ui, broken.strip())
        else:
            assert aborted.error.type == "ImportError"
        assert reloader.status_of(ui).generation == 1
        assert (await ask(QUESTION, context=context)).answer == "answer v1"


async def test_the_events_of_a_save_are_the_same_on_either_thread(
    context: Context, folder: Path
) -> None:
    """The same saves — two good ones, then a broken one — of an inert module and of one
    that calls ``len`` at import: the same events with the same fields, in the same order."""

    async def events_of(extra: str) -> tuple[list[tuple[str, object]], bool]:
        ui = write(folder / "ui.py", INERT.format(version=1) + extra)
        seen: list[ReloadEvent] = []
        async with Reloader(context, [folder], watch=False, on_event=seen.append) as reloader:
            for version in (2, 3):
                write(ui, INERT.format(version=version) + extra)
                assert (await reloader.reload(ui)).ok
            write(ui, INERT.format(version=4) + extra + "X = NOT_DEFINED\n")
            assert not (await reloader.reload(ui)).ok
            assert (await ask(QUESTION, context=context)).answer == "answer v3"
            inline = not _worker_started(reloader)
        described = [(type(event).__name__, getattr(event, "generation", None)) for event in seen]
        return described, inline

    inert, inline = await events_of("")
    calling, in_thread = await events_of("N = len('')\n")
    assert inline and not in_thread
    assert inert == calling
    assert [name for name, _ in inert].count("ReloadCommitted") == 3
    assert "ReloadAborted" in [name for name, _ in inert]


async def test_the_users_ctrl_c_during_an_inline_body_is_not_the_bodys(
    context: Context, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KeyboardInterrupt that may be the user's (SIGINT raises it on this thread)
    propagates out of the reload instead of being reported as the module's failure."""
    ui = write(folder / "inert_ui.py", INERT.format(version=1))
    async with Reloader(context, [folder], watch=False) as reloader:
        write(ui, INERT.format(version=2))
        original = loader_module.Loader._execute

        def interrupted(self: loader_module.Loader, batch: object, name: str) -> object:
            raise KeyboardInterrupt

        monkeypatch.setattr(loader_module.Loader, "_execute", interrupted)
        if threading.current_thread() is threading.main_thread():
            with pytest.raises(KeyboardInterrupt):
                await reloader.reload(ui)
        monkeypatch.setattr(loader_module.Loader, "_execute", original)
        assert reloader.status_of(ui).generation == 1
        assert (await ask(QUESTION, context=context)).answer == "answer v1"


def _loaded(name: str, fromlist: tuple[str, ...] | None, level: int) -> ModuleType | None:
    """What the loader's resolver says for modules outside the watched folders."""
    module = sys.modules.get(name)
    if level or module is None:
        return None
    if not fromlist:
        return sys.modules[name.partition(".")[0]]
    return module if all(item in module.__dict__ for item in fromlist) else None


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import os\nX = os.sep\nY = os.path.sep\nimport os.path as p\nZ = p.join\n", True),
        ("from os import sep\nA = 1\nB = (1, 'x')\nC = ['a', 'b']\n", True),
        ("def f(a=1, *, b: int = 2) -> int:\n    return a\n", True),
        ("x: int = 3\nclass B:\n    def f(self):\n        return super().f()\n", True),
        ("while True:\n    pass\n", False),
        ("import time\ntime.sleep(1)\n", False),
        ("import functools\n@functools.cache\ndef f(): pass\n", False),
        ("class A(object):\n    pass\n", False),
        ("class A(metaclass=type):\n    pass\n", False),
        ("import os\nclass B:\n    y = os\n", False),
        ("import os\nX = os.not_there\n", False),
        ("import os\nos = 1\nX = os.sep\n", False),
        ("from os import *\n", False),
        ("D = {'a': 1}\n", False),
        ("import a_module_nobody_has_xyz\n", False),
        ("X = [*range(3)]\n", False),
        ("from os import environ as __annotations__\nx: int = 1\n", False),
    ],
)
def test_what_is_inert(source: str, expected: bool) -> None:
    """Straight-line code that calls nothing but ``class X:`` and reads only what is
    imported is inert; a loop, a call, a decorator, a base, a class attribute read from a
    name, a missing attribute, a rebound name, ``*``, a dict display, a new import are not."""
    assert inert(compile(source, "m.py", "exec", dont_inherit=True), _loaded) is expected


async def test_a_submodule_whose_package_would_execute_goes_to_the_thread(
    context: Context, folder: Path, probe: Probe
) -> None:
    """``pkg/__init__.py`` blocks (it failed at its bound when the reloader started, so
    nothing of it serves); a save of the inert ``pkg/ui.py`` executes the package again
    first — in the thread, where it is abandoned at its bound while the loop serves."""
    gate, entered = threading.Event(), threading.Event()
    probe.values.update(gate=gate, entered=entered)
    write(
        folder / "pkg" / "__init__.py",
        "import reload_probe\nreload_probe.probe.values['entered'].set()\n"
        "reload_probe.probe.values['gate'].wait(3600)\n",
    )
    ui = write(folder / "pkg" / "ui.py", INERT.format(version=1))
    try:
        async with Reloader(context, [folder], watch=False, import_timeout=scaled(0.5)) as reloader:
            assert reloader.status_of(ui).generation is None  # its package failed
            write(folder / "serving.py", INERT.format(version=7))
            assert (await reloader.reload(folder / "serving.py")).ok
            entered.clear()
            write(ui, INERT.format(version=2))
            results = []

            async def reload() -> None:
                results.append(await reloader.reload(ui))

            async with anyio.create_task_group() as tg:
                tg.start_soon(reload)
                with anyio.fail_after(scaled(10)):
                    await anyio.to_thread.run_sync(entered.wait)
                with anyio.fail_after(scaled(0.4)):  # the loop serves meanwhile
                    assert (await ask(QUESTION, context=context)).answer == "answer v7"
            assert not results[0].ok
            assert reloader.status_of(ui).generation is None
            gate.set()
            with anyio.fail_after(scaled(10)):  # the abandoned bodies end once released
                for run in reloader._loader.abandoned:
                    await run.done.wait()
    finally:
        gate.set()
