"""Watched paths: what each is (:class:`Root`), and those given through a symbolic link,
followed when the link is pointed elsewhere.

A watched path is resolved once, when the reloader is made (``current/providers`` with
``current -> releases/v1`` watches ``releases/v1/providers``). An atomic deploy points the
link at a new release (``ln -sfn releases/v2 current``, or a new link renamed over it): the
old release is still there, unchanged, so nothing watching it notices. :class:`LinkedRoots`
resolves each such path again (one ``realpath`` per linked path, every ``root_check``
seconds) and tells which now lead elsewhere; the reloader then watches the new target and
loads what changed, as for a folder replaced in place.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .._core import get_logger
from ._errors import ReloadPathError, is_transient
from ._events import display_path
from ._watcher import WatchRoot, is_module_file_name

__all__ = ["LinkedRoots", "Root", "RootKind", "refused_link"]

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
        """Each root whose given path now resolves elsewhere → the root it leads to now.

        A path that leads nowhere usable (the link removed, its target gone, now a file
        that is not a module) is logged once and keeps its root until it leads somewhere.
        """
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
