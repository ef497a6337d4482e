"""How long ``hotseam mcp``, ``acp`` and ``run`` take to stop as Claude Code stops them.

    .venv/bin/python bench/stop_latency.py [--rounds 5] [--settle SECONDS]

Starts each command with a provider module that has a disposer (it writes a mark), waits
until it serves (mcp: ``initialize`` answered; acp: ``session/new`` answered; run: the
agent started), then sends SIGINT and, 100 ms later, SIGTERM, and times the exit from the
first signal (``--settle`` waits before it). Nothing is pending (no reply queued, no slow
disposer): the stop should end well within 100 ms on an idle machine. Prints each
command's times, its exit codes, whether every disposer ran, and the load average, which
the figures depend on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

DISPOSING = """
import os

def setup(scope):
    def dispose():
        with open(os.environ["MARK"], "w") as mark:
            mark.write("ran")
    scope.defer(dispose)
"""

AGENT = """
import os
import anyio

async def main(context):
    with open(os.environ["MARK"] + ".started", "w") as mark:
        mark.write("ran")
    await anyio.sleep(3600)
"""


def _line(message: dict[str, object]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _serving(command: str, process: subprocess.Popen[bytes], mark: Path) -> None:
    """Return once the command serves (a request answered, or the agent running)."""
    if command == "run":
        deadline = time.monotonic() + 60
        while not Path(str(mark) + ".started").exists():  # a bench may poll
            if time.monotonic() > deadline:
                raise SystemExit("hotseam run did not start its agent within 60 s")
            time.sleep(0.01)
        return
    assert process.stdin is not None
    assert process.stdout is not None
    if command == "mcp":
        first = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        }
        process.stdin.write(
            _line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": first})
        )
    else:
        process.stdin.write(
            _line(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"protocolVersion": 1},
                }
            )
            + _line(
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "session/new",
                    "params": {"cwd": "/", "mcpServers": []},
                }
            )
        )
    process.stdin.flush()
    for _ in range(1 if command == "mcp" else 2):
        process.stdout.readline()


def one_stop(command: str, folder: Path, settle: float) -> tuple[float, int, bool]:
    """Seconds from SIGINT to the exit, the exit code, whether the disposer ran."""
    mark = folder / f"disposed-{command}"
    mark.unlink(missing_ok=True)
    Path(str(mark) + ".started").unlink(missing_ok=True)
    args = {
        "mcp": ["mcp", "providers"],
        "acp": ["acp", "--watch", "providers"],
        "run": ["run", "providers", "--agent", "agent.py", "--no-journal", "--name", "bench-stop"],
    }[command]
    env = {**os.environ, "MARK": str(mark), "HOTSEAM_RUNTIME_DIR": str(folder / "rt")}
    with (folder / f"{command}.log").open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "hotseam", *args],
            cwd=folder,
            env=env,
            stdin=subprocess.PIPE if command != "run" else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
        try:
            _serving(command, process, mark)
            time.sleep(settle)
            ended: list[float] = []  # when the process exited, seen by a waiting thread

            def note_the_exit() -> None:
                process.wait(60)
                ended.append(time.monotonic())

            waiter = threading.Thread(target=note_the_exit)
            waiter.start()
            started = time.monotonic()
            process.send_signal(signal.SIGINT)
            time.sleep(0.1)  # the host's gap, not part of the figure once the process is gone
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            waiter.join()
            code = process.returncode
            took = ended[0] - started
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    stream.close()
    return took, code, mark.exists()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--settle",
        type=float,
        default=0.0,
        help="seconds between serving and the signal (hotseam mcp imports the forms' "
        "modules in a thread at start; a host stops it long after)",
    )
    options = parser.parse_args()
    rounds, settle = options.rounds, options.settle
    print(f"python {platform.python_version()}, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        (folder / "providers").mkdir()
        (folder / "providers" / "disposing.py").write_text(DISPOSING)
        (folder / "agent.py").write_text(AGENT)
        for command in ("mcp", "acp", "run"):
            results = [one_stop(command, folder, settle) for _ in range(rounds)]
            times = [took for took, _, _ in results]
            print(
                f"hotseam {command}: SIGINT to exit median "
                f"{statistics.median(times) * 1000:.0f} ms, "
                f"max {max(times) * 1000:.0f} ms over {rounds}; exit codes "
                f"{sorted({code for _, code, _ in results})}; every disposer ran: "
                f"{all(ran for _, _, ran in results)}; load average {os.getloadavg()[0]:.1f}"
            )


if __name__ == "__main__":
    main()
