"""Helpers of the CLI tests: a ``python -m hotseam`` subprocess read line by line, files."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from tests._timing import scaled

DEADLINE = 20.0
"""Seconds on an idle machine for one step of a child process; scaled where it is used."""

ASKING_AGENT = """
import anyio

async def main(context):
    result = await context.tools.execute(
        "ask_user_question", {"question": "Colour?", "header": "Colour"}
    )
    print("answer:", result.output["answer"] if result.ok else result.error["code"], flush=True)
    await anyio.sleep_forever()
"""

HELD_PROVIDER = """
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.scripted import Reply, ScriptedProvider


def setup(scope):
    scope.provide(USER_INTERACTION, ScriptedProvider(lambda request: Reply.never()))
"""

ANSWERING_PROVIDER = """
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.scripted import ScriptedProvider


def setup(scope):
    scope.provide(USER_INTERACTION, ScriptedProvider(lambda request: "teal"))
"""


def write(path: Path, source: str) -> Path:
    """Write dedented ``source`` to ``path`` (creating folders)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
    return path


def hotseam_env(runtime: Path) -> dict[str, str]:
    """The environment of a child: its control sockets in ``runtime``."""
    return {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "NO_COLOR": "1",
        "HOTSEAM_RUNTIME_DIR": str(runtime),
    }


def hotseam(*args: str, cwd: Path, runtime: Path) -> subprocess.CompletedProcess[str]:
    """Run ``python -m hotseam ARGS`` to the end."""
    return subprocess.run(
        [sys.executable, "-m", "hotseam", *args],
        cwd=cwd,
        env=hotseam_env(runtime),
        capture_output=True,
        text=True,
        timeout=scaled(DEADLINE),
        check=False,
    )


class Process:
    """A ``python -m hotseam`` subprocess whose output lines are read as they come."""

    def __init__(
        self,
        *args: str,
        cwd: Path,
        runtime: Path | None = None,
        env: dict[str, str] | None = None,
        preexec_fn: Callable[[], object] | None = None,
    ) -> None:
        """``runtime``: where its control socket goes (default: a folder inside ``cwd``);
        ``env``: the whole environment instead; ``preexec_fn``: run in the child first."""
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "hotseam", *args],
            cwd=cwd,
            env=env or hotseam_env(runtime if runtime is not None else cwd / ".hotseam-run"),
            preexec_fn=preexec_fn,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self._queues: dict[str, queue.Queue[str | None]] = {}
        for name in ("stdout", "stderr"):
            stream = getattr(self.popen, name)
            self._queues[name] = queue.Queue()
            threading.Thread(target=self._pump, args=(name, stream), daemon=True).start()

    def _pump(self, name: str, stream: IO[str]) -> None:
        for line in stream:
            self._queues[name].put(line.rstrip("\n"))
        self._queues[name].put(None)

    def expect_each(self, *patterns: str, stream: str = "stderr") -> list[re.Match[str]]:
        """Wait until each of ``patterns`` matched a line, in whatever order the lines come
        (lines logged by different tasks); the matches in the order of ``patterns``."""
        found: dict[str, re.Match[str]] = {}
        start = len(self.lines[stream])
        while len(found) < len(patterns):
            missing = [pattern for pattern in patterns if pattern not in found]
            either = "|".join(f"(?:{pattern})" for pattern in missing)
            self.expect(either, stream=stream)
            for line in self.lines[stream][start:]:
                for pattern in missing:
                    match = re.search(pattern, line)
                    if match is not None and pattern not in found:
                        found[pattern] = match
        return [found[pattern] for pattern in patterns]

    def expect(self, pattern: str, *, stream: str = "stderr") -> re.Match[str]:
        """Wait for a line matching ``pattern`` (a regex); fail at the deadline or EOF."""
        deadline = time.monotonic() + scaled(DEADLINE)
        while True:
            remaining = deadline - time.monotonic()
            try:
                line = self._queues[stream].get(timeout=max(remaining, 0.001))
            except queue.Empty:
                raise AssertionError(
                    f"no {stream} line matched {pattern!r} within {scaled(DEADLINE)} s; got "
                    f"{self.lines[stream]!r}"
                ) from None
            if line is None:
                raise AssertionError(
                    f"{stream} ended before {pattern!r}; got {self.lines[stream]!r}"
                )
            self.lines[stream].append(line)
            found = re.search(pattern, line)
            if found is not None:
                return found

    def finish(self, signum: int | None = None) -> int:
        """Send ``signum`` (if any), wait for the exit, and collect the remaining output."""
        if signum is not None and self.popen.poll() is None:
            self.popen.send_signal(signum)
        code = self.popen.wait(timeout=scaled(DEADLINE))
        for name, lines in self.lines.items():
            while (line := self._queues[name].get(timeout=scaled(DEADLINE))) is not None:
                lines.append(line)
            getattr(self.popen, name).close()
        return code
