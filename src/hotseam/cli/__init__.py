"""The ``hotseam`` command: ``demo``, ``dev``, ``run``, ``acp``, ``mcp``, ``status``, ``reload``...

The CLI owns the process: it configures structlog (the library never does) and decides what
goes to stdout. Each subcommand lives in its own module with ``add_arguments(parser)`` and
``run(args) -> int``, imported only when that subcommand runs.
"""

from __future__ import annotations

import sys

# typing.TYPE_CHECKING without importing typing (`hotseam status` starts here): type checkers
# take any constant of this name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Collection, Sequence

_COMMANDS = {
    "demo": ("hotseam.cli._demo", "ask a short series of questions in this terminal"),
    "dev": ("hotseam.cli._dev", "run an agent with provider modules hot-reloaded from disk"),
    "run": ("hotseam.cli._run", "like dev, for long-running daemons: JSON logs, no prompts"),
    "acp": ("hotseam.cli._acp", "serve as an Agent Client Protocol agent over stdio"),
    "mcp": ("hotseam.cli._mcp", "serve the watched modules' tools to an MCP host, hot-reloaded"),
    "status": ("hotseam.cli._status", "show what a running dev or run is doing"),
    "reload": ("hotseam.cli._reload_cmd", "reload modules of a running dev or run"),
    "inbox": ("hotseam.cli._inbox_cmd", "one web inbox for every daemon writing to a journal"),
    "journal": ("hotseam.cli._journal_cmd", "see and clean the ask journal (list, show, purge)"),
    "approvals": ("hotseam.cli._approvals_cmd", "list, add and revoke approval rules"),
}

# The commands that are an integration's surface (their extras: ``_extras.COMMAND_EXTRAS``).
_EXTRA_COMMANDS = frozenset({"acp", "mcp", "inbox"})


def build_parser(
    only: Collection[str] | None = None, *, list_others: bool = True
) -> argparse.ArgumentParser:
    """The argument parser with every subcommand's options, or only those of the commands in
    ``only``: the others are listed by name and help unless ``list_others`` is false, their
    modules not imported, so ``hotseam --help`` costs no more than ``import hotseam``."""
    import argparse
    import importlib

    from ._help import DocstringFormatter, HelpFormatter

    parser = argparse.ArgumentParser(
        prog="hotseam",
        description="Seams served by one provider at a time, hot-reloaded from disk.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"hotseam {_version()}")
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module_name, help_text) in _COMMANDS.items():
        if only is not None and name not in only:
            if list_others:
                # A name and a help line only: its own --help is never shown in this run
                # (argparse looks up a translation of every built-in string, slow where
                # locales are many).
                subcommands.add_parser(name, help=help_text, add_help=False)
            continue
        module = importlib.import_module(module_name)
        sub = subcommands.add_parser(
            name, help=help_text, description=module.__doc__, formatter_class=DocstringFormatter
        )
        module.add_arguments(sub)
        sub.set_defaults(_module=module)
    return parser


def _status_forms(arguments: Sequence[str]) -> tuple[str | None, bool] | None:
    """``hotseam status``'s common forms, ``[PID|NAME] [--json]`` in either order, as
    ``(target, as_json)``; ``None`` for anything else, which argparse parses. argparse is a
    third of what ``hotseam status`` imports, and scripts run it in a loop; these forms mean
    what argparse makes of them (``tests/cli/test_status_fast_path.py`` compares the two)."""
    if not arguments or arguments[0] != "status" or len(arguments) > 3:
        return None
    target: str | None = None
    as_json = False
    for argument in arguments[1:]:
        if argument == "--json" and not as_json:
            as_json = True
        elif argument and not argument.startswith("-") and target is None:
            target = argument
        else:
            return None
    return target, as_json


def _chosen(arguments: Sequence[str]) -> set[str]:
    """The command named on the command line (nothing before it but options), if any."""
    for argument in arguments:
        if not argument.startswith("-"):
            return {argument} & _COMMANDS.keys()
    return set()


def _version() -> str:
    from .. import __version__

    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``hotseam`` command line; return the process exit code."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    fast = _status_forms(arguments)
    if fast is not None:
        from ._status import show

        return show(fast[0], as_json=fast[1])
    chosen = _chosen(arguments)
    if chosen & _EXTRA_COMMANDS:
        from ._extras import command_needs

        needed = command_needs(next(iter(chosen)))
        if needed is not None:  # before its module, which imports the extra's SDK, is loaded
            print(needed, file=sys.stderr)
            return 2
    args = build_parser(chosen, list_others=not chosen).parse_args(arguments)
    code: int = args._module.run(args)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
