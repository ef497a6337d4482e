"""A CPU hog for the benches: ``--hog N`` runs N busy processes beside the measurement.

The machine the benches run on is shared; the hog makes its load a stated condition instead
of an accident: N processes that spin at the default priority, started before the first
round and killed when the bench ends (``with hog(n):``), so the load average reads about N
plus what else runs. Each spins in plain Python, the way a busy neighbour would.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

__all__ = ["add_hog_option", "hog", "load"]

_SPIN = "while True:\n    pass\n"


@contextlib.contextmanager
def hog(count: int) -> Iterator[None]:
    """``count`` busy processes for the duration of the block (none for 0)."""
    spinners = [
        subprocess.Popen(
            [sys.executable, "-c", _SPIN],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(count)
    ]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()


def add_hog_option(parser: argparse.ArgumentParser) -> None:
    """The benches' shared ``--hog N`` flag."""
    parser.add_argument(
        "--hog",
        type=int,
        default=0,
        metavar="N",
        help="run N busy processes beside the measurement (load the machine on purpose)",
    )


def load() -> str:
    """The load average (1, 5, 15 minutes) as the tables state it."""
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())
