"""Save → new code serving in a real ``hotseam run`` daemon, at two log levels, beside the floor.

Each daemon (``hotseam run providers --agent agent.py:main --no-journal``, JSON log lines on
its stderr, a pipe this process drains as a log collector would) runs an agent that asks
"newer than vN?" again and again; the serving provider answers only a question about an
older version than its own and keeps a question about its own waiting (it never answers
it). A save of version N+1 is then served when the reload withdraws the waiting question
from the old generation and the new one answers it: the agent prints the answer and
``time.perf_counter()`` (CLOCK_MONOTONIC, one clock for the machine's processes). So a
sample is the end of the write → the agent holding the new answer, the re-ask included, as
a user of the daemon sees it.

The daemons differ only in ``--log-level`` (``info``: every lifecycle event of the save is
a JSON line; ``warning``: none is); the floor (``_floor.py``) is measured in the same
rounds, the three in a random order each round.
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from _floor import floor

__all__ = ["run_saves"]

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
_SCRIPT = Path(sys.executable).with_name("hotseam")
HOTSEAM = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "hotseam"]


class _Daemon:
    def __init__(self, folder: Path, level: str) -> None:
        self.level = level
        self.target = folder / "providers" / "ui.py"
        (folder / "providers").mkdir(parents=True)
        self.target.write_text(PROVIDER.format(version=0), encoding="utf-8")
        (folder / "agent.py").write_text(AGENT, encoding="utf-8")
        self.lines = 0
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
                f"bench-{level}-{os.getpid()}",
            ],
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "HOTSEAM_RUNTIME_DIR": str(folder)},
        )
        assert self.process.stdout is not None
        assert self.process.stderr is not None
        self._out: IO[str] = self.process.stdout
        self._drain = threading.Thread(target=self._collect, args=(self.process.stderr,))
        self._drain.start()

    def _collect(self, stream: IO[str]) -> None:
        for _ in stream:
            self.lines += 1

    def save(self, version: int) -> float:
        self.target.write_text(PROVIDER.format(version=version), encoding="utf-8")
        return time.perf_counter()

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
        self._drain.join(10)


@contextlib.contextmanager
def _daemons(folder: Path) -> Iterator[dict[str, _Daemon]]:
    started: dict[str, _Daemon] = {}
    try:
        for level in ("info", "warning"):
            started[level] = _Daemon(folder / level, level)
        for daemon in started.values():
            daemon.served(0)  # serving: the agent holds v0's answer
        yield started
    finally:
        for daemon in started.values():
            daemon.stop()


def run_saves(folder: Path, saves: int) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Samples (seconds) of ``hotseam run`` at info and warning and of the floor, and how
    many log lines each daemon wrote per save."""
    samples: dict[str, list[float]] = {"info": [], "warning": [], "floor": []}
    floor_folder = folder / "floor"
    floor_folder.mkdir()
    with _daemons(folder) as daemons, floor(floor_folder) as bare:
        before = {level: daemon.lines for level, daemon in daemons.items()}
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
                    samples[which].append(served - started)
        time.sleep(0.3)  # the last lines reach the pipe
        per_save = {
            level: (daemon.lines - before[level]) / (saves + 1) for level, daemon in daemons.items()
        }
    return samples, per_save
