"""The ``hotseam`` command: ``demo``, ``dev``, ``run`` and ``acp``.

The CLI owns the process: it configures structlog (the library never does) and decides what
goes to stdout. Each subcommand lives in its own module with ``add_arguments(parser)`` and
``run(args) -> int``, imported only when that subcommand runs.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["main"]

_COMMANDS = {
    "demo": ("hotseam.cli._demo", "ask a short series of questions in this terminal"),
    "dev": ("hotseam.cli._dev", "run an agent with provider modules hot-reloaded from disk"),
    "run": ("hotseam.cli._run", "like dev, for long-running daemons: JSON logs, no prompts"),
    "acp": ("hotseam.cli._acp", "serve as an Agent Client Protocol agent over stdio"),
}


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with every subcommand's options."""
    parser = argparse.ArgumentParser(
        prog="hotseam",
        description="Seams served by one provider at a time, hot-reloaded from disk.",
    )
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module_name, help_text) in _COMMANDS.items():
        module = importlib.import_module(module_name)
        sub = subcommands.add_parser(name, help=help_text, description=module.__doc__)
        module.add_arguments(sub)
        sub.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``hotseam`` command line; return the process exit code."""
    args = build_parser().parse_args(argv)
    code: int = args._module.run(args)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
