"""`hotseam run PATH...`: ``hotseam dev`` for long-running daemons.

The same agent, providers and hot reload as ``hotseam dev``, but every log line on stderr is
one JSON object (no colours; reload events keep their fields, plus a one-line ``summary``),
every lifecycle event is logged, and the command never prompts on its own behalf.

A question asked while no provider is loaded waits for one at most ``--provider-wait``
seconds (default 60), then fails with ``NO_PROVIDER``. ``hotseam status`` and ``hotseam
reload`` steer the process through its control socket (``--name`` names it).

SIGTERM (or SIGINT) disposes every generation — every disposer runs — and exits 0. A fatal
error exits 1 with the reason logged; bad input exits 2 with one line on stderr.
"""

from __future__ import annotations

import argparse

from ._dev import add_session_arguments as add_arguments
from ._dev import run_session

__all__ = ["add_arguments", "run"]


def run(args: argparse.Namespace) -> int:
    return run_session(args, style="json")
