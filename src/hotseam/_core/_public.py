"""Presenting a public package's names under the package, not its private modules."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, MutableMapping

# typing.TYPE_CHECKING without importing typing (the clients of the control socket load
# this module): type checkers take any constant of this name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["present_as"]


def present_as(module_name: str, namespace: MutableMapping[str, Any], names: Iterable[str]) -> None:
    """Set ``__module__`` of each hotseam object in ``names`` to ``module_name``.

    So reprs and tracebacks show ``hotseam.Scope`` rather than ``hotseam._scope.Scope``.
    Objects from outside hotseam, and those that refuse the attribute, are left alone.
    """
    for name in names:
        value = namespace[name]
        module = getattr(value, "__module__", None)
        if isinstance(module, str) and module.startswith("hotseam.") and "._" in module + ".":
            with contextlib.suppress(AttributeError, TypeError):  # e.g. type aliases
                value.__module__ = module_name
