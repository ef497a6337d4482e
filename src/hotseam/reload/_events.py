"""What the reloader reports: reload events, each module's status, what one reload did.

Every event is logged as a structlog event on ``hotseam.reload`` (``reload.planned``,
``reload.committed``, ``reload.aborted``, ``reload.unloaded``, ``reload.dispose_failed``,
``reload.task_failed``) with a one-line ``summary`` field, passed to the ``on_event``
callback, and sent to every open :meth:`Reloader.events` stream. A :class:`ReloadResult` is
plain data over the events of one reload, readable without the machinery that made it.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Literal, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._core import get_logger
from ._errors import LoadError, ReloadError

SLOW_NOTICE = 1.0
"""Seconds a module body or setup may run before a progress line names it."""

_log = get_logger("hotseam.reload")
EventT = TypeVar("EventT", bound="ReloadEvent")


ModuleKind = Literal["provider", "helper"]
"""A provider module has a ``setup(scope)`` function; a helper has none."""


class ModuleState(enum.Enum):
    """Where a module stands after its latest load attempt."""

    ACTIVE = "active"
    """Its latest content is loaded (and, for a provider, set up and active)."""
    FAILED = "failed"
    """Its latest content failed to load; ``generation`` (if any) is still the one serving."""
    UNLOADED = "unloaded"
    """Its file was deleted (or left the watched paths); nothing of it is active."""


@dataclass(frozen=True, slots=True)
class ModuleStatus:
    """One watched module.

    Attributes:
        path: The module's file.
        module: Its import name (``my_ui``, ``providers.helpers``).
        kind: ``provider`` or ``helper`` for the serving generation (``None`` before any).
        state: See :class:`ModuleState`.
        generation: The number of the generation currently serving, counted from 1 per
            module; ``None`` when none is (never loaded, unloaded, or lost at commit).
        error: The error of the latest failed attempt, or of a crashed background task of
            the serving generation; ``None`` after a clean load.
        load_ms: How long the latest attempt took to read, execute and set up the module.
        imports: The watched modules the serving generation imported while it executed.
    """

    path: Path
    module: str
    kind: ModuleKind | None
    state: ModuleState
    generation: int | None
    error: LoadError | None
    load_ms: float | None
    imports: tuple[str, ...]


class NotLoadedError(KeyError):
    """No watched module was loaded from a path (``Reloader.status_of``): a ``KeyError``
    whose ``str()`` is the plain sentence (``KeyError`` would quote it)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def display_path(path: Path) -> str:
    """``path`` relative to the working directory when it is below it, else absolute
    (compared as text: pathlib's ``relative_to`` cost as much as setting a module up)."""
    text = os.fspath(path)
    try:
        cwd = os.getcwd()
    except OSError:  # the working directory was deleted
        return text
    if text == cwd:
        return "."
    prefix = cwd if cwd.endswith(os.sep) else cwd + os.sep
    return text[len(prefix) :] if text.startswith(prefix) else text


def describe(error: LoadError) -> str:
    """``Type: message at file:line``, the file shown as :func:`display_path` shows it."""
    text = f"{error.type}: {error.message}"
    if error.location:
        file, colon, line = error.location.rpartition(":")
        if colon and line.isdigit():
            text += f" at {display_path(Path(file))}:{line}"
        else:
            text += f" at {display_path(Path(error.location))}"
    return text


@dataclass(frozen=True, slots=True)
class ReloadEvent:
    """Base of every reload event; ``kind`` names it and ``summary`` says it in one line.

    ``batch`` numbers the reload the event belongs to (reloads that changed something are
    counted from 1, normally the initial load; ``None`` for a task crash, which belongs to
    no reload). Events of one batch all come before the next batch's ``planned`` event.
    """

    kind: ClassVar[str] = "event"
    level: ClassVar[str] = "info"

    batch: int | None

    @property
    def summary(self) -> str:
        """One line for a human (each event class says more)."""
        return f"reload event {self.kind}"

    def log_fields(self) -> dict[str, Any]:
        """The structured fields of the ``reload.<kind>`` log event: the event's own, paths
        (and other values in tuples) as text, milliseconds rounded to the microsecond."""
        return {f.name: _loggable(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class ReloadPlanned(ReloadEvent):
    """A reload is about to run: what changed, and which modules it executes or unloads.

    ``modules`` lists the files to execute in dependency order: the changed ones and every
    loaded module that imports them, directly or transitively.
    """

    kind: ClassVar[str] = "planned"
    level: ClassVar[str] = "debug"

    changed: tuple[Path, ...]
    modules: tuple[Path, ...]
    unloading: tuple[Path, ...]

    @property
    def summary(self) -> str:
        parts = []
        if self.modules:
            parts.append("loading " + ", ".join(display_path(p) for p in self.modules))
        if self.unloading:
            parts.append("unloading " + ", ".join(display_path(p) for p in self.unloading))
        return "; ".join(parts) or "nothing to do"


@dataclass(frozen=True, slots=True)
class ReloadCommitted(ReloadEvent):
    """A module's new generation is active (for a provider: set up, its registrations live).

    ``duration_ms`` runs from the start of the reload to this commit; ``load_ms`` is this
    module's own read + execute + setup time; ``swap_ms`` is how long the provider swap
    (dispose old, activate new) took, during which asks wait. The summary shows ``load_ms``:
    in a batch of several modules, each line tells that module's own time.
    """

    kind: ClassVar[str] = "committed"

    path: Path
    module: str
    module_kind: ModuleKind
    generation: int
    duration_ms: float
    load_ms: float
    swap_ms: float

    @property
    def summary(self) -> str:
        verb = "loaded" if self.generation == 1 else "reloaded"
        return (
            f"{verb} {display_path(self.path)} (generation {self.generation}) in "
            f"{_ms(self.load_ms)} ms"
        )


@dataclass(frozen=True, slots=True)
class ReloadAborted(ReloadEvent):
    """A module's new content failed to load; ``kept_generation`` (if any) keeps serving."""

    kind: ClassVar[str] = "aborted"
    level: ClassVar[str] = "error"

    path: Path
    module: str
    error: LoadError
    kept_generation: int | None

    @property
    def summary(self) -> str:
        kept = (
            f"keeping generation {self.kept_generation}"
            if self.kept_generation is not None
            else "no generation of it is active"
        )
        return f"failed to load {display_path(self.path)}: {describe(self.error)}; {kept}"

    def log_fields(self) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "path": str(self.path),
            "module": self.module,
            "phase": self.error.phase,
            "error_type": self.error.type,
            "error": self.error.message,
            "location": self.error.location,
            "kept_generation": self.kept_generation,
            "traceback": self.error.traceback,
        }


@dataclass(frozen=True, slots=True)
class ModuleUnloaded(ReloadEvent):
    """A module's file is gone: its generation was disposed and nothing replaces it."""

    kind: ClassVar[str] = "unloaded"

    path: Path
    module: str
    generation: int | None

    @property
    def summary(self) -> str:
        disposed = f" (generation {self.generation} disposed)" if self.generation else ""
        return f"unloaded {display_path(self.path)}{disposed}"


@dataclass(frozen=True, slots=True)
class DisposeFailed(ReloadEvent):
    """Disposers of a generation raised or overran their time bound; it was disposed anyway."""

    kind: ClassVar[str] = "dispose_failed"
    level: ClassVar[str] = "warning"

    path: Path
    module: str
    generation: int
    errors: tuple[LoadError, ...] = field(default=())

    @property
    def summary(self) -> str:
        listed = "; ".join(describe(error) for error in self.errors)
        return (
            f"disposing {display_path(self.path)} generation {self.generation}: "
            f"{len(self.errors)} disposer(s) failed ({listed}); it was disposed anyway"
        )

    def log_fields(self) -> dict[str, Any]:
        logged = ReloadEvent.log_fields(self)
        logged["traceback"] = "\n".join(error.traceback for error in self.errors)
        return logged


@dataclass(frozen=True, slots=True)
class TaskFailed(ReloadEvent):
    """A background task spawned by a provider's setup crashed.

    The crash is reported and the generation stays active (its provider keeps serving);
    saving the module again starts a fresh generation with fresh tasks.
    """

    kind: ClassVar[str] = "task_failed"
    level: ClassVar[str] = "error"

    path: Path
    module: str
    generation: int
    task: str
    error: LoadError

    @property
    def summary(self) -> str:
        return (
            f"background task {self.task} of {display_path(self.path)} (generation "
            f"{self.generation}) crashed: {describe(self.error)}; the generation stays active"
        )

    def log_fields(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "module": self.module,
            "generation": self.generation,
            "task": self.task,
            "error_type": self.error.type,
            "error": self.error.message,
            "location": self.error.location,
            "traceback": self.error.traceback,
        }


def report_slow(what: str, path: Path, module: str, bound: float) -> None:
    """Log ``reload.slow``: ``what`` (``executing``, ``setting up``) of ``path`` has run for
    :data:`SLOW_NOTICE` seconds, so a slow load does not look like a frozen program."""
    if bound <= SLOW_NOTICE:
        return
    _log.info(
        "reload.slow",
        path=str(path),
        module=module,
        phase=what,
        seconds=SLOW_NOTICE,
        summary=f"{what} {display_path(path)}: still running after {SLOW_NOTICE:g} s "
        f"(time bound {bound:g} s)",
    )


def _loggable(value: object) -> object:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return [str(item) for item in value]
    if isinstance(value, float):
        return round(value, 3)
    return value


def _ms(value: float) -> str:
    return str(round(value)) if value >= 10 else f"{value:.1f}"


class EventStream:
    """An async iterator of reload events, open from creation until closed.

    Events are buffered from the moment the stream is created (so create it *before*
    causing a change, then iterate). Use it as ``async with reloader.events() as events:``
    or close it with :meth:`aclose`; the stream also ends when the reloader closes. A stream
    that falls ``max_buffer`` events behind loses the newest ones and :attr:`dropped` counts
    them.
    """

    def __init__(self, emitter: Emitter, max_buffer: int) -> None:
        self._emitter = emitter
        self._send: MemoryObjectSendStream[ReloadEvent]
        self._receive: MemoryObjectReceiveStream[ReloadEvent]
        self._send, self._receive = anyio.create_memory_object_stream[ReloadEvent](max_buffer)
        self.dropped = 0

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> ReloadEvent:
        try:
            return await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._receive.close()
            raise StopAsyncIteration from None

    async def next(self, kind: type[EventT], /, **fields: object) -> EventT:
        """Return the next event of class ``kind`` whose attributes equal ``fields``.

        For example ``await events.next(ReloadCommitted, path=file)``. Raises
        :class:`anyio.EndOfStream` if the stream ends first.
        """
        while True:
            try:
                event = await self._receive.receive()
            except anyio.EndOfStream:
                self._receive.close()
                raise
            if isinstance(event, kind) and all(
                getattr(event, name, _MISSING) == value for name, value in fields.items()
            ):
                return event

    def _deliver(self, event: ReloadEvent) -> None:
        try:
            self._send.send_nowait(event)
        except anyio.WouldBlock:
            self.dropped += 1
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._emitter._streams.discard(self)

    def _end(self) -> None:
        self._send.close()

    async def aclose(self) -> None:
        """Stop receiving events."""
        self._emitter._streams.discard(self)
        self._send.close()
        self._receive.close()

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


_MISSING = object()


class Emitter:
    """Sends each event to the log, the callback and the open streams, in that order."""

    def __init__(self, on_event: Callable[[ReloadEvent], object] | None) -> None:
        self._on_event = on_event
        self._streams: set[EventStream] = set()

    def stream(self, max_buffer: int = 1000) -> EventStream:
        if max_buffer < 1:
            raise ValueError(f"max_buffer must be a positive int, got {max_buffer!r}")
        stream = EventStream(self, max_buffer)
        self._streams.add(stream)
        return stream

    def emit(self, event: ReloadEvent) -> None:
        level = event.level
        if _log.enabled(level):
            logged = event.log_fields()
            logged["summary"] = event.summary
            getattr(_log, level)(f"reload.{event.kind}", **logged)
        if self._on_event is not None:
            try:
                self._on_event(event)
            except Exception as error:
                _log.error(
                    "reload.callback_failed",
                    callback=repr(self._on_event),
                    error=f"{type(error).__name__}: {error}",
                    traceback=LoadError.from_exception("exec", error).traceback,
                )
        for stream in list(self._streams):
            stream._deliver(event)

    def close(self) -> None:
        for stream in list(self._streams):
            stream._end()
        self._streams.clear()


@dataclass(frozen=True, slots=True)
class ReloadResult:
    """What one :meth:`Reloader.reload` did (``batch`` is ``None`` when nothing changed).

    A reload that unloaded provider generations is followed at once by a reload of the
    modules that failed while those were alive (see ``docs/reload.md``): ``events`` then
    holds the events of both, and ``batch`` is the first one's number.
    """

    batch: int | None
    events: tuple[ReloadEvent, ...]
    duration_ms: float
    deferred: tuple[Path, ...] = ()
    """Files (or folders) that could not be read (or listed) for a passing reason — out of
    file descriptors or memory, a network file system that does not answer — and were
    left out: the reloader tries them again on its own until it can (logged once as
    ``reload.deferred``), so a later event or :meth:`Reloader.status_of` tells how they
    loaded."""

    @property
    def committed(self) -> tuple[ReloadCommitted, ...]:
        """The modules whose new generation is now active."""
        return tuple(e for e in self.events if isinstance(e, ReloadCommitted))

    @property
    def aborted(self) -> tuple[ReloadAborted, ...]:
        """The modules that failed to load (their previous generation, if any, serves on)."""
        return tuple(e for e in self.events if isinstance(e, ReloadAborted))

    @property
    def unloaded(self) -> tuple[ModuleUnloaded, ...]:
        """The modules whose file is gone."""
        return tuple(e for e in self.events if isinstance(e, ModuleUnloaded))

    @property
    def ok(self) -> bool:
        """True when no module failed to load."""
        return not self.aborted

    def raise_for_errors(self) -> None:
        """Raise :class:`ReloadError` listing every module that failed to load, if any."""
        if self.aborted:
            listed = "; ".join(f"{display_path(e.path)}: {e.error}" for e in self.aborted)
            raise ReloadError(
                f"{len(self.aborted)} module(s) failed to load: {listed}",
                details={"errors": [e.log_fields() for e in self.aborted]},
            )
