"""`hotseam mcp PATH...`: serve the watched modules' tools to an MCP host, hot-reloaded.

An MCP host (Claude Code, VS Code, Cursor...) launches ``hotseam mcp tools/`` and talks to
it over stdin and stdout, one JSON-RPC message a line. Its tools are the tools the modules
under PATH register (``scope.register_tool`` in ``setup``), listed by name. Saving a module
reloads it while the host stays connected: added, removed and changed tools are announced
(``notifications/tools/list_changed``), and an edited tool's new code serves the next call
under the same name (a call that arrives during the swap waits for it).

Inside a tool, ``await ask(...)`` reaches the human through the host's own UI as a form
elicitation; a host without elicitation gets the web inbox with ``--web``, else an error
that tells the model to ask in the conversation. Both protocol eras are served (the
``initialize`` handshake of 2025-06-18 and 2025-11-25, and 2026-07-28).

With ``--http [PORT]`` the same server listens on loopback for hosts that connect
(Streamable HTTP at ``http://127.0.0.1:PORT/mcp``), behind the web inbox's rules: the
``Host`` and ``Origin`` checks, and a token on every request (``Authorization: Bearer``,
or ``?token=``), logged with the URL at start.

The paths can be written once as ``paths`` in ``[tool.hotseam]`` of the project's
``pyproject.toml`` (with the reloader's options, and ``http``, ``http-host``,
``http-max-sessions``, ``http-session-idle-timeout``, ``input-ttl`` and ``max-line-bytes``
for this command's flags), so ``hotseam mcp`` alone
starts a configured project. stdout carries protocol messages only: logs (JSON lines) and
anything the tools print go to stderr, through a queue that never blocks. The host closing
stdin, SIGTERM or Ctrl-C disposes every generation and exits 0; bad input exits 2 with one
line on stderr.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from .._core import HarnessError, get_logger
from ._config import ConfigError
from ._options import ReloadOptions, add_common_options, port, resolve
from ._stdio_cmd import UsageError, check_stdio, existing, fail, positive_float, positive_int

if TYPE_CHECKING:
    from ..providers.mcp import McpServer
    from ._early import EarlyFront
    from ._stdio_cmd import StopSignals
    from ._web import WebOptions

_log = get_logger("hotseam.cli")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ._web import add_web_arguments

    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="tool modules: a .py file, a folder of them, or a package (default: 'paths' "
        "of [tool.hotseam] in pyproject.toml)",
    )
    parser.add_argument(
        "--max-line-bytes",
        metavar="N",
        type=positive_int,
        default=None,
        help="the longest JSON-RPC message line read from stdin; a longer one is discarded "
        "and answered with error -32600 (default: 16 MiB)",
    )
    parser.add_argument(
        "--input-ttl",
        metavar="SECONDS",
        type=positive_float,
        default=None,
        help="on protocol 2026-07-28, how long a question waits for the host to call the "
        "tool again with the answer (default: 600)",
    )
    parser.add_argument(
        "--http",
        metavar="PORT",
        nargs="?",
        const=0,
        type=port,
        default=None,
        help="serve Streamable HTTP on loopback instead of stdio, at http://127.0.0.1:PORT/mcp "
        "(no PORT: a free one); every request needs the token (Authorization: Bearer TOKEN, "
        "or ?token=TOKEN), logged with the URL at start",
    )
    parser.add_argument(
        "--no-http",
        dest="http",
        action="store_const",
        const=False,
        help="serve stdio even when [tool.hotseam] sets http",
    )
    parser.add_argument(
        "--http-host",
        metavar="HOST",
        default=None,
        help="the loopback address --http listens on (default 127.0.0.1)",
    )
    parser.add_argument(
        "--http-max-sessions",
        metavar="N",
        type=positive_int,
        default=None,
        help="--http sessions open at once; a new one past it closes the least recently "
        "used idle session (503 only while all are busy) (default: 64)",
    )
    parser.add_argument(
        "--http-session-idle-timeout",
        metavar="SECONDS",
        type=positive_float,
        default=None,
        help="close an --http session idle this long: no request in flight, no question "
        "waiting (default: 3600)",
    )
    add_common_options(parser)
    add_web_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ._stdio_cmd import StopSignals, exit_process, stdout_reserved
    from ._web import web_options

    try:
        settings = resolve(args, log_format="json", provider_wait=math.inf)
        checked: dict[str, Any] = {}

        def check(serves_http: bool) -> None:
            """The options are good; the paths and the web inbox's options too, and over
            stdio, the host's probe is answered from now on (:mod:`._early`)."""
            if not settings.paths:
                raise ConfigError(
                    "no PATH given, and no 'paths' in a [tool.hotseam] table of a "
                    "pyproject.toml here or above; for example: hotseam mcp tools/"
                )
            checked["paths"] = [existing(path) for path in settings.paths]
            checked["web"] = web_options(args)
            if not serves_http:
                check_stdio("an MCP host", "hotseam mcp")
                checked["signals"] = StopSignals("mcp")
                checked["signals"].install()  # a host may stop the server once answered
                from .. import __version__
                from ._early import mcp_answer, start_front

                checked["front"] = start_front(mcp_answer(__version__))

        own = _own_options(args, settings.config, check)  # then imports the SDK's modules
        import anyio

        from ._logging import configure_logging  # structlog: after the front started

        paths: list[Path] = checked["paths"]
        web: WebOptions | None = checked["web"]
        front: EarlyFront | None = checked.get("front")
        with stdout_reserved() as protocol_out:
            configure_logging(settings.log_format, level=settings.log_level)  # type: ignore[arg-type]
            signals: StopSignals = checked.get("signals") or StopSignals("mcp")
            signals.install()
            code: int = anyio.run(
                _main,
                paths,
                protocol_out,
                settings.reload,
                web,
                own.max_line_bytes,
                own.input_ttl,
                own.http,
                signals,
                front,
                backend="asyncio",
            )
    except (UsageError, HarnessError, ValueError) as error:
        return fail("hotseam mcp", error)
    except KeyboardInterrupt:  # before the signal handlers were installed
        return 0
    return exit_process(code)  # stopped: nothing to gain from the interpreter's teardown


async def _main(
    paths: list[Path],
    protocol_out: BinaryIO,
    reload: ReloadOptions,
    web: WebOptions | None,
    max_line_bytes: int | None,
    input_ttl: float,
    http: _Http | None,
    signals: StopSignals,
    front: EarlyFront | None,
) -> int:
    import anyio

    from .. import __version__
    from .._core import Context, Scope
    from ..interaction import USER_INTERACTION
    from ..providers.mcp import DEFAULT_MAX_LINE_BYTES, McpProvider, McpServer, stdio_streams
    from ..reload import ReloadPathError
    from ._early import HandOff
    from ._stdio_cmd import served, stdio_pipes
    from ._web import start_web

    base = Context("mcp")
    tools = base.child("mcp.tools")
    try:
        reloader = reload.reloader(tools, paths)
    except ReloadPathError as error:
        return fail("hotseam mcp", error)

    async def serving() -> int:
        async with anyio.create_task_group() as group:
            async with Scope("hotseam.mcp", context=base) as scope:
                fallback = None
                if web is not None:
                    fallback = start_web(scope, web, "hotseam mcp", provide=False)
                    if fallback is None:
                        return 2
                scope.provide(USER_INTERACTION, McpProvider(fallback=fallback))
                server = McpServer(tools, version=__version__, input_ttl=input_ttl)
                events = reloader.events()
                async with server.running(), reloader:
                    await server.tools_changed()  # the first load: nobody to tell yet
                    group.start_soon(server.follow, events)
                    _log.info(
                        "mcp.serving",
                        watch=[str(path) for path in paths],
                        tools=tools.tools.names(),
                        web=None if fallback is None else fallback.url,
                    )
                    if http is not None:
                        if not await _serve_http(server, *http, serving=_warm_up):
                            group.cancel_scope.cancel()  # the reload events' follower
                            return 2
                    else:
                        # Handed off once the modules are loaded: the front answers meanwhile.
                        early = front.hand_off() if front is not None else HandOff()
                        async with (
                            stdio_pipes(protocol_out, early) as (reader, writer),
                            stdio_streams(
                                reader,
                                writer,
                                max_line_bytes=max_line_bytes or DEFAULT_MAX_LINE_BYTES,
                            ) as (read_stream, write_stream),
                        ):
                            _warm_up()
                            await server.serve(read_stream, write_stream)
                    await events.aclose()
            group.cancel_scope.cancel()
        return 0

    return await served("mcp", signals, serving)


def _warm_up() -> None:
    """Make the first question's imports in a daemon thread once the server serves, while
    the host starts talking."""
    import threading

    from ..providers import load_forms

    threading.Thread(target=load_forms, name="hotseam: form imports", daemon=True).start()


async def _serve_http(
    server: McpServer,
    host: str,
    port: int,
    max_sessions: int,
    session_idle_timeout: float,
    *,
    serving: Callable[[], None],
) -> bool:
    """Serve Streamable HTTP until a stop signal (``serving`` called once it listens);
    ``False`` (after one line on stderr) when the address cannot be listened on."""
    import anyio

    from ..providers import load_token, serve_http

    try:
        async with serve_http(
            server,
            host=host,
            port=port,
            token=load_token(),
            max_sessions=max_sessions,
            session_idle_timeout=session_idle_timeout,
        ) as endpoint:
            _log.info(
                "mcp.http_url",
                url=endpoint.url_with_token,
                summary=f"MCP over HTTP at {endpoint.url_with_token}",
            )
            serving()
            await anyio.sleep_forever()
    except (OSError, ValueError) as error:
        print(f"hotseam mcp: --http: {error}", file=sys.stderr)
        return False
    return True  # pragma: no cover - a stop signal cancels the sleep


_Http = tuple[str, int, int, float]
"""Where Streamable HTTP listens (host, port), its most sessions and their idle timeout."""


@dataclass(frozen=True, slots=True)
class _Own:
    """``hotseam mcp``'s own options, flags over ``[tool.hotseam]``."""

    http: _Http | None
    """Where Streamable HTTP listens and its session limits, or ``None``: stdio."""
    input_ttl: float
    max_line_bytes: int | None


def _own_options(
    args: argparse.Namespace,
    config_path: Path | None,
    checked: Callable[[bool], None] = lambda serves_http: None,
) -> _Own:
    """Merge the flags with their ``[tool.hotseam]`` keys; ``checked(serves_http)`` is called
    once they are good, before the defaults are imported from the SDK's modules.

    Raises:
        UsageError: ``http-host`` (or ``--http-host``), or a session limit, without HTTP.
    """
    from ._config import flag_or_config, load_config

    config = load_config(config_path) if config_path is not None else None

    def pick(attribute: str) -> tuple[Any, str]:
        return flag_or_config(args, config, attribute)

    port, _ = pick("http")
    host, host_from = pick("http_host")
    most, most_from = pick("http_max_sessions")
    idle, idle_from = pick("http_session_idle_timeout")
    serves_http = port is not None and port is not False
    for value, origin in ((host, host_from), (most, most_from), (idle, idle_from)):
        if value is not None and not serves_http:
            off = " (--no-http turned it off)" if args.http is False else ""
            raise UsageError(f"{origin} needs --http{off}")
    ttl, _ = pick("input_ttl")
    max_line_bytes, _ = pick("max_line_bytes")
    checked(serves_http)
    from ..providers import DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE_TIMEOUT
    from ..providers.mcp import DEFAULT_INPUT_TTL

    return _Own(
        http=(
            (
                host or "127.0.0.1",
                0 if port is True else int(port),
                DEFAULT_MAX_SESSIONS if most is None else int(most),
                DEFAULT_SESSION_IDLE_TIMEOUT if idle is None else float(idle),
            )
            if serves_http
            else None
        ),
        input_ttl=DEFAULT_INPUT_TTL if ttl is None else float(ttl),
        max_line_bytes=max_line_bytes,
    )
