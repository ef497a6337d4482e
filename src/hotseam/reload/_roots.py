"""Watched paths: what each is (:class:`Root`), those given through a symbolic link,
followed when the link is pointed elsewhere, and one listing of their module files.

A watched path is resolved once (``current/providers`` with ``current -> releases/v1``
watches ``releases/v1/providers``). An atomic deploy points the link at a new release
(``ln -sfn releases/v2 current``): the old release is still there, unchanged, so nothing
watching it notices. :class:`LinkedRoots` resolves each such path again every
``root_check`` seconds and tells which now lead elsewhere, for the reloader to watch.

**Listing** (:class:`Scan`): every module file, classified without opening anything, by
the rules of :class:`~._planner.ModuleIndex`. A folder or entry that cannot be looked at
for a passing reason (``is_transient``) raises instead of being skipped: the listing would
otherwise leave out modules that are there, and the reloader unload them.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .._core import get_logger
from ._errors import ReloadPathError, file_type, is_transient
from ._events import display_path
from ._watcher import WatchRoot, is_module_file_name

_log = get_logger("hotseam.reload")

RootKind = Literal["file", "folder", "package"]


@dataclass(frozen=True, slots=True)
class Root:
    """One watched path, resolved: what it is and which folder acts as the import path."""

    path: Path
    kind: RootKind
    base: Path
    given: Path | None = field(default=None, compare=False)
    """The path as given (absolute, not resolved) when it leads through a symbolic link:
    the reloader follows it when the link is pointed elsewhere (``ln -sfn``)."""
    text: str = field(init=False, repr=False, compare=False)
    """``str(path)``, for comparisons by string on the hot path."""
    prefix: str = field(init=False, repr=False, compare=False)
    """``text`` ending with a separator: what every path below ``path`` starts with."""

    def __post_init__(self) -> None:
        text = str(self.path)
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "prefix", text if text.endswith(os.sep) else text + os.sep)

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
        spelled = Path(os.path.abspath(given))
        linked = spelled if spelled != path else None
        if path.is_file():
            if not is_module_file_name(path.name):
                raise ReloadPathError(
                    f"reload path {os.fspath(given)!r} is not a Python module: expected "
                    "name.py with an identifier as name"
                )
            return cls(path, "file", path.parent, linked)
        if not path.is_dir():
            raise ReloadPathError(f"reload path {os.fspath(given)!r} is not a file or a folder")
        if (path / "__init__.py").is_file():
            if not path.name.isidentifier():
                raise ReloadPathError(
                    f"reload path {os.fspath(given)!r} is a package whose name is not an "
                    "identifier, so it cannot be imported"
                )
            return cls(path, "package", path.parent, linked)
        return cls(path, "folder", path, linked)

    @property
    def watch_root(self) -> WatchRoot:
        """The directory to watch: the folder itself, or a single file's parent (flat)."""
        if self.kind == "file":
            return WatchRoot(self.base, recursive=False)
        return WatchRoot(self.path, recursive=True)


class LinkedRoots:
    """The roots given through a link, and where each led when last looked at."""

    __slots__ = ("_broken",)

    def __init__(self) -> None:
        self._broken: set[Path] = set()
        """Given paths reported as leading nowhere (reported once until they lead again)."""

    def moved(self, roots: tuple[Root, ...]) -> dict[Root, Root]:
        """Each root whose given path now resolves elsewhere → the root it leads to now; one
        that leads nowhere usable is logged once and keeps its root until it does."""
        moved: dict[Root, Root] = {}
        for root in roots:
            given = root.given
            if given is None:
                continue
            if os.path.realpath(given) == root.text:
                self._broken.discard(given)
                continue
            try:
                new = Root.from_path(given)
            except OSError as error:
                if not is_transient(error):
                    raise
                continue  # cannot be looked at now (see is_transient): again at the next check
            except ReloadPathError as error:
                if given not in self._broken:
                    self._broken.add(given)
                    _log.warning(
                        "reload.root_unresolved",
                        path=str(given),
                        watching=str(root.path),
                        error=str(error),
                        summary=f"watched path {display_path(given)} no longer leads to "
                        f"modules ({error}); still watching {display_path(root.path)}",
                    )
                continue
            self._broken.discard(given)
            if new.path == root.path:
                continue
            _log.info(
                "reload.root_relinked",
                path=str(given),
                previous=str(root.path),
                target=str(new.path),
                summary=f"watched path {display_path(given)} now leads to "
                f"{display_path(new.path)} (was {display_path(root.path)}): watching it",
            )
            moved[root] = new
        return moved


def refused_link(path: Path, roots: tuple[Root, ...]) -> str | None:
    """Why ``path``, spelled under a watched path but resolving outside every one, is
    refused: the symbolic link it goes through, and where that leads. ``None`` when it is
    not spelled under a watched path (or no link explains it)."""
    spelled = Path(os.path.abspath(path))
    tops = [
        folder.parent if root.kind == "file" else folder
        for root in roots
        for folder in (root.path, root.given)
        if folder is not None
    ]
    top = next((top for top in tops if spelled.is_relative_to(top)), None)
    if top is None:
        return None
    for candidate in (spelled, *spelled.parents):
        if candidate == top or not candidate.is_relative_to(top):
            break
        if candidate.is_symlink():
            target = os.path.realpath(candidate)
            through = (
                f"is a symbolic link to {target}"
                if candidate == spelled
                else f"goes through the symbolic link {display_path(candidate)} -> {target}"
            )
            return (
                f"{os.fspath(path)!r} {through}, outside the watched paths: refused, as when "
                "the watched folders are loaded (only code under the watched paths runs; a "
                "link is followed only when it leads inside them)"
            )
    return None


# -- listing the watched paths ---------------------------------------------------------------------

NOT_A_PACKAGE = "folder without __init__.py: its modules cannot be imported by name"


@dataclass(frozen=True, slots=True)
class _Entry:
    """One directory entry, classified without opening anything (``lstat``/``stat`` only)."""

    name: str
    path: Path
    real: Path
    mode: int
    link: bool


class Scan:
    """One listing of the watched paths; see :class:`~._planner.ModuleIndex` for the rules."""

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
        self.folders: dict[Path, str | None] = {}
        """Each folder listed for modules → its package (``None``: a folder of modules)."""
        self.sibling_folders: set[Path] = set()
        """The folders of single-file roots, listed for siblings (loaded only if imported)."""
        self.linked = False
        """True when an entry was a symbolic link (the index then never updates in place)."""

    def run(self) -> None:
        for root in self.roots:
            if root.kind == "file":
                self.add(root.path.stem, root.path, root.path, autoload=True)
                self.sibling_folders.add(root.base)
                # Siblings: importable by the file, loaded only when imported; links last.
                for entry in sorted(self.listing(root.base), key=lambda entry: entry.link):
                    if stat.S_ISDIR(entry.mode) or not entry.name.endswith(".py"):
                        continue
                    if entry.link and not self.inside(entry.real):
                        self.skipped[entry.path] = outside(entry.real)
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
            if is_transient(error):
                raise  # not the folder's fault: the whole listing is tried again later
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
                    self.linked = True
                    target = Path(os.path.realpath(path, strict=True))
                    mode = os.stat(target).st_mode
                else:
                    # The entry's own path when nothing in between is a link: one Path
                    # object per module instead of two equal ones.
                    target = path if real == folder else real / item.name
                    mode = item.stat(follow_symlinks=False).st_mode
            except OSError as error:
                if is_transient(error):
                    raise
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
        self.folders[folder] = package
        entries = self.listing(folder, real)
        if package is not None:
            init = next((entry for entry in entries if entry.name == "__init__.py"), None)
            if init is not None and init.link and not self.inside(init.real):
                self.skipped[init.path] = outside(init.real)
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
                self.skipped[entry.path] = outside(entry.real)
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
            self.skipped.setdefault(entry.path, NOT_A_PACKAGE)

    def file(self, package: str | None, entry: _Entry, *, autoload: bool) -> None:
        if not stat.S_ISREG(entry.mode):
            self.skipped[entry.path] = f"not a regular file ({file_type(entry.mode)})"
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


def outside(real: Path) -> str:
    return f"symbolic link to {real}, outside the watched paths: only code under them runs"


def _is_file(path: Path) -> bool:
    """``path`` is a regular file (following links); False when it cannot be told (a
    failure that passes is raised)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError as error:
        if is_transient(error):
            raise
        return False


def _holds_python(folder: Path) -> bool:
    try:
        with os.scandir(folder) as entries:
            return any(entry.name.endswith(".py") for entry in entries)
    except OSError as error:
        if is_transient(error):
            raise
        return False
