"""`hotseam run`: not built yet."""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options yet."""


def run(args: argparse.Namespace) -> int:
    """Say plainly that this command is not built yet."""
    print("hotseam run is not built yet; see the project's open issues.", file=sys.stderr)
    return 2
