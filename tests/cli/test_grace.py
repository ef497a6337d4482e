"""A deleted module file that is back within the grace period is reloaded, not unloaded."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import anyio
import pytest

from hotseam import Context, Seam
from hotseam.cli._grace import GraceWatcher
from hotseam.reload import (
    ChangeKind,
    FileChange,
    ModuleState,
    ReloadCommitted,
    Reloader,
    Watcher,
    WatchfilesWatcher,
    WatchRoot,
)

pytestmark = pytest.mark.anyio

NAMES: Seam[object] = Seam("grace-test")
ANNOUNCING = """
import types

from grace_probe import NAMES


def setup(scope):
    scope.provide(NAMES, types.SimpleNamespace(version={version}))
"""


@pytest.fixture(name="seam")
def _seam() -> Iterator[Seam[object]]:
    """``from grace_probe import NAMES`` in a provider module gives it :data:`NAMES`."""
    sys.modules["grace_probe"] = module = ModuleType("grace_probe")
    module.NAMES = NAMES  # type: ignore[attr-defined]
    yield NAMES
    del sys.modules["grace_probe"]


class Scripted:
    """A watcher whose batches the test sends."""

    def __init__(self) -> None:
        self.send, self.receive = anyio.create_memory_object_stream[Collection[FileChange]](10)

    @contextlib.asynccontextmanager
    async def open(
        self, roots: Sequence[WatchRoot]
    ) -> AsyncIterator[AsyncIterator[Collection[FileChange]]]:
        async with self.receive:
            yield self.receive


async def test_a_deletion_is_held_back_and_passed_on_as_it_ends(
    tmp_path: Path,
) -> None:
    """Deleted then re-created within the grace, and reported: only the re-creation is
    reported. Back without a report of its own: a modification once the grace has passed
    (the reloader reads it again). Deleted for good: the deletion, once the grace has
    passed."""
    back, gone, quiet = tmp_path / "back.py", tmp_path / "gone.py", tmp_path / "quiet.py"
    inner = Scripted()
    watcher = GraceWatcher(inner, grace=0.2)
    async with watcher.open([WatchRoot(tmp_path)]) as batches:
        started = anyio.current_time()
        await inner.send.send(
            [
                FileChange(ChangeKind.DELETED, back),
                FileChange(ChangeKind.DELETED, gone),
                FileChange(ChangeKind.DELETED, quiet),
            ]
        )
        quiet.write_text("x = 1\n")  # back with no event of its own
        back.write_text("x = 2\n")
        await inner.send.send([FileChange(ChangeKind.ADDED, back)])
        with anyio.fail_after(5):
            first = await batches.__anext__()
            later = {*await batches.__anext__(), *await batches.__anext__()}
        waited = anyio.current_time() - started
        await anyio.sleep(0.1)  # the holds all ended by now: nothing more may come
        with pytest.raises(anyio.WouldBlock):
            batches.receive_nowait()  # type: ignore[attr-defined]
    inner.send.close()
    assert list(first) == [FileChange(ChangeKind.ADDED, back)]
    assert later == {
        FileChange(ChangeKind.DELETED, gone),
        FileChange(ChangeKind.MODIFIED, quiet),
    }
    assert waited >= 0.2


class _DeletionsOnly:
    """A custom Watcher (the protocol is public) that reports only deletions: what the test
    pushes, nothing of the file system."""

    def __init__(self) -> None:
        self.send, self.receive = anyio.create_memory_object_stream[Collection[FileChange]](10)

    @contextlib.asynccontextmanager
    async def open(
        self, roots: Sequence[WatchRoot]
    ) -> AsyncIterator[AsyncIterator[Collection[FileChange]]]:
        async with self.send, self.receive:
            yield self.receive

    async def deleted(self, path: Path) -> None:
        await self.send.send([FileChange(ChangeKind.DELETED, path)])


@pytest.mark.parametrize("moved", ["file", "folder"])
async def test_a_return_a_custom_watcher_does_not_report_is_loaded(
    tmp_path: Path, moved: str, seam: Seam[object]
) -> None:
    """A custom watcher reports a module file (or the watched folder) deleted, and nothing
    of its return within the grace, with new content: once the grace has passed the
    reloader reads it again and loads the new content; nothing is unloaded."""
    folder = tmp_path / "providers"
    ui = folder / "ui.py"
    folder.mkdir()
    ui.write_text(ANNOUNCING.format(version=1))
    inner = _DeletionsOnly()
    context = Context("grace")
    watcher = GraceWatcher(inner, grace=0.2)
    with anyio.fail_after(5):
        async with Reloader(context, [folder], watcher=watcher) as reloader:
            async with reloader.events() as events:
                away = tmp_path / "away"
                os.rename(ui if moved == "file" else folder, away)
                await inner.deleted(ui if moved == "file" else folder)
                if moved == "file":
                    away.write_text(ANNOUNCING.format(version=2))
                else:
                    (away / "ui.py").write_text(ANNOUNCING.format(version=2))
                os.rename(away, ui if moved == "file" else folder)
                committed = await events.next(ReloadCommitted, module="ui")
            assert committed.generation == 2
            assert context.lookup(seam).version == 2  # type: ignore[attr-defined]
            assert [status.state for status in reloader.status()] == [ModuleState.ACTIVE]


async def test_with_the_native_watcher_a_return_within_the_grace_is_one_reload(
    tmp_path: Path, seam: Seam[object]
) -> None:
    """The real watcher reports a delete-then-write itself: the module is reloaded once,
    and never unloaded, also once every hold of the grace has ended."""
    folder = tmp_path / "providers"
    ui = folder / "ui.py"
    folder.mkdir()
    ui.write_text(ANNOUNCING.format(version=1))
    context = Context("grace")
    watcher = _Counted(WatchfilesWatcher(), grace=0.2)
    with anyio.fail_after(5):
        async with Reloader(context, [folder], watcher=watcher, coalesce=0) as reloader:
            async with reloader.events() as events:
                ui.unlink()
                ui.write_text(ANNOUNCING.format(version=2))
                committed = await events.next(ReloadCommitted, module="ui")
                await watcher.idle()
                result = await reloader.reload()
            assert (committed.generation, result.batch) == (2, None)
            assert watcher.holds  # the deletion was held
            assert context.lookup(seam).version == 2  # type: ignore[attr-defined]
            assert reloader.status_of(ui).generation == 2
            assert reloader.status_of(ui).state is ModuleState.ACTIVE


class _Counted(GraceWatcher):
    """The grace, telling when none of its holds is running."""

    def __init__(self, inner: Watcher, grace: float) -> None:
        super().__init__(inner, grace)
        self.holds = 0
        self._running = 0
        self._idle = anyio.Event()

    async def _hold(self, *args: Any, **kwargs: Any) -> None:
        self.holds += 1
        self._running += 1
        try:
            await super()._hold(*args, **kwargs)
        finally:
            self._running -= 1
            if not self._running:
                self._idle.set()

    async def idle(self) -> None:
        """Until a hold has run and none runs now."""
        while not self.holds or self._running:
            self._idle = anyio.Event()
            await self._idle.wait()


async def test_a_path_that_cannot_be_looked_at_is_not_taken_for_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its ``stat`` fails for another reason than "not there" (out of file descriptors): the
    watcher goes on, and the held deletion ends as a modification (the reloader's read
    decides) rather than an unload."""
    unsure = tmp_path / "unsure.py"
    real = os.stat

    def stat(path: Any, *args: Any, **kwargs: Any) -> Any:
        if os.fspath(path) == str(unsure):
            raise OSError(errno.EMFILE, "Too many open files", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    inner = Scripted()
    async with GraceWatcher(inner, grace=0.05).open([WatchRoot(tmp_path)]) as batches:
        await inner.send.send([FileChange(ChangeKind.MODIFIED, unsure)])
        await inner.send.send([FileChange(ChangeKind.DELETED, unsure)])
        with anyio.fail_after(5):
            assert list(await batches.__anext__()) == [FileChange(ChangeKind.MODIFIED, unsure)]
            assert list(await batches.__anext__()) == [FileChange(ChangeKind.MODIFIED, unsure)]
    inner.send.close()


async def test_no_grace_passes_deletions_at_once(tmp_path: Path) -> None:
    inner = Scripted()
    async with GraceWatcher(inner, grace=0).open([WatchRoot(tmp_path)]) as batches:
        await inner.send.send([FileChange(ChangeKind.DELETED, tmp_path / "x.py")])
        with anyio.fail_after(5):
            assert list(await batches.__anext__()) == [
                FileChange(ChangeKind.DELETED, tmp_path / "x.py")
            ]
    inner.send.close()


def test_the_grace_is_checked() -> None:
    with pytest.raises(ValueError, match="grace must be"):
        GraceWatcher(cast(Watcher, object()), grace=-1)
