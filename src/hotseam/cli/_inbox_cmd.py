"""`hotseam inbox --journal URL`: one web inbox for every daemon that writes to a journal.

It serves the web inbox's page and API (those of ``hotseam run --web``) for every question
pending in the journal, whichever process asked it. Each card says which daemon asks (its
name, host, pid and agent) and whether it is up. A question of a daemon that is down still
takes an answer: the journal holds it for the daemon's resume. A question whose run was
abandoned stays, marked so, until someone clears it. Answers go to the journal, where the
first one wins: of two inboxes answering at once, one gets 200 and the other 409 saying
what was answered and by whom.

The journal is --journal URL, else ``journal`` in [tool.hotseam], else the embedded one in
hotseam's state folder (what ``hotseam run`` uses by default). Several machines share one
PostgreSQL journal (``postgresql://...``); an SQLite file serves the daemons of one machine.
The web options and their [tool.hotseam] keys are those of ``hotseam run --web``: loopback
only unless --web-allow-remote, the kept token; the port defaults to 8766 (a daemon's own
inbox is on 8765). The page's URL, with its token, is logged at start.

SIGTERM or Ctrl-C tells every open page that the inbox stops, then exits 0. Bad input (a bad
URL, port, host or token file) exits 2 with one line on stderr; so does a journal written
by a newer hotseam. A journal that cannot be reached exits 1 with the reason.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

import anyio
import structlog

from .._core import HarnessError
from ..interaction._journal import (
    DEFAULT_LIVENESS_TIMEOUT,
    JournalError,
    JournalErrorCode,
    open_journal,
)
from ..providers._web._fleet_server import DEFAULT_FLEET_PORT, serve_journal_inbox
from ._config import find_config, load_config
from ._extras import check_journal
from ._logging import LogStyle, configure_logging
from ._options import add_log_options, journal_from_config, seconds
from ._web import WebOptions, add_web_arguments, web_options

__all__ = ["add_arguments", "run"]

EXIT_OK = 0
EXIT_FATAL = 1
EXIT_BAD_INPUT = 2
COMMAND = "hotseam inbox"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``[--journal URL] [--liveness-timeout S] [--web-host H] [--web-port P] ...``."""
    parser.add_argument(
        "--journal",
        metavar="URL",
        help="the journal the daemons write to: postgresql://USER@HOST/DATABASE, "
        "sqlite:///PATH or a file path (default: 'journal' in [tool.hotseam], else the "
        "embedded journal in hotseam's state folder)",
    )
    parser.add_argument(
        "--liveness-timeout",
        type=seconds,
        metavar="SECONDS",
        help="a daemon without a heartbeat for this long is shown down (default "
        f"{DEFAULT_LIVENESS_TIMEOUT:g}: daemons beat every third of it)",
    )
    add_web_arguments(parser, switch=False, default_port=DEFAULT_FLEET_PORT)
    add_log_options(parser, default_format="console")


@dataclass(frozen=True, slots=True)
class _Options:
    journal: str | None
    liveness_timeout: float
    web: WebOptions
    log_level: str
    log_format: LogStyle


def run(args: argparse.Namespace) -> int:
    """Serve the inbox until SIGTERM or Ctrl-C; return the exit code."""
    try:
        options = _prepare(args)
    except (HarnessError, ValueError) as error:
        print(f"{COMMAND}: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    configure_logging(options.log_format, level=options.log_level)
    if options.log_format == "console":
        _show_summaries()
    log = structlog.get_logger("hotseam.cli").bind(logger="hotseam.cli")
    try:
        return anyio.run(_serve, options)
    except KeyboardInterrupt:  # before the signal handler was installed
        return EXIT_OK
    except Exception as error:
        log.error(f"{COMMAND} stopped: {error}", exc_info=True)
        return EXIT_FATAL


def _prepare(args: argparse.Namespace) -> _Options:
    """Everything that can be wrong with the input, found before anything starts."""
    found = find_config()
    config = load_config(found) if found is not None else None
    journal = args.journal
    if journal is None and config is not None and config.get("journal") is not None:
        journal = journal_from_config(config.root, config.get("journal"))
    if journal is not None:
        check_journal(journal)  # JOURNAL_INVALID_URL, naming the URL; its extra
    web = web_options(args, implied=True, default_port=DEFAULT_FLEET_PORT)
    assert web is not None
    level = args.log_level or (config.get("log-level") if config is not None else None)
    style = args.log_format or (config.get("log-format") if config is not None else None)
    return _Options(
        journal=journal,
        liveness_timeout=args.liveness_timeout or DEFAULT_LIVENESS_TIMEOUT,
        web=web,
        log_level=level or "info",
        log_format=style or "console",
    )


async def _serve(options: _Options) -> int:
    log = structlog.get_logger("hotseam.cli").bind(logger="hotseam.cli")
    web = options.web
    stop = anyio.CancelScope()
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with anyio.create_task_group() as tasks:

            async def on_signals() -> None:
                async for signum in signals:
                    log.info(f"{signal.Signals(signum).name}: shutting down")
                    stop.cancel()

            tasks.start_soon(on_signals)
            try:
                with stop:
                    async with (
                        open_journal(
                            options.journal, liveness_timeout=options.liveness_timeout
                        ) as journal,
                        serve_journal_inbox(
                            journal,
                            host=web.host,
                            port=web.port,
                            token=web.token,
                            allow_remote=web.allow_remote,
                        ),
                    ):
                        await anyio.sleep_forever()
            except JournalError as error:
                bad_input = error.code in (
                    JournalErrorCode.JOURNAL_INVALID_URL,
                    JournalErrorCode.JOURNAL_NEWER,
                )
                print(f"{COMMAND}: {error}", file=sys.stderr)
                return EXIT_BAD_INPUT if bad_input else EXIT_FATAL
            except (OSError, ValueError) as error:  # the port, the host
                print(f"{COMMAND}: {error}", file=sys.stderr)
                return EXIT_BAD_INPUT
            finally:
                tasks.cancel_scope.cancel()
    log.info("the inbox stopped; every open page was told")
    return EXIT_OK


def _show_summaries() -> None:
    """On the console, an event with a one-line ``summary`` (the page's URL, a journal out
    of reach) is shown as that line."""
    processors = list(structlog.get_config()["processors"])
    renderer = processors.pop()
    structlog.configure(processors=[*processors, _summary_line, renderer])


def _summary_line(
    logger: object, method_name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    summary = event_dict.get("summary")
    if not isinstance(summary, str):
        return event_dict
    return {key: event_dict[key] for key in ("timestamp", "level") if key in event_dict} | {
        "event": summary
    }
