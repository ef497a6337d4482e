"""ReloadDriver: hot reload in a test, with no watcher and no sleeps (``docs/testing.md``).

A test writes module source (or copies its ``providers/``) into a directory and asks for a
reload, which has fully happened (new generation serving, or aborted with the old one
untouched) when the call returns."""

from __future__ import annotations

import os
import shutil
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, TracebackType

from .._core import Context
from ..reload import ModuleState, ModuleStatus, Reloader, ReloadResult
from ._sites import add_origin, name_originals
from ._strict import StrictModeError, leftovers, snapshot
from ._zombies import Generation, Zombie, find_zombies


class ReloadDriver:
    """Writes modules into ``directory`` and reloads them through a watcher-less Reloader.

    Use it as ``async with ReloadDriver(context, tmp_path) as driver:`` (the
    ``hotseam_reloader`` fixture does this for you); leaving the block disposes every
    generation.
    """

    def __init__(
        self,
        context: Context,
        directory: Path,
        *,
        strict: bool = False,
        origin: str | os.PathLike[str] | None = None,
    ) -> None:
        self.context = context
        self.directory = Path(directory)
        self.strict = strict
        self.directory.mkdir(parents=True, exist_ok=True)
        self.generations: list[Generation] = []
        """Every generation this driver saw serving (weakly): :meth:`zombies` checks them."""
        self._seen: set[tuple[str, int]] = set()
        self._noted: list[Zombie] = []
        """Zombies :meth:`note_zombies` found while the watched modules still served."""
        if origin is not None:
            self.came_from(origin)
        self.reloader = Reloader(context, [self.directory], watch=False)

    async def __aenter__(self) -> ReloadDriver:
        await self.reloader.__aenter__()
        self._note_generations()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.reloader.__aexit__(exc_type, exc, tb)

    def came_from(self, origin: str | os.PathLike[str]) -> None:
        """Say that the modules of this driver's directory are copies of ``origin``'s: leak,
        escape and strict-mode reports name the files in ``origin`` instead of the copies
        (:meth:`load_folder` says it by itself)."""
        add_origin(self.directory, Path(origin).resolve())

    def path(self, name: str) -> Path:
        """The file of module ``name`` (``"my_ui.py"`` or ``"pkg/helpers.py"``)."""
        return self.directory / name

    def write(self, name: str, source: str) -> Path:
        """Write ``source`` (dedented) to module ``name``; nothing is reloaded yet."""
        path = self.path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
        return path

    def delete(self, name: str) -> None:
        """Delete module ``name``'s file; the next :meth:`reload` unloads it."""
        self.path(name).unlink()

    async def reload(self, name: str | None = None, *, force: bool = False) -> ReloadResult:
        """Reload module ``name`` (or rescan everything) and return what happened.

        As a save does, this reloads only what changed: a file whose content is the same
        as its serving generation's (by content hash) makes **no new generation** —
        ``result.committed`` is empty and the generation number stays — unless its last
        load failed. ``force=True`` reloads it anyway, as ``hotseam reload`` and SIGHUP
        do; a test that reloads to exercise disposal (not an edit) needs it.

        A failed reload is not raised: inspect ``result.aborted`` or call
        ``result.raise_for_errors()``.
        """
        target = None if name is None else self.path(name)
        result = await self.reloader.reload(target, force=force)
        self._note_generations()
        return result

    def _serving(self) -> dict[tuple[str, int], ModuleType]:
        """Each generation now serving, by module name and generation."""
        # the loader's records are the reloader's; the kit reads them to reach each
        # generation's module object, which no public status carries
        return {
            (record.name, record.generation): record.module
            for record in self.reloader._loader.records.values()
            if record.module is not None and record.generation is not None
        }

    def _note_generations(self) -> None:
        """Remember (weakly) each generation now serving, for :meth:`zombies`."""
        for key, module in self._serving().items():
            if key not in self._seen:
                self._seen.add(key)
                self.generations.append(Generation(module, key[1]))

    def zombies(self) -> list[Zombie]:
        """Generations no longer serving whose module, classes or functions are still alive,
        each with the reference chain that holds it (see :mod:`hotseam.testing._zombies`),
        and those :meth:`note_zombies` found before the driver closed."""
        serving = self._serving()
        found = find_zombies(
            generation
            for generation in self.generations
            if (generation.name, generation.generation) not in serving
        )
        now = {zombie.label for zombie in found}
        return [zombie for zombie in self._noted if zombie.label not in now] + found

    def note_zombies(self) -> None:
        """Look for zombies now, while the driver is open, and keep them for
        :meth:`zombies`. A generation held by a *watched* helper (a listener left on the
        bus of a ``bus.py`` in the same folder) is garbage again once the close unloads the
        helper too: only a look before the close sees it (the leak check looks here)."""
        self._noted = self.zombies()

    async def load(
        self, name: str, source: str, *, probe: Callable[[], object] | None = None
    ) -> ModuleStatus:
        """Write and load a module, raising if it fails; in strict mode, load it twice.

        Strict mode sets the module up, unloads it (its generation is disposed), checks that
        no provider, tool or task of it is left and that ``probe()`` is back to what it was,
        then loads it again — so a strict load counts two generations; compare generations
        with the returned status's ``generation`` rather than with constants.

        Raises:
            ReloadError: the module failed to load (its error and traceback attached).
            StrictModeError: strict mode found leftovers of the first setup.
        """
        __tracebackhide__ = True
        undone = f"unloading {name!r} did not undo everything its setup did"
        await self._load_strictly(lambda: [self.write(name, source)], name, probe, undone)
        return self.status(name)

    async def load_folder(
        self, folder: str | os.PathLike[str], *, probe: Callable[[], object] | None = None
    ) -> list[ModuleStatus]:
        """Copy an existing folder of modules (your ``providers/``) into the driver's
        directory and load them all, raising if one fails; in strict mode, load them, unload
        them all, check that nothing is left, and load them again.

        The copy (``__pycache__`` and hidden entries left out) is what the test edits and
        reloads: ``driver.write("my_ui.py", ...)`` after it changes the copy, never your
        project. Returns the status of each module copied, by path.

        Raises:
            FileNotFoundError: ``folder`` is not a folder.
            ReloadError: a module failed to load.
            StrictModeError: strict mode found leftovers of the first load.
        """
        __tracebackhide__ = True
        source = Path(folder)
        if not source.is_dir():  # noqa: ASYNC240 - a test helper; the copy is blocking too
            raise FileNotFoundError(f"{os.fspath(folder)!r} is not a folder of modules")
        self.came_from(source)
        undone = f"unloading the modules of {os.fspath(folder)!r} did not undo everything"
        copied = await self._load_strictly(
            lambda: self._copy(source), None, probe, f"{undone} their setups did"
        )
        return [self.reloader.status_of(path) for path in sorted(copied)]

    async def _load_strictly(
        self,
        put: Callable[[], list[Path]],
        name: str | None,
        probe: Callable[[], object] | None,
        undone: str,
    ) -> list[Path]:
        """``put()`` the files and reload ``name`` (or all); in strict mode, remove them,
        reload, raise the leftovers (``undone``: what failed), put and reload again."""
        __tracebackhide__ = True
        before = snapshot(self.context, probe) if self.strict else None
        files = put()
        (await self.reload(name)).raise_for_errors()
        if before is not None:
            for path in files:
                path.unlink()
            (await self.reload(name)).raise_for_errors()
            found = leftovers(before, snapshot(self.context, probe))
            if found:
                raise StrictModeError(
                    f"strict mode: {undone}: " + name_originals("; ".join(found)),
                    details={"leftovers": found},
                )
            put()
            (await self.reload(name)).raise_for_errors()
        return files

    def _copy(self, source: Path) -> list[Path]:
        """Copy ``source`` into the directory; return the module files copied."""
        shutil.copytree(
            source,
            self.directory,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("__pycache__", ".*"),
        )
        return [
            self.directory / path.relative_to(source)
            for path in source.rglob("*.py")
            if not any(part == "__pycache__" or part.startswith(".") for part in path.parts)
        ]

    def status(self, name: str) -> ModuleStatus:
        """The status of module ``name``."""
        return self.reloader.status_of(self.path(name))

    def generation(self, name: str) -> int | None:
        """The generation of module ``name`` now serving (``None`` when none is)."""
        return self.status(name).generation


def assert_generation_active(
    reloader: Reloader | ReloadDriver, path: str | Path, generation: int
) -> None:
    """Module ``path`` is active and its generation ``generation`` is the one serving.

    ``path`` is a module name relative to a driver's directory, or a file path.
    """
    __tracebackhide__ = True
    if isinstance(reloader, ReloadDriver):
        status = reloader.status(str(path))
    else:
        status = reloader.status_of(path)
    if status.state is not ModuleState.ACTIVE or status.generation != generation:
        error = f"; last error: {status.error}" if status.error is not None else ""
        raise AssertionError(
            f"expected generation {generation} of {status.module} to be active, but it is "
            f"{status.state.value} with generation {status.generation}{error}"
        )
