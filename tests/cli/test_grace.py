"""A deleted module file that is back within the grace period is reloaded, not unloaded."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Collection, Sequence
from pathlib import Path
from typing import cast

import anyio
import pytest

from hotseam.cli._grace import GraceWatcher
from hotseam.reload import ChangeKind, FileChange, Watcher, WatchRoot

pytestmark = pytest.mark.anyio


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


async def test_a_deletion_is_held_back_and_dropped_when_the_file_returns(
    tmp_path: Path,
) -> None:
    """Deleted then re-created within the grace: only the re-creation is reported. Deleted
    for good: the deletion is reported once the grace has passed."""
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
        quiet.write_text("x = 1\n")  # back with no event (same content, say): not reported
        back.write_text("x = 2\n")
        await inner.send.send([FileChange(ChangeKind.ADDED, back)])
        with anyio.fail_after(5):
            first = await batches.__anext__()
            second = await batches.__anext__()
        waited = anyio.current_time() - started
        await anyio.sleep(0.1)  # the holds all ended by now: nothing more may come
        with pytest.raises(anyio.WouldBlock):
            batches.receive_nowait()  # type: ignore[attr-defined]
    inner.send.close()
    assert list(first) == [FileChange(ChangeKind.ADDED, back)]
    assert list(second) == [FileChange(ChangeKind.DELETED, gone)]
    assert waited >= 0.2


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
