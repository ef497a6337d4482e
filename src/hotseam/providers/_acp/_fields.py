"""Moved to the surface kit (:mod:`hotseam.providers._kit`): the names ``_conversation``
still imports from here, until it imports them from the kit (then this module goes)."""

from __future__ import annotations

from .._kit import RECOMMENDED_SUFFIX, assemble

__all__ = ["RECOMMENDED_SUFFIX", "assemble"]
