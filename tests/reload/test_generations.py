"""Behaviour 7: every generation is a fresh module object, and old ones are released."""

from __future__ import annotations

import gc
import sys
import weakref
from pathlib import Path
from types import ModuleType

import pytest

from hotseam import Context
from hotseam.interaction import USER_INTERACTION, ask
from hotseam.reload import Reloader

from ._support import Probe, provider_source
from .conftest import QUESTION, write

pytestmark = pytest.mark.anyio

RELOADS = 200
TRACK_FAILED_ATTEMPT = (
    "import sys, weakref; "
    "reload_probe.probe.values.setdefault('failed', []).append(weakref.ref(sys.modules[__name__]))"
)


class TestGenerations:
    async def test_after_200_reloads_no_old_module_or_provider_is_alive(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Weak references to each generation's module, provider and helper die with it.

        Every tenth reload fails (so aborted attempts are covered too), and the provider
        answers an ask each time, so asks and their leases are covered as well.
        """
        helper = write(folder / "words.py", "WORD = 0\n")
        ui = write(folder / "my_ui.py", provider_source(0, module_lines=["import words"]))
        modules: list[weakref.ref[ModuleType]] = []
        providers: list[weakref.ref[object]] = []
        helpers: list[weakref.ref[ModuleType]] = []
        async with Reloader(context, [folder], watch=False) as reloader:
            for version in range(1, RELOADS + 1):
                modules.append(weakref.ref(sys.modules["my_ui"]))
                helpers.append(weakref.ref(sys.modules["words"]))
                providers.append(weakref.ref(context.get(USER_INTERACTION)))
                if version % 10 == 0:
                    failing = ["import words", TRACK_FAILED_ATTEMPT, "1 / 0"]
                    write(ui, provider_source(version, module_lines=failing))
                    assert not (await reloader.reload(ui)).ok
                if version % 2:
                    write(helper, f"WORD = {version}\n")
                write(ui, provider_source(version, module_lines=["import words"]))
                (await reloader.reload()).raise_for_errors()
                assert (await ask(QUESTION, context=context)).answer == f"answer v{version}"
            assert reloader.status_of(ui).generation == RELOADS + 1
            current = sys.modules["my_ui"]
            serving = [current, sys.modules["words"], context.get(USER_INTERACTION)]
            gc.collect()
            alive = [
                obj
                for ref in modules + providers + helpers + probe.values["failed"]
                if (obj := ref()) is not None and not any(obj is s for s in serving)
            ]
            assert alive == []
            assert current.VERSION == RELOADS
            assert len({id(ref()) for ref in helpers if ref() is not None}) == 1
            assert len(probe.values["failed"]) == RELOADS // 10
        assert "my_ui" not in sys.modules and "words" not in sys.modules

    async def test_each_generation_executes_in_a_new_module_object(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Module globals never carry over from one generation to the next."""
        ui = write(
            folder / "my_ui.py",
            provider_source(1, module_lines=["counter = globals().get('counter', 0) + 1"]),
        )
        async with Reloader(context, [folder], watch=False) as reloader:
            first = sys.modules["my_ui"]
            write(ui, ui.read_text().replace("VERSION = 1", "VERSION = 2"))
            await reloader.reload(ui)
            second = sys.modules["my_ui"]
            assert first is not second
            assert first.counter == second.counter == 1
            assert second.__file__ == str(ui) and second.__spec__ is not None
            assert second.__spec__.origin == str(ui)
