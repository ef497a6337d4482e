"""Helpers of the reload tests: the probe, provider sources, a scripted watcher, a virtual
clock."""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import trio.testing
from anyio.streams.memory import MemoryObjectSendStream

from hotseam import Seam
from hotseam.interaction import USER_INTERACTION
from hotseam.reload import ChangeKind, FileChange, WatchRoot

OTHER_SEAM: Seam[object] = Seam("probe-seam")


@dataclass
class Probe:
    """What provider modules under test report (``import reload_probe``)."""

    log: list[tuple[Any, ...]] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    seam: Seam[object] = OTHER_SEAM

    def entries(self, kind: str) -> list[Any]:
        """The second field of every log entry whose first field is ``kind``."""
        return [entry[1] for entry in self.log if entry[0] == kind]

    async def live(self, version: int) -> None:
        """A provider's background task: logs that it started, then runs until cancelled."""
        self.log.append(("live", version))
        try:
            await anyio.sleep_forever()
        finally:
            self.log.append(("stopped", version))

    def note_serving(self, kind: str) -> None:
        """Log the name of the provider serving ``values["context"]`` right now."""
        provider = self.values["context"].lookup(USER_INTERACTION)
        self.log.append((kind, getattr(provider, "name", None)))

    def fail(self) -> None:
        """A disposer that raises."""
        raise RuntimeError("disposer failed")

    async def overrun(self) -> None:
        """A disposer that never finishes on its own."""
        try:
            await anyio.sleep_forever()
        finally:
            self.log.append(("overrun cancelled", 1))

    async def hold(self) -> None:
        """A disposer that waits for ``values["gate"]`` (after setting ``values["entered"]``)."""
        self.values["entered"].set()
        await self.values["gate"].wait()


def provider_source(
    version: int,
    *,
    reply: str = "'answer v{version}'",
    setup_lines: Sequence[str] = (),
    module_lines: Sequence[str] = (),
) -> str:
    """A provider module: a ScriptedProvider whose every reply is ``reply``; logs to the probe.

    ``reply`` is a Python expression (``Reply.never()`` keeps asks open); ``module_lines`` run
    at import, ``setup_lines`` at the end of ``setup(scope)``.
    """
    lines = [
        "import reload_probe",
        "from hotseam.interaction import USER_INTERACTION",
        "from hotseam.providers.scripted import Reply, ScriptedProvider",
        "",
        f"VERSION = {version}",
        "reload_probe.log.append(('exec', VERSION))",
        *module_lines,
        f"provider = ScriptedProvider(lambda request: {reply.format(version=version)},"
        f" name='v{version}')",
        "",
        "",
        "def setup(scope):",
        "    reload_probe.log.append(('setup', VERSION))",
        "    scope.defer(lambda: reload_probe.log.append(('dispose', VERSION)))",
        "    scope.provide(USER_INTERACTION, provider)",
        *(f"    {line}" for line in setup_lines),
    ]
    return "\n".join(lines) + "\n"


class ScriptedWatcher:
    """A Watcher whose changes the test pushes (no file system involved)."""

    def __init__(self) -> None:
        self.roots: list[WatchRoot] = []
        self._send: MemoryObjectSendStream[Collection[FileChange]] | None = None

    def open(
        self, roots: Sequence[WatchRoot]
    ) -> Any:  # AbstractAsyncContextManager[AsyncIterator[Collection[FileChange]]]
        return self._open(roots)

    @asynccontextmanager
    async def _open(
        self, roots: Sequence[WatchRoot]
    ) -> AsyncIterator[AsyncIterator[Collection[FileChange]]]:
        self.roots = list(roots)
        send, receive = anyio.create_memory_object_stream[Collection[FileChange]](100)
        self._send = send
        async with send, receive:
            yield receive

    async def push(self, *paths: Path, kind: ChangeKind = ChangeKind.MODIFIED) -> None:
        """Report ``paths`` as changed."""
        assert self._send is not None, "the reloader has not opened the watcher"
        await self._send.send({FileChange(kind, path) for path in paths})


class _JumpingSelector(selectors.DefaultSelector):
    """The default selector, except that a wait for a timer does not wait: the clock of
    :class:`VirtualTimeLoop` jumps to the timer instead (a wait for I/O alone, with no timer
    due, still waits)."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or (timeout is not None and timeout <= 0):
            return ready
        if timeout is None:  # no timer: wait for I/O (a thread's result, a signal)
            return super().select(None)
        self.now += timeout
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio loop on a virtual clock: time stands still while any task can run and
    jumps to the next timer once every task waits (trio's ``MockClock(autojump_threshold=0)``
    for asyncio). A behaviour about time on ``anyio.current_time()`` (a coalescing window, a
    backoff) then runs the same on any machine; give it as the asyncio backend's
    ``loop_factory`` (:func:`virtual_backend`)."""

    def __init__(self) -> None:
        self._virtual = _JumpingSelector()
        super().__init__(self._virtual)

    def time(self) -> float:
        return self._virtual.now


def virtual_backend(name: str) -> tuple[str, dict[str, Any]]:
    """The ``anyio_backend`` of ``name`` ("asyncio" or "trio") on a virtual clock (see
    :class:`VirtualTimeLoop`). Work handed to a thread does not hold that clock back: a test
    on it keeps its code on the loop (small local module files, inert module bodies)."""
    if name == "asyncio":
        return "asyncio", {"debug": True, "loop_factory": VirtualTimeLoop}
    return "trio", {"clock": trio.testing.MockClock(autojump_threshold=0)}
