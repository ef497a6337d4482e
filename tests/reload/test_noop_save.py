"""A save that changed nothing is cheap: no ``Path.resolve``, no listing, no worker thread,
no pass over the N module records — and every spelling of a path still reaches its module.

``reload(path)`` of a path the index knows as it names it (absolute, normalized, no symbolic
link under the watched paths) is taken as it is; anything else — relative, spelled with
``..``, through a symbolic link — is resolved as before.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from hotseam import Context
from hotseam.reload import ModuleState, Reloader, ReloadPathError
from hotseam.reload._loader import MOUNTS

from ._support import Probe, provider_source
from .conftest import write

pytestmark = pytest.mark.anyio


@pytest.fixture(name="resolved")
def _resolved(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every path ``Path.resolve`` is called on, in order."""
    calls: list[Path] = []
    real = Path.resolve

    def resolve(self: Path, strict: bool = False) -> Path:
        calls.append(self)
        return real(self, strict=strict)

    monkeypatch.setattr(Path, "resolve", resolve)
    return calls


def _count_thread_calls(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []
    real = anyio.to_thread.run_sync

    async def run_sync(func: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(func)
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", run_sync)
    return calls


async def test_a_no_op_save_among_many_resolves_nothing_and_takes_no_thread(
    tmp_path: Path, resolved: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(MOUNTS, "filesystem_type", lambda device: "ext4")
    for number in range(200):
        write(tmp_path / f"m{number}.py", "def setup(scope):\n    pass\n")
    target = tmp_path / "m7.py"
    async with Reloader(Context("noop"), [tmp_path], watch=False) as reloader:
        scans = reloader._index.scans
        threads = _count_thread_calls(monkeypatch)
        del resolved[:]
        for spelling in (target, str(target)):
            write(target, "def setup(scope):\n    pass\n")
            assert (await reloader.reload(spelling)).batch is None
            assert reloader.status_of(spelling).generation == 1
        assert (resolved, threads, reloader._index.scans) == ([], [], scans)


async def test_every_spelling_of_a_path_reaches_its_module(
    context: Context,
    folder: Path,
    probe: Probe,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Relative, with ``..``, through a link to the file or to the watched folder (absolute
    links, outside the watched path): each resolves to the module's file, as before."""
    ui = write(folder / "my_ui.py", provider_source(1))
    write(folder / "sub" / "keep.txt", "")
    alias = tmp_path / "alias.py"
    alias.symlink_to(ui)
    alias_folder = tmp_path / "alias_folder"
    alias_folder.symlink_to(folder)
    outside = write(tmp_path / "outside.py", "X = 1\n")
    monkeypatch.chdir(tmp_path)
    spellings: list[str | Path] = [
        Path("providers/my_ui.py"),
        "providers/my_ui.py",
        folder / "sub" / ".." / "my_ui.py",
        alias,
        str(alias),
        alias_folder / "my_ui.py",
    ]
    async with Reloader(context, [folder], watch=False) as reloader:
        assert not reloader._index.has_links  # the links are outside: the fast path is on
        for version, spelling in enumerate(spellings, start=2):
            write(ui, provider_source(version))
            result = await reloader.reload(spelling)
            assert [(c.path, c.generation) for c in result.committed] == [(ui, version)], spelling
            assert reloader.status_of(spelling).generation == version
        for elsewhere in (outside, "outside.py", folder / ".." / "outside.py"):
            with pytest.raises(ReloadPathError, match="not under a watched path"):
                await reloader.reload(elsewhere)
        assert (await reloader.reload(folder)).batch is None  # the root itself
        assert (await reloader.reload(folder / "sub")).batch is None
    assert probe.entries("exec") == list(range(1, len(spellings) + 2))


async def test_an_absolute_link_under_the_watched_path_resolves_to_its_target(
    context: Context, folder: Path, probe: Probe
) -> None:
    """``current.py -> /…/versions/ui_v1.py``: ``reload`` of the link's path reloads the
    module; so does ``reload`` of the target's."""
    target = write(folder / "versions" / "ui_v1.py", provider_source(1))
    link = folder / "current.py"
    link.symlink_to(target.resolve())
    async with Reloader(context, [folder], watch=False) as reloader:
        assert reloader._index.has_links
        status = reloader.status_of(link)
        assert (status.module, status.generation) == ("current", 1)
        spellings: list[str | Path] = [link, str(link), target]
        for version, spelling in enumerate(spellings, start=2):
            write(target, provider_source(version))
            result = await reloader.reload(spelling)
            assert [(c.module, c.generation) for c in result.committed] == [("current", version)], (
                spelling
            )


async def test_the_blocked_modules_remembered_between_plans_match_the_records(
    context: Context, folder: Path, probe: Probe
) -> None:
    """A save that changed nothing does not look at every record for one refused for a
    conflict; what the planner remembers instead stays equal to the records."""
    a = write(folder / "a.py", provider_source(1))
    b = write(folder / "b.py", provider_source(2))
    helper = write(folder / "helper.py", "X = 1\n")
    async with Reloader(context, [folder], watch=False) as reloader:
        planner, records = reloader._planner, reloader._loader.records

        async def check(path: Path) -> None:
            await reloader.reload(path)
            truth = {name for name, record in records.items() if record.blocker is not None}
            assert planner._any_blocked() == bool(truth)
            assert planner._blocked == truth

        await check(helper)
        assert reloader.status_of(b).state is ModuleState.FAILED  # refused: a serves
        write(b, provider_source(3))
        await check(b)  # refused again
        a.unlink()
        await check(a)  # a goes: b takes the seam
        assert reloader.status_of(b).state is ModuleState.ACTIVE
        write(a, provider_source(4))
        await check(a)  # a comes back: refused
        assert reloader.status_of(a).state is ModuleState.FAILED
        write(helper, "X = 2\n")
        await check(helper)
        b.unlink()
        await check(b)
        assert reloader.status_of(a).state is ModuleState.ACTIVE
        await check(helper)


async def test_a_save_of_a_path_in_a_sibling_folder_with_the_same_prefix_is_not_watched(
    tmp_path: Path,
) -> None:
    """``providers2/x.py`` is not under ``providers``: the string comparison keeps the
    separator."""
    folder = tmp_path / "providers"
    write(folder / "a.py", "X = 1\n")
    sibling = write(tmp_path / "providers2" / "x.py", "X = 1\n")
    async with Reloader(Context("noop"), [folder], watch=False) as reloader:
        with pytest.raises(ReloadPathError):
            await reloader.reload(sibling)
        assert reloader._index._watches(folder / "a.py")
        assert reloader._index._watches(folder)
        assert not reloader._index._watches(sibling)
        assert not reloader._index._watches(tmp_path / "providers2")
        assert not reloader._index._watches(folder / "pkg" / "__pycache__" / "m.py")
        assert not reloader._index._watches(folder / ".git" / "m.py")
        assert not reloader._index._watches(Path(os.sep))


async def test_a_module_imported_on_demand_and_refused_is_remembered_as_blocked(
    context: Context, tmp_path: Path, probe: Probe
) -> None:
    """A single-file root's sibling joins the batch that first imports it, outside the plan;
    refused there (the application provides the seam), it is retried once the
    application's registration goes — at a save that changed nothing."""
    from hotseam.interaction import USER_INTERACTION
    from hotseam.providers.scripted import ScriptedProvider

    main = write(tmp_path / "main.py", "X = 1\n")
    sibling = write(tmp_path / "sibling.py", provider_source(2))
    registration = context.provide(USER_INTERACTION, ScriptedProvider(["app"], name="app"))
    async with Reloader(context, [main], watch=False) as reloader:
        planner, records = reloader._planner, reloader._loader.records
        assert planner._any_blocked() is False
        write(main, "import sibling\n")
        await reloader.reload(main)
        assert reloader.status_of(sibling).error.phase == "conflict"  # type: ignore[union-attr]
        assert planner._any_blocked() is True
        assert (
            planner._blocked
            == {"sibling"}
            == {name for name, record in records.items() if record.blocker is not None}
        )
        await registration.dispose()
        write(main, "import sibling\n")  # the same content
        result = await reloader.reload(main)
        assert ("sibling", 1) in [(c.module, c.generation) for c in result.committed]
        assert planner._any_blocked() is False
