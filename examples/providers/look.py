"""A helper module: no ``setup``, so it is never set up on its own.

``my_ui`` imports it, so saving this file reloads ``my_ui`` too (its dependent).
"""

from __future__ import annotations

__all__ = ["frame"]


def frame(text: str) -> str:
    """Decorate the banner line shown above each question."""
    return f"== {text} =="
