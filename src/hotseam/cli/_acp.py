"""Serve an agent over the Agent Client Protocol: JSON-RPC 2.0 on stdio, one message a line.

An ACP client (an editor such as Zed) launches ``hotseam acp`` and talks to it over its
stdin and stdout. For each prompt the agent (``--agent MODULE:FUNCTION``, default: a demo
that asks one or two questions) runs once, and its questions reach the human as ACP form
elicitations. With ``--watch``, provider modules are loaded and hot-reloaded into the
agent's context, where they may shadow the ACP provider, by the reloader ``dev`` and
``run`` use, made from the same options (``--import-timeout``, ``--deletion-grace``,
``--max-module-size``, ``--polling``...: :func:`~._options.add_reload_options`). The
agent's module executes in a worker thread, bounded by ``--import-timeout``, as theirs
does. stdout carries protocol messages only: everything else the process writes to it
goes to stderr, with the JSON log lines, through a queue that never blocks (a client may
never read stderr).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from .._core import get_logger
from ._agent import AgentLoadError, ask_tool
from ._config import ConfigError
from ._options import ReloadOptions, add_common_options, resolve
from ._stdio_cmd import (
    StopSignals,
    UsageError,
    check_stdio,
    existing,
    exit_process,
    fail,
    positive_float,
    positive_int,
    served,
    stdio_pipes,
    stdout_reserved,
)

if TYPE_CHECKING:
    from typing import Any

    from .._core import Context, Tool
    from ..providers.acp import AgentFunction
    from ._early import EarlyFront

# The SDK, the provider and the reloader are imported when the command runs, not when the
# ``hotseam`` parser is built for another subcommand: ``acp`` alone costs ~0.3 s to import.

_log = get_logger("hotseam.cli")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent",
        metavar="MODULE:FUNCTION",
        help="the agent run for each prompt turn, 'async def agent(context)' "
        "(default: the built-in ACP demo agent); its module executes within --import-timeout",
    )
    parser.add_argument(
        "--watch",
        metavar="PATH",
        nargs="+",
        action="extend",
        default=[],
        help="provider modules to load and hot-reload (.py files, folders, packages)",
    )
    parser.add_argument(
        "--max-line-bytes",
        metavar="N",
        type=positive_int,
        default=None,
        help="the longest JSON-RPC message line read from stdin; a longer one is discarded "
        "and answered with error -32600 (default: 16 MiB, room for images in prompts)",
    )
    parser.add_argument(
        "--session-idle-timeout",
        metavar="SECONDS",
        type=positive_float,
        default=3600.0,
        help="release a session the client never closed after this long without a prompt "
        "(a question still waiting in it is cancelled; default: 3600)",
    )
    add_common_options(parser)  # the reloader's options (dev's and run's), the log options


def run(args: argparse.Namespace) -> int:
    """Serve until the client closes stdin, SIGTERM or Ctrl-C (exit 0).

    Bad input exits 2 with one line on stderr; a fatal error is logged and exits 1.
    """
    import anyio

    from ._logging import configure_logging

    try:
        check_stdio("an ACP client", "hotseam acp")
        paths = [existing(item, "--watch ") for item in args.watch]
        common = resolve(args, log_format="json", provider_wait=math.inf)
        with stdout_reserved() as protocol_out:
            configure_logging(common.log_format, level=common.log_level)  # type: ignore[arg-type]
            if args.agent:
                # As dev and run do: a slow body leaves signals handled, and is abandoned.
                from ._agent import load_agent_within

                agent = load_agent_within(args.agent, common.import_timeout)
            else:
                from ._acp_agent import acp_demo_agent

                agent = acp_demo_agent
            signals = StopSignals("acp")
            signals.install()
            from .. import __version__
            from ._early import acp_answer, start_front

            # The client's initialize is answered from now on, the SDK imported meanwhile.
            front = start_front(acp_answer(__version__), protocol_out.fileno())
            code: int = anyio.run(
                _main,
                agent,
                paths,
                protocol_out,
                ask_tool(),
                common.reload,
                args.max_line_bytes,
                args.session_idle_timeout,
                signals,
                front,
                backend="asyncio",
            )
    except (UsageError, AgentLoadError, ConfigError) as error:
        return fail("hotseam acp", error)
    except KeyboardInterrupt:  # before the signal handlers were installed
        return 0
    return exit_process(code)  # stopped: nothing to gain from the interpreter's teardown


async def _main(
    agent: AgentFunction,
    paths: Sequence[Path],
    protocol_out: BinaryIO,
    ask_tool: Tool[Any],
    reload: ReloadOptions,
    max_line_bytes: int | None,
    session_idle_timeout: float | None,
    signals: StopSignals,
    front: EarlyFront | None,
) -> int:
    from .._core import Context, Scope
    from ..interaction import USER_INTERACTION
    from ..providers.acp import AcpProvider, serve
    from ._early import HandOff

    base = Context("acp")
    agent_context = base.child("acp.agent")
    provider = AcpProvider()
    try:
        watching = _reloader(agent_context, paths, reload)
    except UsageError as error:
        return fail("hotseam acp", error)
    early = front.hand_off() if front is not None else HandOff()

    async def serving() -> int:
        async with (
            Scope("hotseam.acp", context=base) as scope,
            stdio_pipes(protocol_out, early) as (reader, writer),
        ):
            scope.provide(USER_INTERACTION, provider)
            scope.register_tool(ask_tool)
            watcher = getattr(watching, "watcher", None)
            _log.info(
                "acp.serving",
                agent=f"{agent.__module__}:{agent.__qualname__}",
                watch=[str(path) for path in paths],
                watcher=repr(watcher) if watcher is not None else None,
                deletion_grace=getattr(watching, "deletion_grace", None),
            )
            async with watching:
                await serve(
                    agent,
                    agent_context,
                    provider=provider,
                    reader=reader,
                    writer=writer,
                    max_line_bytes=max_line_bytes,
                    session_idle_timeout=session_idle_timeout,
                )
        return 0

    return await served("acp", signals, serving)


def _reloader(
    context: Context, paths: Sequence[Path], options: ReloadOptions
) -> AbstractAsyncContextManager[object]:
    """Load and hot-reload the provider modules under ``paths`` into ``context``, by the
    reloader ``dev`` and ``run`` make from the same ``options``."""
    if not paths:
        return nullcontext()
    from ..reload import ReloadPathError

    try:
        return options.reloader(context, paths)
    except ReloadPathError as error:
        raise UsageError(f"--watch: {error}") from None
