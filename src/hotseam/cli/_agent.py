"""Loading the agent function named by ``--agent MODULE[:FUNCTION]``.

An agent is ``async def agent(context: hotseam.Context) -> object`` (``FUNCTION``: ``main``
by default). A save re-executes the module's current source in a new module object (never
cached bytecode, which a save within the same second may not invalidate).

As a provider module's body, the agent's executes in the reloader's worker thread
(:class:`AgentImporter`): a slow body leaves the loop serving, and one still running at its
time bound is abandoned, its module never installed. The reloader and anyio are imported
only then: ``hotseam acp`` without ``--agent`` never imports them."""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import sys
import threading
import traceback
import types
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from .._core import Context, HarnessError, Tool

AgentFunction = Callable[[Context], Awaitable[Any]]


class AgentLoadError(HarnessError):
    """``--agent`` names something that cannot be loaded or called."""

    default_code = "INVALID_AGENT"


def ask_tool() -> Tool[Any]:
    """The ask tool, made and described now, so that what it imports (pydantic's models)
    is imported before serving: out of descriptors later, the agent's first question would
    fail there (``Too many open files``)."""
    from ..interaction import ask_user_question_tool

    tool = ask_user_question_tool()
    tool.input_schema  # noqa: B018 - made (and described) for what it imports
    return tool


def agent_key(spec: str | None, name: str | None) -> str:
    """The agent's name in the journal (its unfinished run resumes under it): ``--name``;
    else its module's absolute file and its function (``path/agent.py`` and ``pkg.agent``
    name the same agent); the demo agent by the folder it runs in."""
    if name:
        return name
    if spec is None:
        return f"demo@{Path.cwd()}"
    module, _, function = spec.rpartition(":") if ":" in spec else (spec, "", "main")
    function = function or "main"
    if module.endswith(".py"):
        return f"{Path(module).resolve()}:{function}"
    found = _module_file(module)
    where = str(found) if found is not None else f"{module}@{Path.cwd()}"
    return f"{where}:{function}"


class ImportAttempt:
    """One execution of the agent's module, shared by its thread and the event loop:
    :meth:`install` and :meth:`revert` take a lock, so an abandoned body's module is never
    left in ``sys.modules``, however late it ends."""

    __slots__ = ("file", "lock", "name", "new", "old", "reverted")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reverted = False
        self.name: str | None = None
        self.file: Path | None = None
        self.old: types.ModuleType | None = None
        self.new: types.ModuleType | None = None

    def install(self, name: str, module: types.ModuleType, old: types.ModuleType | None) -> None:
        """Put ``module`` in ``sys.modules`` while it executes, unless already abandoned."""
        with self.lock:
            if self.reverted:
                raise _AbandonedError(name)
            self.name, self.new, self.old = name, module, old
            sys.modules[name] = module

    def revert(self) -> None:
        """Put the module that served back in ``sys.modules`` (unless something replaced the
        new one since); nothing can install a module after this."""
        with self.lock:
            self.reverted = True
            name = self.name
            if name is not None and self.new is not None and sys.modules.get(name) is self.new:
                if self.old is not None:
                    sys.modules[name] = self.old
                else:
                    sys.modules.pop(name, None)


class _AbandonedError(ImportError):
    """An import abandoned before its module body started: nothing of it is installed."""

    def __init__(self, name: str) -> None:
        super().__init__(f"executing {name} overran its time bound and was abandoned")


def load_agent(
    spec: str, *, fresh: bool = False, attempt: ImportAttempt | None = None
) -> AgentFunction:
    """Import ``MODULE[:FUNCTION]`` (or ``path/to/file.py[:FUNCTION]``); return the function.
    The body executes in the calling thread, unbounded: :func:`load_agent_within` bounds it.

    Raises:
        AgentLoadError: the spec is malformed, the module cannot be imported (its body
            raised), or the object is not an async function; the message says which (with
            a "did you mean" for a misspelt function).
    """
    module_name, sep, attribute = spec.rpartition(":")
    if not sep:
        module_name, attribute = spec, "main"
    if not module_name or not attribute:
        raise AgentLoadError(
            f"--agent {spec!r}: expected MODULE[:FUNCTION], for example my_agents:main"
        )
    file: Path | None = None
    if module_name.endswith(".py"):
        path = file = Path(module_name).resolve()
        if not path.is_file():
            raise AgentLoadError(f"--agent {spec!r}: no such file {path}")
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        module_name = path.stem
    elif "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    if attempt is not None:
        attempt.name = module_name
        attempt.file = file or _module_file(module_name)
    try:
        module = (
            _fresh_import(module_name, attempt or ImportAttempt())
            if fresh
            else importlib.import_module(module_name)
        )
    except BaseException as error:  # sys.exit() and friends from the module body too
        if isinstance(error, _AbandonedError) or (
            isinstance(error, KeyboardInterrupt)
            and threading.current_thread() is threading.main_thread()
        ):
            raise  # a body nobody waits for, or (before any loop routes SIGINT) a Ctrl-C
        where = _where(error, file or _module_file(module_name))
        raise AgentLoadError(
            f"--agent {spec!r}: importing {module_name} failed: {describe_error(error)}{where}"
        ) from error
    try:
        function = getattr(module, attribute)
    except AttributeError:
        raise AgentLoadError(
            f"--agent {spec!r}: module {module.__name__} ({module.__file__}) has no "
            f"attribute {attribute!r}{_did_you_mean(module, attribute)}"
        ) from None
    if not inspect.iscoroutinefunction(function):
        raise AgentLoadError(
            f"--agent {spec!r}: {attribute} must be 'async def {attribute}(context)', "
            f"got {type(function).__name__}"
        )
    return function  # type: ignore[no-any-return]


def agent_file(function: AgentFunction) -> Path | None:
    """The file of the module that defines ``function`` (``None`` if it has none)."""
    module = sys.modules.get(getattr(function, "__module__", ""))
    file = getattr(module, "__file__", None)
    return Path(file).resolve() if file else None


def _module_file(name: str) -> Path | None:
    file = getattr(sys.modules.get(name), "__file__", None)
    return Path(file) if file else None


def _fresh_import(name: str, attempt: ImportAttempt) -> types.ModuleType:
    """Execute the current source of module ``name`` in a new module object; a body
    ``attempt`` abandoned leaves ``sys.modules`` as it found it, however late it ends."""
    old = sys.modules.get(name)
    file = getattr(old, "__file__", None)
    if old is None or not file or not str(file).endswith(".py"):
        sys.modules.pop(name, None)
        importlib.invalidate_caches()
        return importlib.import_module(name)
    source = Path(file).read_bytes()
    code = compile(source, file, "exec")
    module = types.ModuleType(name, old.__doc__)
    for attribute in ("__file__", "__spec__", "__loader__", "__package__", "__path__"):
        if hasattr(old, attribute):
            setattr(module, attribute, getattr(old, attribute))
    attempt.install(name, module, old)
    try:
        exec(code, module.__dict__)
    except BaseException:
        attempt.revert()  # the running agent keeps its module
        raise
    return module


def shown_path(path: Path) -> str:
    """``path`` relative to the working directory when below it (as the reload reports)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def shown_location(location: str) -> str:
    """``file:line`` with the file as :func:`shown_path` shows it."""
    file, sep, line = location.rpartition(":")
    return f"{shown_path(Path(file))}:{line}" if sep and line.isdigit() else location


def describe_error(error: BaseException) -> str:
    """``Type: message`` (``Type`` alone without a message), looking through a group of one."""
    error = alone(error)
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def alone(error: BaseException) -> BaseException:
    """The one exception of a group of one (a task group's wrapping), else ``error``."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def _where(error: BaseException, file: Path | None) -> str:
    """`` at file:line`` of the innermost frame of the agent's module (a syntax error: its
    own line)."""
    if isinstance(error, SyntaxError) and error.filename and error.lineno:
        return f" at {shown_location(f'{error.filename}:{error.lineno}')}"
    if file is None:
        return ""
    wanted = str(file)
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        if frame.filename == wanted:
            return f" at {shown_location(f'{frame.filename}:{frame.lineno}')}"
    return ""


def _did_you_mean(module: types.ModuleType, attribute: str) -> str:
    """`` (did you mean 'main'?)`` for the closest async function of ``module``."""
    candidates = [
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and inspect.iscoroutinefunction(value)
    ]
    close = difflib.get_close_matches(attribute, candidates, n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]!r}?)"
    if candidates:
        return f"; its async functions: {', '.join(sorted(candidates))}"
    return ""


def load_agent_within(spec: str, timeout: float) -> AgentFunction:
    """:func:`load_agent`, the body executed in a worker thread and abandoned past
    ``timeout`` seconds, for the start of a command (before its event loop).

    Raises:
        AgentLoadError: as ``load_agent``, or the body overran ``timeout`` (naming its line)."""
    import anyio

    importer = AgentImporter(spec, timeout)
    try:
        return anyio.run(functools.partial(importer.load, fresh=False))
    finally:
        importer.close()


class AgentImporter:
    """Imports the agent's module in a worker thread (one per command, replaced after an
    abandoned import), bounded by ``timeout`` seconds; a slow body is named in a
    ``reload.slow`` line."""

    def __init__(self, spec: str, timeout: float) -> None:
        from ..reload import Worker

        self._spec = spec
        self._timeout = timeout
        self._worker = Worker()

    def close(self) -> None:
        """Let the idle thread end."""
        self._worker.close()

    async def load(self, *, fresh: bool) -> AgentFunction:
        """Execute the module (again, with ``fresh``) and return the agent function.

        Raises:
            AgentLoadError: as :func:`load_agent`, or for a body abandoned at the time bound."""
        from ..reload import SLOW_NOTICE, current_run, report_slow

        attempt = ImportAttempt()
        loaded: list[AgentFunction] = []

        def step() -> None:
            function = load_agent(self._spec, fresh=fresh, attempt=attempt)
            run = current_run()
            if run is not None and run.abandoned:
                attempt.revert()  # it ended after its time bound: nothing of it is used
                return
            loaded.append(function)

        def slow(_index: int) -> None:
            if attempt.file is not None:
                report_slow("executing", attempt.file, attempt.name or "", self._timeout)

        abandoned = True
        try:
            run, stuck = await self._worker.run(
                f"executing the agent {self._spec}",
                [step],
                self._timeout,
                on_slow=(SLOW_NOTICE, slow),
            )
            abandoned = stuck is not None
        finally:
            if abandoned:  # at the time bound, or the command stops meanwhile
                attempt.revert()
        if stuck is not None:
            file = attempt.file
            watched = [str(file)] if file is not None else []
            where = run.location(watched) or (str(file) if file is not None else self._spec)
            shown = shown_path(file) if file is not None else attempt.name
            raise AgentLoadError(
                f"--agent {self._spec!r}: executing {shown} did not finish within "
                f"{self._timeout:g} s (stuck at {shown_location(where)}); abandoned: its "
                "thread runs on, and nothing it creates is used"
            )
        if run.error is not None:
            raise run.error
        return loaded[0]
