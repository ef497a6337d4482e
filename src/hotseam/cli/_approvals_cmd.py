"""`hotseam approvals ACTION`: the approval rules of the ask journal, listed, added, revoked.

  hotseam approvals list [--all] [--json]
  hotseam approvals allow TOOL [--where NAME=GLOB]... [--run ID | --daemon ID] [--reason TEXT]
  hotseam approvals reject TOOL [--where NAME=GLOB]... [--run ID | --daemon ID] [--reason TEXT]
  hotseam approvals revoke RULE

A rule decides the calls of a tool needing approval without asking: ``allow`` runs them,
``reject`` refuses them (``APPROVAL_REJECTED``, the rule's reason for the model). ``--where
NAME=GLOB`` narrows it to calls whose argument NAME matches the shell-style pattern (a
string as it is, any other value as its JSON text: ``--where replicas=[1-3]``); repeated,
every pattern must match. A rule covers every daemon writing to the journal, or only one run
(``--run``) or one daemon (``--daemon``). A reject rule wins over an allow rule. Each use is
recorded: ``list`` shows how many calls each rule decided; ``revoke`` stops a rule (its
record and uses stay, for the audit; ``list --all`` shows revoked rules too).

The journal is --journal URL, else ``journal`` in [tool.hotseam], else the embedded one:
the journal ``hotseam run`` records in. Exit codes: 0 done; 1 the journal cannot be reached
or read; 2 bad input (a bad pattern, scope or rule id), with one line on stderr.
"""

from __future__ import annotations

import argparse

from ..interaction.journal import Journal, JournalErrorCode
from ._journal_cmd import Action, run_on_journal
from ._journal_view import clean, local, print_json, print_table
from ._stdio_cmd import EXIT_OK

COMMAND = "hotseam approvals"
_MISTAKES = (JournalErrorCode.INVALID_RULE.value, JournalErrorCode.RULE_UNKNOWN.value)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    journal_help = (
        "the journal: postgresql://USER@HOST/DATABASE, sqlite:///PATH or a file path "
        "(default: 'journal' in [tool.hotseam], else the embedded journal)"
    )
    parser.add_argument("--journal", metavar="URL", help=journal_help)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    def action(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = actions.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("--journal", metavar="URL", default=argparse.SUPPRESS, help=journal_help)
        sub.add_argument("--json", action="store_true", help="one JSON object")
        return sub

    listing = action("list", "the rules in force, oldest first, with how often each was used")
    listing.add_argument("--all", action="store_true", help="the revoked rules too")
    for verb, what in (("allow", "always allow"), ("reject", "always reject")):
        rule = action(verb, f"{what} the calls of a tool (narrowed by --where)")
        rule.add_argument("tool", metavar="TOOL", help="the tool's name")
        rule.add_argument(
            "--where",
            action="append",
            default=[],
            metavar="NAME=GLOB",
            help="only calls whose argument NAME matches GLOB (repeatable: all must match)",
        )
        scope = rule.add_mutually_exclusive_group()
        scope.add_argument("--run", metavar="ID", help="only in this run")
        scope.add_argument("--daemon", metavar="ID", help="only in this daemon")
        rule.add_argument("--reason", metavar="TEXT", help="why (a reject rule tells the model)")
    revoke = action("revoke", "stop a rule (its record and uses stay)")
    revoke.add_argument("rule", metavar="RULE", help="the rule's id (from list)")


def run(args: argparse.Namespace) -> int:
    return run_on_journal(COMMAND, args, _ACTIONS[args.action], bad_input=_MISTAKES)


def _where(given: list[str]) -> dict[str, str]:
    """``--where NAME=GLOB`` values; else ``ValueError`` naming the one that is not."""
    patterns: dict[str, str] = {}
    for item in given:
        name, equals, pattern = item.partition("=")
        if not equals or not name.strip():
            raise ValueError(f"--where takes NAME=GLOB (as in service=api-*), got {item!r}")
        patterns[name.strip()] = pattern
    return patterns


def _list(args: argparse.Namespace) -> Action:
    async def action(journal: Journal) -> int:
        rules = await journal.rules(revoked=args.all)
        if args.json:
            print_json({"journal": journal.url, "rules": [rule.to_dict() for rule in rules]})
        elif not rules:
            print("no approval rules in the journal")
        else:
            rows = [
                (
                    rule.id,
                    clean(rule.describe()),
                    str(rule.uses),
                    local(rule.created_at),
                    "in force" if rule.active else f"revoked {local(rule.revoked_at or 0)}",
                )
                for rule in rules
            ]
            print_table(("RULE", "WHAT", "USES", "ADDED", "STATE"), rows)
        return EXIT_OK

    return action


def _add(args: argparse.Namespace) -> Action:
    where = _where(args.where)
    scope, scope_id = (
        ("run", args.run)
        if args.run
        else ("daemon", args.daemon)
        if args.daemon
        else ("journal", None)
    )

    async def action(journal: Journal) -> int:
        rule = await journal.add_rule(
            args.tool,
            allow=args.action == "allow",
            where=where,
            scope=scope,  # type: ignore[arg-type]
            scope_id=scope_id,
            reason=args.reason,
            by=COMMAND,
        )
        if args.json:
            print_json({"journal": journal.url, "rule": rule.to_dict()})
        else:
            print(f"rule {rule.id}: {clean(rule.describe())}")
        return EXIT_OK

    return action


def _revoke(args: argparse.Namespace) -> Action:
    async def action(journal: Journal) -> int:
        rule = await journal.revoke_rule(args.rule, by=COMMAND)
        if args.json:
            print_json({"journal": journal.url, "rule": rule.to_dict()})
        else:
            print(f"rule {rule.id} revoked: {clean(rule.describe())} (used {rule.uses} times)")
        return EXIT_OK

    return action


_ACTIONS = {"list": _list, "allow": _add, "reject": _add, "revoke": _revoke}
