"""Hints for the mistakes newcomers make in a watched folder, read off the reload events.

The reload report says *what* failed; these lines say, once, what to do: a module without
``setup(scope)`` does nothing; ``from . import x`` in a plain folder fails with "no known
parent package"; ``Address already in use`` on a fixed port means the old generation holds
it while the new one sets up (``scope.carry`` keeps one socket for every generation)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio

from ..reload import (
    ModuleState,
    ReloadAborted,
    ReloadCommitted,
    Reloader,
    ReloadEvent,
    display_path,
)
from ._agent import shown_location

SETTLE = 0.2
"""Seconds without events after which a batch counts as finished (for the helper hint)."""


class Hints:
    """Watch ``reloader``'s events (from creation, so the first load is included) and log a
    hint the first time each mistake shows up."""

    def __init__(self, reloader: Reloader, log: Any) -> None:
        self._reloader = reloader
        self._log = log
        self._events = reloader.events()
        self._given: set[tuple[str, str]] = set()

    async def run(self) -> None:
        helpers: set[str] = set()
        async with self._events as events:
            while True:
                try:
                    event: ReloadEvent | None = await events.__anext__()
                except StopAsyncIteration:
                    return
                while event is not None:
                    await self._note(event, helpers)
                    event = None
                    with anyio.move_on_after(SETTLE):
                        try:
                            event = await events.__anext__()
                        except StopAsyncIteration:
                            return
                if helpers:
                    self._unused_helpers(helpers)
                    helpers.clear()

    async def _note(self, event: ReloadEvent, helpers: set[str]) -> None:
        if isinstance(event, ReloadCommitted) and event.module_kind == "helper":
            helpers.add(event.module)
        elif isinstance(event, ReloadAborted):
            error = event.error
            if _ADDRESS_IN_USE.search(error.message) and error.phase in ("exec", "setup"):
                self._address_in_use(event)
            elif error.type == "ImportError" and "no known parent package" in error.message:
                folder = event.path.parent
                written, instead = await _relative_import(error.location)
                self._hint(
                    "relative-import",
                    event.path,
                    f"{_where(event)}: "
                    f"{display_path(folder)}/ "
                    "is a plain folder (no __init__.py), so its modules are top-level: write "
                    f"'{instead}' instead of '{written}', or add an __init__.py to make it a "
                    "package",
                )

    def _address_in_use(self, event: ReloadAborted) -> None:
        where = _where(event)
        carry = (
            "create the listening socket once with scope.carry('listener', make_socket) and "
            "every generation gets the same bound socket (see 'Carrying state and resources "
            "across reloads' in docs/providers.md)"
        )
        if event.kept_generation is not None:
            self._hint(
                "address-in-use",
                event.path,
                f"{where}: the address is held by generation {event.kept_generation} of this "
                "module, which serves until the new one is set up (a reload never leaves a "
                f"gap): {carry}",
            )
        else:
            self._hint(
                "address-in-use",
                event.path,
                f"{where}: the address is in use, by another process or by a module that "
                "still holds it (one being unloaded, or renamed); if this module serves it, "
                f"{carry}, so that its next generations keep it",
            )

    def _unused_helpers(self, names: set[str]) -> None:
        status = self._reloader.status()
        imported = {
            name
            for item in status
            if item.kind == "provider" and item.state is ModuleState.ACTIVE
            for name in item.imports
        }
        for item in status:
            if item.module in names and item.kind == "helper" and item.module not in imported:
                self._hint(
                    "helper",
                    item.path,
                    f"{display_path(item.path)}: no setup(scope) found; loaded as a helper "
                    "(no provider imports it, so it provides nothing)",
                )

    def _hint(self, kind: str, path: Path, text: str) -> None:
        if (kind, str(path)) in self._given:
            return
        self._given.add((kind, str(path)))
        self._log.info(f"hint: {text}")


_ADDRESS_IN_USE = re.compile(r"address already in use", re.IGNORECASE)
"""EADDRINUSE as the socket module and asyncio's ``create_server`` word it."""

_RELATIVE = re.compile(r"^\s*from\s+\.+([\w.]*)\s+import\s+([\w, ]+)")


async def _relative_import(location: str | None) -> tuple[str, str]:
    """The relative import at ``location`` (``file:line``) and its absolute form."""
    fallback = ("from . import name", "import name")
    file, _, line = (location or "").rpartition(":")
    if not file or not line.isdigit():
        return fallback
    try:
        lines = (await anyio.Path(file).read_text(encoding="utf-8")).splitlines()
        found = _RELATIVE.match(lines[int(line) - 1])
    except (OSError, UnicodeDecodeError, IndexError):
        return fallback
    if found is None:
        return fallback
    module, names = found.group(1), found.group(2).strip()
    written = lines[int(line) - 1].strip()
    return written, (f"from {module} import {names}" if module else f"import {names}")


def _where(event: ReloadAborted) -> str:
    """The failure's ``file:line`` as the reload report shows it, else the module's path."""
    location = event.error.location
    return shown_location(location) if location else display_path(event.path)
