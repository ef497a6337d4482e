"""`hotseam journal ACTION`: see what the ask journal holds, and clean it.

  hotseam journal list [--state STATE] [--agent KEY] [--limit N] [--json]
  hotseam journal show ID [--answer] [--json]
  hotseam journal runs [--unfinished] [--agent KEY] [--limit N] [--json]
  hotseam journal daemons [--json]
  hotseam journal abandon RUN [--yes]
  hotseam journal purge --older-than DURATION [--state STATE] [--yes] [--json]

The journal is --journal URL (before or after the action), else ``journal`` in
[tool.hotseam], else the embedded one in hotseam's state folder: the journal ``hotseam
run`` and ``hotseam dev`` record in.

Answers are personal data: ``list`` and ``show`` never print one. ``show --answer`` prints
it, on stdout only, when asked to. Nothing is logged but warnings, on stderr.

``list`` shows the questions, newest first, one a line: id, state (with the code of a
failure), when asked, the agent and its daemon, the header and the first words. ``show``
shows one in full: the request, its run, its daemon, its times, who settled it.

``runs`` shows each run with its agent, its state, the daemon that owns it (up, down,
stopped, or gone: a process of this machine that no longer runs) and its questions by
state. An unfinished run is what the agent's next start resumes; one whose daemon is up is
why another daemon for that agent refuses to start ("is run by"). ``daemons`` shows every
process that wrote to the journal, with its last heartbeat.

``abandon RUN`` gives up an unfinished run (RUN: its id, or the agent's key): its pending
questions are abandoned, an answer to them is refused, and the agent's next start begins a
new run. It needs --yes; a run whose daemon is up is refused (stop that daemon first).

``purge --older-than DURATION`` removes the questions settled longer ago than DURATION
(30d, 12h, 90m, 45s, 2w; all settled states, or those --state names), then the ended runs
and the stopped daemons nothing refers to any more. Pending questions and unfinished runs
are never purged. Without --yes it says what it would remove and removes nothing.

Exit codes: 0 done (a purge's dry run too); 1 the journal cannot be reached or read; 2 bad
input (a bad URL, id, state or duration; an abandon refused), with one line on stderr.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Collection, Coroutine, Sequence
from pathlib import Path
from typing import Any

import anyio

from .._core import HarnessError
from ..interaction.journal import (
    DEFAULT_LIVENESS_TIMEOUT,
    SETTLED_STATES,
    AskState,
    InboxEntry,
    Journal,
    JournalError,
    JournalErrorCode,
    RunRecord,
    RunState,
    default_journal_path,
    open_journal,
    parse_journal_url,
)
from ._config import project_config
from ._extras import check_journal
from ._journal_view import (
    ago,
    ask_lines,
    clean,
    counts,
    daemon_json,
    daemon_text,
    entry_json,
    headline,
    liveness,
    local,
    plural,
    print_json,
    print_table,
    run_json,
    say_if_cut,
    state_text,
)
from ._logging import configure_logging
from ._options import journal_url
from ._stdio_cmd import EXIT_BAD_INPUT, EXIT_FATAL, EXIT_OK, fail

COMMAND = "hotseam journal"
DEFAULT_LIMIT = 100

_BAD_INPUT = {
    JournalErrorCode.JOURNAL_INVALID_URL,
    JournalErrorCode.JOURNAL_NEWER,
    JournalErrorCode.ASK_UNKNOWN,
    JournalErrorCode.RUN_UNKNOWN,
    JournalErrorCode.RUN_FINISHED,
}
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")


class _RefusedError(Exception):
    """Bad input found while the journal is open: one line on stderr, exit 2."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    journal_help = (
        "the journal: postgresql://USER@HOST/DATABASE, sqlite:///PATH or a file path "
        "(default: 'journal' in [tool.hotseam], else the embedded journal in hotseam's "
        "state folder)"
    )
    parser.add_argument("--journal", metavar="URL", help=journal_help)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    def action(name: str, help_text: str, *, json: bool = True) -> argparse.ArgumentParser:
        sub = actions.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("--journal", metavar="URL", default=argparse.SUPPRESS, help=journal_help)
        if json:
            sub.add_argument("--json", action="store_true", help="one JSON object")
        return sub

    states = ", ".join(state.value for state in AskState)
    listing = action("list", "the questions, newest first (never their answers)")
    listing.add_argument(
        "--state", action="append", metavar="STATE", help=f"only these states ({states})"
    )
    listing.add_argument("--agent", metavar="KEY", help="only the questions of this agent")
    listing.add_argument("--limit", metavar="N", help=f"at most N (default {DEFAULT_LIMIT})")
    show = action("show", "one question in full (its answer only with --answer)")
    show.add_argument("id", metavar="ID", help="the question's id (from list)")
    show.add_argument("--answer", action="store_true", help="print the answer too (personal data)")
    runs = action("runs", "the agents' runs, newest first, with their daemon and questions")
    runs.add_argument("--unfinished", action="store_true", help="only the runs that resume")
    runs.add_argument("--agent", metavar="KEY", help="only the runs of this agent")
    runs.add_argument("--limit", metavar="N", help=f"at most N (default {DEFAULT_LIMIT})")
    action("daemons", "the processes that wrote to the journal")
    abandon = action("abandon", "give up an unfinished run: it never resumes", json=False)
    abandon.add_argument("run", metavar="RUN", help="the run's id, or the agent's key")
    abandon.add_argument("--yes", action="store_true", help="do it (otherwise: refused)")
    purge = action("purge", "remove what was settled longer ago than a duration")
    purge.add_argument("--older-than", metavar="DURATION", help="30d, 12h, 90m, 45s, 2w (or 1d12h)")
    purge.add_argument(
        "--state",
        action="append",
        metavar="STATE",
        help=f"only questions in these states (default: every settled one: "
        f"{', '.join(sorted(SETTLED_STATES))})",
    )
    purge.add_argument("--yes", action="store_true", help="remove (otherwise: a dry run)")


def run(args: argparse.Namespace) -> int:
    return run_on_journal(COMMAND, args, _ACTIONS[args.action])


def run_on_journal(
    command: str,
    args: argparse.Namespace,
    make_action: Callable[[argparse.Namespace], Action],
    *,
    bad_input: Collection[str] = (),
) -> int:
    """Run the action ``make_action(args)`` builds on the journal ``args.journal`` names
    (as ``hotseam run`` chooses it): exit 2 with one line for bad input, 1 when the journal
    cannot be reached or read (``bad_input``: more codes that are the user's mistake)."""
    try:
        url = _journal_url(args.journal)
        action = make_action(args)
    except (HarnessError, ValueError) as error:
        return fail(command, error, EXIT_BAD_INPUT)
    configure_logging("console", level="warning")
    missing = _missing_file(url)
    if missing is not None:
        return fail(command, missing, EXIT_FATAL)
    try:
        return anyio.run(_with_journal, url, action)
    except _RefusedError as error:
        return fail(command, error, EXIT_BAD_INPUT)
    except JournalError as error:
        mistake = error.code in _BAD_INPUT or error.code in bad_input
        return fail(command, error, EXIT_BAD_INPUT if mistake else EXIT_FATAL)


Action = Callable[[Journal], Coroutine[Any, Any, int]]


async def _with_journal(url: str | None, action: Action) -> int:
    async with open_journal(url, liveness_timeout=DEFAULT_LIVENESS_TIMEOUT) as journal:
        return await action(journal)


def _journal_url(given: str | None) -> str | None:
    """--journal, else ``journal`` in [tool.hotseam], else ``None`` (the embedded default),
    as ``hotseam run`` chooses it."""
    if given is None:
        given = journal_url(None, project_config())
    if given is not None and parse_journal_url(given).engine == "memory":  # or INVALID_URL
        raise ValueError(
            "the in-memory journal (memory:) lives inside one process: another cannot see it"
        )
    if given is not None:
        check_journal(given)  # the postgres extra
    return given


def _missing_file(url: str | None) -> str | None:
    """Why an SQLite journal cannot be read: its file does not exist (these commands never
    create one)."""
    if url is None:
        try:
            path = default_journal_path()
        except RuntimeError as error:  # Path.home(): no $HOME and no password entry
            return f"no state folder for the default journal ({error}): give --journal URL"
    else:
        location = parse_journal_url(url)
        if location.engine != "sqlite":
            return None
        path = Path(location.target)
    if path.exists():
        return None
    return f"no journal at {path}: nothing was recorded there"


# -- reading input --------------------------------------------------------------------------


def parse_duration(text: str) -> float:
    """``'30d'`` → seconds: numbers with a unit each (s, m, h, d, w), as in ``1d12h``; else
    ``ValueError``, naming the text and the forms accepted."""
    compact = text.strip().lower()
    parts = _DURATION.findall(compact)
    if not compact or _DURATION.sub("", compact).strip():
        raise ValueError(
            f"bad duration {text!r}: a number and a unit (s, m, h, d, w), as in 30d, 12h, "
            "90m or 1d12h"
        )
    return float(sum(float(number) * _UNITS[unit] for number, unit in parts))


def _states(given: Sequence[str] | None, allowed: frozenset[AskState]) -> frozenset[AskState]:
    """--state values (repeated, or comma-separated)."""
    if not given:
        return allowed
    chosen = set()
    for name in (part.strip().lower() for value in given for part in value.split(",")):
        if name == AskState.PENDING.value and AskState.PENDING not in allowed:
            raise ValueError("pending questions are never purged: abandon their run first")
        if name not in {state.value for state in allowed}:
            known = ", ".join(sorted(state.value for state in allowed))
            raise ValueError(f"unknown state {name!r}: use {known}")
        chosen.add(AskState(name))
    return frozenset(chosen)


def _limit(given: str | None) -> int:
    """--limit: a whole number >= 1 (default :data:`DEFAULT_LIMIT`)."""
    if given is None:
        return DEFAULT_LIMIT
    if not given.strip().isdecimal() or int(given) < 1:
        raise ValueError(f"--limit must be a whole number >= 1, got {given!r}")
    return int(given)


# -- the actions ----------------------------------------------------------------------------


def _list(args: argparse.Namespace) -> Action:
    """``list``: the questions with their run and daemon, newest first; never an answer."""
    states = _states(args.state, frozenset(AskState))
    limit = _limit(args.limit)

    async def action(journal: Journal) -> int:
        entries = await journal.list_entries(states=states, agent=args.agent, limit=limit)
        if args.json:
            print_json({"journal": journal.url, "asks": [entry_json(e) for e in entries]})
        elif not entries:
            print(
                "no questions in the journal match"
                if args.state or args.agent
                else "no questions in the journal"
            )
        else:
            rows = [
                (
                    entry.ask.id,
                    state_text(entry.ask),
                    local(entry.ask.created_at),
                    clean(entry.run.agent),
                    f"{clean(entry.daemon.name)} ({liveness(entry.daemon)})",
                    headline(entry.ask),
                )
                for entry in entries
            ]
            print_table(("ID", "STATE", "ASKED", "AGENT", "DAEMON", "QUESTION"), rows)
        say_if_cut(COMMAND, len(entries), limit)
        return EXIT_OK

    return action


def _show(args: argparse.Namespace) -> Action:
    """``show ID``: one question in full; its answer only with ``--answer``."""

    async def action(journal: Journal) -> int:
        ask = await journal.get_ask(args.id)
        run = await journal.get_run(ask.run_id)
        daemon = await journal.get_daemon(run.daemon_id)
        entry = InboxEntry(ask, run, daemon)
        if args.json:
            print_json({"journal": journal.url, **entry_json(entry, full=True, answer=args.answer)})
        else:
            print("\n".join(ask_lines(entry, answer=args.answer)))
        return EXIT_OK

    return action


def _runs(args: argparse.Namespace) -> Action:
    """``runs``: each run with its owner daemon and its questions counted by state."""
    limit = _limit(args.limit)
    states = {RunState.RUNNING} if args.unfinished else None

    async def action(journal: Journal) -> int:
        overviews = await journal.runs(states=states, agent=args.agent, limit=limit)
        if args.json:
            print_json({"journal": journal.url, "runs": [run_json(o) for o in overviews]})
        elif not overviews:
            print(
                "no runs in the journal match" if states or args.agent else "no runs in the journal"
            )
        else:
            rows = [
                (
                    o.run.id,
                    o.run.state.value,
                    local(o.run.started_at),
                    clean(o.run.agent),
                    daemon_text(o.daemon),
                    counts(o),
                )
                for o in overviews
            ]
            print_table(("RUN", "STATE", "STARTED", "AGENT", "DAEMON", "QUESTIONS"), rows)
        say_if_cut(COMMAND, len(overviews), limit)
        return EXIT_OK

    return action


def _daemons(args: argparse.Namespace) -> Action:
    """``daemons``: every process that wrote to the journal, and whether it is up."""

    async def action(journal: Journal) -> int:
        daemons = await journal.daemons()
        if args.json:
            print_json({"journal": journal.url, "daemons": [daemon_json(d) for d in daemons]})
        elif not daemons:
            print("no daemons in the journal")
        else:
            rows = [
                (
                    d.id,
                    clean(d.name),
                    clean(d.host),
                    str(d.pid),
                    liveness(d),
                    ago(d.heartbeat_at),
                    local(d.started_at),
                    clean(d.agent or "-"),
                )
                for d in daemons
            ]
            headers = ("DAEMON", "NAME", "HOST", "PID", "STATE", "HEARTBEAT", "STARTED", "AGENT")
            print_table(headers, rows)
        return EXIT_OK

    return action


def _abandon(args: argparse.Namespace) -> Action:
    """``abandon RUN``: with ``--yes``, give up a run whose daemon is not up."""

    async def action(journal: Journal) -> int:
        run = await _find_run(journal, args.run)
        if not run.unfinished:
            raise _RefusedError(
                f"run {run.id} of agent {run.agent!r} is {run.state.value}: only an "
                "unfinished run is abandoned"
            )
        owner = await journal.get_daemon(run.daemon_id)
        what = f"run {run.id} of agent {run.agent!r} ({daemon_text(owner)})"
        if liveness(owner) == "up":
            raise _RefusedError(
                f"{what} is run by a daemon that is up: stop it first (a daemon stopped "
                f"without a word counts as down once its heartbeat is "
                f"{journal.liveness_timeout:g} s old)"
            )
        pending = [ask for ask in await journal.run_asks(run.id) if ask.pending]
        if not args.yes:
            raise _RefusedError(
                f"would abandon {what} and its {plural(len(pending), 'pending question')}: "
                "give --yes to do it"
            )
        await journal.abandon_run(run.id)
        print(
            f"abandoned {what}: {plural(len(pending), 'pending question')} abandoned; the "
            "agent's next start begins a new run"
        )
        return EXIT_OK

    return action


def _purge(args: argparse.Namespace) -> Action:
    """``purge --older-than D``: remove (``--yes``) or count what retention no longer keeps."""
    if args.older_than is None:
        raise ValueError("purge needs --older-than DURATION (30d, 12h, 90m...)")
    older_than = parse_duration(args.older_than)
    states = _states(args.state, SETTLED_STATES)

    async def action(journal: Journal) -> int:
        report = await journal.purge(older_than=older_than, states=states, dry_run=not args.yes)
        if args.json:
            print_json(
                {
                    "journal": journal.url,
                    "removed": args.yes,
                    "older_than_s": older_than,
                    "states": sorted(state.value for state in states),
                    "asks": report.asks,
                    "runs": report.runs,
                    "daemons": report.daemons,
                }
            )
            return EXIT_OK
        counted = (
            f"{plural(report.asks, 'question')} ({', '.join(sorted(states))}), "
            f"{plural(report.runs, 'run')} and {plural(report.daemons, 'daemon')} "
            f"older than {args.older_than.strip()}"
        )
        if args.yes:
            print(f"removed {counted}")
        else:
            print(f"would remove {counted}; nothing was removed: give --yes to remove them")
        return EXIT_OK

    return action


_ACTIONS: dict[str, Callable[[argparse.Namespace], Action]] = {
    "list": _list,
    "show": _show,
    "runs": _runs,
    "daemons": _daemons,
    "abandon": _abandon,
    "purge": _purge,
}


async def _find_run(journal: Journal, given: str) -> RunRecord:
    """The run of that id, else the unfinished run of the agent of that key."""
    try:
        return await journal.get_run(given)
    except JournalError as error:
        if error.code != JournalErrorCode.RUN_UNKNOWN:
            raise
    found = await journal.unfinished_run(given)
    if found is None:
        raise _RefusedError(
            f"no run {given!r} in the journal, and no agent of that key has an unfinished run"
        )
    return found
