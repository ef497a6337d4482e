"""Loading the agent function named by ``--agent MODULE[:FUNCTION]``.

An agent is ``async def agent(context: hotseam.Context) -> object``: it runs in a context
whose tools include ``ask_user_question`` and whose user-interaction provider is whatever the
command installed (or hot-reloaded). ``FUNCTION`` defaults to ``main``. ``hotseam dev`` runs
the agent again when its module is saved: :func:`load_agent` with ``fresh=True`` executes
the module's current source in a new module object (never a cached bytecode file, which a
save within the same second may not invalidate).
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import sys
import types
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from .._context import Context
from .._errors import HarnessError

__all__ = ["AgentFunction", "AgentLoadError", "agent_file", "load_agent"]

AgentFunction = Callable[[Context], Awaitable[Any]]


class AgentLoadError(HarnessError):
    """``--agent`` names something that cannot be loaded or called."""

    default_code = "INVALID_AGENT"


def load_agent(spec: str, *, fresh: bool = False) -> AgentFunction:
    """Import ``MODULE[:FUNCTION]`` (or ``path/to/file.py[:FUNCTION]``); return the function.

    Raises:
        AgentLoadError: the spec is malformed, the module cannot be imported, or the object
            is not an async function; the message says which (with a "did you mean" for a
            misspelt function).
    """
    module_name, sep, attribute = spec.rpartition(":")
    if not sep:
        module_name, attribute = spec, "main"
    if not module_name or not attribute:
        raise AgentLoadError(
            f"--agent {spec!r}: expected MODULE[:FUNCTION], for example my_agents:main"
        )
    if module_name.endswith(".py"):
        path = Path(module_name).resolve()
        if not path.is_file():
            raise AgentLoadError(f"--agent {spec!r}: no such file {path}")
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        module_name = path.stem
    elif "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = _fresh_import(module_name) if fresh else importlib.import_module(module_name)
    except Exception as error:
        raise AgentLoadError(
            f"--agent {spec!r}: importing {module_name} failed: {type(error).__name__}: {error}"
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


def _fresh_import(name: str) -> types.ModuleType:
    """Execute the current source of module ``name`` in a new module object."""
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
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except BaseException:
        sys.modules[name] = old  # the running agent keeps its module
        raise
    return module


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
