"""The web inbox provider's private modules (the public name is ``hotseam.providers.web``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._core import lazy_exports
from ._security import DEFAULT_HOST as DEFAULT_HOST
from ._security import TOKEN_ENV as TOKEN_ENV
from ._security import TOKEN_FILE_ENV as TOKEN_FILE_ENV
from ._security import HostPolicy as HostPolicy
from ._security import is_loopback as is_loopback
from ._security import load_token as load_token
from ._security import stored_token_path as stored_token_path
from ._security import token_matches as token_matches

if TYPE_CHECKING:  # the web stack, imported when first used (the token alone needs none)
    from ._journal_inbox import DEFAULT_FLEET_PORT as DEFAULT_FLEET_PORT
    from ._journal_inbox import serve_journal_inbox as serve_journal_inbox
    from ._provider import DEFAULT_PORT as DEFAULT_PORT
    from ._provider import WebProvider as WebProvider
    from ._server import Listener as Listener
    from ._server import WebServer as WebServer

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_exports(
        globals(),
        {
            "DEFAULT_PORT": "._provider",
            "WebProvider": "._provider",
            "Listener": "._server",
            "WebServer": "._server",
            "DEFAULT_FLEET_PORT": "._journal_inbox",
            "serve_journal_inbox": "._journal_inbox",
        },
    )
