"""Context: the providers and tools (:class:`~._registry.BaseContext`, below the scopes)
plus the factory of scopes, and the current context (a context variable library code
reads)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ._errors import HarnessError
from ._registry import BaseContext, current
from ._scope import Scope


class Context(BaseContext):
    """Holds at most one active provider per seam, and the tools offered to models.

    A child context (:meth:`child`) sees its parent's providers and tools and may shadow
    them with its own. Scopes opened with :meth:`scope` register here.
    """

    def child(self, name: str | None = None) -> Context:
        """Return a child context that inherits this one's providers and tools."""
        return Context(name or f"{self.name}.child", parent=self)

    def scope(self, name: str = "scope", **options: Any) -> Scope:
        """Return a new root :class:`~hotseam.Scope` bound to this context."""
        return Scope(name, context=self, **options)


def current_context() -> Context:
    """Return the context set by :func:`use_context`.

    Raises:
        HarnessError: (code ``NO_CONTEXT``) when no context is set.
    """
    context = lookup_current_context()
    if context is None:
        raise HarnessError(
            "no hotseam context is active: pass context= or run the code inside "
            "'with hotseam.use_context(ctx):'",
            "NO_CONTEXT",
        )
    return context


def lookup_current_context() -> Context | None:
    """Return the context set by :func:`use_context`, or ``None``."""
    context = current.get()
    # Only use_context() sets the variable, and it takes a Context.
    return context if isinstance(context, Context) else None


@contextmanager
def use_context(context: Context) -> Iterator[Context]:
    """Make ``context`` the current context for the block (and tasks started in it)."""
    token = current.set(context)
    try:
        yield context
    finally:
        current.reset(token)
