"""The deletion grace of the Reloader (``deletion_grace=``): a module whose file is gone keeps
serving for the grace, whatever plans a reload meanwhile, and is unloaded only if its file is
still gone when the grace is over.

The real native watcher and real file operations; a reload by hand (``reload()``) is used
where the test must know that the reloader saw the file gone (it plans at once).
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import time
from collections.abc import AsyncIterator, Collection, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog
from tests._timing import scaled

from hotseam import Context
from hotseam.interaction import USER_INTERACTION
from hotseam.reload import (
    ChangeKind,
    EventStream,
    FileChange,
    ModuleState,
    ModuleUnloaded,
    ReloadAborted,
    ReloadCommitted,
    Reloader,
    ReloadEvent,
    WatchfilesWatcher,
    WatchOptions,
    WatchRoot,
)

from ._support import Probe
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
SLOW = """
import reload_probe


async def setup(scope):
    if {held}:
        await reload_probe.probe.hold()
"""


def _files(folder: Path, word: str = "teal") -> tuple[Path, Path, str]:
    """``words.py`` (a helper) and ``ui.py`` (a provider importing it); ``ui.py``'s source."""
    words = write(folder / "words.py", f"WORD = {word!r}\n")
    ui = write(folder / "ui.py", PROVIDER)
    return words, ui, ui.read_text()


def _word(context: Context) -> object:
    return getattr(context.lookup(USER_INTERACTION), "word", None)


async def _until_barrier(events: EventStream, folder: Path) -> list[ReloadEvent]:
    """Save a barrier module and return the events up to its commit (reloads are
    serialized: everything planned before it was applied by then; named to come last in
    its batch, whose events come in dependency order, ties by name)."""
    barrier = write(folder / "zz_barrier.py", f"TOKEN = {anyio.current_time()!r}\n")
    seen: list[ReloadEvent] = []
    with anyio.fail_after(scaled(10)):
        async for event in events:
            seen.append(event)
            if isinstance(event, ReloadCommitted) and event.path == barrier:
                return seen
    raise AssertionError(f"the events ended before the barrier: {seen}")


def _of(kind: type[ReloadEvent], seen: list[ReloadEvent]) -> list[str]:
    return [getattr(event, "module", "") for event in seen if isinstance(event, kind)]


async def test_a_module_gone_for_good_serves_for_the_grace_then_is_unloaded(
    tmp_path: Path,
) -> None:
    """Found gone (here by a reload by hand): held, logged once; it serves until the grace is
    over, then it is unloaded in a reload of its own."""
    folder = tmp_path / "providers"
    _, ui, _ = _files(folder)
    context = Context("grace")
    with structlog.testing.capture_logs() as logs:
        async with (
            Reloader(context, [folder], watch=WatchOptions(deletion_grace=GRACE)) as reloader,
            reloader.events() as events,
        ):
            serving = context.lookup(USER_INTERACTION)
            ui.unlink()
            found_gone = anyio.current_time()
            result = await reloader.reload(ui)
            assert (result.batch, result.unloaded) == (None, ())
            assert context.lookup(USER_INTERACTION) is serving
            assert reloader.status_of(ui).state is ModuleState.ACTIVE
            with anyio.fail_after(scaled(5)):
                unloaded = await events.next(ModuleUnloaded, module="ui")
            assert anyio.current_time() - found_gone >= GRACE
            assert unloaded.generation == 1
            assert context.lookup(USER_INTERACTION) is None
            assert reloader.status_of(ui).state is ModuleState.UNLOADED
    held = [entry for entry in logs if entry["event"] == "reload.held"]
    assert [entry["paths"] for entry in held] == [[str(ui)]]
    assert "kept serving for the deletion grace (0.4 s)" in held[0]["summary"]


async def test_without_a_grace_a_module_gone_is_unloaded_at_once(tmp_path: Path) -> None:
    """The library's default (``deletion_grace=0``): the plan that finds the file gone
    unloads it, as a test driving reloads by hand expects."""
    folder = tmp_path / "providers"
    _, ui, _ = _files(folder)
    context = Context("grace")
    async with Reloader(context, [folder], watch=False) as reloader:
        ui.unlink()
        result = await reloader.reload(ui)
        assert [event.module for event in result.unloaded] == ["ui"]
        assert context.lookup(USER_INTERACTION) is None


@pytest.mark.parametrize(
    ("grace", "error"),
    [
        (-1, ValueError),
        (math.inf, ValueError),
        (math.nan, ValueError),
        ("2", TypeError),
        (True, TypeError),
    ],
)
def test_the_grace_is_checked(tmp_path: Path, grace: Any, error: type[Exception]) -> None:
    with pytest.raises(
        error, match=rf"deletion_grace must be a .*number of seconds >= 0, got {grace!r}"
    ):
        Reloader(Context("grace"), [tmp_path], watch=WatchOptions(deletion_grace=grace))


class _Scripted:
    """A custom Watcher (the protocol is public) that reports what the test sends, nothing
    of the file system: a return it does not report."""

    def __init__(self) -> None:
        self.send, self.receive = anyio.create_memory_object_stream[Collection[FileChange]](10)

    @contextlib.asynccontextmanager
    async def open(
        self, roots: Sequence[WatchRoot]
    ) -> AsyncIterator[AsyncIterator[Collection[FileChange]]]:
        async with self.send, self.receive:
            yield self.receive


@pytest.mark.parametrize("moved", ["file", "folder"])
async def test_a_return_the_watcher_does_not_report_is_loaded_when_the_grace_ends(
    tmp_path: Path, moved: str
) -> None:
    """A watcher reports a module file (or the watched folder) deleted, and nothing of its
    return within the grace, with new content: when the grace ends the reloader reads it
    again and loads the new content; nothing is unloaded. (A barrier module in a second
    watched folder, reported with the deletion, shows when that report was planned.)"""
    folder = tmp_path / "providers"
    _, ui, source = _files(folder)
    other = tmp_path / "other"
    barrier = write(other / "barrier.py", "TOKEN = 1\n")
    watcher = _Scripted()
    context = Context("grace")
    with anyio.fail_after(scaled(5)):
        async with (
            Reloader(
                context, [folder, other], watch=WatchOptions(watcher=watcher, deletion_grace=0.2)
            ) as reloader,
            reloader.events() as events,
        ):
            away = tmp_path / "away"
            gone = ui if moved == "file" else folder
            os.rename(gone, away)
            barrier.write_text("TOKEN = 2\n")
            await watcher.send.send(
                [FileChange(ChangeKind.DELETED, gone), FileChange(ChangeKind.MODIFIED, barrier)]
            )
            await events.next(ReloadCommitted, module="barrier")  # the deletion was planned
            assert _word(context) == "teal"  # held
            if moved == "file":
                away.write_text(source.replace("word = words.WORD", 'word = "v2"'))
            else:
                write(away / "words.py", 'WORD = "plum"\n')
            os.rename(away, gone)
            seen: list[ReloadEvent] = []
            async for event in events:
                seen.append(event)
                if isinstance(event, ReloadCommitted) and event.module == "ui":
                    break
            assert _of(ModuleUnloaded, seen) == []
            assert _word(context) == ("v2" if moved == "file" else "plum")
            states = {status.module: status.state for status in reloader.status()}
            assert states == dict.fromkeys(["barrier", "ui", "words"], ModuleState.ACTIVE)


async def test_a_delete_then_write_is_one_reload_and_nothing_at_the_grace_end(
    tmp_path: Path,
) -> None:
    """The native watcher reports the deletion and the new file: one reload of the new
    content, never an unload, and nothing more when the grace is over."""
    folder = tmp_path / "providers"
    _, ui, source = _files(folder)
    context = Context("grace")
    async with (
        Reloader(
            context, [folder], watch=WatchOptions(deletion_grace=GRACE, coalesce=0)
        ) as reloader,
        reloader.events() as events,
    ):
        ui.unlink()
        ui.write_text(source.replace("word = words.WORD", 'word = "v2"'))
        with anyio.fail_after(scaled(5)):
            committed = await events.next(ReloadCommitted, module="ui")
        assert (committed.generation, _word(context)) == (2, "v2")
        await anyio.sleep(GRACE + 0.2)  # the time of the grace: nothing may happen at its end
        seen = await _until_barrier(events, folder)
        assert _of(ModuleUnloaded, seen) == _of(ReloadCommitted, seen)[:-1] == []
        assert reloader.status_of(ui).generation == 2


@pytest.mark.parametrize("changed", [False, True], ids=["same", "changed"])
async def test_a_helper_and_its_importer_both_away_and_back(tmp_path: Path, changed: bool) -> None:
    """``git stash`` / ``git checkout`` takes a helper and the provider importing it away
    and brings them back: nothing is unloaded; unchanged, nothing is even re-executed;
    with a new helper, both are reloaded once and the provider uses it."""
    folder = tmp_path / "providers"
    words, ui, source = _files(folder)
    context = Context("grace")
    async with (
        Reloader(context, [folder], watch=WatchOptions(deletion_grace=GRACE)) as reloader,
        reloader.events() as events,
    ):
        serving = context.lookup(USER_INTERACTION)
        words.unlink()
        ui.unlink()
        result = await reloader.reload()  # both found gone: both held
        assert (result.batch, context.lookup(USER_INTERACTION)) == (None, serving)
        write(words, f"WORD = {'plum' if changed else 'teal'!r}\n")
        ui.write_text(source)
        seen = await _until_barrier(events, folder)
        await anyio.sleep(GRACE)  # past the grace: nothing more
        seen += await _until_barrier(events, folder)
        assert _word(context) == ("plum" if changed else "teal")
        assert (context.lookup(USER_INTERACTION) is serving) is not changed
    assert _of(ModuleUnloaded, seen) == []
    assert _of(ReloadAborted, seen) == []
    reloaded = sorted(set(_of(ReloadCommitted, seen)) - {"zz_barrier"})
    assert reloaded == (["ui", "words"] if changed else [])


async def test_a_module_executed_meanwhile_gets_the_held_module_it_imports(
    tmp_path: Path,
) -> None:
    """``words.py`` is held; ``ui.py`` saved meanwhile imports the ``words`` that serves (not
    an ImportError). When the grace ends with ``words.py`` still gone it is unloaded, and
    ``ui.py`` fails to import it, keeping its generation (as for any deleted module)."""
    folder = tmp_path / "providers"
    words, ui, source = _files(folder)
    context = Context("grace")
    async with (
        Reloader(context, [folder], watch=WatchOptions(deletion_grace=GRACE)) as reloader,
        reloader.events() as events,
    ):
        words.unlink()
        await reloader.reload(words)
        ui.write_text(source + "\nSAVED = True\n")
        with anyio.fail_after(scaled(5)):
            committed = await events.next(ReloadCommitted, module="ui")
            assert (committed.generation, _word(context)) == (2, "teal")
            await events.next(ModuleUnloaded, module="words")
            aborted = await events.next(ReloadAborted, module="ui")
        assert aborted.error.type == "ModuleNotFoundError"
        assert reloader.status_of(ui).generation == 2
        assert _word(context) == "teal"


@pytest.mark.parametrize("back", [False, True], ids=["still-gone", "back-meanwhile"])
async def test_the_grace_ending_while_a_reload_runs(
    tmp_path: Path, probe: Probe, back: bool
) -> None:
    """The grace of ``ui.py`` ends while a reload of another module is in its ``setup``:
    the reload is not disturbed; once it committed, ``ui.py`` is unloaded if still gone (in
    a reload of its own), and left serving if it came back meanwhile."""
    folder = tmp_path / "providers"
    _, ui, source = _files(folder)
    slow = write(folder / "slow.py", SLOW.format(held=False))
    probe.values.update(entered=anyio.Event(), gate=anyio.Event())
    context = Context("grace")
    async with (
        Reloader(context, [folder], watch=WatchOptions(deletion_grace=GRACE)) as reloader,
        reloader.events() as events,
    ):
        ui.unlink()
        found_gone = anyio.current_time()
        assert (await reloader.reload(ui)).unloaded == ()
        slow.write_text(SLOW.format(held=True))
        with anyio.fail_after(scaled(5)):
            await probe.values["entered"].wait()
        await anyio.sleep(found_gone + GRACE + 0.1 - anyio.current_time())  # the grace ends
        assert context.lookup(USER_INTERACTION) is not None  # the reload holds the lock
        if back:
            ui.write_text(source)
        probe.values["gate"].set()
        seen = await _until_barrier(events, folder)
        assert _word(context) == ("teal" if back else None)
    committed = next(e for e in seen if isinstance(e, ReloadCommitted) and e.module == "slow")
    unloaded = [e for e in seen if isinstance(e, ModuleUnloaded)]
    if back:
        assert unloaded == []
    else:
        assert [(e.module, e.generation) for e in unloaded] == [("ui", 1)]
        batches = [committed.batch, unloaded[0].batch, seen[-1].batch]
        assert None not in batches
        assert sorted(batch or 0 for batch in batches) == batches  # in order...
        assert len(set(batches)) == 3  # ...and in a reload of its own


async def test_a_folder_replaced_without_a_module_keeps_it_for_the_grace(tmp_path: Path) -> None:
    """A checkout caught half way: the folder is replaced (``rm -rf`` and made again) with a
    new helper but without ``ui.py`` yet, then ``ui.py`` lands. The listing of the new folder
    holds ``ui.py`` instead of unloading it, and it is reloaded once for the new helper."""
    folder = tmp_path / "providers"
    words, ui, source = _files(folder)
    context = Context("grace")
    async with (
        Reloader(
            context,
            [folder],
            watch=WatchOptions(watcher=WatchfilesWatcher(root_check=0.1), deletion_grace=GRACE),
        ) as reloader,
        reloader.events() as events,
    ):
        shutil.rmtree(folder)
        write(words, 'WORD = "plum"\n')
        with anyio.fail_after(scaled(5)):
            await events.next(ReloadCommitted, module="words")  # the new folder was listed
        assert _word(context) == "teal"  # ui.py is held (stale: its helper changed)
        ui.write_text(source)
        seen = await _until_barrier(events, folder)
        assert _of(ModuleUnloaded, seen) == []
        assert _of(ReloadCommitted, seen) == ["ui", "zz_barrier"]
        assert _word(context) == "plum"


@pytest.mark.parametrize("moved", ["file", "folder"])
async def test_a_return_within_the_grace_is_honoured_when_hotseam_gets_to_it_late(
    tmp_path: Path, moved: str
) -> None:
    """A busy machine: ``ui.py`` (or its whole folder) is held, and is back within the grace,
    but the loop gets to nothing until the grace is over (held here by a blocking sleep: the
    return's event, never reported by this watcher, is as late as an event can be). The
    first plan made then, for another reason (a reload of another module by hand), decides
    by what is on disk: ``ui.py`` is back, so it keeps serving and is never unloaded."""
    folder = tmp_path / "providers"
    _, ui, _ = _files(folder)
    other = tmp_path / "other"
    barrier = write(other / "barrier.py", "TOKEN = 1\n")
    grace = 0.05  # what the loop is held for must outlast it, and a held loop costs the suite
    watcher = _Scripted()
    context = Context("grace")
    async with Reloader(
        context, [folder, other], watch=WatchOptions(watcher=watcher, deletion_grace=grace)
    ) as reloader:
        serving = context.lookup(USER_INTERACTION)
        away = tmp_path / "away"
        gone = ui if moved == "file" else folder
        os.rename(gone, away)
        assert (await reloader.reload(None if moved == "folder" else ui)).unloaded == ()
        os.rename(away, gone)  # back within the grace...
        # ...and the loop gets to it only after the grace ends: blocked on purpose, as a
        # busy machine blocks it
        time.sleep(grace * 3)  # noqa: ASYNC251
        barrier.write_text("TOKEN = 2\n")
        result = await reloader.reload(barrier)  # the first plan past the grace: another's
        assert result.unloaded == ()
        assert [e.module for e in result.events if isinstance(e, ReloadCommitted)] == ["barrier"]
        again = await reloader.reload(ui)  # and any plan since: back, and unchanged
        assert (again.batch, again.unloaded) == (None, ())
        assert context.lookup(USER_INTERACTION) is serving
        assert reloader.status_of(ui).state is ModuleState.ACTIVE
