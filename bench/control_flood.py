"""Control socket flood: issue 21's reproductions at full size against a real ``hotseam run``.

    .venv/bin/python bench/control_flood.py [--idle 1100] [--hostile 2000] [--seed 1]

A ``hotseam run`` child with the common soft limit of 1,024 files (soft and hard set in the
child) gets, in order:

1. ``--idle`` idle connections to its control socket (1,100: more than it has descriptors;
   at most 64 are served at once, the others are closed at once), while a status request
   is made among them (as ``hotseam status`` makes it: tried again while closed unserved);
2. ``--hostile`` hostile request lines from 8 clients at once: deep nesting (``'[' * 3000``
   and deep values inside valid requests), random bytes, invalid UTF-8, NUL bytes, huge and
   non-string ``paths``, 64 KB without a newline, clients that hang up half-way and clients
   that never read their reply;
3. SIGHUP (every module reloaded), then SIGTERM.

**Must hold** (printed at the end; exit 1 otherwise): the daemon never exits before SIGTERM,
and then exits 0; every hostile line that was read got exactly one JSON reply; the waiting
status request and one made after the flood are answered; reaching the connection limit
(and running out of descriptors, if it happens) is logged once per episode, with its end;
nothing is logged at error level.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hotseam.cli._control_client import ControlError, Endpoint, request

SOFT_LIMIT = 1024
PROVIDER = """
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.scripted import Reply, ScriptedProvider


def setup(scope):
    scope.provide(USER_INTERACTION, ScriptedProvider(lambda request: Reply.never()))
"""


def hostile_line(rng: random.Random) -> tuple[bytes, bool]:
    """A hostile request, and whether the client reads the reply."""
    kind = rng.randrange(9)
    if kind == 0:
        return b"[" * rng.randrange(300, 5000) + b"\n", True
    if kind == 1:
        depth = rng.randrange(300, 3000)
        return b'{"op": "status", "x": ' + b"[" * depth + b"]" * depth + b"}\n", True
    if kind == 2:
        return rng.randbytes(rng.randrange(1, 2000)) + b"\n", True
    if kind == 3:
        return b'{"op": "st' + rng.randbytes(4) + b'"}\n', True
    if kind == 4:
        return json.dumps({"op": "reload", "paths": ["p\0"] * 3}).encode() + b"\n", True
    if kind == 5:
        paths = [rng.choice([1, None, [], {}, "x" * 50]) for _ in range(rng.randrange(1, 1500))]
        return json.dumps({"op": "reload", "paths": paths}).encode() + b"\n", True
    if kind == 6:
        return b"x" * (64 * 1024 + rng.randrange(1, 1000)), True
    if kind == 7:
        return b'{"op": "status"', False  # hangs up half-way
    return b'{"op": "status"}\n', False  # never reads the reply


def exchange(path: str, data: bytes, read: bool) -> bytes | None:
    """Send ``data``; return what came back (``None`` when not read)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(15)
        try:
            client.connect(path)
        except OSError:
            return b""  # the daemon is gone: counted as no reply
        try:
            client.sendall(data)
            client.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server replied and closed before taking it all (a line too long)
        if not read:
            return None
        received = bytearray()
        try:
            while chunk := client.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass
        return bytes(received)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=int, default=1100)
    parser.add_argument("--hostile", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # this side holds --idle sockets
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="flood-") as tmp:
        project = Path(tmp)
        (project / "providers").mkdir()
        (project / "providers" / "ui.py").write_text(PROVIDER)
        env = {**os.environ, "HOTSEAM_RUNTIME_DIR": str(project / "rt"), "NO_COLOR": "1"}

        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (SOFT_LIMIT, SOFT_LIMIT))

        child = subprocess.Popen(
            [sys.executable, "-m", "hotseam", "run", "providers"],
            cwd=project,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=limit,
        )
        assert child.stderr is not None
        lines: list[str] = []
        started = threading.Event()
        socket_path: list[str] = []

        def pump() -> None:
            assert child.stderr is not None
            for line in child.stderr:
                lines.append(line)
                if '"control socket: ' in line and not started.is_set():
                    socket_path.append(line.split('"control socket: ', 1)[1].split(" ", 1)[0])
                    started.set()

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        if not started.wait(30):
            print("the daemon did not start", "".join(lines), file=sys.stderr)
            return 1
        path = socket_path[0]

        began = time.monotonic()
        idle = []
        for _ in range(args.idle):
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            idle.append(client)
            try:
                client.connect(path)
            except OSError as error:
                problems.append(f"idle connection {len(idle)}: {error}")
                break
        # As `hotseam status` asks: closed unserved while 64 idle ones hold the slots, it
        # tries again until they are dropped (2 s without a request line).
        try:
            waiting = request(Endpoint(0, Path(path)), {"op": "status"})
            if not waiting.get("ok"):
                problems.append(f"the status among {args.idle} idle connections: {waiting!r}")
        except ControlError as error:
            problems.append(f"the status among {args.idle} idle connections: {error}")
        for client in idle:
            client.close()
        print(f"{args.idle} idle connections survived in {time.monotonic() - began:.1f} s")

        began = time.monotonic()
        replies: Counter[str] = Counter()
        work = [hostile_line(rng) for _ in range(args.hostile)]
        with ThreadPoolExecutor(8) as pool:
            for (data, read), raw in zip(
                work, pool.map(lambda item: exchange(path, *item), work), strict=True
            ):
                if not read:
                    replies["not read"] += 1
                    continue
                if raw is None or raw.count(b"\n") != 1:
                    problems.append(f"not one reply line to {data[:60]!r}: {raw!r}")
                    continue
                reply = json.loads(raw)
                replies[reply.get("code", "ok")] += 1
        print(f"{args.hostile} hostile lines in {time.monotonic() - began:.1f} s: {dict(replies)}")

        child.send_signal(signal.SIGHUP)
        after = exchange(path, b'{"op": "status"}\n', True)
        if not after or not json.loads(after).get("ok"):
            problems.append(f"status after the flood: {after!r}")
        if child.poll() is not None:
            problems.append(f"the daemon exited {child.returncode} before SIGTERM")
        child.send_signal(signal.SIGTERM)
        code = child.wait(30)
        reader.join(10)  # the last lines
        if code != 0:
            problems.append(f"exit {code} at SIGTERM")
        events = Counter(
            json.loads(line).get("event", "")
            for line in lines
            if line.startswith("{") and '"accept.' in line
        )
        errors = [line for line in lines if '"level": "error"' in line]
        print(f"accept events: {dict(events)}")
        if (
            events["accept.saturated"] < 1
            or events["accept.saturated"] != events["accept.unsaturated"]
        ):
            problems.append(f"the connection limit not logged once per episode: {events}")
        if events["accept.starved"] != events["accept.recovered"]:
            problems.append(f"running out of descriptors without its recovery: {events}")
        if errors:
            problems.append(f"{len(errors)} error line(s), the first: {errors[0][:300]}")
    for problem in problems[:10]:
        print(f"FAIL: {problem}", file=sys.stderr)
    if len(problems) > 10:
        print(f"FAIL: ... and {len(problems) - 10} more", file=sys.stderr)
    print("control flood: " + ("FAILED" if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
