"""Module names: which a watched module may take, and which modules are the reloader's.

A watched module lives in ``sys.modules`` under its name while it serves, so its name must
not be another live reloader's, nor a module this process imported, nor an installed
module it would shadow (``json.py`` in a provider folder). The last check searches
``sys.path``; a start of many modules first lists the ``sys.path`` folders once, so that only
names found there are searched for (``PathFinder.find_spec`` per name cost a start as much
as executing the module).
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
import weakref
from pathlib import Path
from types import ModuleType

from ._errors import ModuleNameClashError
from ._planner import ModuleIndex

__all__ = ["NameClaims", "WatchedModuleSpec", "owned"]

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
