"""Loading watched modules: each file read, then executed in a fresh module object per
generation, with its imports recorded.

``importlib.reload`` re-executes a module in its *existing* namespace, so an exception half
way leaves it torn, and nothing tells which modules used it. Here each execution gets a new
module object, and only a successful one replaces the serving one (in the loader's table
and in ``sys.modules``, where pickle, ``get_type_hints`` and pydantic look). The
``__import__`` the loader gives its modules resolves watched names to the loader's modules,
records each one imported (the planner's dependency graph), gives a module of a reload the
*new* version of every module in that reload, and hands every other import on.

**Where a body runs.** In a daemon thread (:class:`Worker`), so a body that blocks leaves
the loop serving; past its time bound it is abandoned (never installed). Unless
:func:`inert` shows from the bytecode that it cannot run anything but itself: then it runs
on the loop at once. The two thread wake-ups of a hop were most of a save on a loaded
machine (6-10 ms each at a load of 22), so only not hopping removes them.

**Reading.** Off the loop, in chunks, only regular files; only a small file on a local file
system is read on the loop (the thread's round trip is most of a save that changed
nothing). A file over ``max_module_size`` is refused before it is opened: ``compile()``
holds the interpreter lock throughout, so even in a thread it would stall the loop.

**Which file systems are local.** A network file system can block for as long as its server
takes. On Linux ``/proc/self/mountinfo`` maps a device number to its type; anything not
known local is read in a thread. The table is read in a thread (:meth:`Mounts.learn`); the
loop's :meth:`Mounts.is_local` costs one zero-timeout ``poll``: the kernel flags
``mountinfo`` after any (un)mount, and the table is dropped then.
"""

from __future__ import annotations

import builtins
import contextlib
import contextvars
import dis
import errno
import functools
import hashlib
import importlib.machinery
import importlib.util
import math
import os
import queue
import select
import stat
import sys
import threading
import time
import weakref
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, ModuleType
from typing import TYPE_CHECKING, Any

import anyio
import sniffio

from .._core import executing
from ._errors import LoadError, LoadPhase, ModuleTooLargeError, file_type, is_transient
from ._events import SLOW_NOTICE, ModuleKind, ModuleState, ModuleStatus, display_path, report_slow
from ._guard import frames_of_thread, interrupted, stuck_location
from ._planner import FileStat, ModuleIndex, NameClaims, Source, WatchedModuleSpec, owned

if TYPE_CHECKING:
    from .._core import Registration, Scope, ToolRegistration


_real_import = builtins.__import__
NOTHING: frozenset[str] = frozenset()
"""The one empty set of names that records share."""
_EXECUTING = threading.local()  # .stack: the attempts whose bodies this thread executes
INLINE_SOURCE_LIMIT = 64 * 1024
"""Bytes of source above which a module is compiled in the worker thread, never on the
event loop's (a big file's compile takes milliseconds)."""


class _DependencyFailedError(ImportError):
    """Raised at an import of a watched module that failed earlier in the same reload."""

    def __init__(self, name: str, error: LoadError) -> None:
        super().__init__(f"{name} failed to load: {error}", name=name)
        self.load_error = error


class _AbandonedError(ImportError):
    """Raised in an abandoned module body's thread when it imports a watched module."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"cannot import {name}: this module body overran its time bound and was abandoned",
            name=name,
        )


def _abandoned() -> bool:
    """True in the thread of a module body that the reloader stopped waiting for."""
    run = current_run()
    return run is not None and run.abandoned


@dataclass(frozen=True, slots=True)
class Blocker:
    """The registration a module was refused for (a conflict), held weakly, and the module
    that made it (``None``: made outside the reloader)."""

    registration: weakref.ref[Registration[Any] | ToolRegistration]
    module: str | None

    @property
    def gone(self) -> bool:
        """True once the registration is no longer active: the module may load now."""
        registration = self.registration()
        return registration is None or not registration.active


@dataclass(eq=False, slots=True)
class ModuleRecord:
    """Everything the reloader knows about one watched module, across its generations."""

    name: str
    path: Path
    sequence: int
    module: ModuleType | None = None
    kind: ModuleKind | None = None
    generation: int | None = None
    last_generation: int = 0
    digest: str | None = None
    stat: FileStat | None = None
    imports: frozenset[str] = frozenset()
    attempt_imports: frozenset[str] = frozenset()
    missing: frozenset[str] = frozenset()
    scope: Scope | None = None
    state: ModuleState = ModuleState.FAILED
    error: LoadError | None = None
    load_ms: float | None = None
    blocker: Blocker | None = None
    since: int = 0
    """The batch whose commit made the serving generation (0: none yet)."""
    failed_at: int = 0
    """The batch of the last failure (0: none): it happened while every generation
    committed before it was alive, which is what a retry after an unload looks at."""

    def status(self) -> ModuleStatus:
        """The public, frozen view of this record."""
        return ModuleStatus(
            path=self.path,
            module=self.name,
            kind=self.kind,
            state=self.state,
            generation=self.generation,
            error=self.error,
            load_ms=self.load_ms,
            imports=tuple(sorted(self.imports)),
        )


@dataclass(eq=False, slots=True)
class _Attempt:
    """One execution of one module; what its code imported. Found from the importing
    code's globals: the ``loader_state`` of the module's spec while its batch is open."""

    name: str
    batch: int
    imports: set[str] = field(default_factory=set)
    missing: set[str] = field(default_factory=set)
    spec: importlib.machinery.ModuleSpec | None = None


@dataclass(eq=False, slots=True)
class Batch:
    """The modules executed by one reload, not yet committed."""

    id: int
    sources: dict[str, Source]
    staged: dict[str, ModuleType] = field(default_factory=dict)
    failed: dict[str, LoadError] = field(default_factory=dict)
    attempts: dict[str, _Attempt] = field(default_factory=dict)
    load_ms: dict[str, float] = field(default_factory=dict)
    transient: dict[str, OSError] = field(default_factory=dict)
    """Modules that failed because a watched module they import could not be read for a
    passing reason → that failure: they are tried again."""
    compiled: dict[str, tuple[CodeType, float]] = field(default_factory=dict)
    """Code compiled on the loop to tell whether it is inert, and how long that took
    (seconds): the thread executes it without compiling it again."""
    inline: set[str] = field(default_factory=set)
    """Modules whose bodies were executed on the event loop's thread (:func:`inert`)."""

    def imports_of(self, name: str) -> frozenset[str]:
        attempt = self.attempts.get(name)
        return frozenset(attempt.imports) if attempt is not None and attempt.imports else NOTHING


class Loader:
    """Owns the module records, executes modules, and keeps ``sys.modules`` in step."""

    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self.records: dict[str, ModuleRecord] = {}
        self._batch: Batch | None = None
        self._claims = NameClaims(index)
        self._sequence = 0
        # One builtins namespace for all of this loader's modules (a copy per module cost
        # more memory than the rest of the module); its __import__ tells the importer
        # from the globals it is given.
        self._builtins = dict(builtins.__dict__)
        self._builtins["__import__"] = self._module_import
        self._worker = Worker()
        self.abandoned: list[ThreadRun] = []
        """Module bodies abandoned at their time bound (pruned of finished ones when read)."""

    # -- the table ----------------------------------------------------------------------------

    def record(self, name: str, path: Path) -> ModuleRecord:
        """The record of ``name``, created on first use (a file can move; the name stays)."""
        record = self.records.get(name)
        if record is None:
            self._sequence += 1
            record = self.records[name] = ModuleRecord(name, path, self._sequence)
        record.path = path
        return record

    def watched_files(self) -> Collection[str]:
        """Paths of all watched module files, as strings (for locating errors): a free view."""
        return self.index.watched_files()

    # -- executing ----------------------------------------------------------------------------

    def begin(self, batch_id: int, sources: Mapping[str, Source]) -> Batch:
        """Open a reload of ``sources``; modules they import on demand join it."""
        assert self._batch is None, "reloads are serialized"
        self._claims.expect(sum(name not in self._claims for name in sources))
        self._batch = Batch(batch_id, dict(sources))
        return self._batch

    async def execute(self, batch: Batch, names: Sequence[str], timeout: float) -> None:
        """Execute every module of ``names`` not executed yet; failures go to ``batch.failed``.

        An :func:`inert` body executes here, the others in the worker thread; one still
        running after ``timeout`` seconds is abandoned (a ``TimeoutError`` naming the line it
        is stuck at), and the modules after it execute in a new thread.
        """

        def left(names: Sequence[str]) -> list[str]:
            return [name for name in names if name not in batch.staged and name not in batch.failed]

        pending = left(names)
        while pending:
            while pending and self._inert(batch, pending[0]):
                self._execute_inline(batch, pending.pop(0))
            pending = left(pending)
            if not pending:
                return
            steps = [functools.partial(self._execute_in_thread, batch, name) for name in pending]
            run, stuck = await self._worker.run(
                f"executing {pending[0]}",
                steps,
                timeout,
                on_slow=(SLOW_NOTICE, functools.partial(self._report_slow, pending, timeout)),
            )
            if stuck is None:
                return
            name = pending[stuck]
            path = batch.sources[name].path
            run.label = f"executing {name}"
            self.abandoned.append(run)
            location = run.location(self.watched_files()) or str(path)
            batch.staged.pop(name, None)
            batch.failed[name] = LoadError.at(
                "exec",
                "TimeoutError",
                f"executing {path} did not finish within {timeout} s (stuck at {location}); "
                "abandoned: its thread runs on, its module is never installed (the bound "
                "is import_timeout, --import-timeout on the command line)",
                location,
            )
            current = run.current  # the stuck body, and when it started
            batch.load_ms[name] = (
                (time.monotonic() - current[1]) * 1000 if current else timeout * 1000
            )
            pending = left(pending[stuck + 1 :])

    def _inert(self, batch: Batch, name: str) -> bool:
        """True when ``name``'s body can run on the loop (or has run); the code compiled to
        tell is kept."""
        if name in batch.staged or name in batch.failed:
            return True
        source = batch.sources[name]
        if len(source.data) > INLINE_SOURCE_LIMIT:
            return False
        parent = name.rpartition(".")[0]
        if parent and self._loaded_now(batch, parent) is None:
            return False  # executing it executes its package first (or reads it)
        started = time.perf_counter()
        try:
            code = compile(source.data, str(source.path), "exec", dont_inherit=True)
        except BaseException as error:  # the thread compiles it again and reports it
            if interrupted(error):
                raise
            return False
        batch.compiled[name] = (code, time.perf_counter() - started)
        is_package = source.path.name == "__init__.py"
        package = name if is_package else name.rpartition(".")[0]
        return inert(code, functools.partial(self._loaded_import, batch, package))

    def _execute_inline(self, batch: Batch, name: str) -> None:
        """Execute an inert body on the loop; failures go to ``batch.failed``, but the user's
        Ctrl-C arriving meanwhile is not the body's."""
        if name in batch.staged or name in batch.failed:
            return
        batch.inline.add(name)
        try:
            self._execute(batch, name)
        except BaseException as error:  # recorded in batch.failed
            if interrupted(error):
                raise

    def _loaded_import(
        self, batch: Batch, package: str, name: str, fromlist: tuple[str, ...] | None, level: int
    ) -> ModuleType | None:
        """What ``import`` of ``name`` in this batch returns if it can without running code
        (nothing executed, read or looked up through ``__getattr__``), else ``None``."""
        if level:
            if not package:
                return None
            try:
                absolute = importlib.util.resolve_name("." * level + name, package)
            except (ImportError, ValueError):
                return None
        else:
            absolute = name
        parts = absolute.split(".")
        watched = self.index.owns(parts[0])
        if not watched and parts[0] in self.records:
            return None  # a watched module whose file is gone: the import fails, in the thread
        modules: list[ModuleType] = []
        for depth in range(1, len(parts) + 1):
            dotted = ".".join(parts[:depth])
            module = self._loaded_now(batch, dotted) if watched else sys.modules.get(dotted)
            if type(module) is not ModuleType:
                return None
            if getattr(module.__spec__, "_initializing", False):
                return None  # being imported by another thread: the import would wait
            modules.append(module)
        if not fromlist:
            return modules[0]
        target = modules[-1]
        if any(item not in target.__dict__ for item in fromlist):
            return None
        return target

    def _loaded_now(self, batch: Batch, name: str) -> ModuleType | None:
        """The module a watched import of ``name`` gets now without executing or reading."""
        staged = batch.staged.get(name)
        if staged is not None:
            return staged
        if name in batch.failed or name in batch.sources:
            return None
        record = self.records.get(name)
        return record.module if record is not None else None

    def _report_slow(self, names: Sequence[str], timeout: float, index: int) -> None:
        batch = self._batch
        if batch is not None:
            name = names[index]
            report_slow("executing", batch.sources[name].path, name, timeout)

    def _execute_in_thread(self, batch: Batch, name: str) -> None:
        if name in batch.staged or name in batch.failed:
            return  # imported, so executed, by a module before it
        with contextlib.suppress(BaseException):  # recorded in batch.failed
            self._execute(batch, name)

    def end(self, batch: Batch, committed: set[str], unloaded: set[str]) -> None:
        """Settle the reload: committed modules serve, the rest revert, unloaded ones go
        (in ``sys.modules`` and their packages' attributes too)."""
        assert self._batch is batch
        self._batch = None
        self._claims.expect(0)  # let the sys.path listing go
        for attempt in batch.attempts.values():
            if attempt.spec is not None:
                attempt.spec.loader_state = None
        for name in committed:
            record = self.records[name]
            record.module = batch.staged[name]
            record.imports = batch.imports_of(name)
            record.attempt_imports = NOTHING
        for name in unloaded:
            record = self.records[name]
            record.module = None
            record.imports = NOTHING
        touched = set(batch.sources) | set(batch.staged) | set(batch.failed) | unloaded
        for name in sorted(touched):
            self._settle(name)
        for name in unloaded:
            self._claims.release(name)
        for name in set(batch.sources) - committed - unloaded:
            kept = self.records.get(name)
            if kept is not None and kept.module is None:
                self._claims.release(name)

    def close(self) -> None:
        """Forget every module (after their generations were disposed)."""
        self._worker.close()
        for record in self.records.values():
            record.module = None
        for name in sorted(self.records, reverse=True):
            self._settle(name)
            self._claims.release(name)

    def kind_of(self, module: ModuleType) -> tuple[ModuleKind, Callable[..., Any] | None]:
        """``provider`` and its ``setup``, or ``helper`` and ``None``.

        Raises:
            TypeError: ``setup`` exists but is not callable.
        """
        setup = module.__dict__.get("setup")
        if setup is None:
            return "helper", None
        if not callable(setup):
            raise TypeError(
                f"{module.__file__}: 'setup' must be a function 'def setup(scope)' "
                f"(sync or async), got {type(setup).__name__}"
            )
        return "provider", setup

    def _execute(self, batch: Batch, name: str) -> ModuleType:
        source = batch.sources[name]
        started = time.perf_counter()
        attempt = batch.attempts[name] = _Attempt(name, batch.id)
        phase: LoadPhase = "compile"
        compiled = batch.compiled.pop(name, None)
        if compiled is not None:
            started -= compiled[1]  # its load time includes compiling it
        try:
            code = (
                compiled[0]
                if compiled is not None
                else compile(source.data, str(source.path), "exec", dont_inherit=True)
            )
            phase = "exec"
            self._claims.claim(name, source.path)
            parent_name, _, child = name.rpartition(".")
            parent = self._require(parent_name, attempt, record=False) if parent_name else None
            module = self._new_module(name, source.path, attempt)
            batch.staged[name] = module
            sys.modules[name] = module
            stack = _EXECUTING.__dict__.setdefault("stack", [])
            stack.append(attempt)
            try:
                with executing(str(source.path)):
                    exec(code, module.__dict__)
            except BaseException:
                if not _abandoned():
                    batch.staged.pop(name, None)
                raise
            finally:
                stack.pop()
            if _abandoned():
                raise _AbandonedError(name)  # noqa: TRY301 - nothing of it may be installed
            if parent is not None:
                setattr(parent, child, module)
        except BaseException as error:  # sys.exit(), KeyboardInterrupt... raised by the body
            if _abandoned():
                raise
            if isinstance(error, _DependencyFailedError):
                root = error.load_error
                batch.failed[name] = LoadError(
                    "dependency",
                    root.type,
                    f"{root.message} (while importing {error.name}, which failed to load)",
                    root.location,
                    root.traceback,
                )
            else:
                batch.failed[name] = LoadError.from_exception(
                    phase, error, self.watched_files(), str(source.path)
                )
            batch.load_ms[name] = (time.perf_counter() - started) * 1000
            raise
        batch.load_ms[name] = (time.perf_counter() - started) * 1000
        return module

    def _new_module(self, name: str, path: Path, attempt: _Attempt) -> ModuleType:
        is_package = path.name == "__init__.py"
        module = ModuleType(name)
        file = str(path)
        spec = WatchedModuleSpec(name, None, origin=file, is_package=is_package)
        spec.has_location = True
        module.__spec__ = spec
        module.__file__ = file
        module.__cached__ = None  # type: ignore[attr-defined]
        module.__package__ = name if is_package else name.rpartition(".")[0]
        if is_package:
            module.__path__ = [str(path.parent)]
            spec.submodule_search_locations = [str(path.parent)]
        spec.loader_state = attempt
        attempt.spec = spec
        module.__dict__["__builtins__"] = self._builtins
        return module

    def _module_import(
        self,
        name: str,
        globals_: Mapping[str, object] | None = None,
        locals_: Mapping[str, object] | None = None,
        fromlist: Sequence[str] | None = (),
        level: int = 0,
    ) -> ModuleType:
        """``__import__`` for watched modules: the importer is the module whose globals
        these are; without an open attempt (live code) it is served what serves now."""
        spec = globals_.get("__spec__") if globals_ is not None else None
        attempt = getattr(spec, "loader_state", None)
        if not isinstance(attempt, _Attempt):
            executing_now: list[_Attempt] | None = getattr(_EXECUTING, "stack", None)
            attempt = executing_now[-1] if executing_now else _Attempt("", 0)
        return self._import(attempt, name, globals_, locals_, fromlist or (), level)

    def _import(
        self,
        attempt: _Attempt,
        name: str,
        globals_: Mapping[str, object] | None,
        locals_: Mapping[str, object] | None,
        fromlist: Sequence[str],
        level: int,
    ) -> ModuleType:
        if level:
            package = globals_.get("__package__") if globals_ is not None else None
            if not isinstance(package, str) or not package:
                raise ImportError("attempted relative import with no known parent package")
            absolute = importlib.util.resolve_name("." * level + name, package)
        else:
            absolute = name
        top_level = absolute.partition(".")[0]
        if not self.index.owns(top_level):
            if top_level in self.records:
                # A watched module whose file is gone: ``sys.modules`` still holds it until
                # the reload commits, but the import must fail as it would from disk.
                attempt.missing.add(absolute)
                raise ModuleNotFoundError(f"No module named {absolute!r}", name=absolute)
            try:
                return _real_import(name, globals_, locals_, fromlist, level)
            except ModuleNotFoundError:
                attempt.missing.add(absolute)
                raise
        parts = absolute.split(".")
        module = top = self._require(parts[0], attempt)
        for depth in range(2, len(parts) + 1):
            module = self._require(".".join(parts[:depth]), attempt)
        if not fromlist:
            return top
        wanted = list(fromlist)
        if "*" in wanted:
            wanted = [item for item in getattr(module, "__all__", ()) if isinstance(item, str)]
        for item in wanted:
            submodule = f"{absolute}.{item}"
            if not hasattr(module, item) and self.index.path_of(submodule) is not None:
                self._require(submodule, attempt)
        return module

    def _require(self, name: str, attempt: _Attempt, *, record: bool = True) -> ModuleType:
        """The module ``name`` as ``attempt`` should see it, executing it if needed."""
        if _abandoned():
            raise _AbandonedError(name)
        if record and name != attempt.name:
            attempt.imports.add(name)
        batch = self._batch
        if batch is None or batch.id != attempt.batch:
            return self._serving(name, attempt)
        staged = batch.staged.get(name)
        if staged is not None:
            return staged  # also a module still executing: an import cycle, as in Python
        failed = batch.failed.get(name)
        if failed is not None:
            raise _DependencyFailedError(name, failed)
        if name not in batch.sources:
            record_ = self.records.get(name)
            if record_ is not None and record_.module is not None:
                return record_.module
            path = self.index.path_of(name)
            if path is None:
                attempt.missing.add(name)
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            try:
                batch.sources[name] = read_file(path, self.index.max_size)
            except OSError as error:
                if is_transient(error):
                    batch.transient.setdefault(attempt.name, error)
                raise ModuleNotFoundError(f"cannot read {path}: {error}", name=name) from error
        try:
            return self._execute(batch, name)
        except _DependencyFailedError:
            raise
        except BaseException as error:
            if _abandoned():
                raise
            raise _DependencyFailedError(name, batch.failed[name]) from error

    def _serving(self, name: str, attempt: _Attempt) -> ModuleType:
        """An import made by live code, outside a reload: the serving generation."""
        record = self.records.get(name)
        if record is not None and record.module is not None:
            return record.module
        path = self.index.path_of(name)
        if path is None:
            attempt.missing.add(name)
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        why = record.error if record is not None else None
        raise ImportError(
            f"the watched module {name!r} ({path}) is not loaded"
            + (f": its last load failed ({why})" if why is not None else "")
            + "; a watched module can only be imported while a module that needs it executes",
            name=name,
        )

    def _settle(self, name: str) -> None:
        """Make ``sys.modules`` and the parent package agree with what serves ``name``."""
        record = self.records.get(name)
        serving = record.module if record is not None else None
        if name in self._claims or serving is not None:
            current = sys.modules.get(name)
            if serving is not None:
                sys.modules[name] = serving
            elif (current is not None and owned(current)) or name in self._claims:
                sys.modules.pop(name, None)
        parent_name, _, child = name.rpartition(".")
        if not parent_name:
            return
        parent_record = self.records.get(parent_name)
        parent = parent_record.module if parent_record is not None else None
        if parent is None:
            return
        if serving is not None:
            setattr(parent, child, serving)
        elif isinstance(parent.__dict__.get(child), ModuleType):
            delattr(parent, child)


# -- the module-body thread ------------------------------------------------------------------------


@dataclass(eq=False, slots=True)
class ThreadRun:
    """Steps of work running in a :class:`Worker`'s daemon thread; ``abandoned`` once the
    event loop stopped waiting for one of them (its thread runs on, and runs no more steps)."""

    label: str
    done: anyio.Event = field(default_factory=anyio.Event)
    error: BaseException | None = None
    ident: int | None = None
    abandoned: bool = False
    current: tuple[int, float] | None = None
    """The step running and when it started (``time.monotonic()``); set by the thread."""

    @property
    def running(self) -> bool:
        return not self.done.is_set()

    def location(self, watched: Collection[str]) -> str | None:
        """Where the thread is stuck right now (``None`` once it ended)."""
        if self.done.is_set():
            return None
        return stuck_location(frames_of_thread(self.ident), watched)


_CURRENT = threading.local()
_STOP = object()

HANDOFF_WAIT = 0.001
"""Seconds :meth:`Worker.run` waits for its steps blocking (the GIL released) before it
waits on the event loop: a typical module body executes well within it, and it is below
the interpreter's switch interval (5 ms) that a body running Python imposes anyway."""


def _call_soon_threadsafe() -> Callable[[Callable[[], object]], object]:
    """The running loop's own "call this soon, from any thread", looked up on the loop (a
    mismatch fails loudly here, not in the thread, where the loop would never learn that
    the body ended). Not ``anyio.lowlevel.current_token()``: before anyio 4.11 it has no
    ``backend_class`` to call through."""
    if sniffio.current_async_library() == "trio":
        import trio

        return trio.lowlevel.current_trio_token().run_sync_soon
    import asyncio

    return asyncio.get_running_loop().call_soon_threadsafe


def current_run() -> ThreadRun | None:
    """The :class:`ThreadRun` whose thread this is, if any."""
    run: ThreadRun | None = getattr(_CURRENT, "run", None)
    return run


def _serve(jobs: queue.SimpleQueue[Any]) -> None:
    """A worker thread's life: run jobs until told to stop, or until one is abandoned."""
    while True:
        job = jobs.get()
        if job is _STOP:
            return
        keep_serving = job()
        del job  # what it ran (a batch and its sources) must not wait here for the next job
        if not keep_serving:
            return  # abandoned: a fresh thread takes the next job


class Worker:
    """One reusable daemon thread for module bodies, so a body that blocks leaves the event
    loop serving (kept between reloads: starting a thread costs twice a hand-off).

    A step that overruns its time bound is *abandoned*: Python cannot stop a thread, so it
    runs on, runs no further step, and the next steps go to a new thread.
    """

    __slots__ = ("__weakref__", "_jobs", "_stopper")

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Any] | None = None
        self._stopper: weakref.finalize[Any, Worker] | None = None

    def close(self) -> None:
        """Let the idle thread end (a busy one ends after its job)."""
        if self._jobs is not None:
            self._jobs.put(_STOP)
        self._retire()

    def _submit(self, job: Callable[[], bool]) -> None:
        jobs = self._jobs
        if jobs is None:
            jobs = self._jobs = queue.SimpleQueue()
            thread = threading.Thread(
                target=_serve, args=(jobs,), name="hotseam: module bodies", daemon=True
            )
            thread.start()
            # A worker nobody closed ends with it (the thread holds only the queue).
            self._stopper = weakref.finalize(self, jobs.put, _STOP)
        jobs.put(job)

    def _retire(self) -> None:
        """The thread is stuck in an abandoned step: the next job starts a new one."""
        self._jobs = None
        if self._stopper is not None:
            self._stopper.detach()
            self._stopper = None

    async def run(
        self,
        label: str,
        steps: Sequence[Callable[[], object]],
        timeout: float,
        *,
        on_slow: tuple[float, Callable[[int], object]] | None = None,
    ) -> tuple[ThreadRun, int | None]:
        """Run ``steps`` in order in the thread (in a copy of the current context), each
        bounded by ``timeout`` seconds from its own start; return the run and the index of
        the step abandoned at its bound (``None``: all ran). A step's exception ends the
        run (``error``): steps are expected to catch their own.

        ``on_slow=(seconds, notify)`` calls ``notify(index)`` once for a step still running
        after ``seconds``. The loop is woken once per run, not per step: it sleeps until the
        running step's deadline (or slow notice). Cancellation abandons the run.
        """
        run = ThreadRun(label)
        call_soon = _call_soon_threadsafe()
        context = contextvars.copy_context()
        handoff = threading.Lock()
        finished = threading.Event()
        blocking = True  # the loop thread is in its short blocking wait (see HANDOFF_WAIT)

        def job() -> bool:
            run.ident = threading.get_ident()
            _CURRENT.run = run
            try:
                for index, step in enumerate(steps):
                    if run.abandoned:
                        break
                    run.current = (index, time.monotonic())
                    context.run(step)
            except BaseException as error:  # reported by the waiter
                run.error = error
            finally:
                run.current = None
                _CURRENT.run = None
                with handoff:
                    told = blocking
                    if told:
                        finished.set()
                if not told:
                    # Scheduled, not waited for: the thread is free at once (a blocking call
                    # would have it wait for the loop, then compete with it for the GIL).
                    # The loop is gone (asyncio: closed; trio: RunFinishedError): nobody waits.
                    with contextlib.suppress(RuntimeError):
                        call_soon(run.done.set)
            return not run.abandoned

        slow, notify = on_slow if on_slow is not None else (math.inf, None)
        notified = -1
        abandoned: int | None = None
        self._submit(job)
        try:
            # A short blocking wait first, the GIL released: the thread says it is done
            # through a lock, not the loop's wake-up pipe (two hand-overs that were a fifth
            # of a save's own work). A body that waits (I/O, the loop itself) holds the loop
            # up for HANDOFF_WAIT at most, once per run, then is waited for on the loop.
            if finished.wait(min(HANDOFF_WAIT, timeout)):
                run.done.set()
            else:
                # From here the thread tells the loop; if it finished in between (it saw
                # ``blocking`` still true, so it told nobody), it is done now.
                with handoff:
                    blocking = False
                if finished.is_set():
                    run.done.set()
            while not run.done.is_set():
                current = run.current
                now = time.monotonic()
                if current is None:  # not started yet, or just ended
                    with anyio.move_on_after(min(slow, timeout)):
                        await run.done.wait()
                    continue
                index, started = current
                if now - started >= timeout:
                    abandoned = index
                    break
                if notify is not None and index != notified and now - started >= slow:
                    notified = index
                    notify(index)
                wake = started + timeout
                if index != notified and slow < timeout:
                    wake = started + slow
                elif index == notified:  # a slow run: look for the next step now and then
                    wake = min(wake, now + slow / 4)
                with anyio.move_on_after(max(wake - now, 0.0)):
                    await run.done.wait()
        finally:
            if not run.done.is_set():
                run.abandoned = True
                self._retire()
        return run, abandoned


# -- inert module bodies ---------------------------------------------------------------------------

Resolve = Callable[[str, "tuple[str, ...] | None", int], "ModuleType | None"]
"""``resolve(name, fromlist, level)``: the module ``IMPORT_NAME`` would return without
running any code (``None``: it might run some)."""

_OP = dis.opmap
_CACHE = _OP.get("CACHE", 0)
_EXTENDED_ARG = _OP["EXTENDED_ARG"]
_HAVE_ARGUMENT = dis.HAVE_ARGUMENT


def _ops(*names: str) -> frozenset[int]:
    return frozenset(_OP[name] for name in names if name in _OP)


# Instructions that touch nothing but the frame's stack, its namespace (a plain dict) and
# fresh objects: none of them can run code of anyone else.
_PLAIN = _ops(
    "NOP",
    "RESUME",
    "POP_TOP",
    "COPY",
    "SWAP",
    "LOAD_CONST",
    "STORE_NAME",
    "RETURN_VALUE",
    "RETURN_CONST",
    "BUILD_TUPLE",
    "BUILD_LIST",
    "MAKE_CELL",
    "LOAD_CLOSURE",
    "COPY_FREE_VARS",
    "PUSH_NULL",
)
_LOAD_NAME = _OP["LOAD_NAME"]
_LOAD_CONST = _OP["LOAD_CONST"]
_MAKE_FUNCTION = _OP["MAKE_FUNCTION"]
_LOAD_BUILD_CLASS = _OP["LOAD_BUILD_CLASS"]
_PUSH_NULL = _OP["PUSH_NULL"]
_NULL_AFTER = sys.version_info >= (3, 13)  # ``LOAD_NAME X, PUSH_NULL``, not the reverse
_PRECALL = _OP.get("PRECALL", -1)
_CALL = _OP["CALL"]
_IMPORT_NAME = _OP["IMPORT_NAME"]
_IMPORT_FROM = _OP["IMPORT_FROM"]
_SETUP_ANNOTATIONS = _OP["SETUP_ANNOTATIONS"]
_STORE_SUBSCR = _OP["STORE_SUBSCR"]
_STORE_NAME = _OP["STORE_NAME"]
_LOAD_ATTR = _OP["LOAD_ATTR"]
_ATTR_SHIFT = 1 if sys.version_info >= (3, 12) else 0  # 3.12 packs a method flag in
_LIST_EXTEND = _OP["LIST_EXTEND"]
_BUILD_CONST_KEY_MAP = _OP.get("BUILD_CONST_KEY_MAP", -1)
_MAX_INSTRUCTIONS = 20_000
"""A longer body goes to the thread: its steps are bounded, but not by little."""


def _instructions(code: CodeType) -> list[tuple[int, int]]:
    """``(opcode, argument)`` pairs of ``code``, inline caches skipped (``dis`` is fifty
    times slower, and this runs once per save)."""
    raw = code.co_code
    result: list[tuple[int, int]] = []
    extended = 0
    for offset in range(0, len(raw), 2):
        op = raw[offset]
        if op == _CACHE:
            continue
        arg = raw[offset + 1] | extended if op >= _HAVE_ARGUMENT else 0
        if op == _EXTENDED_ARG:
            extended = arg << 8
            continue
        extended = 0
        result.append((op, arg))
    return result


def _plain_module(value: object) -> ModuleType | None:
    """``value`` if it is a module whose attributes are read from its ``__dict__`` alone."""
    if type(value) is not ModuleType:
        return None
    return value


def inert(code: CodeType, resolve: Resolve, *, class_body: bool = False) -> bool:
    """True when executing ``code`` (a module body, or a class body inside one) can run no
    code but its own, and so ends within its length: see the module's docstring."""
    ops = _instructions(code)
    if len(ops) > _MAX_INSTRUCTIONS:
        return False
    consts: Sequence[object] = code.co_consts
    names = code.co_names
    imported: ModuleType | None = None  # the module the last IMPORT_NAME pushed
    chain: list[str] = []  # the rest of a dotted ``import a.b as c``, taken by IMPORT_FROM
    modules: dict[str, ModuleType] = {}  # names this body bound to a plain module
    pushed: ModuleType | None = None  # the plain module the last instruction pushed
    classes: set[str] = set()  # names this body bound to a bare class (see _bare_class)
    built = False  # the last instruction pushed a bare class this body built
    for index, (op, arg) in enumerate(ops):
        produced, pushed = pushed, None
        was_built, built = built, False
        if op == _STORE_NAME:
            if names[arg] == "__annotations__":
                return False  # annotations would then be stored into whatever this is
            if produced is not None:
                modules[names[arg]] = produced
            else:
                modules.pop(names[arg], None)
            if was_built:
                classes.add(names[arg])
            else:
                classes.discard(names[arg])
            continue
        if op in _PLAIN:
            continue
        if op == _LOAD_ATTR:
            # ``helper.VALUE`` (``os.path.sep``) of a module this body imported, the name
            # in its __dict__: a dict lookup (a missing one would reach __getattr__).
            owner = produced
            attribute = names[arg >> _ATTR_SHIFT]
            if class_body or owner is None or attribute not in owner.__dict__:
                return False
            pushed = _plain_module(owner.__dict__[attribute])
            continue
        if op == _LOAD_NAME:
            pushed = modules.get(names[arg])
            # A class body may read only ``__name__`` (its prologue): a value it stored
            # could have a ``__set_name__`` that ``type()`` calls.
            if class_body and names[arg] != "__name__":
                return False
            continue
        if op == _MAKE_FUNCTION:
            continue  # defaults, annotations and closures are values already on the stack
        if op == _LOAD_BUILD_CLASS:
            if not _class_statement(ops, index, consts, resolve):
                return False
            continue
        if op in (_PRECALL, _CALL):
            # The call of ``__build_class__`` that _class_statement checked, or ``X()`` of a
            # bare class this body built and bound to ``X``.
            call = index if op == _CALL else index + 1
            if _builds_class(ops, call):
                built = op == _CALL and _bare_class(consts[ops[_build_start(ops, call)][1]])
                continue
            if class_body or not _instantiates(ops, call, names, classes):
                return False
            continue
        if op == _SETUP_ANNOTATIONS:
            continue
        if op in (_LIST_EXTEND, _BUILD_CONST_KEY_MAP):
            # ``["a", "b"]`` extends a list by a constant tuple; keyword defaults build a
            # dict from a constant tuple of names: iterating a tuple, hashing a str.
            if index < 1 or ops[index - 1][0] != _LOAD_CONST:
                return False
            keys = consts[ops[index - 1][1]]
            if not isinstance(keys, tuple) or (
                op == _BUILD_CONST_KEY_MAP and not all(type(key) is str for key in keys)
            ):
                return False
            continue
        if op == _STORE_SUBSCR:
            # ``x: T = v`` stores T in ``__annotations__['x']`` (a dict, a str key).
            if (
                index < 2
                or "__annotations__" not in names
                or ops[index - 2] != (_LOAD_NAME, names.index("__annotations__"))
            ):
                return False
            if ops[index - 1][0] != _LOAD_CONST or not isinstance(consts[ops[index - 1][1]], str):
                return False
            continue
        if op == _IMPORT_NAME:
            if class_body or index < 2:
                return False
            (level_op, level), (from_op, from_arg) = ops[index - 2], ops[index - 1]
            if level_op != _LOAD_CONST or from_op != _LOAD_CONST:
                return False
            level_value, fromlist = consts[level], consts[from_arg]
            if not isinstance(level_value, int) or not (
                fromlist is None
                or (isinstance(fromlist, tuple) and all(isinstance(i, str) for i in fromlist))
            ):
                return False
            if fromlist is not None and "*" in fromlist:
                return False
            imported = _plain_module(resolve(names[arg], fromlist, level_value))
            if imported is None:
                return False
            chain = names[arg].split(".")[1:] if fromlist is None else []
            pushed = imported if not chain else None
            continue
        if op == _IMPORT_FROM:
            if imported is None:
                return False
            attribute = names[arg]
            if chain:
                # ``import a.b.c as d``: IMPORT_FROM b, then c, each from the one before.
                if chain[0] != attribute:
                    return False
                chain.pop(0)
                value = imported.__dict__.get(attribute)
                following = _plain_module(value)
                if following is None:
                    return False
                imported = pushed = following
                continue
            if attribute not in imported.__dict__:
                return False
            pushed = _plain_module(imported.__dict__[attribute])
            continue
        return False  # a call, a loop, an attribute, an operator... or unknown: the thread
    return True


def _class_statement(
    ops: Sequence[tuple[int, int]], index: int, consts: Sequence[object], resolve: Resolve
) -> bool:
    """``class X:`` with no bases, keywords or decorators, whose body is inert too."""
    if not _builds_class(ops, _call_after(ops, index)):
        return False
    body = consts[ops[index + 1][1]]
    return isinstance(body, CodeType) and inert(body, resolve, class_body=True)


def _call_after(ops: Sequence[tuple[int, int]], index: int) -> int:
    """Where the CALL of the ``__build_class__`` loaded at ``index`` should be."""
    position = index + 4
    if position < len(ops) and ops[position][0] == _PRECALL:
        position += 1
    return position


_BARE_DUNDERS = frozenset(
    {
        "__module__",
        "__qualname__",
        "__doc__",
        "__firstlineno__",
        "__static_attributes__",
        "__classcell__",
    }
)
"""The dunder names a class body may bind and still be bare: the compiler's own."""


def _bare_class(body: object) -> bool:
    """True when the class body ``body`` binds no dunder but the compiler's own: then
    calling its class runs ``object.__new__`` and ``object.__init__`` only, and no
    ``__del__``."""
    if not isinstance(body, CodeType):
        return False
    stored = {body.co_names[arg] for op, arg in _instructions(body) if op == _STORE_NAME}
    return all(
        name in _BARE_DUNDERS or not (name.startswith("__") and name.endswith("__"))
        for name in stored
    )


def _instantiates(
    ops: Sequence[tuple[int, int]], call: int, names: Sequence[str], classes: Collection[str]
) -> bool:
    """True when ``ops[call]`` is ``CALL 0`` of ``X`` loaded by name just before (with its
    ``NULL``, and a ``PRECALL 0`` where there is one), ``X`` bound to a bare class."""
    if call >= len(ops) or ops[call] != (_CALL, 0):
        return False
    load = call - 1
    if ops[load] == (_PRECALL, 0):
        load -= 1
    null_after = _NULL_AFTER and load >= 1 and ops[load][0] == _PUSH_NULL
    if null_after:
        load -= 1
    if load < 0 or ops[load][0] != _LOAD_NAME or names[ops[load][1]] not in classes:
        return False
    return null_after or (load >= 1 and ops[load - 1][0] == _PUSH_NULL)


def _build_start(ops: Sequence[tuple[int, int]], call: int) -> int:
    """Where the ``LOAD_CONST <code>`` of the class body is, for a call
    :func:`_builds_class` accepted."""
    return call - (4 if ops[call - 1][0] == _PRECALL else 3)


def _builds_class(ops: Sequence[tuple[int, int]], call: int) -> bool:
    """True when ``ops[call]`` is ``CALL 2`` right after ``LOAD_BUILD_CLASS, LOAD_CONST
    <code>, MAKE_FUNCTION 0, LOAD_CONST <name>`` (and a ``PRECALL 2`` where there is one)."""
    if call >= len(ops) or ops[call] != (_CALL, 2):
        return False
    start = call - 4
    if ops[call - 1][0] == _PRECALL:
        if ops[call - 1][1] != 2:
            return False
        start -= 1
    if start < 0:
        return False
    build, body, function, name = ops[start : start + 4]
    return (
        build[0] == _LOAD_BUILD_CLASS
        and body[0] == _LOAD_CONST
        and function == (_MAKE_FUNCTION, 0)
        and name[0] == _LOAD_CONST
    )


# -- reading module files --------------------------------------------------------------------------

# A file caught between an editor's truncate and its write reads as empty (Vite #610): an empty
# read is re-read a few times before it is believed, unless the module was empty before. A
# file that appears (created, renamed back) is no exception: loading its empty moment would
# replace a provider with an empty helper module until the write lands.
_EMPTY_RETRIES = 5
_EMPTY_RETRY_DELAY = 0.01
_DIGEST_SIZE = 16
_CHUNK = 1 << 20
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
LOOP_READ_LIMIT = 64 * 1024
"""Files of at most this many bytes on a local file system are read on the event loop."""


def digest(data: bytes) -> str:
    """The content hash used to tell a real change from a touch."""
    return hashlib.blake2b(data, digest_size=_DIGEST_SIZE).hexdigest()


def check_size(path: Path, size: int, limit: int | None) -> None:
    """Refuse a module file of ``size`` bytes over ``limit`` (``None``: no limit).

    Raises:
        ModuleTooLargeError: naming the file, its size and the limit.
    """
    if limit is not None and size > limit:
        raise ModuleTooLargeError(
            f"{display_path(path)} is {_size(size)}, over the limit of {_size(limit)} for a "
            "module file: compiling it would stall the event loop, so it is not loaded (the "
            "limit: Reloader(max_module_size=...), hotseam --max-module-size, [tool.hotseam] "
            "max-module-size)"
        )


def _size(count: int) -> str:
    """``26.2 MiB (27,482,112 bytes)``, or ``1 MiB`` for an exact power."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            if count % scale == 0:
                return f"{count // scale} {unit}"
            return f"{count / scale:.1f} {unit} ({count:,} bytes)"
    return f"{count} bytes"


def read_file(path: Path, limit: int | None = None) -> Source:
    """Read ``path`` and the stat of the file read (one open, so the two agree). Blocking.

    Only a regular file is opened (a FIFO named ``x.py`` would block the read), checked
    before and once opened, as is the size against ``limit``.

    Raises:
        OSError: the file cannot be read, or is not a regular file (``FileNotFoundError``:
            it is gone; :class:`ModuleTooLargeError`: it is over ``limit``).
    """
    seen = os.stat(path)
    _require_regular(path, seen.st_mode)
    check_size(path, seen.st_size, limit)
    fd = os.open(path, _OPEN_FLAGS)
    try:
        st = os.fstat(fd)
        _require_regular(path, st.st_mode)
        check_size(path, st.st_size, limit)
        # In chunks, hashed as they come: a single huge read (and the copies around it)
        # would hold the GIL, and so stall the event loop, for as long as it takes.
        hasher = hashlib.blake2b(digest_size=_DIGEST_SIZE)
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, _CHUNK):
            total += len(chunk)
            check_size(path, total, limit)
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
        raise OSError(errno.EINVAL, f"not a regular file ({file_type(mode)})", str(path))


def read_on_loop(path: Path, seen: os.stat_result, limit: int | None = None) -> Source | None:
    """Read ``path`` at once, on the event loop, if that cannot block; ``None``: read it in
    a worker thread instead (:func:`read_file`, which also reports every failure).

    ``seen`` is its ``lstat``, just taken: only a regular file of at most
    :data:`LOOP_READ_LIMIT` bytes on a local file system is opened, no link followed.
    """
    most = LOOP_READ_LIMIT if limit is None else min(limit, LOOP_READ_LIMIT)
    if not stat.S_ISREG(seen.st_mode) or seen.st_size > most or not MOUNTS.is_local(seen.st_dev):
        return None
    try:
        fd = os.open(path, _OPEN_FLAGS | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_dev != seen.st_dev or st.st_size > most:
            return None
        data = os.read(fd, st.st_size + 1)
        while len(data) <= most and (more := os.read(fd, most + 1)):
            data += more  # it grew since the fstat
        if len(data) > most:
            return None
    except OSError:
        return None
    finally:
        os.close(fd)
    return Source(path, data, digest(data), (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino))


def _read_in_thread(path: Path, limit: int | None) -> Source:
    """:func:`read_file` in a worker thread, which also brings the mount table up to date
    (it is never read on the event loop)."""
    MOUNTS.learn()
    return read_file(path, limit)


async def read_source(
    path: Path,
    previous: str | None,
    seen: os.stat_result | None = None,
    limit: int | None = None,
) -> Source | None:
    """Read ``path`` (in a worker thread unless :func:`read_on_loop` may); ``None`` if it is
    gone. An unexpectedly empty read is retried briefly: it is believed at once only when
    ``previous`` (the digest last loaded) was empty too.
    """
    for attempt in range(_EMPTY_RETRIES + 1):
        source = read_on_loop(path, seen, limit) if seen is not None and not attempt else None
        if source is None:
            try:
                source = await anyio.to_thread.run_sync(_read_in_thread, path, limit)
            except FileNotFoundError:
                return None
        empty_ok = previous == _EMPTY_DIGEST or attempt == _EMPTY_RETRIES
        if source.data or empty_ok:
            return source
        await anyio.sleep(_EMPTY_RETRY_DELAY)
    raise AssertionError("unreachable")  # pragma: no cover


_EMPTY_DIGEST = digest(b"")


def read_many(paths: Collection[Path], limit: int | None = None) -> dict[Path, Source | OSError]:
    """Read every file of ``paths`` (blocking: one worker thread for all, where
    :func:`read_source` would take one hop per file). An empty read is left out, for
    :func:`read_source` to retry and decide."""
    MOUNTS.learn()
    found: dict[Path, Source | OSError] = {}
    for path in paths:
        try:
            source = read_file(path, limit)
        except OSError as error:
            found[path] = error
            continue
        if source.data:
            found[path] = source
    return found


# -- which file systems are local ------------------------------------------------------------------

LOCAL_TYPES = frozenset(
    {
        "bcachefs",
        "btrfs",
        "erofs",
        "exfat",
        "ext2",
        "ext3",
        "ext4",
        "f2fs",
        "hfsplus",
        "jfs",
        "nilfs2",
        "overlay",
        "ramfs",
        "reiserfs",
        "squashfs",
        "tmpfs",
        "vfat",
        "xfs",
        "zfs",
    }
)
"""File-system types whose reads never wait on a network or another process. Everything
else (``nfs*``, ``cifs``, ``smb3``, ``fuse.*``, ``fuseblk``, ``9p``, ``ceph``,
``glusterfs``, ``afs``, ``virtiofs``, ``autofs``...) counts as not local."""

_MOUNTINFO = "/proc/self/mountinfo"
_CHANGED = select.POLLPRI | select.POLLERR if hasattr(select, "poll") else 0


def parse_mountinfo(text: str) -> dict[int, str]:
    """Device number → file-system type, from the text of ``/proc/<pid>/mountinfo``
    (``id parent major:minor root mount-point options [optional...] - type ...``, spaces in
    paths escaped). A device said to have two types (a malformed line) is left out."""
    types: dict[int, str] = {}
    conflicting: set[int] = set()
    for line in text.splitlines():
        fields = line.split(" ")
        try:
            separator = fields.index("-", 6)
            major, minor = fields[2].split(":")
            device = os.makedev(int(major), int(minor))
            kind = fields[separator + 1]
        except (ValueError, IndexError):
            continue
        if types.setdefault(device, kind) != kind:
            conflicting.add(device)
    for device in conflicting:
        del types[device]
    return types


class Mounts:
    """The mount table of this process, as far as the event loop may trust it."""

    def __init__(self, path: str = _MOUNTINFO) -> None:
        self._path = path
        self._supported = sys.platform.startswith("linux") and hasattr(select, "poll")
        self._lock = threading.Lock()
        self._types: dict[int, str] | None = None
        """Device number → type; ``None``: not known (never read, or changed since)."""
        self._watch: tuple[int, select.poll] | None = None
        """The open ``mountinfo`` and a poller of it, told of mounts and unmounts."""

    def filesystem_type(self, device: int) -> str | None:
        """The type of the file system with ``device`` as ``st_dev``; ``None`` when not
        known right now. For the event loop: never waits, never reads the table."""
        if self._types is None or not self._lock.acquire(blocking=False):
            return None
        try:
            if self._watch is None or self._changed(self._watch):
                self._types = None
                return None
            return self._types.get(device)
        finally:
            self._lock.release()

    def is_local(self, device: int) -> bool:
        """True when the file system with ``device`` as ``st_dev`` is known to be local."""
        return self.filesystem_type(device) in LOCAL_TYPES

    def learn(self) -> None:
        """Read the mount table if it was never read or changed since. Blocking: call it in
        a worker thread. Never raises: a failure leaves every file system not local."""
        if not self._supported:
            return
        with self._lock:
            try:
                if self._watch is None:
                    fd = os.open(self._path, os.O_RDONLY | os.O_CLOEXEC)
                    poller = select.poll()
                    poller.register(fd, _CHANGED)
                    self._watch = (fd, poller)  # it reports changes after this open
                elif not self._changed(self._watch) and self._types is not None:
                    return
                # Any change reported so far is in what is read now; a later one is
                # reported to the next poll.
                with open(self._path, encoding="utf-8", errors="replace") as file:
                    self._types = parse_mountinfo(file.read())
            except (OSError, ValueError) as error:
                self._types = None  # the next learn reads it again, whatever the poll says
                # Out of descriptors the watch is kept: closing it would hand a descriptor
                # to whatever opens a file next, and opening it again would take one.
                if not is_transient(error):
                    self._close()

    def after_fork(self) -> None:
        """In a child process: start afresh (the lock may be held by a thread not there,
        and the open file is shared with the parent)."""
        self._lock = threading.Lock()
        self._types = None
        self._close()

    @staticmethod
    def _changed(watch: tuple[int, select.poll]) -> bool:
        """True when the mount table changed since the last poll (the lock is held)."""
        return any(events & _CHANGED for _, events in watch[1].poll(0))

    def _close(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            with contextlib.suppress(OSError):
                os.close(watch[0])


MOUNTS = Mounts()
"""The process's mount table (one per process: it is the same for every reloader)."""

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=MOUNTS.after_fork)
