"""Save → new code serving in a real ``hotseam run`` daemon, at two log levels, beside the floor.

Each daemon (``hotseam run providers --agent agent.py:main --no-journal``, JSON log lines on
its stderr, a pipe that a process of its own drains, as a log collector would: a thread of
this process reading it took the interpreter lock from the thread that waits for the
answer, at info only) runs an agent that asks
"newer than vN?" again and again; the serving provider answers only a question about an
older version than its own and keeps a question about its own waiting (it never answers
it). A save of version N+1 is then served when the reload withdraws the waiting question
from the old generation and the new one answers it: the agent prints the answer and
``time.perf_counter()`` (CLOCK_MONOTONIC, one clock for the machine's processes). So a
sample is the end of the write → the agent holding the new answer, the re-ask included, as
a user of the daemon sees it.

The daemons differ only in ``--log-level`` (``info``: every lifecycle event of the save is
a JSON line; ``warning``: none is); the floor (``_floor.py``) is measured in the same
rounds, the three in a random order each round. With ``other_src`` (a copy of hotseam's
``src`` folder, another version of the code) two more daemons run that code at the same two
levels, in the same rounds: before and after a change, measured together.

Beside the latency, each save of a daemon reads the CPU time its threads ran and the time
its event loop's thread waited for a core (``/proc/PID/task/TID/schedstat``, in ns; Linux
only) from the end of the write to the answer: what the save cost on its path, split into
the loop's thread and every other thread (the log writer, the module-body thread).
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from _floor import floor

__all__ = ["CPU", "ROWS", "Saves", "run_saves"]

PROVIDER = """\
import anyio
from hotseam.interaction import USER_INTERACTION, AskUserQuestionAnswer

VERSION = {version}


class Provider:
    async def ask(self, request):
        if int(request.question.rpartition("v")[2]) >= VERSION:
            await anyio.sleep_forever()
        return AskUserQuestionAnswer(f"v{{VERSION}}")


def setup(scope):
    scope.provide(USER_INTERACTION, Provider())
"""
AGENT = """\
import sys
import time

from hotseam.interaction import AskUserQuestionRequest, ask


async def main(context):
    seen = -1
    while True:
        answer = await ask(AskUserQuestionRequest(f"newer than v{seen}"), context=context)
        seen = int(answer.answer[1:])
        sys.stdout.write(f"{answer.answer} {time.perf_counter()!r}\\n")
        sys.stdout.flush()
"""
_COLLECTOR = """\
import os, sys
count, path = 0, sys.argv[1]
for chunk in iter(lambda: sys.stdin.buffer.read1(65536), b""):
    count += chunk.count(b"\\n")
    with open(path + ".new", "w") as file:
        file.write(str(count))
    os.replace(path + ".new", path)
"""
"""Drains a daemon's stderr and keeps the count of its lines in a file."""
_SCRIPT = Path(sys.executable).with_name("hotseam")
HOTSEAM = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "hotseam"]


def _schedstat(pid: int) -> dict[int, tuple[int, int]]:
    """Each thread's (ns run on a CPU, ns waited for one) of process ``pid``; empty where
    ``/proc`` does not say."""
    threads: dict[int, tuple[int, int]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return threads
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as file:
                run, wait, _ = file.read().split()
        except (OSError, ValueError):
            continue
        threads[int(tid)] = (int(run), int(wait))
    return threads


@dataclass
class CPU:
    """What saves cost a daemon's threads on their path (seconds, one value per save)."""

    loop: list[float] = field(default_factory=list)
    """CPU time of the event loop's thread (the main thread)."""
    others: list[float] = field(default_factory=list)
    """CPU time of every other thread (the log writer, the module-body thread...)."""
    waited: list[float] = field(default_factory=list)
    """Time the loop's thread was runnable but waited for a core."""


class _Daemon:
    def __init__(self, folder: Path, level: str, src: Path | None = None) -> None:
        self.level = level
        self.src = src
        self.target = folder / "providers" / "ui.py"
        (folder / "providers").mkdir(parents=True)
        self.target.write_text(PROVIDER.format(version=0), encoding="utf-8")
        (folder / "agent.py").write_text(AGENT, encoding="utf-8")
        self._counted = folder / "lines"
        self._collector = subprocess.Popen(
            [sys.executable, "-c", _COLLECTOR, str(self._counted)], stdin=subprocess.PIPE
        )
        assert self._collector.stdin is not None
        self.process = subprocess.Popen(
            [
                *HOTSEAM,
                "run",
                "providers",
                "--agent",
                "agent.py:main",
                "--no-journal",
                "--log-format",
                "json",
                "--log-level",
                level,
                "--name",
                f"bench-{level}-{os.getpid()}-{id(self)}",
            ],
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._collector.stdin,
            text=True,
            env=_environment(folder, src),
        )
        assert self.process.stdout is not None
        self._out: IO[str] = self.process.stdout
        self._collector.stdin.close()  # the daemon holds the pipe's write end now

    @property
    def lines(self) -> int:
        """How many lines the daemon wrote to its stderr so far (that reached the collector)."""
        try:
            return int(self._counted.read_text(encoding="ascii") or 0)
        except FileNotFoundError:
            return 0

    def save(self, version: int) -> float:
        self._before = _schedstat(self.process.pid)
        self.target.write_text(PROVIDER.format(version=version), encoding="utf-8")
        return time.perf_counter()

    def account(self, cpu: CPU) -> None:
        """Add the threads' times from the last :meth:`save` until now to ``cpu``."""
        after = _schedstat(self.process.pid)
        pid = self.process.pid
        if pid not in after or pid not in self._before:
            return
        loop_run = after[pid][0] - self._before[pid][0]
        cpu.loop.append(loop_run / 1e9)
        cpu.waited.append((after[pid][1] - self._before[pid][1]) / 1e9)
        others = sum(
            run - self._before.get(tid, (0, 0))[0] for tid, (run, _) in after.items() if tid != pid
        )
        cpu.others.append(others / 1e9)

    def served(self, version: int) -> float:
        while True:
            line = self._out.readline()
            if not line:
                raise RuntimeError(f"hotseam run ({self.level}) ended")
            got, _, when = line.rpartition(" ")
            if got == f"v{version}":
                return float(when)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._collector.wait(10)


def _environment(folder: Path, src: Path | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "HOTSEAM_RUNTIME_DIR": str(folder)}
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
    return env


ROWS = ("info", "warning")
"""The daemons' log levels (a row each); ``before info``, ``before warning`` with another
version of the code."""


@contextlib.contextmanager
def _daemons(folder: Path, other_src: Path | None) -> Iterator[dict[str, _Daemon]]:
    started: dict[str, _Daemon] = {}
    try:
        for level in ROWS:
            started[level] = _Daemon(folder / level, level)
            if other_src is not None:
                started[f"before {level}"] = _Daemon(folder / f"before-{level}", level, other_src)
        for daemon in started.values():
            daemon.served(0)  # serving: the agent holds v0's answer
        yield started
    finally:
        for daemon in started.values():
            daemon.stop()


@dataclass
class Saves:
    """What :func:`run_saves` measured, by row (``info``, ``warning``, ``floor``, and the
    other code's ``before info``, ``before warning``)."""

    samples: dict[str, list[float]]
    """Seconds from the end of the write to the new answer, one per save."""
    lines: dict[str, float]
    """Log lines each daemon wrote per save."""
    cpu: dict[str, CPU]
    """Each daemon's threads' times on the path of each save."""
    load: tuple[tuple[float, float, float], tuple[float, float, float]]
    """``os.getloadavg()`` when the first round began and when the last ended."""


def run_saves(folder: Path, saves: int, other_src: Path | None = None) -> Saves:
    """Measure ``saves`` saves of each row, interleaved in a random order each round, after
    one round of warm-up."""
    floor_folder = folder / "floor"
    floor_folder.mkdir()
    with _daemons(folder, other_src) as daemons, floor(floor_folder) as bare:
        samples: dict[str, list[float]] = {row: [] for row in [*daemons, "floor"]}
        cpu = {row: CPU() for row in daemons}
        before = {level: daemon.lines for level, daemon in daemons.items()}
        load_at_start = os.getloadavg()
        for version in range(1, saves + 2):  # the first round is warm-up
            for which in random.sample(list(samples), len(samples)):
                time.sleep(0.15 + random.uniform(0, 0.02))
                if which == "floor":
                    started = bare.save(version)
                    served = bare.served(version)
                else:
                    started = daemons[which].save(version)
                    served = daemons[which].served(version)
                    if version > 1:
                        daemons[which].account(cpu[which])
                if version > 1:
                    samples[which].append(served - started)
        load_at_end = os.getloadavg()
        time.sleep(0.3)  # the last lines reach the pipe
        per_save = {
            level: (daemon.lines - before[level]) / (saves + 1) for level, daemon in daemons.items()
        }
    return Saves(samples, per_save, cpu, (load_at_start, load_at_end))
