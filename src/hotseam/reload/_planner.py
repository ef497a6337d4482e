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

import errno
import hashlib
import os
import stat
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

# A file caught between an editor's truncate and its write reads as empty (Vite #610): an empty
# read is re-read a few times before it is believed, unless the module was empty before. A
# file that appears (created, renamed back) is no exception: loading its empty moment would
# replace a provider with an empty helper module until the write lands.
_EMPTY_RETRIES = 5
_EMPTY_RETRY_DELAY = 0.01
_DIGEST_SIZE = 16
_CHUNK = 1 << 20


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
    return hashlib.blake2b(data, digest_size=_DIGEST_SIZE).hexdigest()


def read_file(path: Path) -> Source:
    """Read ``path`` and the stat of the file read (one open, so the two agree).

    Only a regular file is ever opened: a FIFO, a socket or a device named ``x.py`` would
    block the read (or act on the device), so it is refused from its stat; the open is
    non-blocking and the opened file checked again, in case it was swapped in between.
    Blocking: call it in a worker thread (:func:`read_source` does).

    Raises:
        OSError: the file cannot be read, or is not a regular file (``FileNotFoundError``:
            it is gone).
    """
    _require_regular(path, os.stat(path).st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        _require_regular(path, st.st_mode)
        # In chunks, hashed as they come: a single huge read (and the copies around it)
        # would hold the GIL, and so stall the event loop, for as long as it takes.
        hasher = hashlib.blake2b(digest_size=_DIGEST_SIZE)
        chunks: list[bytes] = []
        while chunk := os.read(fd, _CHUNK):
            hasher.update(chunk)
            chunks.append(chunk)
    finally:
        os.close(fd)
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    return Source(
        path, data, hasher.hexdigest(), (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
    )


def _require_regular(path: Path, mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise OSError(errno.EINVAL, f"not a regular file ({_file_type(mode)})", str(path))


def _file_type(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, what in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return what
    return "an unknown kind of file"


async def read_source(path: Path, previous: str | None) -> Source | None:
    """Read ``path``; ``None`` if it is gone. An unexpectedly empty read is retried briefly.

    The read and the hash run in a worker thread, so a big file never blocks the event loop.
    ``previous`` (the digest last loaded) only decides whether an empty read is believed at
    once: only when the module was empty before.
    """
    for attempt in range(_EMPTY_RETRIES + 1):
        try:
            source = await anyio.to_thread.run_sync(read_file, path)
        except FileNotFoundError:
            return None
        empty_ok = previous == _EMPTY_DIGEST or attempt == _EMPTY_RETRIES
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

    Symbolic links: a link that resolves inside a watched path is followed, and its module
    keeps the link's path and name; a change of the file it points to maps to that module
    (:meth:`name_of`). A link that resolves outside every watched path is refused (only code
    under the given paths runs). Each real file and folder is loaded once: a link to one
    already found (``pkg/again -> .``) is skipped, and real paths win over links to them.
    Every skipped entry is listed in :attr:`skipped` with the reason.
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
    real_paths: dict[str, Path] = field(default_factory=dict)
    """Module name → the real file its path leads to (differs from its path through links)."""
    targets: dict[Path, str] = field(default_factory=dict)
    """The real file of a module reached through a symbolic link → the module's name; the
    previous scan's entries are kept too, so the removal of a target still finds its module."""
    linked: dict[Path, str] = field(default_factory=dict)
    """:attr:`targets` of the latest scan only."""

    def rescan(self) -> None:
        """List the watched paths again (the new index replaces the old one at once)."""
        scan = _Scan(self.roots)
        scan.run()
        self.paths = scan.paths
        self.names = scan.names
        self.autoload = scan.autoload
        self.clashes = scan.clashes
        self.skipped = scan.skipped
        self.real_paths = scan.real_paths
        previous = self.linked
        self.linked = {
            real: name for name, real in scan.real_paths.items() if scan.paths[name] != real
        }
        self.targets = {**previous, **self.linked}
        self.tops = {name.partition(".")[0] for name in self.paths}

    def name_of(self, path: Path) -> str | None:
        """The module name of ``path``, if it is an importable module under a watched path,
        or the real file of one reached through a symbolic link."""
        name = self.names.get(path)
        return name if name is not None else self.targets.get(path)

    def path_of(self, name: str) -> Path | None:
        """The file of module ``name``, if it is one of the watched modules."""
        return self.paths.get(name)

    def owns(self, top_level: str) -> bool:
        """True when imports of ``top_level`` (and its submodules) resolve to watched files."""
        return top_level in self.tops

    def under(self, directory: Path) -> list[str]:
        """Module names whose files (or the real files they link to) are below ``directory``."""
        return [
            name
            for name, path in self.paths.items()
            if path.is_relative_to(directory)
            or self.real_paths.get(name, path).is_relative_to(directory)
        ]

    def watch_roots(self) -> list[WatchRoot]:
        """The directories to watch."""
        return [root.watch_root for root in self.roots]


_NOT_A_PACKAGE = "folder without __init__.py: its modules cannot be imported by name"


@dataclass(frozen=True, slots=True)
class _Entry:
    """One directory entry, classified without opening anything (``lstat``/``stat`` only)."""

    name: str
    path: Path
    real: Path
    mode: int
    link: bool


class _Scan:
    """One listing of the watched paths; see :class:`ModuleIndex` for the rules."""

    def __init__(self, roots: tuple[Root, ...]) -> None:
        self.roots = roots
        self.paths: dict[str, Path] = {}
        self.names: dict[Path, str] = {}
        self.autoload: set[str] = set()
        self.clashes: dict[Path, Path] = {}
        self.skipped: dict[Path, str] = {}
        self.real_paths: dict[str, Path] = {}
        self.owners: dict[Path, str] = {}  # real file → module name
        self.visited: set[Path] = set()  # real folders already scanned
        self.links: list[tuple[str | None, _Entry]] = []  # followed after every real path
        self.trees = [root.path for root in roots if root.kind != "file"]
        self.flat = {root.base for root in roots if root.kind == "file"}

    def run(self) -> None:
        for root in self.roots:
            if root.kind == "file":
                self.add(root.path.stem, root.path, root.path, autoload=True)
                # Siblings: importable by the file, loaded only when imported; links last.
                for entry in sorted(self.listing(root.base), key=lambda entry: entry.link):
                    if stat.S_ISDIR(entry.mode) or not entry.name.endswith(".py"):
                        continue
                    if entry.link and not self.inside(entry.real):
                        self.skipped[entry.path] = _outside(entry.real)
                    else:
                        self.file(None, entry, autoload=False)
            elif root.path in self.visited:
                continue  # inside another watched folder, already scanned
            elif root.kind == "package":
                self.folder(root.path, root.path, root.path.name)
            else:
                self.folder(root.path, root.path, None)
        while self.links:
            package, entry = self.links.pop(0)
            self.entry(package, entry, following=True)

    def inside(self, real: Path) -> bool:
        """True when ``real`` is under a watched path (as the watcher sees them)."""
        return real.parent in self.flat or any(real.is_relative_to(tree) for tree in self.trees)

    def listing(self, folder: Path, real: Path | None = None) -> list[_Entry]:
        """The entries of ``folder`` (hidden ones and caches left out), by name; an
        unreadable folder or entry is skipped and reported."""
        try:
            with os.scandir(folder) as iterator:
                found = sorted(iterator, key=lambda entry: entry.name)
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as error:
            self.skipped[folder] = f"cannot be listed: {error.strerror or error}"
            return []
        real = real if real is not None else folder
        entries: list[_Entry] = []
        for item in found:
            if item.name.startswith(".") or item.name == "__pycache__":
                continue
            path = Path(item.path)
            link = False
            try:
                link = item.is_symlink()
                if link:
                    target = Path(os.path.realpath(path, strict=True))
                    mode = os.stat(target).st_mode
                else:
                    target = real / item.name
                    mode = item.stat(follow_symlinks=False).st_mode
            except OSError as error:
                if item.name.endswith(".py") or item.is_dir(follow_symlinks=False):
                    self.skipped[path] = (
                        f"broken symbolic link: {error.strerror or error}"
                        if link
                        else f"cannot be read: {error.strerror or error}"
                    )
                continue
            entries.append(_Entry(item.name, path, target, mode, link))
        return entries

    def folder(self, folder: Path, real: Path, package: str | None) -> None:
        """Scan a folder of modules (``package=None``) or the package ``package``."""
        self.visited.add(real)
        entries = self.listing(folder, real)
        if package is not None:
            init = next((entry for entry in entries if entry.name == "__init__.py"), None)
            if init is not None and init.link and not self.inside(init.real):
                self.skipped[init.path] = _outside(init.real)
            elif init is not None:
                self.file(package, init, autoload=True)
        for entry in entries:
            if entry.link:
                self.links.append((package, entry))
            elif entry.name != "__init__.py" or package is None:
                self.entry(package, entry, following=False)

    def entry(self, package: str | None, entry: _Entry, *, following: bool) -> None:
        if entry.link and not self.inside(entry.real):
            if entry.name.endswith(".py") or _holds_python(entry.real):
                self.skipped[entry.path] = _outside(entry.real)
            return
        if not stat.S_ISDIR(entry.mode):
            if entry.name.endswith(".py"):
                self.file(package, entry, autoload=True)
            return
        if entry.real in self.visited:
            if following:
                self.skipped[entry.path] = (
                    f"symbolic link to {entry.real}, which is already watched: each file "
                    "is loaded once"
                )
            return
        init = entry.path / "__init__.py"
        if entry.name.isidentifier() and _is_file(init):
            name = entry.name if package is None else f"{package}.{entry.name}"
            self.folder(entry.path, entry.real, name)
        elif any(item.name.endswith(".py") for item in self.listing(entry.path, entry.real)):
            self.skipped.setdefault(entry.path, _NOT_A_PACKAGE)

    def file(self, package: str | None, entry: _Entry, *, autoload: bool) -> None:
        if not stat.S_ISREG(entry.mode):
            self.skipped[entry.path] = f"not a regular file ({_file_type(entry.mode)})"
            return
        if entry.name == "__init__.py" and package is not None:
            self.add(package, entry.path, entry.real, autoload=autoload)
        elif not is_module_file_name(entry.name):
            self.skipped[entry.path] = "not an importable module name"
        else:
            stem = entry.name[: -len(".py")]
            name = stem if package is None else f"{package}.{stem}"
            self.add(name, entry.path, entry.real, autoload=autoload)

    def add(self, name: str, path: Path, real: Path, *, autoload: bool) -> None:
        existing = self.paths.get(name)
        if existing is not None:
            if existing != path and path not in self.names:
                self.clashes[path] = existing
            return
        owner = self.owners.get(real)
        if owner is not None and path not in self.names:
            self.skipped[path] = (
                f"{'symbolic link to ' if real != path else ''}{real}, which is already "
                f"loaded as module {owner!r}: each file is loaded once"
            )
            return
        self.paths[name] = path
        self.names[path] = name
        self.real_paths[name] = real
        self.owners[real] = name
        if autoload:
            self.autoload.add(name)


def _outside(real: Path) -> str:
    return f"symbolic link to {real}, outside the watched paths: only code under them runs"


def _is_file(path: Path) -> bool:
    """``path`` is a regular file (following links); False when it cannot be told."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _holds_python(folder: Path) -> bool:
    try:
        with os.scandir(folder) as entries:
            return any(entry.name.endswith(".py") for entry in entries)
    except OSError:
        return False


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
