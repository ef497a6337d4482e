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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._stdio_cmd import (
    EXIT_BAD_INPUT,
    EXIT_FATAL,
    EXIT_OK,
    STOP_SIGNALS,
    StopSignals,
    exit_process,
    fail,
)

if TYPE_CHECKING:
    from ._logging import LogStyle
    from ._web import WebOptions

# The rest is imported after the stop signals are handled (:func:`add_arguments`): the web
# inbox's modules take seconds to import on a busy machine, and a SIGTERM then is a stop.

COMMAND = "hotseam inbox"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options; when the process is ``hotseam inbox``, its stop signals are handled from
    here on, before the slow imports (a process that only builds the parser keeps its own)."""
    if _is_the_command():
        _stop_signals()
    from ..interaction.journal import DEFAULT_LIVENESS_TIMEOUT
    from ..providers import DEFAULT_FLEET_PORT
    from ._options import add_log_options, seconds
    from ._web import add_web_arguments

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


def _is_the_command() -> bool:
    """Whether this process was started as ``hotseam inbox`` (the command's first word)."""
    words = [word for word in sys.argv[1:] if not word.startswith("-")]
    return words[:1] == ["inbox"]


_signals: StopSignals | None = None
_replaced: dict[int, Any] = {}


def _stop_signals() -> StopSignals:
    """SIGTERM and SIGINT handled for the rest of the process (:class:`StopSignals`): one
    that comes while the command starts is kept, and stops it once its loop runs."""
    global _signals
    if _signals is None:
        _replaced.update({signum: signal.getsignal(signum) for signum in STOP_SIGNALS})
        _signals = StopSignals("inbox", report=_report_signal)
        _signals.install()
    return _signals


def _restore_signals() -> None:
    """Give back the handlers :func:`_stop_signals` replaced, when the command returns to a
    caller (bad input, or ``main()`` called in-process by a test)."""
    global _signals
    for signum, handler in _replaced.items():
        if handler is not None:
            signal.signal(signum, handler)
    _replaced.clear()
    _signals = None


def _report_signal(name: str, count: int) -> None:
    from ._logging import cli_log

    log = cli_log()
    if count == 1:
        log.info(f"{name}: shutting down")
    else:
        log.info(f"{name} while stopping: the stop goes on (a third signal exits at once)")


@dataclass(frozen=True, slots=True)
class _Options:
    journal: str | None
    liveness_timeout: float
    web: WebOptions
    log_level: str
    log_format: LogStyle


def run(args: argparse.Namespace) -> int:
    signals = _stop_signals()  # installed already when this process is the command
    import anyio

    from .._core import HarnessError
    from ._logging import add_processors, cli_log, configure_logging, summary_lines

    try:
        options = _prepare(args)
    except (HarnessError, ValueError) as error:
        _restore_signals()
        return fail(COMMAND, error)
    configure_logging(options.log_format, level=options.log_level)
    if options.log_format == "console":
        # An event with a one-line summary (the page's URL, a journal out of reach) is that.
        add_processors(summary_lines())
    log = cli_log()
    try:
        code: int = anyio.run(_serve, options, signals)
    except Exception as error:
        log.error(f"{COMMAND} stopped: {error}", exc_info=True)
        code = EXIT_FATAL
    if not _is_the_command():  # main() called in-process: its caller goes on
        _restore_signals()
        return code
    # Stopped: the handlers stay to the end (the interpreter's teardown would restore the
    # default action, and a host's second signal would kill a finished stop).
    return exit_process(code)


def _prepare(args: argparse.Namespace) -> _Options:
    """Everything that can be wrong with the input, found before anything starts."""
    from ..interaction.journal import DEFAULT_LIVENESS_TIMEOUT
    from ..providers import DEFAULT_FLEET_PORT
    from ._config import project_config
    from ._extras import check_journal
    from ._options import journal_url
    from ._web import web_options

    config = project_config()
    journal = journal_url(args.journal, config)
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


async def _serve(options: _Options, signals: StopSignals) -> int:
    import anyio

    from ..interaction.journal import JournalError, JournalErrorCode, open_journal
    from ..providers import serve_journal_inbox
    from ._logging import cli_log

    log = cli_log()
    web = options.web
    stop = anyio.CancelScope()
    try:
        with signals.cancelling(stop), stop:
            async with (
                open_journal(options.journal, liveness_timeout=options.liveness_timeout) as journal,
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
        return fail(COMMAND, error, EXIT_BAD_INPUT if bad_input else EXIT_FATAL)
    except (OSError, ValueError) as error:  # the port, the host
        return fail(COMMAND, error)
    log.info("the inbox stopped; every open page was told")
    return EXIT_OK
