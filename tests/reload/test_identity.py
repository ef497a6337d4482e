"""Issue 13: seams keep their identity across reloads; module-level registrations are refused."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

import pytest
from pydantic import BaseModel

from hotseam import Context, HarnessError, ScopeError, Seam, Tool, ToolCall, tool
from hotseam.reload import Reloader

from ._support import Probe
from .conftest import write

pytestmark = pytest.mark.anyio

SEAM_MODULE = """
import reload_probe
from typing import Protocol, runtime_checkable
from hotseam import Seam

@runtime_checkable
class Greeter(Protocol):
    def greet(self) -> str: ...

GREETER = Seam("identity-greeter", Greeter)
reload_probe.probe.values.setdefault("seams", []).append(GREETER)

class Impl:
    def greet(self) -> str:
        return "generation {n}"

def setup(scope):
    scope.provide(GREETER, Impl())
"""


async def test_the_seam_of_generation_1_finds_the_provider_of_generation_5(
    context: Context, folder: Path, probe: Probe
) -> None:
    path = folder / "greeter.py"
    async with Reloader(context, [folder], watch=False) as reloader:
        for n in range(1, 6):
            write(path, SEAM_MODULE.format(n=n))
            (await reloader.reload(path)).raise_for_errors()
        first, *_, fifth = probe.values["seams"]
        assert first is not fifth and first == fifth and hash(first) == hash(fifth)
        assert context.get(first).greet() == "generation 5"
        assert (await context.wait_for(first)).greet() == "generation 5"


def test_two_live_definitions_with_different_types_are_refused_naming_both() -> None:
    @runtime_checkable
    class One(Protocol):
        def one(self) -> None: ...

    kept: Seam[One] = Seam("identity-clash", One)
    with pytest.raises(HarnessError) as caught:
        _define_elsewhere("identity-clash", str)
    error = caught.value
    assert error.code == "SEAM_CONFLICT"
    assert kept.location in str(error)
    assert "elsewhere.py:1" in str(error)
    # Same type from another file, or any type from the same file, is the same seam.
    _define_elsewhere("identity-clash", One)
    assert Seam("identity-clash", str) == kept


def _define_elsewhere(name: str, protocol: type) -> Seam[object]:
    namespace = {"Seam": Seam, "name": name, "protocol": protocol}
    exec(compile("seam = Seam(name, protocol)", "elsewhere.py", "exec"), namespace)
    seam = namespace["seam"]
    assert isinstance(seam, Seam)
    return seam


async def test_a_seam_clash_fails_the_load_of_the_second_module(
    context: Context, folder: Path, probe: Probe
) -> None:
    write(folder / "one.py", SEAM_MODULE.format(n=1).replace("identity-greeter", "clash-load"))
    write(folder / "two.py", "from hotseam import Seam\nOTHER = Seam('clash-load', int)\n")
    async with Reloader(context, [folder], watch=False) as reloader:
        result = await reloader.reload()
        (failed,) = result.aborted
        assert failed.module == "two"
        assert failed.error is not None
        assert "one.py:" in failed.error.message and "two.py:2" in failed.error.message


MODULE_LEVEL = """
import hotseam
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.scripted import ScriptedProvider

hotseam.current_context().provide(USER_INTERACTION, ScriptedProvider(lambda r: "x"))

def setup(scope):
    pass
"""


async def test_a_module_level_registration_fails_the_load(context: Context, folder: Path) -> None:
    path = write(folder / "eager.py", MODULE_LEVEL)
    async with Reloader(context, [folder], watch=False) as reloader:
        for _ in range(3):
            result = await reloader.reload(path, force=True)
            (failed,) = result.aborted
            assert failed.error is not None
            assert failed.error.message.startswith(
                "register in setup(scope): a module-level registration would outlive its generation"
            )
            assert f"{path}:5" in failed.error.message
        assert context.providers() == {}


class _Echo(BaseModel):
    text: str


@tool(name="module_level_tool")
async def _a_tool(echo: _Echo, call: ToolCall) -> str:
    """Echo."""
    return echo.text


async def test_a_module_level_tool_registration_through_a_scope_fails_the_load(
    context: Context, folder: Path, probe: Probe
) -> None:
    probe.values["tool"] = _a_tool
    path = write(
        folder / "eager_tool.py",
        "import reload_probe\n"
        "P = reload_probe.probe\n"
        "P.values['scope'].register_tool(P.values['tool'])\n",
    )
    async with context.scope("owned by the test") as scope:
        probe.values["scope"] = scope
        async with Reloader(context, [folder], watch=False) as reloader:
            (failed,) = (await reloader.reload(path)).aborted
            assert failed.error is not None
            assert "register in setup(scope)" in failed.error.message
            assert f"{path}:3" in failed.error.message
            assert context.tools.get("module_level_tool") is None


async def test_a_module_level_tool_registration_on_the_context_fails_the_load(
    context: Context, folder: Path, probe: Probe
) -> None:
    probe.values["tool"] = _a_tool
    path = write(
        folder / "eager_registry.py",
        "import hotseam, reload_probe\n"
        "P = reload_probe.probe\n"
        "hotseam.current_context().tools.register(P.values['tool'])\n"
        "def setup(scope):\n"
        "    pass\n",
    )
    async with Reloader(context, [folder], watch=False) as reloader:
        for _ in range(2):
            (failed,) = (await reloader.reload(path, force=True)).aborted
            assert failed.error is not None
            assert "register in setup(scope)" in failed.error.message
            assert f"{path}:3" in failed.error.message
        assert context.tools.get("module_level_tool") is None


async def test_registrations_in_setup_and_outside_a_load_are_fine(context: Context) -> None:
    seam: Seam[object] = Seam("identity-plain")
    async with context.scope("plain") as scope:
        scope.provide(seam, object())
        assert isinstance(_a_tool, Tool)
        scope.register_tool(_a_tool)
    with pytest.raises(ScopeError):  # the refusal is a ScopeError, only inside a body
        from hotseam._core import executing

        with executing("x.py"):
            context.provide(seam, object())
