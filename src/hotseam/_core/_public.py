"""Presenting a package's names under the package, not its private modules; importing them
only when first used."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, MutableMapping

# Not typing.TYPE_CHECKING: see _errors.py.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def present_as(module_name: str, namespace: MutableMapping[str, Any], names: Iterable[str]) -> None:
    """Set ``__module__`` of each hotseam object in ``names`` to ``module_name``, so reprs and
    tracebacks show ``hotseam.Scope``; objects from outside hotseam, and those that refuse the
    attribute, are left alone."""
    for name in names:
        value = namespace[name]
        module = getattr(value, "__module__", None)
        if isinstance(module, str) and module.startswith("hotseam.") and "._" in module + ".":
            with contextlib.suppress(AttributeError, TypeError):  # e.g. type aliases
                value.__module__ = module_name


def lazy_exports(
    namespace: MutableMapping[str, Any],
    defined_in: Mapping[str, str],
    *,
    present: Iterable[str] = (),
) -> Callable[[str], Any]:
    """A package's or a module's PEP 562 ``__getattr__``: each name of ``defined_in`` is
    imported from its module (``"._http"``) when first asked for, so a package exports what
    only some importers need; the names in ``present`` are :func:`present_as` the package."""
    presented = frozenset(present)
    module = namespace["__name__"]
    package = namespace["__package__"]  # itself for a package, its package for a module

    def load(name: str) -> Any:
        where = defined_in.get(name)
        if where is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        import importlib

        loaded = importlib.import_module(where, package)
        namespace[name] = getattr(loaded, name)
        # every name the module has defined, at once: a public one is presented even when
        # first reached through its module (a traceback naming ``GrowthError`` raised by a
        # function); a name the module itself imports lazily stays unloaded
        names = [
            each for each, source in defined_in.items() if source == where and each in vars(loaded)
        ]
        namespace.update({each: vars(loaded)[each] for each in names})
        present_as(module, namespace, [each for each in [name, *names] if each in presented])
        return namespace[name]

    return load
