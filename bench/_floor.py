"""The floor of a save → serve: a bare process doing only what any hot reload must do.

One blocking inotify read (``IN_CLOSE_WRITE | IN_MOVED_TO`` on the folder, as hotseam's
native watcher asks), then read the file, ``compile``, ``exec`` in a fresh namespace and
call its ``answer()``; it prints the value and ``time.perf_counter()`` (CLOCK_MONOTONIC:
one clock for the machine's processes) so the bench measures it from the same instant as
the rest: the end of the write. Nothing else runs in it: no event loop, no second thread.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

__all__ = ["FLOOR_MODULE", "Floor", "floor"]

FLOOR_MODULE = """\
def answer():
    return "v{value}"
"""
"""The module the floor serves (the hotseam rows serve a provider of the same value)."""

_SCRIPT = r"""
import os, sys, time
from inotify_simple import INotify, flags
folder, name = sys.argv[1], sys.argv[2]
watch = INotify()
watch.add_watch(folder, flags.CLOSE_WRITE | flags.MOVED_TO)
path = os.path.join(folder, name)
out = sys.stdout
out.write("ready\n")
out.flush()
while True:
    for event in watch.read():
        if event.name != name:
            continue
        with open(path, "rb") as file:
            data = file.read()
        namespace = {"__name__": "served"}
        exec(compile(data, path, "exec", dont_inherit=True), namespace)
        value = namespace["answer"]()
        out.write(f"{value} {time.perf_counter()!r}\n")
        out.flush()
"""


class Floor:
    """A running floor process watching ``target``'s folder; :meth:`served` waits for it."""

    def __init__(self, target: Path, process: subprocess.Popen[str]) -> None:
        self.target = target
        self._process = process
        assert process.stdout is not None
        self._out: IO[str] = process.stdout

    def save(self, value: int) -> float:
        """Write version ``value``; return when the write ended (``perf_counter``)."""
        self.target.write_text(FLOOR_MODULE.format(value=value), encoding="utf-8")
        return time.perf_counter()

    def served(self, value: int) -> float:
        """Block until the floor served ``value``; when it did (``perf_counter``)."""
        while True:
            line = self._out.readline()
            if not line:
                raise RuntimeError("the floor process ended")
            got, _, when = line.rpartition(" ")
            if got == f"v{value}":
                return float(when)


@contextlib.contextmanager
def floor(folder: Path, name: str = "floor_served.py") -> Iterator[Floor]:
    """Start the floor process on ``folder / name`` (written at version 0 first)."""
    target = folder / name
    target.write_text(FLOOR_MODULE.format(value=0), encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, "-B", "-c", _SCRIPT, str(folder), name],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    try:
        assert process.stdout is not None
        if process.stdout.readline().strip() != "ready":
            raise RuntimeError("the floor process did not start")
        time.sleep(0.01)
        yield Floor(target, process)
    finally:
        process.kill()
        process.wait()
