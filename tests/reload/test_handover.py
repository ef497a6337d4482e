"""Issue 13: a generation hands what it carries to its successor, on commit and only then.

Each test drives a watcher-less :class:`Reloader` over real files. Provider modules carry a
:class:`Resource` made by the probe's factory, so the test sees every creation and disposal.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

from hotseam import Context, ScopeError
from hotseam.reload import DisposeFailed, ModuleState, Reloader, ReloadEvent

from ._support import Probe
from .conftest import write

pytestmark = pytest.mark.anyio

_ids = itertools.count(1)


@dataclass(eq=False)
class Resource:
    """Something a generation carries; counts its disposals."""

    id: int = field(default_factory=lambda: next(_ids))
    disposals: int = 0
    fail_dispose: bool = False

    def dispose(self) -> None:
        self.disposals += 1
        if self.fail_dispose:
            raise RuntimeError(f"resource {self.id} failed to dispose")


@dataclass
class Factory:
    """The probe's factory: makes resources, can be told to fail."""

    made: list[Resource] = field(default_factory=list)
    fail: bool = False

    def __call__(self) -> Resource:
        if self.fail:
            raise ValueError("factory failed")
        resource = Resource()
        self.made.append(resource)
        return resource


def source(
    version: int = 1, *, carry: str | None = None, lines: tuple[str, ...] = (), key: str = "res"
) -> str:
    """A provider module that carries ``key`` (``carry``: the carry call's extra arguments)."""
    call = (
        f"    res = scope.carry({key!r}, P.values['factory'], dispose=Resource.dispose"
        f"{', ' + carry if carry else ''})"
    )
    body = [
        "import reload_probe",
        "P = reload_probe.probe",
        "Resource = P.values['Resource']",
        f"VERSION = {version}",
        "",
        "def setup(scope):",
        call,
        "    P.log.append(('setup', VERSION, res.id))",
        *(f"    {line}" for line in lines),
    ]
    return "\n".join(body) + "\n"


@pytest.fixture(name="factory")
def _factory(probe: Probe) -> Factory:
    factory = Factory()
    probe.values.update(factory=factory, Resource=Resource)
    return factory


@pytest.fixture(name="events")
def _events() -> list[ReloadEvent]:
    return []


@pytest.fixture(name="reloader")
async def _reloader(
    context: Context, folder: Path, factory: Factory, events: list[ReloadEvent]
) -> AsyncIterator[Reloader]:
    async with Reloader(context, [folder], watch=False, on_event=events.append) as reloader:
        yield reloader


async def test_later_generations_receive_the_same_object(
    reloader: Reloader, folder: Path, factory: Factory, probe: Probe
) -> None:
    path = folder / "ui.py"
    for version in range(1, 6):
        write(path, source(version))
        (await reloader.reload(path)).raise_for_errors()
    assert len(factory.made) == 1
    assert probe.entries("setup") == [1, 2, 3, 4, 5]
    assert {entry[2] for entry in probe.log} == {factory.made[0].id}
    assert factory.made[0].disposals == 0


async def test_a_carried_counter_ends_at_the_right_value_after_100_reloads(
    reloader: Reloader, folder: Path, probe: Probe
) -> None:
    path = folder / "counter.py"
    template = (
        "def setup(scope):\n"
        "    state = scope.carry('state', dict)\n"
        "    state['count'] = state.get('count', 0) + 1\n"
        "    import reload_probe\n"
        "    reload_probe.probe.values['state'] = state\n"
        "# save {n}\n"
    )
    for n in range(101):
        write(path, template.format(n=n))
        (await reloader.reload(path)).raise_for_errors()
    assert probe.values["state"] == {"count": 101}
    assert reloader.status_of(path).generation == 101


async def test_a_failed_prepare_leaves_the_value_with_the_running_generation(
    reloader: Reloader, folder: Path, factory: Factory, probe: Probe
) -> None:
    path = folder / "ui.py"
    write(path, source(1))
    (await reloader.reload(path)).raise_for_errors()
    kept = factory.made[0]
    # It carried, then failed: the value stays with generation 1; nothing disposed or made.
    write(path, source(2, lines=("raise RuntimeError('setup failed after carrying')",)))
    result = await reloader.reload(path)
    assert [status.module for status in result.aborted] == ["ui"]
    assert reloader.status_of(path).generation == 1
    assert (factory.made, kept.disposals) == ([kept], 0)
    # A version bump that fails: the fresh value is disposed, the old one untouched.
    write(path, source(3, carry="version=2", lines=("raise RuntimeError('no')",)))
    result = await reloader.reload(path)
    assert result.aborted
    fresh = factory.made[1]
    assert (fresh.disposals, kept.disposals) == (1, 0)
    # The next good generation still takes it over.
    write(path, source(4))
    (await reloader.reload(path)).raise_for_errors()
    assert probe.log[-1] == ("setup", 4, kept.id)
    assert kept.disposals == 0


async def test_what_a_failed_setup_did_to_the_carried_value_sticks(
    reloader: Reloader, folder: Path, probe: Probe
) -> None:
    """The carry table's failed row (docs/providers.md): the value stays with the running
    generation as the same object, so a mutation the failed ``setup`` made before raising
    is not rolled back; the running generation sees it."""
    path = folder / "counter.py"
    template = (
        "def setup(scope):\n"
        "    state = scope.carry('state', dict)\n"
        "    state['count'] = state.get('count', 0) + 1\n"
        "    import reload_probe\n"
        "    reload_probe.probe.values.setdefault('seen', []).append(state)\n"
        "    {fail}\n"
    )
    write(path, template.format(fail="pass"))
    (await reloader.reload(path)).raise_for_errors()
    write(path, template.format(fail="raise RuntimeError('setup failed after mutating')"))
    assert (await reloader.reload(path)).aborted
    assert reloader.status_of(path).generation == 1
    first, failed = probe.values["seen"]
    assert failed is first  # on loan, not a copy
    assert first == {"count": 2}  # the failed setup's increment stuck
    docs = Path(__file__).parents[2] / "docs"
    [row] = [
        line
        for line in (docs / "providers.md").read_text().splitlines()
        if line.startswith("| a new generation fails")
    ]
    assert "untouched" not in row
    assert "sticks" in row


@pytest.mark.parametrize("how", ["delete the file", "close the reloader"])
async def test_unloading_disposes_the_value_once(
    context: Context, folder: Path, factory: Factory, how: str
) -> None:
    path = folder / "ui.py"
    async with Reloader(context, [folder], watch=False) as reloader:
        for version in (1, 2, 3):
            write(path, source(version))
            (await reloader.reload(path)).raise_for_errors()
        if how == "delete the file":
            path.unlink()
            result = await reloader.reload(path)
            assert [status.module for status in result.unloaded] == ["ui"]
            assert factory.made[0].disposals == 1
    assert [resource.disposals for resource in factory.made] == [1]


async def test_a_generation_that_drops_the_key_disposes_the_value_at_commit(
    reloader: Reloader, folder: Path, factory: Factory, probe: Probe
) -> None:
    path = folder / "ui.py"
    write(path, source(1))
    (await reloader.reload(path)).raise_for_errors()
    write(path, "import reload_probe\ndef setup(scope):\n    reload_probe.log.append(('v2',))\n")
    (await reloader.reload(path)).raise_for_errors()
    assert factory.made[0].disposals == 1
    write(path, source(3))
    (await reloader.reload(path)).raise_for_errors()
    assert len(factory.made) == 2  # dropped once: the next carry starts afresh


@pytest.mark.parametrize("refusal", ["version=2", "accept=lambda old: False"])
async def test_a_refused_value_is_replaced_and_disposed_when_the_successor_commits(
    reloader: Reloader, folder: Path, factory: Factory, probe: Probe, refusal: str
) -> None:
    path = folder / "ui.py"
    write(path, source(1))
    (await reloader.reload(path)).raise_for_errors()
    write(path, source(2, carry=refusal))
    (await reloader.reload(path)).raise_for_errors()
    old, fresh = factory.made
    assert (old.disposals, fresh.disposals) == (1, 0)
    assert probe.log[-1] == ("setup", 2, fresh.id)


async def test_a_value_refused_by_version_keeps_the_same_version_afterwards(
    reloader: Reloader, folder: Path, factory: Factory
) -> None:
    path = folder / "ui.py"
    for version in (1, 2, 3):
        write(path, source(version, carry="version=2"))
        (await reloader.reload(path)).raise_for_errors()
    assert len(factory.made) == 1  # equal versions: taken over


async def test_a_factory_that_raises_fails_the_load_and_carries_nothing(
    reloader: Reloader, folder: Path, factory: Factory, probe: Probe
) -> None:
    path = folder / "ui.py"
    factory.fail = True
    write(path, source(1))
    result = await reloader.reload(path)
    assert result.aborted and "factory failed" in str(result.aborted[0].error)
    factory.fail = False
    write(path, source(2))
    (await reloader.reload(path)).raise_for_errors()
    first = factory.made[0]
    # Later: the factory runs only for a refused value; it raising leaves the old one be.
    factory.fail = True
    write(path, source(3, carry="version=9"))
    assert (await reloader.reload(path)).aborted
    assert (len(factory.made), first.disposals) == (1, 0)
    assert reloader.status_of(path).generation == 1


async def test_carrying_one_key_twice_in_a_generation_fails_its_setup(
    reloader: Reloader, folder: Path, factory: Factory
) -> None:
    path = folder / "ui.py"
    write(path, source(1))
    (await reloader.reload(path)).raise_for_errors()
    write(path, source(2, lines=("scope.carry('res', P.values['factory'])",)))
    result = await reloader.reload(path)
    error = result.aborted[0].error
    assert error is not None and "already carried" in error.message
    assert (len(factory.made), factory.made[0].disposals) == (1, 0)


async def test_a_dispose_that_raises_is_reported_and_runs_once(
    reloader: Reloader, folder: Path, factory: Factory, events: list[ReloadEvent]
) -> None:
    path = folder / "ui.py"
    write(path, source(1))
    (await reloader.reload(path)).raise_for_errors()
    factory.made[0].fail_dispose = True
    path.unlink()
    await reloader.reload(path)
    failed = [event for event in events if isinstance(event, DisposeFailed)]
    assert len(failed) == 1
    assert "failed to dispose" in failed[0].errors[0].message
    assert factory.made[0].disposals == 1


async def test_an_async_factory_and_an_async_context_manager(
    reloader: Reloader, folder: Path, probe: Probe
) -> None:
    path = folder / "ui.py"
    probe.values["entries"] = []
    text = (
        "import contextlib, anyio, reload_probe\n"
        "P = reload_probe.probe\n"
        "async def make():\n"
        "    await anyio.lowlevel.checkpoint()\n"
        "    return ['made']\n"
        "@contextlib.asynccontextmanager\n"
        "async def held():\n"
        "    P.values['entries'].append('enter')\n"
        "    try:\n"
        "        yield 'inside'\n"
        "    finally:\n"
        "        P.values['entries'].append('exit')\n"
        "async def setup(scope):\n"
        "    made = await scope.acarry('made', make)\n"
        "    cm = await scope.acarry('cm', held)\n"
        "    P.log.append(('setup', id(made), cm))\n"
        "# {n}\n"
    )
    for n in range(3):
        write(path, text.format(n=n))
        (await reloader.reload(path)).raise_for_errors()
    assert len({entry[1] for entry in probe.log}) == 1
    assert probe.log[-1][2] == "inside"
    assert probe.values["entries"] == ["enter"]
    path.unlink()
    await reloader.reload(path)
    assert probe.values["entries"] == ["enter", "exit"]


async def test_a_sync_carry_of_an_async_factory_is_refused(
    reloader: Reloader, folder: Path
) -> None:
    path = folder / "ui.py"
    write(path, "async def make():\n    return 1\ndef setup(scope):\n    scope.carry('x', make)\n")
    result = await reloader.reload(path)
    error = result.aborted[0].error
    assert error is not None and "acarry" in error.message


async def test_an_async_factory_stuck_past_the_setup_timeout_leaves_the_old_value(
    context: Context, folder: Path, factory: Factory, probe: Probe
) -> None:
    path = folder / "ui.py"
    async with Reloader(context, [folder], watch=False, setup_timeout=0.3) as reloader:
        write(path, source(1))
        (await reloader.reload(path)).raise_for_errors()
        write(
            path,
            "import anyio, reload_probe\n"
            "async def never():\n"
            "    await anyio.sleep_forever()\n"
            "async def setup(scope):\n"
            "    await scope.acarry('res', never, version=5)\n",
        )
        result = await reloader.reload(path)
        assert result.aborted
        assert reloader.status_of(path).generation == 1
        assert factory.made[0].disposals == 0
    assert factory.made[0].disposals == 1


async def test_a_module_rerun_for_a_changed_helper_keeps_its_value(
    reloader: Reloader, folder: Path, factory: Factory, probe: Probe
) -> None:
    write(folder / "helper.py", "GREETING = 'hello'\n")
    path = folder / "ui.py"
    write(path, "import helper\n" + source(1))
    (await reloader.reload()).raise_for_errors()
    write(folder / "helper.py", "GREETING = 'hi'\n")
    result = await reloader.reload(folder / "helper.py")
    result.raise_for_errors()
    assert "ui" in [status.module for status in result.committed]
    assert len(factory.made) == 1
    assert probe.log[-1] == ("setup", 1, factory.made[0].id)
    assert reloader.status_of(path).generation == 2


async def test_keys_are_per_module(
    reloader: Reloader, folder: Path, factory: Factory, probe: Probe
) -> None:
    write(folder / "one.py", source(1))
    write(folder / "two.py", source(2))
    (await reloader.reload()).raise_for_errors()
    assert len(factory.made) == 2
    write(folder / "one.py", source(3))
    (await reloader.reload(folder / "one.py")).raise_for_errors()
    assert len(factory.made) == 2
    (folder / "two.py").unlink()
    await reloader.reload(folder / "two.py")
    assert [resource.disposals for resource in factory.made] == [0, 1]


async def test_a_reload_that_unloads_while_another_module_hands_over(
    reloader: Reloader, folder: Path, factory: Factory
) -> None:
    write(folder / "one.py", source(1))
    write(folder / "two.py", source(2))
    (await reloader.reload()).raise_for_errors()
    write(folder / "one.py", source(3))
    (folder / "two.py").unlink()
    (await reloader.reload()).raise_for_errors()
    assert [resource.disposals for resource in factory.made] == [0, 1]
    assert reloader.status_of(folder / "one.py").state is ModuleState.ACTIVE


def test_carry_reports_a_non_string_key() -> None:
    async def main() -> None:
        async with Context().scope("plain") as scope:
            with pytest.raises(TypeError):
                scope.carry(1, list)  # type: ignore[call-overload]
            scope.carry("k", list)
            with pytest.raises(ScopeError) as caught:
                scope.carry("k", list)
            assert caught.value.code == "CARRY_TWICE"

    anyio.run(main)


BLOCKING = """
import reload_probe
P = reload_probe.probe
Resource = P.values['Resource']

async def setup(scope):
    res = scope.carry('res', P.values['factory'], dispose=Resource.dispose)
    P.log.append(('setup', 2, res.id))
    P.values['entered'].set()
    await P.values['gate'].wait()
"""


@pytest.mark.parametrize("how", ["close the reloader meanwhile", "cancel the reload"])
async def test_a_reload_interrupted_while_its_setup_holds_the_value(
    context: Context, folder: Path, factory: Factory, probe: Probe, how: str
) -> None:
    """Closing the reloader waits for the reload in flight (then disposes once); cancelling
    the reload leaves the value with the running generation."""
    path = folder / "ui.py"
    probe.values.update(entered=anyio.Event(), gate=anyio.Event())
    async with Reloader(context, [folder], watch=False) as reloader:
        write(path, source(1))
        (await reloader.reload(path)).raise_for_errors()
        write(path, BLOCKING)
        async with anyio.create_task_group() as group:
            with anyio.CancelScope() as reload_scope:
                group.start_soon(reloader.reload, path)
                await probe.values["entered"].wait()
                if how == "cancel the reload":
                    group.cancel_scope.cancel()
                else:
                    group.start_soon(reloader.aclose)
                    await anyio.wait_all_tasks_blocked()
                    assert factory.made[0].disposals == 0
                    probe.values["gate"].set()
            assert not reload_scope.cancel_called
        if how == "cancel the reload":
            assert factory.made[0].disposals == 0
            assert reloader.status_of(path).generation == 1
            probe.values["gate"].set()
    assert [resource.disposals for resource in factory.made] == [1]
