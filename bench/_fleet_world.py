"""The fleet torture's world: its settings, the agent, and its processes under supervision.

Every daemon and inbox is a real ``python -m hotseam`` child. A *slot* is what a
supervisor keeps running: an agent (``hotseam run --name AGENT``), started again after each
death (SIGKILL) and, once its agent finished a run, for its next run; or an inbox
(``hotseam inbox``), started again on a new port after each death. Each *life* of a slot is
one process; what it printed and logged is kept per life, for the ledger.

``--break NAME`` runs every child on a scratch copy of ``src/hotseam`` with one guarantee
broken on purpose (:data:`BREAKS`), to see the torture catch it.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

import hotseam


@dataclass(frozen=True)
class FleetSettings:
    """What one torture does (the defaults are the long version of ``make stress``)."""

    engine: str = "postgresql"  # or "sqlite"
    daemons: int = 3
    agents: int = 4  # per daemon: each its own `hotseam run --name`
    questions: int = 1200  # at least, in all (rounded up to whole runs)
    per_run: int = 20  # questions an agent asks in one run
    daemon_kills: int = 100  # at least
    inbox_kills: int = 20  # at least
    kill_interval: float = 0.3  # mean seconds between two kills
    window_share: float = 0.3  # of daemon kills: frozen, answered (committed), then killed
    both_share: float = 0.5  # of questions: answered in both inboxes at the same instant
    answer_delay: float = 0.1  # at most, before a question is answered
    restart_delay: float = 0.3  # at most, before a supervisor starts a dead process again
    poll: float = 0.05  # seconds between two listings of each inbox
    race_share: float = 0.1  # of other starts: several daemons at once (see _fleet_race)
    # PostgreSQL stopped for 1-3 s, then started again (our own server only).
    outages: int = 0
    outage_interval: float = 15.0  # mean seconds between two outages
    seed: int = 1
    timeout: float = 1500.0
    breaks: tuple[str, ...] = ()

    @property
    def agent_count(self) -> int:
        return self.daemons * self.agents

    @property
    def rounds(self) -> int:
        """Runs per agent, one after the other."""
        return max(1, math.ceil(self.questions / (self.agent_count * self.per_run)))

    @property
    def expected(self) -> int:
        """Questions the agents ask in all."""
        return self.rounds * self.agent_count * self.per_run


AGENT = """
import json, os, sys
from hotseam.interaction.journal import current_run

QUESTIONS = __PER_RUN__


async def main(context):
    # The same questions in every run of an agent: a finished run must never replay.
    run = current_run()
    for seq in range(QUESTIONS):
        question = f"{run.agent} asks question {seq}"
        # Said by the agent on the line it prints (one write, that a SIGKILL cannot split):
        # the answer comes from the record the run resumed with, not from anyone now. The
        # daemon's `ask.replayed` goes to stderr through a writer thread, and a SIGKILL
        # after the answer is printed can lose it.
        held = run.recorded_at(seq, None)
        replayed = held is not None and not held.pending
        result = await context.tools.execute("ask_user_question", {"question": question})
        line = {"pid": os.getpid(), "agent": run.agent, "run": run.id, "seq": seq,
                "question": question, "replayed": replayed}
        if result.ok:
            line["answer"] = result.output["answer"]
        else:
            line["error"] = result.error["code"]
        sys.stdout.write(json.dumps(line) + "\\n")
        sys.stdout.flush()
"""

# Events a daemon logs that the ledger reads (the rest is only counted by level).
KEPT_EVENTS = frozenset(
    {
        "ask.replayed",
        "ask.started",
        "run.resumed",
        "run.diverged",
        "journal.run_started",
        "journal.run_claimed",
        "run.owner_gone",
        "the agent finished",
    }
)


@dataclass(eq=False)
class Life:
    """One process of a slot, from its start to its death."""

    slot: str
    number: int
    pid: int = 0
    started: float = 0.0
    ended: float | None = None
    code: int | None = None
    killed: str | None = None  # "kill", "window" (frozen, answered, killed) or None
    stdout: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)  # warnings and errors
    serving: str | None = None  # an inbox's URL
    process: anyio.abc.Process | None = field(default=None, repr=False)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.ended is None

    @property
    def runs(self) -> list[str]:
        """The runs this life started, resumed or printed answers of, in order."""
        found = [e["run_id"] for e in self.events if "run_id" in e and e["event"] != "ask.replayed"]
        found += [line["run"] for line in self.stdout if "run" in line]
        return list(dict.fromkeys(found))

    @property
    def returned(self) -> bool:
        """Its agent function returned (the run it was on must never replay)."""
        return any(e["event"] == "the agent finished" for e in self.events)


@dataclass(eq=False)
class Slot:
    """An agent or an inbox, kept running by its supervisor."""

    name: str
    kind: str  # "agent" or "inbox"
    index: int
    lives: list[Life] = field(default_factory=list)
    rounds_done: int = 0
    done: bool = False
    changed: anyio.Event = field(default_factory=anyio.Event)

    @property
    def current(self) -> Life | None:
        """The life running it: of those alive (racers that lose end at once), the one
        that asks, else the newest."""
        alive = [life for life in self.lives if life.alive]
        asking = [life for life in alive if any(e["event"] == "ask.started" for e in life.events)]
        chosen = asking or alive
        return chosen[-1] if chosen else None

    def poke(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()


class World:
    """The folders, the environment and the commands of the children."""

    def __init__(self, folder: Path, url: str, settings: FleetSettings) -> None:
        self.folder = folder
        self.url = url
        self.settings = settings
        self.project = folder / "project"
        (self.project / "providers").mkdir(parents=True)  # no provider: inboxes answer
        agent = AGENT.replace("__PER_RUN__", str(settings.per_run))
        (self.project / "agent.py").write_text(agent, encoding="utf-8")
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "NO_COLOR": "1",
            "XDG_STATE_HOME": str(folder / "state"),  # the inboxes' kept token
            "HOTSEAM_RUNTIME_DIR": str(folder / "run"),  # the control sockets
        }
        for name in ("HOTSEAM_WEB_TOKEN", "HOTSEAM_WEB_TOKEN_FILE"):
            env.pop(name, None)
        if settings.breaks:
            broken = str(broken_copy(folder / "broken", settings.breaks))
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [broken, env.get("PYTHONPATH")]))
        self.env = env

    def daemon_command(self, agent: str) -> list[str]:
        return [
            sys.executable, "-m", "hotseam", "run", "providers", "--agent", "agent.py",
            "--name", agent, "--journal", self.url, "--provider-wait", "86400",
            "--stall-warning", "0", "--log-format", "json",
        ]  # fmt: skip

    def inbox_command(self) -> list[str]:
        return [
            sys.executable, "-m", "hotseam", "inbox", "--journal", self.url,
            "--web-port", "0", "--log-format", "json",
        ]  # fmt: skip

    async def start(self, slot: Slot) -> Life:
        """Start the slot's next life; its output is read by tasks of ``readers``."""
        life = Life(slot.name, len(slot.lives) + 1)
        command = self.daemon_command(slot.name) if slot.kind == "agent" else self.inbox_command()
        life.process = await anyio.open_process(
            command,
            cwd=self.project,
            env=self.env,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        life.pid = life.process.pid
        life.started = time.monotonic()
        slot.lives.append(life)
        return life


async def read_life(life: Life, on_serving: Callable[[Life], None] | None = None) -> int:
    """Read a life's output until it ends; its exit code (negative: the signal)."""
    process = life.process
    assert process is not None
    assert process.stdout is not None
    assert process.stderr is not None

    def on_stdout(line: str) -> None:
        try:
            data = json.loads(line)
        except ValueError:
            data = {"unreadable": line[:200]}
        life.stdout.append(data)

    def on_stderr(line: str) -> None:
        if not line.startswith("{"):
            life.problems.append({"event": "not json", "line": line[:300]})
            return
        event = json.loads(line)
        name = event.get("event")
        if name in KEPT_EVENTS:
            life.events.append(event)
        elif name == "web.serving":
            life.serving = event["url"]
            if on_serving is not None:
                on_serving(life)
        if event.get("level") in ("warning", "error", "critical"):
            life.problems.append(event)

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_lines, process.stdout, on_stdout)
            group.start_soon(_lines, process.stderr, on_stderr)
            code = await process.wait()
    finally:
        if process.returncode is None:  # the torture was cancelled: no child outlives it
            process.kill()
        life.ended = time.monotonic()
        await process.aclose()
    life.code = code
    return code


async def _lines(stream: anyio.abc.ByteReceiveStream, handle: Callable[[str], None]) -> None:
    buffered = BufferedByteReceiveStream(stream)
    while True:
        try:
            line = await buffered.receive_until(b"\n", 1 << 20)
        except (anyio.IncompleteRead, anyio.EndOfStream, anyio.ClosedResourceError):
            return  # a partial last line of a killed process is not a line
        handle(line.decode("utf-8", "replace"))


def kill(life: Life, how: str = "kill") -> bool:
    """SIGKILL a life (frozen or not); its reader sees it end. False when it had ended."""
    if not life.alive or life.killed is not None:
        return False
    try:
        os.kill(life.pid, signal.SIGKILL)
    except ProcessLookupError:  # exited and reaped, not yet read to its end
        return False
    life.killed = how
    return True


def freeze(life: Life) -> bool:
    """SIGSTOP a running life: it holds whatever it held, and sees nothing."""
    if not life.alive:
        return False
    try:
        os.kill(life.pid, signal.SIGSTOP)
    except ProcessLookupError:
        return False
    return True


# -- breaks ---------------------------------------------------------------------------------

# name -> (what it breaks, [(file under src/hotseam, text, replacement)]): each text must be
# found exactly once, or the break no longer applies to this code and says so.
BREAKS: dict[str, tuple[str, list[tuple[str, str, str]]]] = {
    "first-answer-wins": (
        "an answer overwrites an answered ask (settle_ask's UPDATE also takes state 'answered')",
        [
            (
                "interaction/_journal/_store.py",
                'f"UPDATE hotseam_asks SET {SETTLED} WHERE id = ? AND state = ?{running}"',
                "f\"UPDATE hotseam_asks SET {SETTLED} WHERE id = ? AND state IN (?, 'answered')"
                '{running}"',
            )
        ],
    ),
    "resume": (
        "a restarted daemon never resumes: its agent's unfinished run is abandoned (as "
        "--fresh does)",
        [("interaction/_runs.py", "if record is not None and fresh:", "if record is not None:")],
    ),
    "finished-run": (
        "a run whose agent returned is not ended: the next run of the agent resumes it",
        [
            (
                "interaction/_runs.py",
                "            if outcome is not None:\n                await self._end(run",
                "            if outcome is None:\n                await self._end(run",
            )
        ],
    ),
    "replay-position": (
        "replay hands out the record of the next position (and does not compare digests)",
        [
            (
                "interaction/_runs.py",
                "key is None and record.key is None and record.seq == position",
                "key is None and record.key is None and record.seq == position + 1",
            ),
            (
                "interaction/_journaled.py",
                "if recorded is not None and recorded.digest != digest:",
                "if False:",
            ),
        ],
    ),
    "redeliver": (
        "a resumed run's answered question is not replayed but awaited again (its answer "
        "delivered live a second time)",
        [
            (
                "interaction/_ask.py",
                "if record is not None and not record.pending:",
                "if False:",
            )
        ],
    ),
}


def broken_copy(folder: Path, breaks: tuple[str, ...]) -> Path:
    """A copy of the ``hotseam`` package this process imports, under ``folder``, with
    ``breaks`` applied; the folder to put first on the children's ``PYTHONPATH``."""
    target = folder / "hotseam"
    source = Path(hotseam.__file__).parent
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    for name in breaks:
        if name not in BREAKS:
            raise SystemExit(f"unknown break {name!r}; known: {', '.join(BREAKS)}")
        for relative, text, replacement in BREAKS[name][1]:
            path = target / relative
            code = path.read_text(encoding="utf-8")
            if code.count(text) != 1:
                raise SystemExit(
                    f"the break {name!r} no longer applies: {text!r} is not found once in "
                    f"src/hotseam/{relative}"
                )
            path.write_text(code.replace(text, replacement), encoding="utf-8")
    return folder
