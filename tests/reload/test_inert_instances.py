"""A module body may make an instance of a plain class it defines and still run on the
event loop's thread; a class whose instantiation can run code of its own still goes to the
worker thread, where a body that blocks in it is abandoned at its bound while the loop
serves.

``provider = Provider()`` of a ``class Provider:`` without bases, decorators or a dunder
method of its own (``__init__``, ``__new__``, ``__del__``...) runs ``object``'s own
``__new__`` and ``__init__`` only, in C: the body stays inert (``hotseam.reload._loader``),
so a save of it needs no thread hop.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from types import ModuleType

import anyio
import pytest
from tests._timing import scaled

from hotseam import Context
from hotseam.interaction import ask
from hotseam.reload import Reloader
from hotseam.reload._loader import inert

from ._support import Probe
from .conftest import QUESTION, write

pytestmark = pytest.mark.anyio

INSTANCE = """\
import reload_probe
from hotseam.interaction import USER_INTERACTION, AskUserQuestionAnswer

VERSION = {version}


class Provider:
{methods}
    async def ask(self, request):
        return AskUserQuestionAnswer(f"answer v{{VERSION}}")


provider = Provider()


def setup(scope):
    scope.provide(USER_INTERACTION, provider)
"""

BLOCKS = (
    "reload_probe.probe.values['entered'].set()\n"
    "        reload_probe.probe.values['gate'].wait(3600)"
)


def _source(version: int, methods: str = "") -> str:
    return INSTANCE.format(version=version, methods=methods)


def _worker_started(reloader: Reloader) -> bool:
    return reloader._loader._worker._jobs is not None


async def test_a_provider_made_at_import_from_a_plain_class_needs_no_thread(
    context: Context, folder: Path, probe: Probe
) -> None:
    ui = write(folder / "ui.py", _source(1))
    async with Reloader(context, [folder], watch=False) as reloader:
        assert (await ask(QUESTION, context=context)).answer == "answer v1"
        write(ui, _source(2))
        assert (await reloader.reload(ui)).ok
        assert (await ask(QUESTION, context=context)).answer == "answer v2"
        assert not _worker_started(reloader)


async def test_a_broken_save_of_it_keeps_the_serving_generation(
    context: Context, folder: Path, probe: Probe
) -> None:
    ui = write(folder / "ui.py", _source(1))
    async with Reloader(context, [folder], watch=False) as reloader:
        write(ui, _source(2) + "X = NOT_DEFINED\n")
        (aborted,) = (await reloader.reload(ui)).aborted
        assert aborted.error.type == "NameError"
        assert reloader.status_of(ui).generation == 1
        assert (await ask(QUESTION, context=context)).answer == "answer v1"
        assert not _worker_started(reloader)


@pytest.mark.parametrize(
    ("methods", "line"),
    [
        (f"    def __init__(self):\n        {BLOCKS}\n", "provider = Provider()"),
        (f"    def __new__(cls):\n        {BLOCKS}\n", "provider = Provider()"),
        (f"    def __del__(self):\n        {BLOCKS}\n", "Provider()"),
    ],
    ids=["__init__", "__new__", "__del__"],
)
async def test_a_class_whose_instantiation_blocks_is_abandoned_while_the_loop_serves(
    context: Context, folder: Path, probe: Probe, methods: str, line: str
) -> None:
    """v1 serves; v2's instantiation blocks (in ``__init__``, ``__new__``, or the
    ``__del__`` of an instance dropped at once): it fails at the import bound while v1
    answers, and v3 loads after it."""
    gate, entered = threading.Event(), threading.Event()
    probe.values.update(gate=gate, entered=entered)
    ui = write(folder / "ui.py", _source(1))
    # Ten import bounds: a body wrongly run on the loop's thread freezes it until then,
    # and the test fails instead of hanging.
    release = threading.Timer(scaled(5), gate.set)
    release.start()
    try:
        async with Reloader(context, [folder], watch=False, import_timeout=scaled(0.5)) as reloader:
            write(ui, _source(2, methods) + f"{line}\n")
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
            assert reloader.status_of(ui).generation == 1
            write(ui, _source(3))
            assert (await reloader.reload(ui)).ok
            assert (await ask(QUESTION, context=context)).answer == "answer v3"
            gate.set()
            with anyio.fail_after(scaled(10)):  # the abandoned body ends once released
                for run in reloader._loader.abandoned:
                    await run.done.wait()
    finally:
        gate.set()
        release.cancel()


def _loaded(name: str, fromlist: tuple[str, ...] | None, level: int) -> ModuleType | None:
    module = sys.modules.get(name)
    if level or module is None:
        return None
    return module if all(item in module.__dict__ for item in fromlist or ()) else None


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("class P:\n    def f(self): pass\np = P()\n", True),
        ("class P:\n    pass\nP()\n", True),
        ("class P:\n    'doc'\n    x = 1\np = P()\nq = P()\n", True),
        ("class P:\n    def f(self):\n        return super().f()\np = P()\n", True),
        ("class P:\n    def __init__(self): pass\np = P()\n", False),
        ("class P:\n    def __new__(cls): pass\np = P()\n", False),
        ("class P:\n    def __del__(self): pass\nP()\n", False),
        ("class P:\n    __slots__ = ()\np = P()\n", False),
        ("class P:\n    pass\np = P(1)\n", False),
        ("class P(object):\n    pass\np = P()\n", False),
        ("class P:\n    pass\nP = len\np = P()\n", False),
        ("from types import SimpleNamespace as P\np = P()\n", False),
        ("p = P()\n", False),
        ("class P:\n    class Q:\n        pass\n    q = Q()\n", False),
        ("class P:\n    def f(self): pass\np = P()\np.f()\n", False),
        ("class P:\n    pass\np = P()()\n", False),
    ],
    ids=[
        "an instance",
        "an instance dropped",
        "two instances",
        "a method using super()",
        "__init__",
        "__new__",
        "__del__",
        "__slots__",
        "an argument",
        "a base",
        "the name rebound",
        "an imported class",
        "an undefined name",
        "in a class body",
        "a method called",
        "the instance called",
    ],
)
def test_what_instantiation_is_inert(source: str, expected: bool) -> None:
    """``X()`` of a class defined above, without bases and binding no dunder but the
    compiler's own, is inert; an argument, a dunder method, a base, a rebound or imported
    name, a call of the instance or of its method are not."""
    assert inert(compile(source, "m.py", "exec", dont_inherit=True), _loaded) is expected
