"""Run a command on a busy machine: ``python tests/_hog.py [--procs N] -- COMMAND ...``.

``make test-loaded`` runs the suite this way, so that a deadline tuned for an idle machine
shows up as a failure here instead of on a busy CI box. N processes spin at the default
priority (the way a neighbour's build would) from before COMMAND starts until it ends; the
default, three per core, with the suite's own three workers puts the load average near 8 on
2 cores. The hog is bounded: each spinner also ends after ``--seconds`` and when this
process goes away (killed, crashed), so none is ever left behind. Exits with COMMAND's code.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

_SPIN = """
import os, sys, time
parent, end = int(sys.argv[1]), time.monotonic() + float(sys.argv[2])
while time.monotonic() < end and os.getppid() == parent:
    for _ in range(200_000):
        pass
"""


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    """Start the spinners, run the command, stop the spinners; COMMAND's exit code."""
    parser = argparse.ArgumentParser(prog="tests/_hog.py", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--procs",
        type=int,
        default=3 * (os.cpu_count() or 1),
        help="busy processes (default: three per core)",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=2400.0,
        help="the spinners end after this long whatever happens (default: 40 minutes)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=2.0,
        help="seconds the spinners run before COMMAND starts (default: 2)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no COMMAND given (tests/_hog.py -- pytest ...)")
    spinners = [
        subprocess.Popen(
            [sys.executable, "-c", _SPIN, str(os.getpid()), str(args.seconds)],
            stdin=subprocess.DEVNULL,
        )
        for _ in range(max(args.procs, 0))
    ]
    # A SIGTERM (a CI runner's cancel) ends this process through the finally below.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    started = time.monotonic()
    print(f"hog: {len(spinners)} busy processes; load average {_load()}", file=sys.stderr)
    try:
        time.sleep(args.settle)
        code = subprocess.call(command)
    finally:
        print(
            f"hog: stopped after {time.monotonic() - started:.0f} s; load average {_load()}",
            file=sys.stderr,
        )
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()
    return code


if __name__ == "__main__":
    sys.exit(main())
