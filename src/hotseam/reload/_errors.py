"""What went wrong in a reload: the reloader's errors, and failures as plain data.

The errors the reloader raises::

    HarnessError
     ├── ReloadError           RELOAD_FAILED        ReloadResult.raise_for_errors(): modules failed
     ├── ReloaderClosedError   RELOADER_CLOSED      used before 'async with' or after closing
     └── ReloadPathError       INVALID_RELOAD_PATH  a path is missing or holds no modules
    ImportError
     └── ModuleNameClashError  a watched module's name is taken by another module
    OSError
     └── ModuleTooLargeError   a module file is over the reloader's max_module_size

A failure of a watched module (a syntax error, an exception in ``setup``...) is never
raised: it is reported as a :class:`LoadError`, which keeps strings only, never the
exception object. An exception holds its traceback, the traceback holds frames, and the
frames hold the failed generation's module namespace, which must be free to go once the
reload is over.
"""

from __future__ import annotations

import linecache
import traceback
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .._core import HarnessError

__all__ = [
    "LoadError",
    "LoadPhase",
    "ModuleNameClashError",
    "ModuleTooLargeError",
    "ReloadError",
    "ReloadPathError",
    "ReloaderClosedError",
]

LoadPhase = Literal[
    "read", "compile", "exec", "setup", "dependency", "conflict", "activate", "dispose", "task"
]
"""Where a module's load failed (``dispose`` and ``task`` are failures of a live generation)."""

_PACKAGE_DIR = str(Path(__file__).resolve().parent)


class ReloadError(HarnessError):
    """One or more modules failed to load (raised by :meth:`ReloadResult.raise_for_errors`)."""

    default_code = "RELOAD_FAILED"


class ReloaderClosedError(HarnessError, RuntimeError):
    """The reloader was used after it was closed."""

    default_code = "RELOADER_CLOSED"


class ReloadPathError(HarnessError, ValueError):
    """A path given to the reloader does not exist or cannot hold provider modules."""

    default_code = "INVALID_RELOAD_PATH"


class ModuleNameClashError(ImportError):
    """A watched module's name is already taken by another module in this process.

    Raised where the module would be imported, so its importers fail as they would on any
    import error; reported in the module's status, never raised to the reloader's caller.
    """


class ModuleTooLargeError(OSError):
    """A module file is larger than the reloader's ``max_module_size``: it is not read.

    Reported as the module's load failure (phase ``read``), never raised to the caller.
    """


@dataclass(frozen=True, slots=True)
class LoadError:
    """A failure of one module, reduced to what a person (or a log) needs to see.

    Attributes:
        phase: Where it happened (``compile``, ``exec``, ``setup``, ``conflict``...).
        type: The exception's class name (``SyntaxError``, ``ProviderConflictError``...).
        message: The exception's message.
        location: ``file:line`` of the failing line in watched code when there is one, else
            of the innermost frame; ``None`` when there is no traceback at all.
        traceback: The formatted traceback, without the reloader's own frames.
    """

    phase: LoadPhase
    type: str
    message: str
    location: str | None
    traceback: str

    def __str__(self) -> str:
        where = f" at {self.location}" if self.location else ""
        return f"{self.type}: {self.message}{where}"

    @classmethod
    def from_exception(
        cls,
        phase: LoadPhase,
        error: BaseException,
        watched: Collection[str] = (),
        module_file: str | None = None,
    ) -> LoadError:
        """Summarize ``error``.

        ``watched`` are the module files whose frames matter most; ``module_file`` is where
        the error is located when no frame of watched code is in its traceback.
        """
        message = str(error)
        if isinstance(error, SyntaxError):
            message = error.msg or message
        return cls(
            phase=phase,
            type=type(error).__name__,
            message=message,
            location=_location(error, watched, module_file),
            traceback=_format(error),
        )

    @classmethod
    def at(cls, phase: LoadPhase, type_: str, message: str, location: str | None) -> LoadError:
        """A failure found by looking, not by raising (a conflict, a time-out).

        Its traceback is the one line at ``location`` (``file:line``), as Python shows it.
        """
        text = f"{type_}: {message}\n"
        if location is not None:
            file, _, line = location.rpartition(":")
            if line.isdigit():
                source = linecache.getline(file, int(line)).strip()
                shown = f"\n    {source}" if source else ""
                text = f'  File "{file}", line {line}{shown}\n{text}'
        return cls(phase, type_, message, location, text)


def _location(
    error: BaseException, watched: Collection[str], module_file: str | None
) -> str | None:
    if isinstance(error, SyntaxError) and error.filename:
        return f"{error.filename}:{error.lineno}" if error.lineno else error.filename
    frames = traceback.extract_tb(error.__traceback__)
    for frame in reversed(frames):
        if frame.filename in watched:
            return f"{frame.filename}:{frame.lineno}"
    if module_file is not None:
        return module_file
    outside = [frame for frame in frames if not frame.filename.startswith(_PACKAGE_DIR)]
    if outside:
        return f"{outside[-1].filename}:{outside[-1].lineno}"
    if frames:
        return f"{frames[-1].filename}:{frames[-1].lineno}"
    return None


def _format(error: BaseException) -> str:
    """The traceback as Python prints it, minus the frames of the reloader itself."""
    summary = traceback.TracebackException.from_exception(error)
    kept = [frame for frame in summary.stack if not frame.filename.startswith(_PACKAGE_DIR)]
    summary.stack = traceback.StackSummary.from_list(kept)
    return "".join(summary.format())
