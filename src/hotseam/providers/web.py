"""The web inbox: answer a running agent's questions from a browser.

:class:`WebProvider` serves a page listing every pending question of the process, live,
with a small JSON API and an event stream beside it, on Starlette served by Hypercorn
inside hotseam's own event loop (asyncio or trio). See ``docs/web.md``::

    from hotseam.interaction import USER_INTERACTION
    from hotseam.providers.web import WebProvider

    def setup(scope):
        web = WebProvider.serve(scope, port=8765)   # loopback only, token required
        scope.provide(USER_INTERACTION, web)

``hotseam run PATH --web`` (and ``hotseam dev``) does the same and prints the page's URL.
"""

from __future__ import annotations

from .._core import present_as
from .._extras import raise_if_missing

try:
    from ._web import DEFAULT_HOST, DEFAULT_PORT, TOKEN_ENV, TOKEN_FILE_ENV, WebProvider
except ModuleNotFoundError as error:  # installed without the web extra
    raise_if_missing(error, "web", __name__)
    raise

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "TOKEN_ENV", "TOKEN_FILE_ENV", "WebProvider"]

present_as(__name__, globals(), __all__)
