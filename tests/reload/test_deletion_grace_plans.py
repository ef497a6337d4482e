"""What the daemon torture (bench/torture_daemon.py) found, each reduced to one case.

The real native watcher and a real ``Reloader`` with the deletion grace of ``hotseam
dev``/``run`` (``deletion_grace``): a module file deleted and back within the grace must
never be unloaded, whatever plans a reload meanwhile (its provider keeps serving, its
question is not withdrawn), and is re-set-up only when it changed or what it imports did.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from tests._timing import scaled

from hotseam import Context
from hotseam.interaction import USER_INTERACTION
from hotseam.reload import (
    EventStream,
    ModuleState,
    ModuleUnloaded,
    ReloadCommitted,
    Reloader,
    ReloadEvent,
    WatchfilesWatcher,
    WatchOptions,
)

from .conftest import write

pytestmark = pytest.mark.anyio

GRACE = 0.4
PROVIDER = """
import words
from hotseam.interaction import USER_INTERACTION


class Provider:
    word = words.WORD

    async def ask(self, request):
        raise NotImplementedError


def setup(scope):
    scope.provide(USER_INTERACTION, Provider())
"""


def _reloader(context: Context, folder: Path) -> Reloader:
    watcher = WatchfilesWatcher(root_check=0.1)
    return Reloader(context, [folder], watch=WatchOptions(watcher=watcher, deletion_grace=GRACE))


async def _until_barrier(events: EventStream, folder: Path) -> list[ReloadEvent]:
    """Once the grace of every deletion made so far has passed: save a barrier module and
    return the events up to its commit (reloads are serialized: everything earlier was
    applied by then)."""
    await anyio.sleep(GRACE + 0.3)  # the holds end; what they release is reloaded
    barrier = write(folder / "barrier.py", "TOKEN = 1\n")
    seen: list[ReloadEvent] = []
    with anyio.fail_after(scaled(10)):
        async for event in events:
            seen.append(event)
            if isinstance(event, ReloadCommitted) and event.path == barrier:
                return seen
    raise AssertionError(f"the events ended before the barrier: {seen}")


@pytest.mark.parametrize("gone", ["file", "folder"])
async def test_a_save_then_a_deletion_in_one_batch_is_held_by_the_grace(
    tmp_path: Path, gone: str
) -> None:
    """Saved, then deleted (or its folder moved away) microseconds later: the watcher reports
    ``modified`` and ``deleted`` in one batch. Whatever the report says, the plan finds the
    file gone: it is held, not unloaded, and unchanged when it is back (never re-set-up)."""
    folder = tmp_path / "providers"
    write(folder / "words.py", 'WORD = "teal"\n')
    source = write(folder / "ui.py", PROVIDER).read_text()
    context = Context("findings")
    async with _reloader(context, folder) as reloader, reloader.events() as events:
        serving = context.lookup(USER_INTERACTION)
        assert serving is not None
        (folder / "ui.py").write_text(source)  # the same bytes: a save that changes nothing
        if gone == "file":
            (folder / "ui.py").unlink()
            await anyio.sleep(GRACE / 3)
            (folder / "ui.py").write_text(source)
        else:
            os.rename(folder, tmp_path / "providers.away")
            await anyio.sleep(GRACE / 3)
            os.rename(tmp_path / "providers.away", folder)
        seen = await _until_barrier(events, folder)
        assert [e for e in seen if isinstance(e, ModuleUnloaded)] == []
        assert context.lookup(USER_INTERACTION) is serving  # never replaced either


async def test_a_helper_saved_while_its_importer_is_within_the_grace_keeps_the_importer(
    tmp_path: Path,
) -> None:
    """``git checkout`` of a branch that changes ``words.py`` and lacks ``ui.py``, and back
    within the grace (or a ``git pull`` that writes the helper between deleting and writing
    ``ui.py``): ``ui.py`` must be reloaded for the new helper, never unloaded. (The grace
    was a wrapper of the watcher: the helper's plan re-executed ``ui.py``, found it gone and
    unloaded it at once.)"""
    folder = tmp_path / "providers"
    write(folder / "words.py", 'WORD = "teal"\n')
    source = write(folder / "ui.py", PROVIDER).read_text()
    context = Context("findings")
    async with _reloader(context, folder) as reloader, reloader.events() as events:
        (folder / "ui.py").unlink()
        write(folder / "words.py", 'WORD = "plum"\n')
        await anyio.sleep(GRACE / 3)
        (folder / "ui.py").write_text(source)
        seen = await _until_barrier(events, folder)
        unloaded = [e.module for e in seen if isinstance(e, ModuleUnloaded)]
        assert unloaded == [], f"unloaded within the grace: {unloaded}"
        assert getattr(context.lookup(USER_INTERACTION), "word", None) == "plum"


@pytest.mark.parametrize("gone", ["file", "folder"])
async def test_an_explicit_reload_within_the_grace_keeps_the_module(
    tmp_path: Path, gone: str
) -> None:
    """A deploy script's ``hotseam reload`` lands while ``git`` has the file (or the whole
    folder) away for a moment: the module must keep serving, as the grace promises. (The
    grace held back only the watcher's events: the explicit reload unloaded it.)"""
    folder = tmp_path / "providers"
    write(folder / "words.py", 'WORD = "teal"\n')
    source = write(folder / "ui.py", PROVIDER).read_text()
    context = Context("findings")
    async with _reloader(context, folder) as reloader, reloader.events() as events:
        serving = context.lookup(USER_INTERACTION)
        if gone == "file":
            (folder / "ui.py").unlink()
        else:
            os.rename(folder, tmp_path / "providers.away")
        result = await reloader.reload(force=True)  # what SIGHUP and `hotseam reload` do
        if gone == "file":
            (folder / "ui.py").write_text(source)
        else:
            os.rename(tmp_path / "providers.away", folder)
        seen = await _until_barrier(events, folder)
        assert [e.module for e in result.unloaded] == []
        assert [e for e in seen if isinstance(e, ModuleUnloaded)] == []
        assert serving is not None
        assert context.lookup(USER_INTERACTION) is not None
        assert reloader.status_of(folder / "ui.py").state is ModuleState.ACTIVE
