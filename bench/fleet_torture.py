"""The fleet torture: daemons and inboxes killed at random while a fleet asks and answers.

    .venv/bin/python bench/fleet_torture.py [--engine postgresql|sqlite] [--questions 1200]
        [--daemons 3] [--agents 4] [--per-run 20] [--daemon-kills 100] [--inbox-kills 20]
        [--seed 1] [--outages 0] [--postgres URL] [--break NAME]

Real processes on one journal (PostgreSQL: a throw-away server unless ``--postgres`` names
one — its tables go to a new schema; SQLite: one file):

* ``--daemons`` x ``--agents`` agents, each its own ``hotseam run --name AGENT`` (the
  journal's agent key), with no provider: every question is answered in the inboxes. Each
  agent asks ``--per-run`` questions one after the other and prints each answer with its
  question; a run that finished is followed by the next run of the same agent (the same
  questions: a finished run must never replay), until ``--questions`` are asked in all;
* two ``hotseam inbox`` processes; clients list both every ``poll`` seconds and answer
  what is pending — half the questions in **both** inboxes at the same instant, the rest
  in one, after a random delay;
* a killer: SIGKILL of a random daemon (its supervisor starts it again after a random
  delay, during which its question may be answered) or of an inbox (started again on a new
  port). Three daemon kills in ten hit the window between an answer's commit and the agent
  receiving it: the daemon is frozen (SIGSTOP), its open question answered in an inbox
  (committed, as the journal says while the daemon is still frozen), then it is killed.
  Answers and kills keep pace (neither gets more than 3 % ahead of the other in its share
  of the whole), so at least ``--daemon-kills`` and ``--inbox-kills`` land while questions
  are open;
* racing claims (``_fleet_race.py``): an agent's first start, its first restart after a
  kill and a share of the others start three daemons at once for it; one asks, the others
  must exit 2 with one plain line, never two askers in one run;
* journal outages (PostgreSQL, on the torture's own server): ``--outages`` times the
  server is stopped (``pg_ctl stop -m fast``: every connection cut) for 1-3 s while the
  fleet asks and answers, then started again. The daemons' questions wait for it — an
  agent never receives ``JOURNAL_UNAVAILABLE``, a run's end is recorded once it is back, so
  no finished run replays; the inboxes answer ``503`` meanwhile. A daemon started while
  the journal cannot be opened at all exits 1 with one line (its supervisor starts it
  again): counted, not judged; one that opened it and then meets the outage (registering,
  looking for the agent's run, claiming it; an inbox subscribing) waits for it. A racer
  that waits out an outage (or is merely slow to start) while the winner of its race
  replays and ends the agent's run starts the agent's next run, with new questions: a run
  of its own, counted as a slow racer's and finished like the others, not a replay.

Then the journal is checked against everything the inboxes said and the agents received
(see ``_fleet_ledger.py``); exit status 1 when a must-be-0 counter is not 0.

``HOTSEAM_FLEET_DUMP=FILE`` writes every life (its events, printed lines, exit) and the
outages' times to ``FILE`` as JSON lines, for a post-mortem of a failed run.

``--break NAME`` runs the children on a scratch copy of ``src/hotseam`` with one guarantee
broken (``--break list`` lists them); the torture must then fail.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import anyio.abc
import anyio.to_thread
import httpx
from _fleet_ledger import Attempt, Ledger, Report, check
from _fleet_race import Races
from _fleet_world import BREAKS, FleetSettings, Life, Slot, World, freeze, kill, read_life
from _journal_reads import patient

from hotseam.interaction._journal import AskState, Journal, RunState, open_journal

TESTS = Path(__file__).resolve().parents[1] / "tests"
PACE_SLACK = 0.03


class Fleet:
    """The supervisors, the answering clients and the killer of one torture."""

    def __init__(self, world: World, settings: FleetSettings, server: Any = None) -> None:
        self.world = world
        self.settings = settings
        self.server = server  # the PostgreSQL server to stop now and then (ours only)
        self.down = False  # the server is stopped: the torture's own reads wait
        self.rng = random.Random(settings.seed)
        self.ledger = Ledger()
        self.agents = [
            Slot(f"d{d}-a{a}", "agent", d * settings.agents + a)
            for d in range(settings.daemons)
            for a in range(settings.agents)
        ]
        self.inboxes = [Slot(f"inbox-{i}", "inbox", i) for i in range(2)]
        self.token = ""
        self.handling: set[str] = set()
        self.decided: set[str] = set()
        self.listed: dict[str, dict[str, Any]] = {}  # the last listings, by question id
        self.paced = anyio.Event()
        self.stopping = False
        self.serial = 0
        self.reserved: set[str] = set()  # agents the killer is about to freeze
        self.posting: set[str] = set()  # questions whose answers are on their way
        self.relisted = anyio.Event()  # set after each listing of the inboxes
        self.races = Races(settings.race_share, self.rng)  # several daemons for one agent

    # -- supervisors --------------------------------------------------------------------------

    async def supervise_agent(self, slot: Slot, journal: Journal) -> None:
        """Keep the agent running until it finished its runs; start it again after a kill
        (or, as a supervisor would, after any exit)."""
        finished: set[str] = set()
        returned: set[str] = set()  # runs a life saw its agent return in
        while len(finished) < self.settings.rounds or await self._left(slot, journal, returned):
            lives = await self.races.live(self.world, slot)  # one, or several racing
            slot.poke()
            # A run is done when the journal says it finished (a kill may land after its
            # end was committed, before the daemon logged it), or when the daemon logged
            # that its agent returned (under --break finished-run, the journal never says
            # so, and the next life goes through the same run again).
            for life in lives:
                for run_id in life.runs:
                    run = await _reachable(lambda run_id=run_id: journal.get_run(run_id))
                    if run.state is RunState.FINISHED:
                        finished.add(run_id)
                if life.returned and life.runs:
                    returned.add(life.runs[-1])
                if life.returned and not (life.runs and life.runs[-1] in finished):
                    finished.add(f"returned in life {life.number}")
            # And every run the journal says finished: a life killed soon after its run
            # ended may not have logged the run at all (its log lines still queued), and
            # starting it again would begin a run the fleet never asked for.
            ended = await _reachable(
                lambda: journal.runs(states=[RunState.FINISHED], agent=slot.name)
            )
            finished.update(overview.run.id for overview in ended)
            slot.rounds_done = len(finished)
            # The life that ran the agent (a race's losers exit 2 at once).
            life = next((life for life in lives if life.code != 2), lives[-1])
            code = life.code
            if code == 0 or life.killed is not None:
                await anyio.sleep(self.rng.uniform(0, self.settings.restart_delay))
            else:  # refused (exit 2: the old life looked alive), or failed: noted
                await anyio.sleep(1.0)
        slot.done = True
        slot.poke()

    async def _left(self, slot: Slot, journal: Journal, returned: set[str]) -> bool:
        """The agent has an unfinished run that no life saw it return in: one a slow racer
        started (see the ledger) and a kill cut; it is resumed and finished like the others
        (under ``--break finished-run`` the run whose agent returned is not, or it would
        never end)."""
        run = await _reachable(lambda: journal.unfinished_run(slot.name))
        return run is not None and run.id not in returned

    async def supervise_inbox(self, slot: Slot, ready: anyio.Event) -> None:
        """Keep the inbox serving until the fleet is done; start it again after a kill."""
        while not self.stopping:
            life = await self.world.start(slot)

            def serving(life: Life) -> None:
                self.token = (life.serving or "").split("?token=")[-1]
                slot.poke()
                if all(s.current and s.current.serving for s in self.inboxes):
                    ready.set()

            await read_life(life, serving)
            slot.poke()
            if not self.stopping:
                await anyio.sleep(self.rng.uniform(0, self.settings.restart_delay))

    def base(self, index: int) -> str | None:
        life = self.inboxes[index].current
        if life is None or life.serving is None:
            return None
        return life.serving.split("/?token=")[0]

    # -- answering ----------------------------------------------------------------------------

    async def watch(self, client: httpx.AsyncClient, group: anyio.abc.TaskGroup) -> None:
        """List both inboxes every ``poll`` seconds; answer what is pending and new."""
        while not self.stopping:
            listed: dict[str, dict[str, Any]] = {}
            for index in range(2):
                base = self.base(index)
                if base is None:
                    continue
                try:
                    reply = await client.get(f"{base}/api/questions")
                except httpx.HTTPError:
                    continue
                if reply.status_code != 200:
                    continue
                for question in reply.json()["questions"]:
                    if question.get("state") != "pending":
                        continue
                    ask_id = question["id"]
                    listed[ask_id] = question
                    if ask_id not in self.handling and ask_id not in self.decided:
                        self.handling.add(ask_id)
                        group.start_soon(self.answer, client, question)
            self.listed = listed  # what is pending now, as both inboxes say
            self.relisted.set()
            self.relisted = anyio.Event()
            await anyio.sleep(self.settings.poll)

    def _kill_share(self) -> float:
        """How far the kills are: the smaller of the daemon and inbox kills' shares."""
        settings, kills = self.settings, self.ledger.kills
        return min(
            (kills["daemon"] + kills["window"]) / max(1, settings.daemon_kills),
            kills["inbox"] / max(1, settings.inbox_kills),
            1.0,
        )

    def _answer_share(self) -> float:
        return min(self.ledger.wins / self.settings.expected, 1.0)

    def _allowed(self) -> bool:
        """Answers and kills keep pace: no more than their share of the questions is
        answered before the same share of the kills happened (and the killer waits for
        the answers the same way)."""
        return self._answer_share() < self._kill_share() + PACE_SLACK

    async def answer(self, client: httpx.AsyncClient, listed: dict[str, Any]) -> None:
        ask_id, question = str(listed["id"]), _text(listed)
        try:
            await anyio.sleep(self.rng.uniform(0, self.settings.answer_delay))
            while not self._allowed() and not self.stopping:
                await self.paced.wait()
            if listed["run"]["agent"] in self.reserved:
                return  # the killer freezes this agent and answers it: listed again later
            self.posting.add(ask_id)
            live = [index for index in range(2) if self.base(index) is not None]
            if not live:
                return  # both inboxes are being restarted: listed again later
            both = len(live) == 2 and self.rng.random() < self.settings.both_share
            targets = live if both else [self.rng.choice(live)]
            attempts = [
                self.attempt(ask_id, question, index, "both" if both else "one")
                for index in targets
            ]
            async with anyio.create_task_group() as group:
                for attempt in attempts:
                    group.start_soon(self.post, client, attempt, 10.0)
            if any(
                a.status == 200 or a.code in ("ALREADY_ANSWERED", "NOT_PENDING") for a in attempts
            ):
                self.decided.add(ask_id)
        finally:
            self.handling.discard(ask_id)
            self.posting.discard(ask_id)

    def attempt(self, ask_id: str, question: str, inbox: int, mode: str) -> Attempt:
        """An answer to post: it names its question, and is unique."""
        self.serial += 1
        return Attempt(ask_id, inbox, f"{ask_id}|{question}|inbox {inbox}|{self.serial}", mode)

    async def post(self, client: httpx.AsyncClient, attempt: Attempt, timeout: float) -> None:
        base = self.base(attempt.inbox)
        if base is None:
            attempt.error = "inbox down"
        else:
            try:
                reply = await client.post(
                    f"{base}/api/questions/{attempt.ask_id}/answer",
                    json={"text": attempt.text},
                    timeout=timeout,
                )
            except httpx.HTTPError as error:
                attempt.error = type(error).__name__
            else:
                attempt.status = reply.status_code
                if reply.status_code != 200:
                    body = reply.json().get("error", {})
                    attempt.code = body.get("code")
                    # The winner's answer, one item per question (one question here).
                    (shown, *_) = (body.get("answer") or {}).get("answers") or [{}]
                    attempt.shown = shown.get("text") or next(iter(shown.get("labels") or []), None)
        self.ledger.answered(attempt)

    # -- the killer ---------------------------------------------------------------------------

    async def killer(self, client: httpx.AsyncClient, journal: Journal) -> None:
        settings, kills = self.settings, self.ledger.kills
        inbox_share = settings.inbox_kills / max(1, settings.inbox_kills + settings.daemon_kills)
        while not self.stopping:
            await anyio.sleep(self.rng.expovariate(1 / settings.kill_interval))
            if self.down:
                continue  # the window kills read the journal: not while it is stopped
            if self._kill_share() >= 1.0 and self.rng.random() < 0.5:
                continue  # past the targets: kills go on, at half the rate
            if self._kill_share() > self._answer_share() + PACE_SLACK:
                continue  # ahead of the answers
            if self.rng.random() < inbox_share:
                life = self.inboxes[self.rng.randrange(2)].current
                if life is not None and life.serving is not None and kill(life):
                    kills["inbox"] += 1
            else:
                running = [slot.current for slot in self.agents if slot.current is not None]
                if not running:
                    continue
                life = self.rng.choice(running)
                done = kills["daemon"] + kills["window"]
                if kills["window committed"] < settings.window_share * (done + 1):
                    asking = [life for life in running if self.open_question(life) is not None]
                    await self.kill_in_window(client, journal, self.rng.choice(asking or running))
                elif kill(life):
                    kills["daemon"] += 1
            self.paced.set()
            self.paced = anyio.Event()

    async def outages(self) -> None:
        """Stop the PostgreSQL server for 1-3 s, ``outages`` times, while the fleet works."""
        server, settings = self.server, self.settings
        if server is None or settings.engine != "postgresql":
            return
        rng = random.Random(settings.seed * 31 + 7)
        for _ in range(settings.outages):
            await anyio.sleep(rng.expovariate(1 / settings.outage_interval))
            if self.stopping:
                return
            self.down = True
            down_at = time.time()
            try:
                await anyio.to_thread.run_sync(server._pg_ctl, "stop", "-m", "fast")
                await anyio.sleep(rng.uniform(1.0, 3.0))
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(server._pg_ctl, "start")
                self.down = False
            self.ledger.kills["journal outage"] += 1
            self.ledger.outages.append((down_at, time.time()))

    def open_question(self, life: Life) -> dict[str, Any] | None:
        """The question the life's agent has open, as last listed, and no answer is on its
        way to (none: not known)."""
        found = None
        for question in self.listed.values():
            run: Any = question["run"]
            ask_id = question["id"]
            if run["agent"] == life.slot and ask_id not in self.decided:
                found = None if ask_id in self.posting else question
        return found

    async def kill_in_window(self, client: httpx.AsyncClient, journal: Journal, life: Life) -> None:
        """Freeze the daemon while its question is open, answer it in an inbox, kill it: the
        answer is committed and the agent never received it (the journal is asked while
        the daemon is still frozen: pending at the freeze, answered before the kill).

        The answering clients leave the agent's questions alone meanwhile; its open
        question is waited for (at most 2 s: a daemon starting up has none yet)."""
        self.reserved.add(life.slot)
        try:
            with anyio.move_on_after(2.0):
                while life.alive and self.open_question(life) is None:
                    await self.relisted.wait()
            question = self.open_question(life)
            if not freeze(life):
                return
            live = [index for index in range(2) if self.base(index) is not None]
            committed, why = False, "no open question known"
            if question is not None and live:
                ask_id = str(question["id"])
                attempt = self.attempt(ask_id, _text(question), self.rng.choice(live), "window")
                why = "journal busy (frozen inside a write)"
                with anyio.move_on_after(2.0):  # a daemon frozen inside its own SQLite write
                    why = "answered before the freeze"
                    if (await _reachable(lambda: journal.get_ask(ask_id))).pending:
                        await self.post(client, attempt, 2.0)
                        asked = await _reachable(lambda: journal.get_ask(ask_id))
                        committed = asked.state is AskState.ANSWERED
                        if committed:
                            self.decided.add(ask_id)
                        why = f"the answer was refused ({attempt.status} {attempt.code})"
            if not kill(life, "window"):  # it had exited before it was frozen
                return
        finally:
            self.reserved.discard(life.slot)
        if not committed:
            self.ledger.kills[f"window missed: {why}"] += 1
        self.ledger.kills["window"] += 1
        if committed:
            self.ledger.kills["window committed"] += 1

    async def progress(self, started: float) -> None:
        """A line on stderr every 10 s: how far the torture is."""
        kills = self.ledger.kills
        while True:
            await anyio.sleep(10)
            done = sum(slot.rounds_done for slot in self.agents)
            print(
                f"  {time.monotonic() - started:6.1f} s: {self.ledger.wins} answers recorded, "
                f"{done} of {self.settings.rounds * len(self.agents)} runs done, "
                f"{kills['daemon'] + kills['window']} daemon and {kills['inbox']} inbox kills",
                file=sys.stderr,
                flush=True,
            )

    # -- the whole ---------------------------------------------------------------------------

    async def run(self) -> Report:
        settings = self.settings
        started = time.monotonic()
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=16)
        async with anyio.create_task_group() as group:
            ready = anyio.Event()
            for slot in self.inboxes:
                group.start_soon(self.supervise_inbox, slot, ready)
            with anyio.fail_after(60):
                await ready.wait()
            async with (
                httpx.AsyncClient(
                    headers={"x-hotseam-token": self.token}, limits=limits, timeout=10.0
                ) as client,
                open_journal(self.world.url) as journal,
                anyio.create_task_group() as work,
            ):
                work.start_soon(self.watch, client, work)
                work.start_soon(self.killer, client, journal)
                work.start_soon(self.outages)
                work.start_soon(self.progress, started)
                with anyio.move_on_after(settings.timeout) as deadline:
                    async with anyio.create_task_group() as agents:
                        for slot in self.agents:
                            agents.start_soon(self.supervise_agent, slot, journal)
                self.stopping = True
                self.paced.set()
                work.cancel_scope.cancel()
            for slot in self.inboxes:  # a clean stop
                life = slot.current
                if life is not None:
                    os.kill(life.pid, signal.SIGTERM)
        if deadline.cancelled_caught:
            for slot in self.agents:
                if slot.current is not None:
                    kill(slot.current)
        async with open_journal(self.world.url) as journal:
            report = await check(
                journal, self.agents, self.inboxes, self.ledger, settings, self.races.races
            )
        self.races.check(report.counts, report.examples)
        if deadline.cancelled_caught:
            report.bad("missing: the fleet did not finish in time", f"{settings.timeout} s")
        report.seconds = time.monotonic() - started
        if dump := os.environ.get("HOTSEAM_FLEET_DUMP"):  # every life, for a post-mortem
            _dump(Path(dump), self.agents + self.inboxes, self.ledger.outages)
        return report


def _dump(path: Path, slots: list[Slot], outages: list[tuple[float, float]]) -> None:
    """Every life of every slot as JSON lines: what it logged, printed and how it ended."""
    import json

    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"outages (wall clock)": outages}) + "\n")
        for slot in slots:
            for life in slot.lives:
                fields = {
                    "slot": slot.name, "life": life.number, "pid": life.pid,
                    "started": life.started, "ended": life.ended, "code": life.code,
                    "killed": life.killed, "events": life.events, "stdout": life.stdout,
                    "problems": life.problems,
                }  # fmt: skip
                out.write(json.dumps(fields, default=str) + "\n")


def new_schema(url: str) -> str:
    """A URL of the database at ``url`` whose tables go to a new, empty schema (the
    journal's tables are made in the connection's current schema)."""
    import psycopg

    name = "hotseam_bench_" + uuid.uuid4().hex[:10]
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {name}")
    option = quote(f"-csearch_path={name}", safe="")
    return f"{url}{'&' if '?' in url else '?'}options={option}"


@asynccontextmanager
async def journal_url(
    settings: FleetSettings, folder: Path, postgres: str | None
) -> AsyncIterator[tuple[str, Any]]:
    """The journal of the torture — a new schema of PostgreSQL, or a new SQLite file — and
    the PostgreSQL server when it is the torture's own (``None`` otherwise)."""
    if settings.engine == "sqlite":
        yield str(folder / "journal.sqlite3"), None
        return
    if postgres is not None:
        yield await anyio.to_thread.run_sync(new_schema, postgres), None
        return
    sys.path.insert(0, str(TESTS))
    sys.path.insert(0, str(TESTS.parent))  # it imports tests._timing
    from _postgres import PostgresServer  # type: ignore[import-not-found]

    server = await anyio.to_thread.run_sync(PostgresServer.start)
    try:
        yield server.new_schema(), server
    finally:
        server.stop()


async def run_torture(
    settings: FleetSettings, folder: Path, url: str, server: Any = None
) -> Report:
    """One torture in ``folder`` on the journal at ``url`` (for tests and main); with
    ``server`` (a ``tests/_postgres.py`` server), the journal outages too."""
    world = World(folder, url, settings)
    return await Fleet(world, settings, server).run()


def _text(listed: dict[str, Any]) -> str:
    """What an inbox card asks: the text of each of its questions."""
    return " / ".join(str(item["question"]) for item in listed["questions"])


async def _reachable(read: Any) -> Any:
    """``read()`` (a journal read of the torture itself), tried again while the journal is
    out of reach (an outage)."""
    return await patient(read, pause=0.2)


async def main(settings: FleetSettings, postgres: str | None) -> int:
    print(
        f"# hotseam fleet torture — {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {platform.system()} {platform.release()}"
    )
    for name in settings.breaks:
        print(f"BROKEN on purpose: {name}: {BREAKS[name][0]}")
    with tempfile.TemporaryDirectory(prefix="hotseam-fleet-") as folder:
        async with journal_url(settings, Path(folder), postgres) as (url, server):
            report = await run_torture(settings, Path(folder), url, server)
    print(report.render())
    return 0 if report.ok else 1


def _arguments() -> tuple[FleetSettings, str | None]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    defaults = FleetSettings()
    parser.add_argument("--engine", choices=["postgresql", "sqlite"], default=defaults.engine)
    parser.add_argument("--questions", type=int, default=defaults.questions)
    parser.add_argument("--daemons", type=int, default=defaults.daemons)
    parser.add_argument("--agents", type=int, default=defaults.agents, help="per daemon")
    parser.add_argument("--per-run", type=int, default=defaults.per_run)
    parser.add_argument("--daemon-kills", type=int, default=defaults.daemon_kills)
    parser.add_argument("--inbox-kills", type=int, default=defaults.inbox_kills)
    parser.add_argument("--kill-interval", type=float, default=defaults.kill_interval)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--timeout", type=float, default=defaults.timeout)
    parser.add_argument(
        "--outages",
        type=int,
        default=defaults.outages,
        help="times the torture's own PostgreSQL server is stopped for 1-3 s",
    )
    parser.add_argument("--postgres", help="a PostgreSQL URL to use instead of a new server")
    parser.add_argument("--break", dest="breaks", action="append", default=[], metavar="NAME")
    options = parser.parse_args()
    if "list" in options.breaks:
        for name, (what, _) in BREAKS.items():
            print(f"{name}: {what}")
        raise SystemExit(0)
    settings = replace(
        defaults,
        engine=options.engine,
        questions=options.questions,
        daemons=options.daemons,
        agents=options.agents,
        per_run=options.per_run,
        daemon_kills=options.daemon_kills,
        inbox_kills=options.inbox_kills,
        kill_interval=options.kill_interval,
        seed=options.seed,
        timeout=options.timeout,
        outages=options.outages,
        breaks=tuple(options.breaks),
    )
    return settings, options.postgres


if __name__ == "__main__":
    chosen, given = _arguments()
    sys.exit(anyio.run(main, chosen, given))
