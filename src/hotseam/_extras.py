"""The optional integrations (``pip install 'hotseam[acp]'``...) and the one line that names
the extra to install when a surface is used without it.

The base install holds the core, the interaction seam, hot reload, the terminal surface and
the pytest plugin; each integration brings its SDK through an extra declared in
``pyproject.toml``. ``EXTRAS`` lists, per extra, the top-level modules its surface imports
(``tests/test_packaging.py`` checks it against ``pyproject.toml``), so that a missing one is
found before anything starts (``missing``) or recognised when an import fails
(``raise_if_missing``), instead of a ``ModuleNotFoundError`` traceback.
"""

from __future__ import annotations

import importlib.util

EXTRAS: dict[str, tuple[str, ...]] = {
    "acp": ("acp",),
    "web": ("starlette", "hypercorn"),
    # Streamable HTTP is served by the web inbox's server.
    "mcp": ("mcp", "mcp_types", "starlette", "hypercorn"),
    "postgres": ("psycopg",),
}
"""Each extra and the top-level modules that its surface imports."""


class MissingExtraError(ImportError):
    """A surface was imported without the extra that brings its SDK; the message names it."""

    def __init__(self, what: str, extra: str, module: str) -> None:
        super().__init__(f"{what} needs the {extra} extra: {install_hint(extra)}", name=module)
        self.extra = extra


def install_hint(extra: str) -> str:
    """The command that installs ``extra``."""
    return f"pip install 'hotseam[{extra}]'"


def missing(extra: str) -> str | None:
    """The first module of ``extra`` that cannot be imported here, or ``None``: looked up on
    the path without importing anything."""
    for module in EXTRAS[extra]:
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):  # a broken parent, a None in sys.modules
            found = None
        if found is None:
            return module
    return None


def raise_if_missing(error: ModuleNotFoundError, extra: str, what: str) -> None:
    """Raise ``MissingExtraError`` (from ``error``) when ``error`` is about a module of
    ``extra``; return otherwise, for the caller to re-raise ``error`` as it is."""
    name = (error.name or "").partition(".")[0]
    if name in EXTRAS[extra]:
        raise MissingExtraError(what, extra, name) from error
