"""`hotseam status [PID|NAME]`: what a running ``hotseam dev`` or ``hotseam run`` is doing.

It asks the process over its control socket and prints, for each watched module, its
generation, state, load time and last error; the active provider of each seam; the
address of each web inbox (token included: the socket is the owner's alone); the open
questions (who asks, for how long; never an answer); the agent; the journal, and while
it is out of reach for how long and what waits for it; and the uptime. With no
argument it talks to the only running process; with several, name one by pid or by the
``--name`` it was started with. ``--json`` prints the reply as one JSON object.

Exit codes: 0 when the status was printed, 1 when no process could be reached (the reason
is printed), 2 for bad input.
"""

from __future__ import annotations

import json
import sys

from ._control_client import ControlError, locate, request

# typing.TYPE_CHECKING without importing typing (this module is
# part of `hotseam status`): type checkers take any constant of this name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target",
        nargs="?",
        metavar="PID|NAME",
        help="the process to ask: its pid, its --name, or its socket path (default: the "
        "only one running)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    return show(args.target, as_json=args.json)


def show(target: str | None, *, as_json: bool) -> int:
    """Print the status of ``target`` (see :func:`run`); return the exit code. The command
    line's common forms come here without argparse (:func:`hotseam.cli.main`)."""
    try:
        endpoint, notes = locate(target)
        for note in notes:
            print(f"hotseam status: {note}", file=sys.stderr)
        reply = request(endpoint, {"op": "status"})
    except ControlError as error:
        print(f"hotseam status: {error}", file=sys.stderr)
        return 1
    if not isinstance(reply, dict) or not reply.get("ok"):
        said = reply.get("error") if isinstance(reply, dict) else reply
        print(f"hotseam status: the process replied: {said}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(reply, indent=None))
    else:
        print(format_status(reply))
    return 0


def format_status(reply: dict[str, Any]) -> str:
    """The status reply as lines for a person."""
    name = f" ({reply['name']})" if reply.get("name") else ""
    agent = reply.get("agent") or {}
    lines = [
        f"{reply['command']}, pid {reply['pid']}{name}, up {_duration(reply['uptime_s'])}",
        f"  watching {', '.join(reply.get('watching', []))} from {reply.get('cwd')}",
        f"  agent: {agent.get('name')} ({agent.get('state')}, {agent.get('runs')} run(s))",
        _journal_line(reply.get("journal")),
        *_rule_lines(reply.get("approval_rules", [])),
        "modules:",
    ]
    for module in reply.get("modules", []):
        generation = module["generation"]
        shown = f"generation {generation}" if generation is not None else "no generation"
        load = f", loaded in {module['load_ms']:g} ms" if module.get("load_ms") else ""
        kind = f" {module['kind']}" if module.get("kind") else ""
        lines.append(f"  {module['path']}:{kind} {module['state']}, {shown}{load}")
        if module.get("error"):
            lines.append(f"    last error: {module['error']}")
    if not reply.get("modules"):
        lines.append("  (none yet)")
    lines.append("providers:")
    lines.extend(
        f"  {provider['seam']}: {provider['provider']} (context {provider['context']!r}, "
        f"registered at {provider['registered_at']})"
        for provider in reply.get("providers", [])
    )
    if not reply.get("providers"):
        lines.append("  (none active)")
    lines.extend(
        f"web inbox: {inbox['url']} ({inbox['pending']} waiting there)"
        for inbox in reply.get("web", [])
    )
    lines.append("open questions:")
    for ask in reply.get("asks", []):
        who = ask.get("agent") or "an agent"
        header = f" {ask['header']!r}" if ask.get("header") else ""
        if ask.get("waiting_for_provider"):
            where = "waiting for a provider"
        else:
            where = f"shown by {ask.get('provider')}"
        lines.append(f"  {who} asks{header} for {_duration(ask['seconds'])}, {where}")
    if not reply.get("asks"):
        lines.append("  (none)")
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def _rule_lines(rules: object) -> list[str]:
    """The approval rules in force (``hotseam approvals`` lists and revokes them)."""
    if rules is None:
        return ["  approval rules: not known now (the journal is out of reach)"]
    if not isinstance(rules, list) or not rules:
        return []
    return [f"  approval rules ({len(rules)} in force):"] + [
        f"    {rule.get('id')}: {rule.get('text')}, used {rule.get('uses')} time(s)"
        for rule in rules
        if isinstance(rule, dict)
    ]


def _journal_line(journal: object) -> str:
    """Where the questions are recorded, and the agent's run there."""
    if not isinstance(journal, dict):
        return "  journal: none (questions live in this process only)"
    run = f", {journal['run']}" if journal.get("run") else ""
    line = f"  journal: {journal.get('url')}{run}"
    for wait in journal.get("unreachable") or []:
        waiting = "; ".join(wait.get("waiting") or []) or "nothing yet"
        line += (
            f"\n    OUT OF REACH for {_duration(wait['seconds'])} ({wait.get('error')}); "
            f"waiting for it: {waiting}"
        )
    return line
