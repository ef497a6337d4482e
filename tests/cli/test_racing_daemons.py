"""Several ``hotseam run`` for one agent started at once: one asks, the others say who does.

A supervisor that retries, a deploy that starts the new daemon before the old one is gone,
a fleet of machines started together: each daemon looks for a live owner of the agent's
run, finds none, and goes on to take the run; the journal lets exactly one of them take it.
The others must exit 2 with one line naming the winner and what to do, never exit 1 with
a traceback. The same when the run was left by a daemon killed with ``kill -9``.

Real processes on a real journal (an SQLite file, a PostgreSQL server). Each racer's
provider waits in its ``setup`` until all of them have looked at the journal and loaded
it (a barrier of files), so that every round is the race: all of them saw no owner, none
has taken the run yet.
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import anyio
import pytest

from _timing import scaled
from cli._support import hotseam_env, write
from hotseam.interaction._journal import open_journal
from journal.conftest import postgres_server, postgres_url  # noqa: F401 (fixtures)

RACERS = 3
ROUNDS = 3  # a new agent, then twice a run left by the killed winner
AGENT_NAME = "deployer"

AGENT = """
async def main(context):
    result = await context.tools.execute("ask_user_question", {"question": "Deploy now?"})
    print("answered", result.ok, flush=True)
"""

# Arrives at the barrier (a file named by its pid), then waits for every racer, at most
# RACE_WAIT seconds, before providing a UI that never answers.
BARRIER_UI = """
import os
from pathlib import Path

import anyio

from hotseam.interaction import USER_INTERACTION
from hotseam.providers.scripted import Reply, ScriptedProvider


async def setup(scope):
    barrier = Path(os.environ["RACE_BARRIER"])
    (barrier / str(os.getpid())).touch()
    with anyio.move_on_after(float(os.environ["RACE_WAIT"])):
        while len(list(barrier.iterdir())) < int(os.environ["RACE_COUNT"]):
            await anyio.sleep(0.02)
    scope.provide(USER_INTERACTION, ScriptedProvider(lambda request: Reply.never()))
"""


class Racer:
    """One ``hotseam run`` of the race; its lines go to a queue shared by all racers."""

    def __init__(self, index: int, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.index = index
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "hotseam", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr: list[str] = []
        self.asking = False
        self.ended = False

    def pump(self, events: queue.Queue[tuple[Racer, str | None]]) -> None:
        stream: IO[str] | None = self.popen.stderr
        assert stream is not None
        for line in stream:
            events.put((self, line.rstrip("\n")))
        events.put((self, None))

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(timeout=scaled(20))
        if self.popen.stderr is not None:
            self.popen.stderr.close()


def _race(
    project: Path, url: str, round_: int, racers: list[Racer], extra: tuple[str, ...]
) -> tuple[Racer, list[Racer]]:
    """Start RACERS daemons at once; return the one that asks and the others, ended."""
    barrier = project / f"barrier-{round_}"
    barrier.mkdir()
    events: queue.Queue[tuple[Racer, str | None]] = queue.Queue()
    started = []
    for index in range(RACERS):
        env = {
            **hotseam_env(project / f"rt-{round_}-{index}"),  # one machine each
            "RACE_BARRIER": str(barrier),
            "RACE_COUNT": str(RACERS),
            "RACE_WAIT": str(scaled(30)),
        }
        args = ["run", "providers", "--agent", "agent.py", "--name", AGENT_NAME]
        args += ["--journal", url, "--setup-timeout", str(scaled(60)), *extra]
        racer = Racer(index, args, project, env)
        racers.append(racer)
        started.append(racer)
    for racer in started:
        threading.Thread(target=racer.pump, args=(events,), daemon=True).start()
    deadline = time.monotonic() + scaled(60)
    while not all(racer.asking or racer.ended for racer in started):
        try:
            racer, line = events.get(timeout=max(deadline - time.monotonic(), 0.001))
        except queue.Empty:
            shown = {r.index: r.stderr[-5:] for r in started}
            pytest.fail(f"round {round_}: not every racer asked or ended in time: {shown}")
        if line is None:
            racer.ended = True
            continue
        racer.stderr.append(line)
        if '"ask.started"' in line:
            racer.asking = True
    askers = [racer for racer in started if racer.asking]
    assert len(askers) == 1, {r.index: r.stderr for r in started}
    (asker,) = askers
    losers = [racer for racer in started if racer is not asker]
    for loser in losers:
        loser.popen.wait(timeout=scaled(20))
    return asker, losers


def _check_loser(loser: Racer, asker: Racer, round_: int) -> None:
    shown = "\n".join(loser.stderr)
    code = loser.popen.returncode
    assert code == 2, f"round {round_}: a loser exited {code}:\n{shown}"
    assert "Traceback" not in shown, shown
    events = [json.loads(line) for line in loser.stderr if line.startswith("{")]
    assert not [event for event in events if "exception" in event], shown
    plain = [line for line in loser.stderr if not line.startswith("{")]
    assert len(plain) == 1, shown
    (line,) = plain
    assert line.startswith("hotseam run: the agent 'deployer' "), line
    assert f"pid {asker.popen.pid}" in line, line  # who runs it
    assert "stop that one first" in line, line  # what to do


async def _owner_pid(url: str) -> int:
    async with open_journal(url) as journal:
        run = await journal.unfinished_run(AGENT_NAME)
        assert run is not None
        return (await journal.get_daemon(run.daemon_id)).pid


def _run_the_races(tmp_path: Path, url: str, *extra: str) -> None:
    write(tmp_path / "agent.py", AGENT)
    write(tmp_path / "providers" / "ui.py", BARRIER_UI)
    racers: list[Racer] = []
    try:
        for round_ in range(ROUNDS):
            asker, losers = _race(tmp_path, url, round_, racers, extra)
            for loser in losers:
                _check_loser(loser, asker, round_)
            assert anyio.run(_owner_pid, url) == asker.popen.pid
            if round_ < ROUNDS - 1:
                asker.kill()  # kill -9: its run is left unfinished, to resume
        asker.popen.send_signal(signal.SIGTERM)
        assert asker.popen.wait(timeout=scaled(30)) == 0
    finally:
        for racer in racers:
            racer.kill()


def test_daemons_racing_for_one_agent_on_sqlite_one_asks_the_others_exit_2(
    tmp_path: Path,
) -> None:
    _run_the_races(tmp_path, str(tmp_path / "journal.sqlite3"))


def test_daemons_racing_for_one_agent_on_postgresql_one_asks_the_others_exit_2(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
) -> None:
    _run_the_races(tmp_path, postgres_url)


def test_daemons_racing_to_start_afresh_abandon_no_live_run(tmp_path: Path) -> None:
    """``--fresh`` abandons the agent's unfinished run, not the one a racer just started:
    one asks, the others say who does."""
    _run_the_races(tmp_path, str(tmp_path / "journal.sqlite3"), "--fresh")
