"""Where something was created: the frames of the caller's own code, libraries left out.

The escape check, the growth mode and the zombie report name "the line that created it": a
frame of the standard library, an installed package or hotseam is not a line the test
author can change, so it is skipped; a creation with no other frame is the
infrastructure's (an event loop's self-pipe), not reported. A folder a test copied its
providers from (``ReloadDriver(origin=...)``, ``load_folder``) is registered here, so
reports name the user's file instead of the copy."""

from __future__ import annotations

import os
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

StackFrame = tuple[str, int, str]
"""``(filename, line, function)`` of one frame."""

_MAX_FRAMES = 30
_LOOP_LIBRARIES = {
    "asyncio": f"{os.sep}asyncio{os.sep}",
    "anyio": f"{os.sep}anyio{os.sep}",
    "trio": f"{os.sep}trio{os.sep}",
}


def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    dirs.update({sys.prefix, sys.base_prefix, sys.exec_prefix})
    dirs.add(str(Path(__file__).resolve().parents[1]))  # hotseam itself
    dirs.add(str(Path(__file__).parents[1]))
    expanded = set()
    for directory in dirs:
        expanded.add(directory.rstrip(os.sep) + os.sep)
        expanded.add(os.path.realpath(directory).rstrip(os.sep) + os.sep)
    return tuple(sorted(expanded))


_LIBRARY_DIRS = _library_dirs()
_is_library: dict[str, bool] = {}
_origins: dict[str, str] = {}


def is_library(filename: str) -> bool:
    """True for code the test author does not write: stdlib, installed packages, hotseam."""
    known = _is_library.get(filename)
    if known is None:
        known = filename.startswith(("<", *_LIBRARY_DIRS))
        _is_library[filename] = known
    return known


@dataclass(frozen=True, slots=True)
class Site:
    """Where something was created: the user's frames, outermost first."""

    stack: tuple[StackFrame, ...]

    @property
    def created_at(self) -> str:
        file, line, func = self.stack[-1]
        return f"{file}:{line} (in {func})"


def capture(skip: int = 1, *, unless_via: frozenset[str] = frozenset()) -> Site | None:
    """The site of the caller's caller (``skip`` frames up), or ``None`` when no frame is
    the user's, or when one of the loop libraries ``unless_via`` made it on the user's
    behalf (the walk stops there: most timers and tasks are anyio's, and cost no more).
    Costs one walk up the stack; a filename is classified once."""
    frame = sys._getframe(skip + 1)
    frames: list[StackFrame] = []
    library = _is_library
    while frame is not None and len(frames) < _MAX_FRAMES:
        filename = frame.f_code.co_filename
        known = library.get(filename)
        if known is None:
            known = is_library(filename)
        if not known:
            frames.append((filename, frame.f_lineno, frame.f_code.co_name))
        elif not frames and any(_LOOP_LIBRARIES[name] in filename for name in unless_via):
            return None
        frame = frame.f_back  # type: ignore[assignment]
    if not frames:
        return None
    frames.reverse()
    return Site(tuple(frames))


def add_origin(copy: Path, original: Path) -> None:
    """Reports name files under ``copy`` by their path under ``original``."""
    for variant in {str(copy), os.path.realpath(copy)}:
        _origins[variant.rstrip(os.sep) + os.sep] = str(original).rstrip(os.sep) + os.sep


def forget_origins() -> None:
    """Drop every registered copy (the plugin does this after each test)."""
    _origins.clear()


def name_originals(text: str) -> str:
    """``text`` with every registered copy's path replaced by the original's."""
    for copy in sorted(_origins, key=len, reverse=True):
        text = text.replace(copy, _origins[copy])
    return text
