"""`hotseam dev PATH...`: run an agent while its providers are hot-reloaded from disk.

The agent (default: the built-in demo agent) runs in a context whose providers come from
the provider modules under PATH. Saving a module reloads it: the old generation is disposed
(a question it is showing is withdrawn and asked again by the new one), then the new one
is activated. Each reload is reported on stderr in one line, for example
``reloaded providers/my_ui.py (generation 4) in 12 ms``; a failed one names file:line and
says ``keeping generation 3``.

``--answers FILE`` installs a scripted provider (see ``hotseam.providers.scripted``) in the
*parent* context: it answers only while no watched module provides the user-interaction
seam (a watched provider shadows it), which makes it a fallback for CI runs and for the
moments when the watched UI fails to load.

The loop stays alive. A question asked while no provider is loaded (none saved yet, its
file deleted, a branch switch) waits for one, with one line saying so, instead of failing
(``--provider-wait`` bounds it). On a terminal the agent's end does not end the command: it
says how the agent ended and keeps watching; saving the agent's module, or pressing Enter
while it is not running, runs it again (a save while it runs withdraws its question first).
Ctrl-C at an open question dismisses it; a second Ctrl-C within a second stops the command.

The options can be written once in ``[tool.hotseam]`` of the project's ``pyproject.toml``
(``paths``, ``agent``, the time bounds, ``log-level``, ``log-format``, ``polling``...), so
``hotseam dev`` alone starts a configured project; a flag wins over the file. The process
listens on a private control socket (its path is logged at start) for ``hotseam status``
and ``hotseam reload``.

Ctrl-C, SIGTERM or SIGHUP (the terminal went away) disposes every generation, then exits
0, within a few seconds plus the dispose time bound even when a setup or a module body is
stuck: code that overran its time bound is not waited for (it is named in a warning).
``hotseam run`` takes SIGHUP as the daemon convention instead: reload every module (failed
ones are retried). A fatal error (the agent raised, the watcher failed, a disposer failed at
shutdown) exits 1 with the reason logged; bad input (a missing path, a bad --agent, a bad
answers file) exits 2 with one line saying what is wrong.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import signal
import sys
from collections.abc import AsyncIterator, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import anyio
import structlog

from .._core import TOOL_GATE, CloseReason, Context, DisposalError, HarnessError, Scope, Tool
from ..interaction import USER_INTERACTION
from ..interaction.approvals import HumanGate
from ..interaction.journal import JOURNALING, JournalDaemon, JournalError, JournalErrorCode
from ..providers.scripted import ScriptedProvider
from ..reload import Reloader, ReloaderClosedError
from ._agent import (
    AgentFunction,
    agent_key,
    ask_tool,
    describe_error,
    load_agent_within,
    shown_path,
)
from ._agent_loop import AgentLoop
from ._config import ConfigError
from ._control import Claim, claim, parse_request, serving
from ._demo import demo_agent
from ._extras import check_journal
from ._hints import Hints
from ._logging import LogStyle, add_processors, cli_log, configure_logging, summary_lines
from ._options import Settings, add_common_options, add_session_options, resolve, seconds_or_zero
from ._snapshot import SessionFacts, handle
from ._stdio_cmd import EXIT_BAD_INPUT, EXIT_FATAL, EXIT_OK, StopSignals, exit_process, fail
from ._watchdog import LoopWatchdog
from ._web import WebOptions, add_web_arguments, start_web, web_options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_session_arguments(parser)
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log every lifecycle event (providers installed and removed, asks...), "
        "not only reloads and problems",
    )


def add_session_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments ``dev`` and ``run`` share."""
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="provider modules: a .py file, a folder of them, or a package (default: "
        "'paths' of [tool.hotseam] in pyproject.toml)",
    )
    parser.add_argument(
        "--agent",
        metavar="MODULE[:FUNCTION]",
        help="the agent to run, 'async def main(context)' (default: the built-in demo agent); "
        "MODULE may also be a path such as examples/agent.py; FUNCTION defaults to main",
    )
    parser.add_argument(
        "--answers",
        metavar="FILE",
        help="answer questions from this JSON script while no watched provider does",
    )
    add_common_options(parser)
    add_session_options(parser)
    parser.add_argument(
        "--stall-warning",
        type=seconds_or_zero,
        metavar="SECONDS",
        help="warn when the event loop is blocked this long, naming the line (default 2, "
        "0 disables); a second Ctrl-C or SIGTERM while it is blocked exits at once",
    )
    add_web_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return run_session(args, style="console", verbose=args.verbose)


@dataclass(frozen=True, slots=True)
class _Session:
    command: str
    reloader: Reloader
    agent: AgentFunction
    answers: ScriptedProvider | None
    ask_tool: Tool[Any]
    settings: Settings
    control: Claim
    web: WebOptions | None = None
    agent_key: str = "demo"


def run_session(args: argparse.Namespace, *, style: LogStyle, verbose: bool = True) -> int:
    """Check the input, configure logging, and run the agent under the reloader."""
    command = f"hotseam {args.command}"
    session = _prepare(args, command, style)
    if isinstance(session, int):
        return session
    style = session.settings.log_format  # type: ignore[assignment]
    level = session.settings.log_level
    configure_logging(style, level=level)
    # A reload or loop event shows as its one-line summary (its traceback, if any, below it).
    add_processors(
        *([_drop_lifecycle_chatter] if not verbose and level != "debug" else []),
        *(
            [summary_lines("reload.", "loop.", "ask.", "accept.", "web.", tracebacks=True)]
            if style == "console"
            else []
        ),
    )
    log = cli_log()
    parse_request(b'{"op": "status"}')  # as ask_tool() does: imported before serving
    signals = StopSignals(command, report=functools.partial(_report_signal, log))
    signals.install()
    try:
        code: int = anyio.run(_serve, session, signals)
    except KeyboardInterrupt:
        # Ctrl-C before the signal handler was installed (or after it was removed): the
        # reloader's 'async with' still disposed every generation on the way out.
        log.info("interrupted; every generation was disposed")
        return EXIT_OK
    except Exception as error:
        log.error(f"{command} stopped: {describe_error(error)}", exc_info=True)
        return EXIT_FATAL
    return exit_process(code)  # stopped: nothing to gain from the interpreter's teardown


def _report_signal(log: Any, name: str, count: int) -> None:
    if count == 1:
        log.info(f"{name}: shutting down")
    else:
        log.info(f"{name}: already shutting down (a third signal exits at once)")


def _prepare(args: argparse.Namespace, command: str, style: LogStyle) -> _Session | int:
    """Everything that can be wrong with the input, found before anything starts."""
    providers = Context("providers", parent=Context("hotseam"))
    try:
        wait = float("inf") if command == "hotseam dev" else 60.0
        settings = resolve(args, log_format=style, provider_wait=wait)
        if not settings.paths:
            raise ConfigError(
                "no PATH given, and no 'paths' in a [tool.hotseam] table of a pyproject.toml "
                "here or above; for example: hotseam dev providers/"
            )
        reloader = settings.reload.reloader(providers, settings.paths)
        agent: AgentFunction = (
            load_agent_within(settings.agent, settings.import_timeout)
            if settings.agent
            else demo_agent
        )
        answers = ScriptedProvider.from_file(settings.answers) if settings.answers else None
        if settings.journaled and settings.journal is not None:
            check_journal(settings.journal)  # JOURNAL_INVALID_URL, naming it; its extra
        web = web_options(args)
        control = claim(settings.name)
    except (HarnessError, ValueError) as error:
        return fail(command, error)
    return _Session(
        command,
        reloader,
        agent,
        answers,
        ask_tool(),
        settings,
        control,
        web=web,
        agent_key=agent_key(settings.agent, settings.name),
    )


async def _serve(session: _Session, signals: StopSignals) -> int:
    log = cli_log()
    reloader = session.reloader
    outcome = EXIT_OK
    daemon = session.command == "hotseam run"
    # Stop signals are handled before any provider code runs: a KeyboardInterrupt can then
    # only be provider code's, which the reloader reports. SIGHUP has a receiver of its own.
    stop = anyio.CancelScope()
    watchdog = LoopWatchdog(session.settings.stall_warning or None, log, exit_process)
    with anyio.open_signal_receiver(signal.SIGHUP) as hangups, signals.cancelling(stop):
        async with watchdog.watching(), anyio.create_task_group() as control:

            async def reload_everything() -> None:
                # force: unchanged modules too (without it only changed files reload).
                try:
                    result = await reloader.reload(force=True)
                except ReloaderClosedError:
                    return
                log.info(
                    f"SIGHUP: {len(result.committed)} module(s) reloaded, "
                    f"{len(result.aborted)} failed"
                )

            async def on_signals() -> None:
                async for _ in hangups:
                    if daemon:
                        log.info("SIGHUP: reloading every module")
                        control.start_soon(reload_everything)
                        continue
                    log.info("SIGHUP: shutting down")
                    stop.cancel()

            control.start_soon(on_signals)
            with stop:
                outcome = await _serve_session(session, log, stop.cancel)
            control.cancel_scope.cancel()
    leftover = reloader.still_running()
    if leftover:
        log.warning(
            "exiting without waiting for code that overran its time bound",
            still_running=leftover,
        )
        exit_process(outcome)
    return outcome


async def _serve_session(session: _Session, log: Any, stop: Callable[[], None]) -> int:
    """Run the agent under the reloader; dispose every generation however it ends."""
    reloader = session.reloader
    providers = reloader.context
    assert providers.parent is not None
    outcome = EXIT_OK
    async with Scope("hotseam-cli", context=providers.parent) as cli_scope:
        cli_scope.register_tool(session.ask_tool)
        # Tools needing approval are asked through the active provider (a provider module
        # may provide its own TOOL_GATE: it is found first).
        gate = HumanGate(offer_rules=True)
        cli_scope.provide(TOOL_GATE, gate)
        if session.answers is not None:
            cli_scope.provide(USER_INTERACTION, session.answers)
        if session.web is not None and not start_web(cli_scope, session.web, session.command):
            return EXIT_BAD_INPUT
        cli_scope.spawn(Hints(reloader, log).run)
        async with contextlib.AsyncExitStack() as stack:
            journal = await _open_journal(session, stack, cli_scope, log)
            if isinstance(journal, int):
                return journal
            # The control socket serves from before the first load: a stuck load can be seen.
            async with _controlled(session, log) as facts, reloader:
                watched = ", ".join(shown_path(path) for path in reloader.paths)
                facts.journal = None if journal is None else journal.journal.url
                facts.rules = gate.rules.rules if journal is None else journal.journal.rules
                try:
                    outcome = await _run_agent(session, log, stop, watched, facts, journal)
                finally:
                    try:
                        await reloader.aclose(CloseReason.SHUTDOWN)
                    except DisposalError as failure:
                        outcome = EXIT_FATAL
                        log.error(  # noqa: TRY400 - each failure was logged as reload.dispose_failed
                            f"{len(failure.exceptions)} disposer(s) failed at shutdown",
                            failures=[describe_error(error) for error in failure.exceptions],
                        )
                    else:
                        log.info("every generation was disposed")
                    # The CLI's own effects (its web inbox tells open pages why it closes)
                    # see a shutdown, not the stop signal's cancellation.
                    await cli_scope.aclose(CloseReason.SHUTDOWN)
    return outcome


async def _open_journal(
    session: _Session, stack: contextlib.AsyncExitStack, scope: Scope, log: Any
) -> JournalDaemon | int | None:
    """The journal (``None`` with --no-journal), open until ``stack`` closes and provided in
    ``scope``'s context; an exit code when it cannot be opened (one line on stderr)."""
    settings = session.settings
    if not settings.journaled:
        return None
    name = settings.name or session.command
    try:
        journal = await stack.enter_async_context(
            JournalDaemon.open(settings.journal, name=name, agent=session.agent_key)
        )
    except JournalError as error:
        sys.stderr.write(f"{session.command}: {error}\n")  # one write: a log line cannot cut it
        unreachable = error.code == JournalErrorCode.JOURNAL_UNAVAILABLE
        return EXIT_FATAL if unreachable else EXIT_BAD_INPUT
    owner = await journal.running_elsewhere(session.agent_key)
    if owner is not None:
        sys.stderr.write(  # one write: the log's writer thread cannot cut the line
            f"{session.command}: the agent {session.agent_key!r} is run by {owner.name} "
            f"(host {owner.host}, pid {owner.pid}) in {journal.journal.url}; stop that one "
            "first, or name this agent otherwise with --name\n"
        )
        sys.stderr.flush()
        return EXIT_BAD_INPUT
    registration = scope.provide(JOURNALING, journal)
    stack.push_async_callback(registration.dispose)  # gone before the journal closes
    log.info(f"journal: {journal.journal.url} (agent {session.agent_key})")
    return journal


@contextlib.asynccontextmanager
async def _controlled(session: _Session, log: Any) -> AsyncIterator[SessionFacts]:
    """Serve the control socket (``hotseam status``, ``hotseam reload``) in the block."""
    settings = session.settings
    socket = session.control.socket
    facts = SessionFacts(
        session.command,
        session.reloader,
        name=settings.name,
        socket=None if socket is None else str(socket),
        agent=settings.agent or "the demo agent",
    )
    async with serving(session.control, functools.partial(handle, facts), log):
        yield facts


async def _run_agent(
    session: _Session,
    log: Any,
    stop: Callable[[], None],
    watched: str,
    facts: SessionFacts,
    journal: JournalDaemon | None,
) -> int:
    """Run the agent (again and again in ``dev``)."""
    settings = session.settings
    dev = session.command == "hotseam dev"
    folders = ", ".join(
        shown_path(path) + ("/" if path.is_dir() else "") for path in session.reloader.paths
    )

    def waiting(seam: str) -> None:
        log.info(f"waiting for a provider of {seam!r} — save one under {folders}")

    loop = AgentLoop(
        settings.agent,
        session.agent,
        session.reloader.context,
        log,
        facts,
        keep_alive=dev and _terminal(sys.stdin),
        provider_wait=settings.provider_wait,
        on_wait=waiting,
        stop=stop,
        import_timeout=settings.import_timeout,
        journal=journal,
        agent_key=session.agent_key,
        fresh=settings.fresh,
    )
    word = "Ctrl-C" if dev else "SIGTERM"
    log.info(f"{session.command}: watching {watched} ({word} to stop)")
    return await loop.run()


def _terminal(stream: Any) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def _drop_lifecycle_chatter(
    logger: object, method_name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """Keep reload reports, the CLI's own lines, the address of a web inbox a provider
    module starts serving (its token is in it), and every warning and error."""
    if method_name in ("debug", "info"):
        source = str(event_dict.get("logger", ""))
        first_serving = event_dict.get("event") == "web.serving" and event_dict.get("first")
        if not source.startswith(("hotseam.reload", "hotseam.cli")) and not first_serving:
            raise structlog.DropEvent
    return event_dict
