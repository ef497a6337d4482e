"""Executing watched modules: a fresh module object per generation, with its imports recorded.

``importlib.reload`` re-executes a module in its *existing* namespace, so an exception half
way leaves it torn (new names next to old ones), and nothing tells you which modules used
it. Here each execution gets a new module object; only a successful one ever replaces the
serving one (in the loader's table and in ``sys.modules``), so a failed reload leaves the
old namespace exactly as it was.

Imports are seen through the ``__import__`` of the builtins namespace the loader gives its
modules (one for all of them; it tells the importing module from the globals it is given),
which:

* resolves watched names (``import helpers``, ``from pkg import ui``, ``from . import x``)
  to the loader's modules, as if the watched folder were on the import path;
* records each watched module imported, which is the dependency graph the planner uses;
* during a reload, gives a module being executed the *new* version of every module in the
  same reload (executing it first if needed), so dependents see a consistent generation;
* hands every other import to the normal import system.

Modules are also placed in ``sys.modules`` under their names while they serve (pickle,
``typing.get_type_hints``, pydantic and dataclasses look there). A name that would shadow an
installed module, or that another live reloader already loaded, is refused with an error
naming both files.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import importlib.machinery
import importlib.util
import sys
import threading
import time
import weakref
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, ModuleType
from typing import TYPE_CHECKING, Any

from .._core import executing
from ._errors import LoadError, LoadPhase, is_transient
from ._events import SLOW_NOTICE, report_slow
from ._guard import ThreadRun, Worker, current_run, inert, interrupted
from ._planner import ModuleIndex, NameClaims, WatchedModuleSpec, owned
from ._read import FileStat, Source, read_file
from ._status import ModuleKind, ModuleState, ModuleStatus

if TYPE_CHECKING:
    from .._core import Registration, Scope, ToolRegistration

__all__ = ["NOTHING", "Batch", "Blocker", "Loader", "ModuleRecord"]

_real_import = builtins.__import__
NOTHING: frozenset[str] = frozenset()
"""The one empty set of names that records share (a thousand modules need not hold a
thousand empty sets)."""
_EXECUTING = threading.local()  # .stack: the attempts whose bodies this thread executes
INLINE_SOURCE_LIMIT = 64 * 1024
"""Bytes of source above which a module is compiled in the worker thread, never on the
event loop's (compiling is bounded by the size, but a big file's bound is milliseconds)."""


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
    """The registration a module was refused for (a conflict), and the module that made it.

    ``module`` is ``None`` for a registration made outside the reloader. The registration is
    held weakly: once nothing else holds it, it is surely not active any more.
    """

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


class _Attempt:
    """One execution of one module; what its code imported.

    Found from the importing code's globals: it is the ``loader_state`` of the module's
    spec while its batch is open (and cleared when the batch ends, so that it is freed).
    """

    __slots__ = ("batch", "imports", "missing", "name", "spec")

    def __init__(self, name: str, batch: int) -> None:
        self.name = name
        self.batch = batch
        self.imports: set[str] = set()
        self.missing: set[str] = set()
        self.spec: importlib.machinery.ModuleSpec | None = None


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
    passing reason (out of file descriptors...) → that failure: they are tried again."""
    compiled: dict[str, tuple[CodeType, float]] = field(default_factory=dict)
    """Code compiled on the event loop's thread to tell whether it is inert, and how long
    that took (seconds): the thread executes it without compiling it again."""
    inline: set[str] = field(default_factory=set)
    """Modules whose bodies were executed on the event loop's thread (inert: see
    :func:`._guard.inert`)."""

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
        """Paths of all watched module files, as strings (for locating errors): a view that
        looks each one up in the index, so asking costs nothing until an error is located."""
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

        A body that cannot block or spin (:func:`~hotseam.reload._guard.inert`:
        straight-line code that calls nothing but ``class X:`` and ``X()`` of such a class,
        and imports only what is imported) executes here, on the event loop's thread, at
        once. The others (with the watched modules they import) execute one after another in
        the loader's worker thread, so a body that blocks leaves the event loop serving. One
        still running ``timeout`` seconds after it started is abandoned: it fails with a
        ``TimeoutError`` naming the line it is stuck at, its thread runs on, nothing it
        creates is ever installed, and the modules after it execute in a new thread.
        """
        pending = [name for name in names if name not in batch.staged and name not in batch.failed]
        while pending:
            while pending and self._inert(batch, pending[0]):
                self._execute_inline(batch, pending.pop(0))
            pending = [
                name for name in pending if name not in batch.staged and name not in batch.failed
            ]
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
            pending = [
                name
                for name in pending[stuck + 1 :]
                if name not in batch.staged and name not in batch.failed
            ]

    def _inert(self, batch: Batch, name: str) -> bool:
        """True when ``name``'s body can run on the event loop's thread (or has run): it
        is compiled here to tell, and the code is kept for whoever executes it."""
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
        """Execute an inert body on this (the event loop's) thread; failures go to
        ``batch.failed``, but the user's Ctrl-C arriving meanwhile is not the body's."""
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
        (nothing executed, read or looked up through a module's ``__getattr__``), else
        ``None``: the :func:`~hotseam.reload._guard.inert` test of the loader's imports."""
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
        """Settle the reload: committed modules serve, the rest revert, unloaded ones go.

        ``sys.modules`` and the submodule attributes of packages are brought in line with
        what now serves.
        """
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
        these are. Without an open attempt (live code of a serving generation, or code
        exec'd in globals of its own outside a module body) it is served what serves now."""
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
