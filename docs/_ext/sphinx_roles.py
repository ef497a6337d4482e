"""A griffe extension: hotseam's docstrings, written with Sphinx roles, read as Markdown.

The docstrings use ``:func:`ask```, ``:meth:`~Reloader.events``` and literal blocks
introduced by ``::`` (``hotseam --help`` reads them the same way, see ``cli/_help.py``).
mkdocstrings reads Markdown, so each role naming a public hotseam object becomes a
cross-reference that mkdocs-autorefs resolves in the scope of the documented object
(``scoped_crossrefs``): one that resolves to nothing fails ``mkdocs build --strict``, so
the API reference never points nowhere. A role naming something the reference cannot
link to is shown as code: a private name (a component starting with ``_``, such as
``:mod:`._carry```) or an object of another project (``:class:`anyio.EndOfStream```; the
build fetches no other project's inventory).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(
    r":(?:py:)?(?:func|class|meth|mod|attr|data|exc|obj|const):`(?P<tilde>~?)(?P<target>[^`]+)`"
)
LITERAL_INTRO = re.compile(r"(?<=\S)::$", re.M)
LONE_LITERAL_INTRO = re.compile(r"^[ \t]*::\n", re.M)


def _linkable(obj: griffe.Object, identifier: str) -> bool:
    """Whether ``identifier``, seen from ``obj``, names a public object of hotseam."""
    if any(part.startswith("_") for part in identifier.split(".")):
        return False
    first = identifier.split(".", 1)[0]
    try:
        resolved = obj.resolve(first)
    except griffe.NameResolutionError:
        return True  # let autorefs try (and fail the strict build if it cannot)
    return resolved.split(".", 1)[0] == "hotseam"


def markdown(text: str, obj: griffe.Object) -> str:
    """The docstring ``text`` of ``obj`` with its Sphinx roles and ``::`` as Markdown."""

    def replace(match: re.Match[str]) -> str:
        target = match["target"].strip()
        identifier = target.removesuffix("()").lstrip(".")
        title = target.rsplit(".", 1)[-1] if match["tilde"] else target
        if not _linkable(obj, identifier):
            return f"`{title}`"
        return f"[`{title}`][{identifier}]"

    text = ROLE.sub(replace, text)
    text = LONE_LITERAL_INTRO.sub("", text)
    return LITERAL_INTRO.sub(":", text)


class SphinxRoles(griffe.Extension):
    """Rewrites every docstring once its package is loaded."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value, obj)
