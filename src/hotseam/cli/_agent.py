"""Loading the agent function named by ``--agent MODULE:FUNCTION``.

An agent is ``async def agent(context: hotseam.Context) -> object``: it runs in a context
whose tools include ``ask_user_question`` and whose user-interaction provider is whatever the
command installed (or hot-reloaded).
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from .._context import Context
from .._errors import HarnessError

__all__ = ["AgentFunction", "AgentLoadError", "load_agent"]

AgentFunction = Callable[[Context], Awaitable[Any]]


class AgentLoadError(HarnessError):
    """``--agent`` names something that cannot be loaded or called."""

    default_code = "INVALID_AGENT"


def load_agent(spec: str) -> AgentFunction:
    """Import ``MODULE:FUNCTION`` (or ``path/to/file.py:FUNCTION``) and return the function.

    Raises:
        AgentLoadError: the spec is malformed, the module cannot be imported, or the object
            is not an async function; the message says which.
    """
    module_name, sep, attribute = spec.rpartition(":")
    if not sep or not module_name or not attribute:
        raise AgentLoadError(
            f"--agent {spec!r}: expected MODULE:FUNCTION, for example my_agents:main"
        )
    if module_name.endswith(".py"):
        path = Path(module_name).resolve()
        if not path.is_file():
            raise AgentLoadError(f"--agent {spec!r}: no such file {path}")
        sys.path.insert(0, str(path.parent))
        module_name = path.stem
    elif "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        raise AgentLoadError(
            f"--agent {spec!r}: importing {module_name} failed: {type(error).__name__}: {error}"
        ) from error
    try:
        function = getattr(module, attribute)
    except AttributeError:
        raise AgentLoadError(
            f"--agent {spec!r}: module {module.__name__} ({module.__file__}) has no "
            f"attribute {attribute!r}"
        ) from None
    if not inspect.iscoroutinefunction(function):
        raise AgentLoadError(
            f"--agent {spec!r}: {attribute} must be 'async def {attribute}(context)', "
            f"got {type(function).__name__}"
        )
    return function  # type: ignore[no-any-return]
