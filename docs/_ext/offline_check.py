"""An MkDocs hook: the built site loads nothing from outside itself.

After the build, every HTML page is parsed and every resource a browser would load on its
own — scripts, style sheets, fonts, images, frames, media, preconnects — must be a path
inside the site (or ``data:``); style sheets must not ``@import`` or ``url()`` anything
outside it either. Links a reader follows (``<a href>``) may point anywhere. A page that
would reach the network fails the build, naming the page, the tag and the address.

(Material's JavaScript bundle names two addresses it loads only on demand: a
ResizeObserver polyfill for browsers that lack one, and mermaid for diagrams. The site has
no diagrams, and every browser of the last years has ResizeObserver.)
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

REMOTE = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//", re.I)
CSS_REMOTE = re.compile(
    r"(?:url\(\s*['\"]?|@import\s+['\"])\s*((?:[a-z][a-z0-9+.-]*:)?//[^'\")\s]+)", re.I
)
LOADED = {
    "script": ("src",),
    "img": ("src", "srcset"),
    "iframe": ("src",),
    "source": ("src", "srcset"),
    "audio": ("src",),
    "video": ("src", "poster"),
    "embed": ("src",),
    "object": ("data",),
    "link": ("href",),
}
NOT_LOADED_LINKS = {"canonical", "alternate", "author", "help", "license", "next", "prev", "search"}


class _Resources(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.remote: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "link" and set((attributes.get("rel") or "").split()) <= NOT_LOADED_LINKS:
            return
        for name in LOADED.get(tag, ()):
            value = attributes.get(name) or ""
            if REMOTE.match(value):
                self.remote.append(f"<{tag} {name}={value!r}>")
        style = attributes.get("style") or ""
        self.remote.extend(f"<{tag} style> {url}" for url in CSS_REMOTE.findall(style))

    def handle_data(self, data: str) -> None:
        if self.lasttag == "style":
            self.remote.extend(f"<style> {url}" for url in CSS_REMOTE.findall(data))


def remote_resources(site: Path) -> list[str]:
    """Every resource of the built ``site`` that a browser would fetch from elsewhere."""
    found = []
    for page in sorted(site.rglob("*.html")):
        parser = _Resources()
        parser.feed(page.read_text(encoding="utf-8"))
        found.extend(f"{page.relative_to(site)}: {entry}" for entry in parser.remote)
    for sheet in sorted(site.rglob("*.css")):
        urls = CSS_REMOTE.findall(sheet.read_text(encoding="utf-8"))
        found.extend(f"{sheet.relative_to(site)}: {url}" for url in urls)
    return found


def on_post_build(config: Any, **kwargs: Any) -> None:
    """Fail the build when a page or style sheet would load something from outside."""
    from mkdocs.exceptions import PluginError

    found = remote_resources(Path(config["site_dir"]))
    if found:
        raise PluginError(
            "the site would load resources from outside itself:\n  " + "\n  ".join(found)
        )
