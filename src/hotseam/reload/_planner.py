"""The watched modules: which file is which module, what imports what, which names they hold.

The module index (:class:`ModuleIndex`), the names modules take in ``sys.modules``
(:class:`NameClaims`), a batch's order by its imports, and :class:`Plan`, the record of one
reload; what a plan decides is :mod:`._plan_builder`'s.

**Names and files**, as if each watched path were on the import path: a folder's ``x.py``
is ``x`` and its sub-folders with an ``__init__.py`` are packages (one without holds nothing
importable: reported); a package's parent is the path entry (``providers.x``); a single
file is its module, and its sibling ``.py`` files may be imported by it but are not loaded
on their own. Dependencies are the imports each module made while it executed.

**Names claimed.** A serving module's name must not be another live reloader's, a module
this process imported, nor an installed module it would shadow (``json.py``). That last
check lists the ``sys.path`` folders once per start of many modules (``find_spec`` per name
cost as much as executing the module).
"""

from __future__ import annotations

import importlib.machinery
import os
import stat
import sys
import weakref
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from ._errors import LoadError, ModuleNameClashError
from ._roots import NOT_A_PACKAGE, Root, Scan
from ._watcher import WatchRoot, is_module_file_name

MAX_MODULE_SIZE = 1024 * 1024
"""The default largest module file, in bytes (1 MiB). Of 56,365 ``.py`` files on a
development machine 11 were over it, all generated code; compiling holds the interpreter
lock for 40 to 450 ms per MB, growing faster than the size, so a module just under the
limit stalls the loop 0.05 to 0.5 s."""

FileStat = tuple[int, int, int, int]
"""A file's ``(mtime_ns, ctime_ns, size, inode)``: changes on a save or a touch, not on a read."""


@dataclass(frozen=True, slots=True)
class Source:
    """The content of one module file at planning time (``stat``: the file's, as read)."""

    path: Path
    data: bytes
    digest: str
    stat: FileStat | None = None


@dataclass(slots=True)
class ModuleIndex:
    """Every importable module under the watched paths: name ⇄ file, and what loads on start.

    Kept current by :meth:`refresh` from the paths the watcher reported: a module file
    created, saved or deleted in a folder already listed updates its one entry (one
    ``lstat``), so a save costs the same among 1,000 modules as among one. Whatever a single
    entry cannot express (a folder, an ``__init__.py``, a symbolic link, a name clash, a
    folder never listed) falls back to :meth:`rescan`, a full listing; both give one index.

    A symbolic link that resolves inside a watched path is followed, its module keeping the
    link's path and name (:meth:`name_of` maps its target too); one leading outside is
    refused. Each real file and folder is loaded once (real paths win over links to them).
    Every skipped entry is in :attr:`skipped` with the reason.
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
    folders: dict[Path, str | None] = field(default_factory=dict)
    """Folders listed for modules → their package (``None``: a folder of modules)."""
    siblings: set[Path] = field(default_factory=set)
    """Folders of single-file roots (their other ``.py`` files load only when imported)."""
    former: dict[Path, str] = field(default_factory=dict)
    """A file that left the index → the module name it had (until a file takes that path
    again): what a report of a deleted file maps to."""
    former_folders: set[Path] = field(default_factory=set)
    """Folders listed by an earlier scan but not the latest."""
    per_top: Counter[str] = field(default_factory=Counter)
    """Top-level name → how many modules are under it (:attr:`tops` are those above 0)."""
    has_links: bool = False
    scans: int = 0
    """Full listings so far (the tests count them)."""
    seen: dict[Path, os.stat_result] = field(default_factory=dict)
    """The ``lstat`` of each regular file the latest :meth:`refresh` was told of: whether
    reading it may skip the worker thread (:func:`~._loader.read_on_loop`)."""
    max_size: int | None = MAX_MODULE_SIZE
    """The largest module file read, in bytes (``None``: no limit); see :mod:`._loader`."""
    held: dict[Path, str] = field(default_factory=dict)
    """Module files gone within the deletion grace → their module (see :mod:`._plan_builder`):
    their entries stay, as if the files were there, until :meth:`release`."""
    missing: set[Path] = field(default_factory=set)
    """The :attr:`held` files the latest listing (or report) found gone."""

    def rescan(self) -> None:
        """List the watched paths again (the new index replaces the old one at once)."""
        scan = Scan(self.roots)
        scan.run()
        self.scans += 1
        for path, name in self.names.items():
            if path not in scan.names:
                self.former[path] = name
        for path in scan.names:
            self.former.pop(path, None)
        self.former_folders.update(self.folders.keys() - scan.folders.keys())
        self.former_folders.difference_update(scan.folders)
        self.paths = scan.paths
        self.names = scan.names
        self.autoload = scan.autoload
        self.clashes = scan.clashes
        self.skipped = scan.skipped
        self.real_paths = scan.real_paths
        self.folders = scan.folders
        self.siblings = scan.sibling_folders
        self.has_links = scan.linked
        previous = self.linked
        self.linked = {
            real: name for name, real in scan.real_paths.items() if scan.paths[name] != real
        }
        self.targets = {**previous, **self.linked}
        self.per_top = Counter(name.partition(".")[0] for name in self.paths)
        self.tops = set(self.per_top)
        self._keep_held()

    def refresh(self, changed: Collection[Path] | None) -> None:
        """Bring the index up to date after ``changed`` were reported (``None``: anything may
        have changed, so list everything). Paths outside the watched paths are ignored."""
        if self.seen:
            self.seen = {}
        if changed is None or self.has_links or not self.scans:
            self.rescan()
            return
        for path in changed:
            if not self._update(path):
                self.rescan()
                return

    def _update(self, path: Path) -> bool:
        """Apply a report of ``path`` to its one entry; False when only a listing can."""
        if path in self.siblings:
            return False  # the folder of a single-file root (made again, say): list it
        if not self._watches(path):
            return True  # outside the watched paths, or hidden: nothing of ours
        parent = path.parent
        name = path.name
        try:
            seen = _lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            mode: int | None = None
        except OSError:
            return False  # unreadable: the listing reports why
        else:
            mode = seen.st_mode
            if stat.S_ISREG(mode):
                self.seen[path] = seen
        if path in self.folders and (mode is None or not stat.S_ISDIR(mode)):
            return False  # a listed folder (a root too) gone or replaced by a file: list
        if mode is not None and not stat.S_ISREG(mode):
            # A folder (created, renamed in, chmod-ed), a link, a FIFO named like a module:
            # only a listing can tell what that changes.
            return not (stat.S_ISDIR(mode) or stat.S_ISLNK(mode) or name.endswith(".py"))
        if not name.endswith(".py"):
            # Gone: a folder that was listed (its modules went with it), or never anything.
            return mode is not None or (
                path not in self.folders and path not in self.skipped and path not in self.siblings
            )
        if name == "__init__.py" or path in self.clashes.values():
            return False  # a package appears or goes; a clashing file may take the name
        if any(root.kind == "file" and root.path == path for root in self.roots):
            return True  # a single-file root keeps its entry even while the file is gone
        if parent in self.folders and parent in self.siblings:
            return False  # listed twice (a root's folder and a file root's), order decides
        if parent in self.siblings:
            package = None
        elif parent in self.folders:
            package = self.folders[parent]
        elif self.skipped.get(parent) == NOT_A_PACKAGE:
            # A folder already reported as holding nothing importable; losing a file may
            # leave it without any, which only a listing can tell.
            return mode is not None
        else:
            return mode is None and path not in self.skipped  # a folder never listed
        if mode is None:
            if path in self.held:
                self.missing.add(path)  # held: the entry stays
            else:
                self._forget(path)
            return True
        if path in self.names or path in self.clashes:
            self.missing.discard(path)
            return True  # saved again: the entry stands
        if not is_module_file_name(name):
            self.skipped[path] = "not an importable module name"
            return True
        stem = name[: -len(".py")]
        module = stem if package is None else f"{package}.{stem}"
        if module in self.paths:
            return False  # a clash: which file wins depends on the listing's order
        self.skipped.pop(path, None)
        self._insert(module, path)  # autoloaded unless a single-file root's sibling
        return True

    def _forget(self, path: Path) -> None:
        """Remove the entry of ``path``, a module file that is gone."""
        self.skipped.pop(path, None)
        self.clashes.pop(path, None)
        module = self.names.pop(path, None)
        if module is None:
            return
        self.former[path] = module
        del self.paths[module]
        self.real_paths.pop(module, None)
        self.autoload.discard(module)
        top = module.partition(".")[0]
        self.per_top[top] -= 1
        if not self.per_top[top]:
            del self.per_top[top]
            self.tops.discard(top)

    def hold(self, path: Path, name: str) -> bool:
        """Keep the entry of module ``name`` at ``path``, whose file is gone, as if the file
        were there, until :meth:`release`. False when the name or the path is another
        module's now."""
        if self.paths.get(name, path) != path or self.names.get(path, name) != name:
            return False
        self.held[path] = name
        self.missing.add(path)
        if path not in self.names:
            self._insert(name, path)
        return True

    def release(self, path: Path) -> None:
        """Stop keeping the entry of ``path``: forget it if its file is still gone."""
        name = self.held.pop(path, None)
        if name is not None and path in self.missing:
            self.missing.discard(path)
            if self.names.get(path) == name:
                self._forget(path)

    def _keep_held(self) -> None:
        """After a listing: put back the entries of the held files it did not find; a held
        file whose name (or path) another file took now is held no more."""
        self.missing = set()
        for path, name in list(self.held.items()):
            if self.names.get(path) == name:
                continue  # listed: back
            if path in self.names or name in self.paths:
                del self.held[path]  # a module turned package, say: that one loads
                continue
            self._insert(name, path)
            self.missing.add(path)

    def _insert(self, name: str, path: Path) -> None:
        """Add the entry of module ``name`` at ``path`` (neither is taken)."""
        self.former.pop(path, None)
        self.paths[name] = path
        self.names[path] = name
        self.real_paths.setdefault(name, path)
        top = name.partition(".")[0]
        self.per_top[top] += 1
        self.tops.add(top)
        if path.parent not in self.siblings or any(
            root.kind == "file" and root.path == path for root in self.roots
        ):
            self.autoload.add(name)

    def _watches(self, path: Path) -> bool:
        """True when ``path`` is under a watched path and not hidden (as the listing sees it).
        By string: a :class:`Path` is normalized, so this needs no ``relative_to``."""
        text = str(path)
        for root in self.roots:
            if root.kind == "file":
                if path.parent != root.base:
                    continue
                relative = path.name
            elif text == root.text:
                relative = ""
            elif text.startswith(root.prefix):
                relative = text[len(root.prefix) :]
            else:
                continue
            return not any(
                part.startswith(".") or part == "__pycache__" for part in relative.split(os.sep)
            )
        return False

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

    def may_hold(self, directory: Path) -> bool:
        """False when ``directory`` surely holds no module, now or at an earlier scan (a file,
        or a name no listing ever met), so nobody needs to look under it."""
        if self.has_links or directory in self.folders or directory in self.former_folders:
            return True
        if directory in self.siblings:
            return True  # the folder of a single-file root
        if directory in self.skipped or any(root.path == directory for root in self.roots):
            return True
        return any(folder.is_relative_to(directory) for folder in self.former_folders)

    def under(self, directory: Path) -> list[str]:
        """Module names whose files (or the real files they link to) are below ``directory``."""
        if not self.may_hold(directory):
            return []
        return [
            name
            for name, path in self.paths.items()
            if path.is_relative_to(directory)
            or self.real_paths.get(name, path).is_relative_to(directory)
        ]

    def watch_roots(self) -> list[WatchRoot]:
        """The directories to watch."""
        return [root.watch_root for root in self.roots]

    def watched_files(self) -> WatchedFiles:
        """The module files, as strings (for locating errors): a live view, built for free."""
        return WatchedFiles(self)


class WatchedFiles(Collection[str]):
    """The module files of an index as strings, looked up as they are asked for (building
    the set on every use made each ``setup`` cost O(N) for an error that rarely happens)."""

    __slots__ = ("_index",)

    def __init__(self, index: ModuleIndex) -> None:
        self._index = index

    def __contains__(self, item: object) -> bool:
        return isinstance(item, str) and Path(item) in self._index.names

    def __iter__(self) -> Iterator[str]:
        return iter([str(path) for path in self._index.names])

    def __len__(self) -> int:
        return len(self._index.names)


_lstat = os.lstat  # a name of its own, so tests can count the calls


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
    deferred: list[Path] = field(default_factory=list)
    """Paths left out because they could not be read or listed for a passing reason (out
    of file descriptors...): the reloader retries them (see :func:`~._errors.is_transient`)."""
    held: list[Path] = field(default_factory=list)
    """Module files this plan found gone and began to hold (the deletion grace)."""
    back: list[Path] = field(default_factory=list)
    """Held module files this plan found back within the grace."""
    carrier: str | None = None
    """The one unloaded module whose generation carries values (``scope.carry``), if one
    does: a single provider without a serving generation in this plan may take them over
    (a renamed module; see :mod:`._plan_builder`)."""

    @property
    def empty(self) -> bool:
        """True when nothing changed."""
        return not (self.sources or self.unload or self.unreadable)


def importers_of(imports: Mapping[str, Collection[str]]) -> dict[str, set[str]]:
    """The reverse of ``imports``: module → the modules that import it."""
    importers: dict[str, set[str]] = {}
    for name, imported in imports.items():
        for dependency in imported:
            importers.setdefault(dependency, set()).add(name)
    return importers


def dependents(seeds: Iterable[str], importers: Mapping[str, Collection[str]]) -> set[str]:
    """Every module that imports one of ``seeds``, directly or through others (seeds excluded);
    ``importers`` as :func:`importers_of` gives them."""
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


_CLAIMS: dict[str, weakref.ref[NameClaims]] = {}


class WatchedModuleSpec(importlib.machinery.ModuleSpec):
    """The spec of a module a reloader executed: it marks the module as the reloader's."""


def owned(module: ModuleType) -> bool:
    """True for a module object made by a reloader."""
    return isinstance(getattr(module, "__spec__", None), WatchedModuleSpec)


class NameClaims:
    """The names one reloader's modules hold, checked against everything else."""

    __slots__ = ("__weakref__", "_held", "_installed", "_where")

    def __init__(self, index: ModuleIndex) -> None:
        self._where = index  # tells where another reloader has a name (``path_of``)
        self._held: set[str] = set()
        self._installed: _InstalledNames | None = None

    def __contains__(self, name: str) -> bool:
        return name in self._held

    def expect(self, count: int) -> None:
        """``count`` names may be claimed soon: list ``sys.path`` once if that is cheaper."""
        self._installed = _InstalledNames() if count > _LISTING_PAYS_OFF else None

    def claim(self, name: str, path: Path) -> None:
        """Take ``name`` for the module in ``path``.

        Raises:
            ModuleNameClashError: another reloader holds it, a module this process imported
                has it, or it would shadow an installed module.
        """
        if name in self._held:
            return
        owner_ref = _CLAIMS.get(name)
        owner = owner_ref() if owner_ref is not None else None
        if owner is not None and owner is not self:
            other = owner._where.path_of(name)
            raise ModuleNameClashError(
                f"module name {name!r} is already loaded by another hotseam reloader "
                f"(from {other}); {rename(path, name)}"
            )
        existing = sys.modules.get(name)
        if existing is not None and not owned(existing):
            raise ModuleNameClashError(
                f"module name {name!r} is already imported in this process (from "
                f"{_origin_of(existing)}); {rename(path, name)} so it does not shadow "
                "that module"
            )
        if "." not in name and existing is None:
            installed = self._installed
            if installed is None or installed.may_hold(name):
                origin = installed_origin(name)
                if origin is not None and origin != path:
                    raise ModuleNameClashError(
                        f"module name {name!r} would shadow the installed module {origin}; "
                        f"{rename(path, name)}"
                    )
        _CLAIMS[name] = weakref.ref(self)
        self._held.add(name)

    def release(self, name: str) -> None:
        if name in self._held:
            self._held.discard(name)
            owner_ref = _CLAIMS.get(name)
            if owner_ref is not None and owner_ref() in (self, None):
                del _CLAIMS[name]


_LISTING_PAYS_OFF = 16
"""New names in one reload from which listing ``sys.path`` once beats a search per name."""


class _InstalledNames:
    """The top-level names ``sys.path``'s folders may provide, case-folded: a superset, so a
    name not in it surely is not installed there. Any entry that is not a readable folder
    (a zip file, say) turns the filter off."""

    __slots__ = ("_names", "_path")

    def __init__(self) -> None:
        self._path: list[str] = []
        self._names: set[str] | None = None

    def may_hold(self, name: str) -> bool:
        if self._path != sys.path:  # also when a module body changed sys.path
            self._path = list(sys.path)
            self._names = _list_importable(self._path)
        return self._names is None or name.casefold() in self._names


def _list_importable(entries: list[str]) -> set[str] | None:
    names: set[str] = set()
    for entry in entries:
        try:
            with os.scandir(entry or os.curdir) as listing:
                for item in listing:
                    names.add(item.name.partition(".")[0].casefold())
        except FileNotFoundError:
            continue  # nothing is imported from it
        except OSError:  # a zip file, an unreadable folder: search every name
            return None
    return names


def installed_origin(name: str) -> Path | None:
    """Where ``import name`` would come from without the reloader, if anywhere."""
    if name in sys.builtin_module_names:
        return Path(f"<built-in module {name}>")
    try:
        spec = importlib.machinery.PathFinder.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.origin and spec.origin not in ("namespace", "built-in", "frozen"):
        return Path(spec.origin).resolve()
    locations = spec.submodule_search_locations
    if locations:
        return Path(next(iter(locations))).resolve()
    return None


def _origin_of(module: ModuleType) -> str:
    """Where an imported module really comes from: its file, its package folders (a
    namespace package has no file), or "a built-in module"."""
    file = getattr(module, "__file__", None)
    if file:
        return str(file)
    folders = list(getattr(module, "__path__", None) or ())
    if folders:
        return "the namespace package in " + ", ".join(str(folder) for folder in folders)
    return "a built-in module"


def rename(path: Path, name: str) -> str:
    """A concrete rename to suggest for the watched file (or package folder) at ``path``."""
    last = name.rpartition(".")[2]
    if path.name == "__init__.py":
        return f"rename the folder {path.parent} (for example to {last}_ui/)"
    return f"rename {path} (for example to {path.with_name(f'{last}_ui.py').name})"
