"""Failures that pass: a file that cannot be read *now* is read again, never given up on.

Out of file descriptors (``EMFILE``: a provider took them all, a flood of connections;
``ENFILE`` for the whole system), out of memory or buffers, an interrupted call, or a
network file system that answers ``EIO`` or ``ESTALE`` while its server is away: the file
is there and fine, it just cannot be opened or listed at this moment. Treating that as a
failed load (nothing would retry it: the file does not change again) or as a file that is
gone (its module would be unloaded) leaves the daemon serving old code, or none.

So a read or a listing that fails with one of :data:`TRANSIENT_ERRNOS` is *deferred*: the
reloader retries it with a bounded backoff (:data:`FIRST_RETRY` doubling up to
:data:`LAST_RETRY` seconds, for as long as it takes), logs ``reload.deferred`` once per
episode naming the file and the reason, and ``reload.recovered`` once it could look at the
file again. A real disk error that keeps answering ``EIO`` stays one episode (logged once),
retried every :data:`LAST_RETRY` seconds at the cost of one failed read.
"""

from __future__ import annotations

import errno
import math
import os
import re
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import anyio

from .._core import get_logger
from ._events import display_path

__all__ = [
    "EVERYTHING",
    "FIRST_RETRY",
    "LAST_RETRY",
    "TRANSIENT_ERRNOS",
    "Deferrals",
    "describe_errno",
    "is_transient",
    "transient_errno",
]

_log = get_logger("hotseam.reload")

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

EVERYTHING: Final = Path("<every watched path>")
"""The key of a deferred listing of every watched path (a start, a reload of everything)."""

_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def transient_errno(error: BaseException) -> int | None:
    """The ``errno`` of ``error`` if it is one of :data:`TRANSIENT_ERRNOS`, else ``None``.

    An :class:`OSError` is looked at first, then its cause and context (a
    ``ModuleNotFoundError`` raised from a failed read), then the ``(os error N)`` a
    watchfiles error (from Rust) carries in its message.
    """
    for current in _chain(error):
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


@dataclass(slots=True)
class _Episode:
    """One path that cannot be read, from its first failure until it is read again."""

    started: float
    attempts: int
    due: float


class Deferrals:
    """The paths a reloader could not look at for a passing reason, and when to retry.

    A path is a module file (its read failed), a path whose listing failed, or
    :data:`EVERYTHING`. Each plan of a reload is one round: :meth:`begin`, then
    :meth:`deferred` for each transient failure and :meth:`looked_at` for each path that
    was read or listed (whatever came of it), then :meth:`end`, which logs the episodes
    that began (``reload.deferred``, once each) and ended (``reload.recovered``), and
    schedules the retries. :meth:`take_due` hands the retries whose time has come; the
    plan that retries them looks at each again (or defers it once more).
    """

    __slots__ = ("_episodes", "_failed", "_looked", "_scheduled")

    def __init__(self) -> None:
        self._episodes: dict[Path, _Episode] = {}
        self._failed: dict[Path, tuple[str, BaseException]] = {}
        self._looked: set[Path] = set()
        self._scheduled: anyio.Event | None = None
        """Set when a retry was scheduled: :meth:`due` looks at the times again."""

    def __bool__(self) -> bool:
        return bool(self._episodes)

    def __contains__(self, path: object) -> bool:
        return path in self._episodes

    def begin(self) -> None:
        """A plan starts: nothing deferred or looked at in it yet."""
        self._failed.clear()
        self._looked.clear()

    def deferred(self, path: Path, error: BaseException, what: str = "read") -> None:
        """``path`` could not be looked at now, ``error`` being transient; ``what`` failed
        (``read``, or ``list``: ``error.filename`` could not be listed)."""
        self._failed[path] = (what, error)

    def looked_at(self, paths: Iterable[Path]) -> None:
        """``paths`` were read or listed (whatever came of it): their episodes end."""
        self._looked.update(paths)

    def paths(self) -> list[Path]:
        """Every path waiting to be looked at again."""
        return list(self._episodes)

    def end(self) -> None:
        """The plan is over: log what began and ended, schedule the retries."""
        now = time.monotonic()
        began: dict[tuple[str | None, str, str], list[Path]] = {}
        for path, (what, error) in self._failed.items():
            episode = self._episodes.get(path)
            if episode is None:
                episode = self._episodes[path] = _Episode(now, 0, now)
                code, text = describe_errno(error)
                subject = _subject(what, error)
                began.setdefault((subject, code, text), []).append(path)
            episode.due = now + min(FIRST_RETRY * 2**episode.attempts, LAST_RETRY)
            episode.attempts += 1
        ended = sorted(self._looked.intersection(self._episodes) - self._failed.keys())
        recovered = {path: self._episodes.pop(path) for path in ended}
        self._failed.clear()
        self._looked.clear()
        for (subject, code, text), paths in began.items():
            _report_deferred(subject, code, text, paths)
        if recovered:
            _report_recovered(recovered, now)
        if self._episodes and self._scheduled is not None:
            self._scheduled.set()

    def next_due(self) -> float | None:
        """When the next retry is due (``time.monotonic()``), or ``None``: none is."""
        due = min((episode.due for episode in self._episodes.values()), default=math.inf)
        return None if due == math.inf else due

    async def due(self) -> AsyncIterator[list[Path]]:
        """Each time retries are due, the paths to look at again (:meth:`take_due`); the
        consumer's plan of them settles them before the next is handed out."""
        while True:
            self._scheduled = anyio.Event()
            due = self.next_due()
            if due is None:
                await self._scheduled.wait()
            else:
                with anyio.move_on_after(due - time.monotonic()):
                    await self._scheduled.wait()
            paths = self.take_due(time.monotonic())
            if paths:
                yield paths

    def take_due(self, now: float) -> list[Path]:
        """The paths whose retry is due at ``now`` (:data:`EVERYTHING` among them: a
        listing of every watched path), to be looked at again by the next plan (which
        schedules them again, or ends their episodes)."""
        due = sorted(path for path, episode in self._episodes.items() if episode.due <= now)
        for path in due:
            self._episodes[path].due = math.inf
        return due


def _subject(what: str, error: BaseException) -> str | None:
    """What could not be done, when it is not reading the deferred file itself: listing a
    folder (``list``), or reading a module the deferred one imports (``import``)."""
    if what == "read":
        return None
    failed = next((e for e in _chain(error) if isinstance(e, OSError) and e.filename), None)
    where = display_path(Path(os.fsdecode(failed.filename))) if failed is not None else "it"
    return f"list {where}" if what == "list" else f"read {where}"


def _chain(error: BaseException) -> list[BaseException]:
    """``error``, its cause or context, theirs...: each once."""
    found: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not seen for seen in found):
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def _report_deferred(subject: str | None, code: str, text: str, paths: list[Path]) -> None:
    shown = _listed(paths)
    doing = f"read {shown}" if subject is None else f"{subject} (for {shown})"
    _log.warning(
        "reload.deferred",
        paths=[str(path) for path in paths],
        errno=code,
        error=text,
        summary=f"cannot {doing} now ({code}: {text}): a passing failure, retried (every "
        f"{LAST_RETRY:g} s at most) until it works; what is loaded keeps serving",
    )


def _report_recovered(recovered: dict[Path, _Episode], now: float) -> None:
    longest = max(now - episode.started for episode in recovered.values())
    attempts = sum(episode.attempts for episode in recovered.values())
    _log.info(
        "reload.recovered",
        paths=[str(path) for path in recovered],
        seconds=round(longest, 3),
        attempts=attempts,
        summary=f"{_listed(list(recovered))} can be read again (after {longest:.1f} s, "
        f"{attempts} attempt(s))",
    )


def _listed(paths: list[Path], most: int = 5) -> str:
    shown = ["every watched path" if path == EVERYTHING else display_path(path) for path in paths]
    if len(shown) > most:
        return ", ".join(shown[:most]) + f" and {len(shown) - most} more"
    return ", ".join(shown)
