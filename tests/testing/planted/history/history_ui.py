"""Planted defect: each setup appends its rendered page to a helper's module-level cache."""

import planted_cache

from hotseam import Scope


def render(title: str) -> str:
    return f"<h1>{title}</h1>" + "<p>…</p>" * 1024  # PLANTED: what the cache keeps


def setup(scope: Scope) -> None:
    planted_cache.remember(render("Questions"))
