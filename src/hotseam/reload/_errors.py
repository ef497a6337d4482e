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

A failure of a watched module is never raised: it is a :class:`LoadError` of strings only,
since an exception holds its traceback, whose frames hold the failed generation's namespace,
which must be free to go.

**Failures that pass** (:data:`TRANSIENT_ERRNOS`: out of descriptors or memory, an
interrupted call, ``EIO``/``ESTALE`` from a network file system whose server is away): the
file is fine, it just cannot be opened now. A failed load would never be retried (the file
does not change again) and a file gone would be unloaded, so the read is *deferred*:
retried from :data:`FIRST_RETRY` doubling up to :data:`LAST_RETRY` seconds for as long as
it takes (:class:`~._plan_builder.Deferrals`), logged ``reload.deferred`` once per episode
and ``reload.recovered`` at its end.
"""

from __future__ import annotations

import errno
import linecache
import os
import re
import stat
import traceback
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from .._core import HarnessError

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


def file_type(mode: int) -> str:
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


# -- failures that pass ----------------------------------------------------------------------------

TRANSIENT_ERRNOS: Final = frozenset(
    {
        errno.EMFILE,  # this process is out of file descriptors
        errno.ENFILE,  # the whole system is
        errno.ENOMEM,
        errno.ENOBUFS,
        errno.EAGAIN,  # also EWOULDBLOCK
        errno.EINTR,  # retried by Python itself (PEP 475), except where a handler raised
        errno.EIO,  # a network file system whose server does not answer (soft mounts, FUSE)
        errno.ESTALE,  # an NFS handle gone stale under a path that is fine again
    }
)
"""The ``errno`` values of a failure that says nothing about the file: try again later."""

FIRST_RETRY: Final = 0.05
"""Seconds before the first retry of a deferred read; each later one waits twice as long…"""
LAST_RETRY: Final = 1.0
"""…up to this many seconds: a read deferred for long is retried at least this often."""

_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def transient_errno(error: BaseException) -> int | None:
    """The ``errno`` of ``error`` if it is one of :data:`TRANSIENT_ERRNOS`, else ``None``.

    An :class:`OSError` is looked at first, then its cause and context (a
    ``ModuleNotFoundError`` raised from a failed read), then the ``(os error N)`` a
    watchfiles error (from Rust) carries in its message.
    """
    for current in chain_of(error):
        if isinstance(current, OSError) and current.errno in TRANSIENT_ERRNOS:
            return current.errno
        if not isinstance(current, OSError):
            found = _OS_ERROR.search(str(current))
            if found is not None and int(found.group(1)) in TRANSIENT_ERRNOS:
                return int(found.group(1))
    return None


def is_transient(error: BaseException) -> bool:
    """True when ``error`` is (or was caused by) a failure that passes: see the module."""
    return transient_errno(error) is not None


def describe_errno(error: BaseException) -> tuple[str, str]:
    """``("EMFILE", "Too many open files")`` for a transient ``error``."""
    number = transient_errno(error)
    if number is None:
        return type(error).__name__, str(error)
    return errno.errorcode.get(number, str(number)), os.strerror(number)


def chain_of(error: BaseException) -> list[BaseException]:
    """``error``, its cause or context, theirs...: each once."""
    found: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not seen for seen in found):
        found.append(current)
        current = current.__cause__ or current.__context__
    return found
