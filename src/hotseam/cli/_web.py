"""``--web`` for ``hotseam dev`` and ``hotseam run``: answer questions in a browser.

The web inbox is installed in the *parent* context, like ``--answers``: it serves every
question while no watched module provides the user-interaction seam itself. It is not
reloaded (it belongs to the CLI), so its URL stays the same for the whole run.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from .._scope import Scope
from ..interaction import USER_INTERACTION
from ..providers._web._security import is_loopback, load_token
from ..providers.web import DEFAULT_HOST, DEFAULT_PORT, WebProvider

__all__ = ["WebOptions", "add_web_arguments", "start_web", "web_options"]


@dataclass(frozen=True, slots=True)
class WebOptions:
    """What ``--web...`` asked for, checked."""

    host: str
    port: int
    allow_remote: bool
    token_file: str | None


def add_web_arguments(parser: argparse.ArgumentParser) -> None:
    """``--web [--web-host HOST] [--web-port PORT] [--web-allow-remote] [--web-token-file F]``."""
    group = parser.add_argument_group("web inbox")
    group.add_argument(
        "--web",
        action="store_true",
        help="answer questions in a browser: prints the inbox's URL (with its token) on stderr",
    )
    group.add_argument(
        "--web-host",
        metavar="HOST",
        help=f"where the inbox listens (default {DEFAULT_HOST}; another address needs "
        "--web-allow-remote)",
    )
    group.add_argument(
        "--web-port",
        type=_port,
        metavar="PORT",
        help=f"the inbox's TCP port (default {DEFAULT_PORT}; 0 picks a free one)",
    )
    group.add_argument(
        "--web-allow-remote",
        action="store_true",
        help="allow --web-host to be an address other machines can reach (prints a warning)",
    )
    group.add_argument(
        "--web-token-file",
        metavar="FILE",
        help="read the inbox's token from FILE (default: $HOTSEAM_WEB_TOKEN, else "
        "$HOTSEAM_WEB_TOKEN_FILE, else a new one per process)",
    )


def web_options(args: argparse.Namespace) -> WebOptions | None:
    """The checked options, or ``None`` without ``--web``.

    Raises:
        ValueError: a ``--web-*`` option without ``--web``, or ``--web`` with ``--answers``.
    """
    given = [
        flag
        for flag, value in (
            ("--web-host", getattr(args, "web_host", None)),
            ("--web-port", getattr(args, "web_port", None)),
            ("--web-allow-remote", getattr(args, "web_allow_remote", False)),
            ("--web-token-file", getattr(args, "web_token_file", None)),
        )
        if value not in (None, False)
    ]
    if not getattr(args, "web", False):
        if given:
            raise ValueError(f"{given[0]} needs --web")
        return None
    if getattr(args, "answers", None):
        raise ValueError("--web and --answers both answer questions: choose one")
    host = (args.web_host or DEFAULT_HOST).strip()
    if host.count(":") == 1 or (host.startswith("[") and "]:" in host):
        raise ValueError(f"--web-host {host}: give the address alone, and the port as --web-port")
    if not is_loopback(host.strip("[]")) and not args.web_allow_remote:
        raise ValueError(
            f"--web-host {host} is not a loopback address, so other machines could reach the "
            "inbox: add --web-allow-remote to mean it"
        )
    if args.web_token_file is not None:
        load_token(token_file=args.web_token_file)  # a bad file is bad input, found early
    return WebOptions(
        host=host,
        port=DEFAULT_PORT if args.web_port is None else args.web_port,
        allow_remote=bool(args.web_allow_remote),
        token_file=args.web_token_file,
    )


def start_web(scope: Scope, options: WebOptions, log: Any, command: str) -> WebProvider | None:
    """Serve the inbox for the CLI's lifetime and announce its URL in one stderr line.

    Returns ``None`` after one line on stderr when the port cannot be listened on (in use,
    not allowed) or the host is not an address of this machine: bad input, exit 2.
    """
    try:
        web = WebProvider.serve(
            scope,
            host=options.host,
            port=options.port,
            allow_remote=options.allow_remote,
            token_file=options.token_file,
        )
    except (OSError, ValueError) as error:
        print(f"{command}: {error}", file=sys.stderr)
        return None
    scope.provide(USER_INTERACTION, web)
    log.info(f"web inbox: {web.url}")
    return web


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 0 to 65535, got {text!r}")
    return value
