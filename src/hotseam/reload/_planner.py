"""Planning a reload: which modules exist, which changed (by content hash), which depend on them.

The watched paths are read as if each were on the import path:

* a folder of modules (``providers/``): its ``x.py`` files are the modules ``x``, and its
  sub-folders with an ``__init__.py`` are packages (``pkg``, ``pkg.y``); a sub-folder
  without one holds nothing importable, which is reported, not silently skipped;
* a package (``providers/`` with an ``__init__.py``): its parent is the import path entry,
  so its modules are ``providers``, ``providers.x``...;
* a single file (``providers/my_ui.py``): the module ``my_ui``; the other top-level
  ``.py`` files next to it can be imported by it (and are then watched and tracked), but are
  not loaded on their own.

Dependencies come from the imports each module actually made while it executed (recorded
by the loader); a change reloads the changed modules and, transitively, every loaded module
that imported one of them, in dependency order.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import anyio

from ._errors import LoadError, ReloadPathError
from ._watcher import WatchRoot, is_module_file_name

__all__ = [
    "FileStat",
    "ModuleIndex",
    "Plan",
    "Root",
    "Source",
    "dependency_order",
    "digest",
    "read_file",
    "read_source",
]

RootKind = Literal["file", "folder", "package"]

# A file caught between an editor's truncate and its write reads as empty (Vite #610): when a
# non-empty module suddenly reads empty, re-read a few times before believing it.
_EMPTY_RETRIES = 5
_EMPTY_RETRY_DELAY = 0.01


@dataclass(frozen=True, slots=True)
class Root:
    """One watched path, resolved: what it is and which folder acts as the import path."""

    path: Path
    kind: RootKind
    base: Path

    @classmethod
    def from_path(cls, given: str | os.PathLike[str]) -> Root:
        """Classify ``given``.

        Raises:
            ReloadPathError: the path does not exist, or is a file that is not an
                importable ``name.py``.
        """
        path = Path(given).resolve()
        if not path.exists():
            raise ReloadPathError(f"reload path {os.fspath(given)!r} does not exist")
        if path.is_file():
            if not is_module_file_name(path.name):
                raise ReloadPathError(
                    f"reload path {os.fspath(given)!r} is not a Python module: expected "
                    "name.py with an identifier as name"
                )
            return cls(path, "file", path.parent)
        if not path.is_dir():
            raise ReloadPathError(f"reload path {os.fspath(given)!r} is not a file or a folder")
        if (path / "__init__.py").is_file():
            if not path.name.isidentifier():
                raise ReloadPathError(
                    f"reload path {os.fspath(given)!r} is a package whose name is not an "
                    "identifier, so it cannot be imported"
                )
            return cls(path, "package", path.parent)
        return cls(path, "folder", path)

    @property
    def watch_root(self) -> WatchRoot:
        """The directory to watch: the folder itself, or a single file's parent (flat)."""
        if self.kind == "file":
            return WatchRoot(self.base, recursive=False)
        return WatchRoot(self.path, recursive=True)


FileStat = tuple[int, int, int, int]
"""A file's ``(mtime_ns, ctime_ns, size, inode)``: changes on a save or a touch, not on a read."""


@dataclass(frozen=True, slots=True)
class Source:
    """The content of one module file at planning time (``stat``: the file's, as read)."""

    path: Path
    data: bytes
    digest: str
    stat: FileStat | None = None


def digest(data: bytes) -> str:
    """The content hash used to tell a real change from a touch."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def read_file(path: Path) -> Source:
    """Read ``path`` and the stat of the file read (one open, so the two agree).

    Raises:
        OSError: the file cannot be read (``FileNotFoundError``: it is gone).
    """
    with path.open("rb") as file:
        data = file.read()
        st = os.fstat(file.fileno())
    return Source(path, data, digest(data), (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino))


async def read_source(path: Path, previous: str | None) -> Source | None:
    """Read ``path``; ``None`` if it is gone. An unexpectedly empty read is retried briefly.

    ``previous`` (the digest last loaded) only decides whether an empty read is believed.
    """
    for attempt in range(_EMPTY_RETRIES + 1):
        try:
            # A module file is small; a worker thread would cost more than the read.
            source = read_file(path)
        except FileNotFoundError:
            return None
        empty_ok = previous is None or previous == _EMPTY_DIGEST or attempt == _EMPTY_RETRIES
        if source.data or empty_ok:
            return source
        await anyio.sleep(_EMPTY_RETRY_DELAY)
    raise AssertionError("unreachable")  # pragma: no cover


_EMPTY_DIGEST = digest(b"")


@dataclass(slots=True)
class ModuleIndex:
    """Every importable module under the watched paths: name ⇄ file, and what loads on start.

    Rebuilt by :meth:`rescan` at the start of every reload (a folder listing is cheap next
    to executing code, and it catches packages appearing or losing their ``__init__.py``).
    """

    roots: tuple[Root, ...]
    paths: dict[str, Path] = field(default_factory=dict)
    names: dict[Path, str] = field(default_factory=dict)
    autoload: set[str] = field(default_factory=set)
    tops: set[str] = field(default_factory=set)
    clashes: dict[Path, Path] = field(default_factory=dict)
    """A module file whose name is already taken by an earlier file → that earlier file."""
    skipped: dict[Path, str] = field(default_factory=dict)
    """Files and folders under a watched path that cannot be imported → why."""

    def rescan(self) -> None:
        """List the watched paths again."""
        self.paths = {}
        self.names = {}
        self.autoload = set()
        self.clashes = {}
        self.skipped = {}
        for root in self.roots:
            if root.kind == "file":
                self._add(root.path.stem, root.path, autoload=True)
                for sibling in _listdir(root.base):
                    if sibling.is_file() and is_module_file_name(sibling.name):
                        self._add(sibling.stem, sibling, autoload=False)
            elif root.kind == "package":
                self._scan_package(root.path, root.path.name)
            else:
                self._scan_folder(root.path)
        self.tops = {name.partition(".")[0] for name in self.paths}

    def name_of(self, path: Path) -> str | None:
        """The module name of ``path``, if it is an importable module under a watched path."""
        return self.names.get(path)

    def path_of(self, name: str) -> Path | None:
        """The file of module ``name``, if it is one of the watched modules."""
        return self.paths.get(name)

    def owns(self, top_level: str) -> bool:
        """True when imports of ``top_level`` (and its submodules) resolve to watched files."""
        return top_level in self.tops

    def under(self, directory: Path) -> list[str]:
        """Module names whose files are below ``directory``."""
        return [name for path, name in self.names.items() if path.is_relative_to(directory)]

    def watch_roots(self) -> list[WatchRoot]:
        """The directories to watch."""
        return [root.watch_root for root in self.roots]

    def _add(self, name: str, path: Path, *, autoload: bool) -> None:
        existing = self.paths.get(name)
        if existing is not None:
            if existing != path and path not in self.names:
                self.clashes[path] = existing
            return
        self.paths[name] = path
        self.names[path] = name
        if autoload:
            self.autoload.add(name)

    def _scan_folder(self, folder: Path) -> None:
        for entry in _listdir(folder):
            if entry.is_dir():
                if (entry / "__init__.py").is_file() and entry.name.isidentifier():
                    self._scan_package(entry, entry.name)
                elif _holds_python(entry):
                    self.skipped[entry] = (
                        "folder without __init__.py: its modules cannot be imported by name"
                    )
            elif entry.suffix == ".py":
                if is_module_file_name(entry.name):
                    self._add(entry.stem, entry, autoload=True)
                else:
                    self.skipped[entry] = "not an importable module name"

    def _scan_package(self, folder: Path, name: str) -> None:
        self._add(name, folder / "__init__.py", autoload=True)
        for entry in _listdir(folder):
            if entry.is_dir():
                if (entry / "__init__.py").is_file() and entry.name.isidentifier():
                    self._scan_package(entry, f"{name}.{entry.name}")
                elif _holds_python(entry):
                    self.skipped[entry] = (
                        "folder without __init__.py: its modules cannot be imported by name"
                    )
            elif entry.suffix == ".py" and entry.name != "__init__.py":
                if is_module_file_name(entry.name):
                    self._add(f"{name}.{entry.stem}", entry, autoload=True)
                else:
                    self.skipped[entry] = "not an importable module name"


def _listdir(folder: Path) -> list[Path]:
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError:
        return []
    return [
        Path(entry.path)
        for entry in entries
        if not entry.name.startswith(".") and entry.name != "__pycache__"
    ]


def _holds_python(folder: Path) -> bool:
    return any(entry.suffix == ".py" for entry in _listdir(folder))


@dataclass(slots=True)
class Plan:
    """What one reload will do."""

    changed: list[Path] = field(default_factory=list)
    """Files whose content changed (or that appeared) since their last load attempt, and
    files of failed modules saved or touched again."""
    sources: dict[str, Source] = field(default_factory=dict)
    """Modules to execute (changed ones, retried ones, their dependents) → their content."""
    retries: set[str] = field(default_factory=set)
    """Modules refused for a conflict, executed again because the registration that refused
    them is gone or leaves in this reload. In a conflict they yield to the other modules."""
    order: list[str] = field(default_factory=list)
    """``sources`` in dependency order."""
    unload: list[str] = field(default_factory=list)
    """Modules whose file is gone (or no longer importable), dependents last."""
    unreadable: dict[str, tuple[Path, LoadError]] = field(default_factory=dict)
    """Modules whose file exists but could not be read."""

    @property
    def empty(self) -> bool:
        """True when nothing changed."""
        return not (self.sources or self.unload or self.unreadable)


def dependents(seeds: Iterable[str], imports: Mapping[str, Collection[str]]) -> set[str]:
    """Every module that imports one of ``seeds``, directly or through others (seeds excluded)."""
    importers: dict[str, set[str]] = {}
    for name, imported in imports.items():
        for dependency in imported:
            importers.setdefault(dependency, set()).add(name)
    found: set[str] = set()
    todo = list(seeds)
    while todo:
        for importer in importers.get(todo.pop(), ()):
            if importer not in found:
                found.add(importer)
                todo.append(importer)
    return found - set(seeds)


def dependency_order(names: Collection[str], imports: Mapping[str, Collection[str]]) -> list[str]:
    """``names`` with every module after the modules it imports (cycles broken by name)."""
    wanted = set(names)
    ordered: list[str] = []
    visited: set[str] = set()

    def visit(name: str) -> None:
        visited.add(name)
        for dependency in sorted(imports.get(name, ())):
            if dependency in wanted and dependency not in visited:
                visit(dependency)
        ordered.append(name)

    for name in sorted(wanted):
        if name not in visited:
            visit(name)
    return ordered
