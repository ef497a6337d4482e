"""``--web`` for ``hotseam dev`` and ``hotseam run``: answer questions in a browser.

The inbox is installed in the *parent* context, like ``--answers``: it serves while no
watched module provides the seam. It is the CLI's (never reloaded), so its URL stays the
same for the run, and its token from one start to the next."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._core import Scope
from .._extras import missing
from ..interaction import USER_INTERACTION
from ..providers import is_loopback, load_token, stored_token_path
from ._config import flag_or_config, project_config
from ._extras import needs
from ._options import port

if TYPE_CHECKING:
    from ..providers.web import WebProvider

# The web provider's defaults (tests/test_import_cost.py checks that they agree): the web
# stack (Starlette, Hypercorn: about 25 ms) is imported only when the inbox is served.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


@dataclass(frozen=True, slots=True)
class WebOptions:
    """What ``--web...`` asked for, checked."""

    host: str
    port: int
    allow_remote: bool
    token_file: str | None
    token: str


def add_web_arguments(
    parser: argparse.ArgumentParser, *, switch: bool = True, default_port: int = DEFAULT_PORT
) -> None:
    """``--web [--web-host HOST] [--web-port PORT] [--web-allow-remote] [--web-token-file F]``;
    without ``switch``, no ``--web`` (``hotseam inbox`` is nothing but an inbox)."""
    group = parser.add_argument_group("web inbox")
    if switch:
        group.add_argument(
            "--web",
            action=argparse.BooleanOptionalAction,
            help="answer questions in a browser: prints the inbox's URL (with its token) on "
            "stderr; 'hotseam status' shows it too (--no-web: not even with web = true in "
            "[tool.hotseam])",
        )
    group.add_argument(
        "--web-host",
        metavar="HOST",
        help=f"where the inbox listens (default {DEFAULT_HOST}; another address needs "
        "--web-allow-remote)",
    )
    group.add_argument(
        "--web-port",
        type=port,
        metavar="PORT",
        help=f"the inbox's TCP port (default {default_port}; 0 picks a free one)",
    )
    group.add_argument(
        "--web-allow-remote",
        action="store_true",
        default=None,
        help="allow --web-host to be an address other machines can reach (prints a warning)",
    )
    group.add_argument(
        "--web-token-file",
        metavar="FILE",
        help="read the inbox's token from FILE (default: $HOTSEAM_WEB_TOKEN, else "
        "$HOTSEAM_WEB_TOKEN_FILE, else the one kept in "
        f"{_shown_state_path()}, made at the first start and the same at every start)",
    )


def web_options(
    args: argparse.Namespace, *, implied: bool = False, default_port: int = DEFAULT_PORT
) -> WebOptions | None:
    """The checked options (flags over ``[tool.hotseam]``), or ``None`` without the inbox; the
    token is read here, so a bad token file is found before anything starts. ``implied``:
    the command is the inbox (``web`` and ``answers`` are not consulted).

    Raises:
        ValueError: a ``--web-*`` flag without the inbox, the inbox with ``--answers``, a
            bad host, or a token that cannot be read.
        ConfigError: the configuration file is wrong."""
    config = project_config()

    def pick(attribute: str) -> tuple[Any, str]:
        return flag_or_config(args, config, attribute)

    web, web_from = (True, "the inbox") if implied else pick("web")
    if not web:
        given = [
            f"--{attribute.replace('_', '-')}"
            for attribute in ("web_host", "web_port", "web_allow_remote", "web_token_file")
            if getattr(args, attribute, None) is not None
        ]
        if given:
            off = " (--no-web turned it off)" if web is False else ""
            raise ValueError(f"{given[0]} needs --web{off}")
        return None
    if missing("web") is not None:
        raise ValueError(needs(web_from, "web"))
    answers, answers_from = (None, "") if implied else pick("answers")
    if answers:
        raise ValueError(
            f"{web_from} and {answers_from} both answer questions: choose one"
            + (" (--no-web turns the web inbox off)" if web_from != "--web" else "")
        )
    host_value, host_from = pick("web_host")
    host = str(host_value or DEFAULT_HOST).strip()
    if host.count(":") == 1 or (host.startswith("[") and "]:" in host):
        raise ValueError(f"{host_from} {host}: give the address alone, and the port as --web-port")
    allow_remote, _ = pick("web_allow_remote")
    if not is_loopback(host.strip("[]")) and not allow_remote:
        raise ValueError(
            f"{host_from} {host} is not a loopback address, so other machines could reach the "
            "inbox: add --web-allow-remote (web-allow-remote = true) to mean it"
        )
    port, _ = pick("web_port")
    token_file, token_file_from = pick("web_token_file")
    if token_file is not None and config is not None and token_file_from != "--web-token-file":
        token_file = config.path_of(token_file)
    token = load_token(token_file=token_file)  # a bad file is bad input, found early
    return WebOptions(
        host=host,
        port=default_port if port is None else port,
        allow_remote=bool(allow_remote),
        token_file=token_file,
        token=token,
    )


def start_web(
    scope: Scope, options: WebOptions, command: str, *, provide: bool = True
) -> WebProvider | None:
    """Serve the inbox for the CLI's lifetime (provided in ``scope`` unless ``provide`` is
    false: ``hotseam mcp``'s fallback); ``None`` after one line on stderr when the address
    cannot be listened on (bad input, exit 2)."""
    from ..providers.web import WebProvider

    try:
        web = WebProvider.serve(
            scope,
            host=options.host,
            port=options.port,
            allow_remote=options.allow_remote,
            token=options.token,
        )
    except (OSError, ValueError) as error:
        print(f"{command}: {error}", file=sys.stderr)
        return None
    if provide:
        scope.provide(USER_INTERACTION, web)
    return web


def _shown_state_path() -> str:
    try:
        return str(stored_token_path()).replace(str(Path.home()), "~", 1)
    except RuntimeError:
        return "$XDG_STATE_HOME/hotseam/web-token"
