"""Generations of a provider, loaded and hot-reloaded by a real :class:`Reloader`.

The provider module the reloader loads is the same for every surface: its ``setup`` hands
its scope to the surface under test (:func:`install`), which provides the provider there.
A reload commits a new generation exactly as a save does (prepare a staged scope, swap,
dispose the old generation, hand carried values over, activate the new one).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from hotseam import Scope
from hotseam.reload import Reloader

from ._surface import Surface

_serving: list[Surface] = []

MODULE = """
import {name} as _generations

GENERATION = {generation}


def setup(scope):
    _generations.install(scope)
"""


def install(scope: Scope) -> None:
    """What the provider module's ``setup`` does: the surface under test installs."""
    _serving[-1].install(scope)


def _save(module: Path, generation: int) -> None:
    """Write the provider module of ``generation`` (a tiny local file: no thread needed)."""
    module.parent.mkdir(exist_ok=True)
    module.write_text(MODULE.format(name=__name__, generation=generation))


class Generations:
    """The reloader serving a surface's provider module."""

    def __init__(self, reloader: Reloader, module: Path) -> None:
        self.reloader = reloader
        self._module = module
        self._generation = 1

    async def reload(self) -> None:
        """Save the module anew and reload it: the next generation is committed."""
        self._generation += 1
        _save(self._module, self._generation)
        result = await self.reloader.reload()
        assert result.committed, result


@asynccontextmanager
async def generations(surface: Surface, folder: Path) -> AsyncIterator[Generations]:
    """The provider module loaded into ``surface.context`` (generation 1), until the end."""
    module = folder / "contract_ui.py"
    _save(module, 1)
    _serving.append(surface)
    try:
        async with Reloader(surface.context, folder, watch=False) as reloader:
            assert surface.generation == 1, "the provider module did not load: see the log"
            yield Generations(reloader, module)
    finally:
        _serving.remove(surface)
