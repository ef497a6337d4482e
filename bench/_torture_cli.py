"""The daemon torture against a real ``hotseam run`` (``bench/torture_daemon.py --cli``).

A ``hotseam run providers --agent agent.py --deletion-grace G --provider-wait W`` child, in a
git repository (``providers/`` untracked), its control socket in a folder of its own:

* **the agent** (``agent.py``) asks continuously from four tasks through the
  ``ask_user_question`` tool and appends each question, answer and failure code to
  ``ledger/asks.log``;
* **the provider** (``providers/torture_ui.py``, importing ``providers/torture_words.py``)
  answers after 0-30 ms, appends what it returned to ``ledger/answers.log``, carries a
  counter and a listening socket (``scope.carry``) and connects through the socket on three
  asks in ten; each setup, disposer run and carried value made or disposed leaves a marker
  file (created exclusively: a second run of a disposer leaves an ``again`` marker);
* **the harness** makes ``--edits`` steps: ordinary edits (valid versions, atomic saves,
  syntax errors, exceptions in ``setup``, the helper saved or broken, the counter's version
  changed, the listener dropped and carried again, the provider deleted or renamed away),
  SIGHUP in one step of ten (its "SIGHUP: N module(s) reloaded" line must follow), and
  episodes in one of ten, their kinds taken in turns — the
  provider deleted or renamed away and back within the grace and past it, the folder
  removed and made again, deployed by renames, moved away and back within and past the
  grace, taken by ``git stash -u`` and brought back by ``git stash pop`` — each started
  from a quiet, converged state (good content back, a barrier module's commit in the log,
  an answer of the version on disk) and followed by convergence: within ``converge_within``
  seconds an ask made after the folder settled is answered by the version on disk;
* **a client thread** hammers the control socket meanwhile: ``status`` and ``reload``
  requests (the protocol ``hotseam status``/``reload`` speak, and now and then the real
  commands), the hostile lines of ``bench/control_flood.py`` (deep nesting, random bytes,
  64 KB without a newline, clients that hang up or never read), and bursts of 80 idle
  connections (more than the 64 it serves at once) with a status request among them.
  Reload requests land at any moment, an episode's files away included (a module within
  its grace must survive them: ``tests/reload/test_deletion_grace_plans.py``); they wait only
  while a SIGHUP's reload is checked.

At the end the good content is put back, converged, and SIGTERM sent.

**Must be 0**: the daemon exited before SIGTERM, or not with 0 then; an answer returned by a
provider and not received by the agent (*discarded*), or returned twice (*given twice*); an
answer to another question; a failure other than ``NO_PROVIDER``/``ASK_ABORTED`` while, by
the daemon's own log, no provider module was active at some moment of the ask
(*unexplained*); an ask with no outcome at SIGTERM that started more than ``hang_after``
before (*hung*; the last ask of each task is cut by the stop); a control request not
answered, a status not ok, a hostile line without exactly one reply line, a real
``hotseam status``/``reload`` that failed, a SIGHUP not followed by its reload; a disposer
not run exactly once, a carried value not disposed exactly once, a carried socket found
closed while carried; a module unloaded, or a question lost, within the grace; a module not
unloaded past it; an episode that did not converge; an error-level log line other than a
refused save (``reload.aborted``).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from _torture_cli_world import CliFiles, Ledgers
from _torture_ledger import Report, Settings
from control_flood import exchange, hostile_line

from hotseam.cli._control_client import ControlError, Endpoint, request

__all__ = ["CLI_ZERO", "CliSettings", "run_cli"]

CLI_ZERO = (
    "daemon exited before SIGTERM",
    "exit status at SIGTERM not 0",
    "answers discarded",
    "answers given twice",
    "wrong question",
    "unexplained failures",
    "asks hung",
    "control requests unanswered",
    "hostile lines without one reply",
    "hotseam status/reload commands failed",
    "SIGHUP without its reload",
    "disposers not run exactly once",
    "carried values not disposed exactly once",
    "carried socket closed while still carried",
    "unloaded within the grace",
    "questions lost within the grace",
    "not unloaded past the grace",
    "did not converge to the files",
    "unexpected error log lines",
)
STEPS: dict[str, int] = {
    "provider: valid version": 14,
    "provider: atomic save": 8,
    "provider: syntax error": 6,
    "provider: exception in setup": 5,
    "provider: deleted": 3,
    "provider: renamed away": 3,
    "helper: valid version": 8,
    "helper: syntax error": 3,
    "carry: counter version changed": 4,
    "carry: listener dropped or carried again": 3,
    "SIGHUP": 7,
    "episode": 7,
}
EPISODES = (
    "grace: deleted, back within the grace",
    "grace: deleted, back past the grace",
    "grace: renamed away, back within the grace",
    "grace: renamed away, back past the grace",
    "folder: rm -rf and made again",
    "folder: atomic deploy by renames",
    "folder: moved away, back within the grace",
    "folder: moved away, back past the grace",
    "folder: git stash -u, pop within the grace",
    "folder: git stash -u, pop past the grace",
)
"""Taken in turns, each round in a new random order: every kind is tried in a run of 200."""


@dataclass(frozen=True)
class CliSettings(Settings):
    edits: int = 200
    grace: float = 0.5
    provider_wait: float = 1.0
    converge_within: float = 10.0
    hang_after: float = 30.0
    git: bool = True


class Daemon:
    """The ``hotseam run`` child and its log, read as it comes (one JSON object a line)."""

    def __init__(self, project: Path, settings: CliSettings) -> None:
        env = {
            **os.environ,
            "HOTSEAM_RUNTIME_DIR": str(project / "rt"),
            "XDG_STATE_HOME": str(project / "state"),
            "NO_COLOR": "1",
            "PYTHONUNBUFFERED": "1",
        }
        command = [sys.executable, "-m", "hotseam", "run", "providers", "--agent", "agent.py"]
        command += ["--deletion-grace", str(settings.grace), "--name", "torture"]
        command += ["--provider-wait", str(settings.provider_wait), "--dispose-timeout", "2"]
        self.child = subprocess.Popen(
            command,
            cwd=project,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.env = env
        self.project = project
        self.events: list[tuple[float, dict[str, object]]] = []
        self.other_lines: list[str] = []
        self.socket: Path | None = None
        self.started = threading.Event()
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.child.stderr is not None
        for line in self.child.stderr:
            try:
                event = json.loads(line)
            except ValueError:
                self.other_lines.append(line)
                continue
            when = datetime.fromisoformat(str(event.get("timestamp"))).timestamp()
            with self.lock:
                self.events.append((when, event))
            text = str(event.get("event", ""))
            if text.startswith("control socket: ") and not self.started.is_set():
                self.socket = Path(text.removeprefix("control socket: ").split(" ", 1)[0])
                self.started.set()

    def since(self, index: int) -> list[tuple[float, dict[str, object]]]:
        with self.lock:
            return self.events[index:]

    def mark(self) -> int:
        """Where the log is now (what comes later is read from here)."""
        with self.lock:
            return len(self.events)

    def committed_since(self, index: int, name: str) -> bool:
        """The log says ``name`` was (re)loaded after line ``index``."""
        return any(
            e.get("event") == "reload.committed" and e.get("module") == name
            for _, e in self.since(index)
        )

    def unloaded(self, index: int, start: float, end: float) -> list[str]:
        """Modules whose generation the log says was unloaded between ``start`` and ``end``
        (looked at from line ``index`` on)."""
        return [
            str(e.get("module"))
            for at, e in self.since(index)
            if start <= at <= end and e.get("event") == "reload.unloaded" and e.get("generation")
        ]

    def no_provider_moments(self) -> list[tuple[float, float]]:
        """Intervals during which, by the log, no provider module was active."""
        active: set[str] = set()
        empty_since: float | None = None
        gaps: list[tuple[float, float]] = []
        for at, e in self.since(0):
            kind, module = e.get("event"), str(e.get("module"))
            if kind == "reload.committed" and e.get("module_kind") == "provider":
                active.add(module)
            elif kind == "reload.unloaded" or (
                kind == "reload.aborted" and e.get("kept_generation") is None
            ):
                active.discard(module)
            else:
                continue
            if not active and empty_since is None:
                empty_since = at
            elif active and empty_since is not None:
                gaps.append((empty_since, at))
                empty_since = None
        if empty_since is not None:
            gaps.append((empty_since, float("inf")))
        return gaps

    def alive(self) -> bool:
        return self.child.poll() is None


class Client(threading.Thread):
    """Hammers the control socket until stopped; counts what went wrong."""

    def __init__(self, daemon: Daemon, report: Report, seed: int) -> None:
        super().__init__(daemon=True)
        self.daemon_process = daemon
        self.report = report
        self.rng = random.Random(seed)
        self.stopping = threading.Event()
        self.counts = report.section("control socket")
        self.gate = threading.Lock()
        """Held by a reload request while it runs, and by the harness to check a SIGHUP."""
        self.held = threading.Event()
        """Set while a SIGHUP's reload is checked: reload requests wait."""

    def reloading(self) -> bool:
        """Take the gate for a reload request; False (gate released) while reloads are held."""
        self.gate.acquire()
        if self.held.is_set():
            self.gate.release()
            self.counts["reloads held while a SIGHUP was checked"] += 1
            return False
        return True

    def hold_reloads(self) -> None:
        """From now until ``release_reloads``, no reload request starts (one running ends
        first)."""
        with self.gate:
            self.held.set()

    def release_reloads(self) -> None:
        self.held.clear()

    def run(self) -> None:
        while not self.stopping.is_set():
            roll = self.rng.random()
            try:
                if roll < 0.35:
                    self.status()
                elif roll < 0.45:
                    self.reload()
                elif roll < 0.85:
                    self.hostile()
                elif roll < 0.9:
                    self.idle_burst()
                else:
                    self.command()
            except Exception as error:  # a bug of the harness must be seen, not hang the run
                self.report.problems.append(f"the control client crashed: {error!r}")
                return
            self.stopping.wait(self.rng.uniform(0.01, 0.08))

    @property
    def endpoint(self) -> Endpoint:
        assert self.daemon_process.socket is not None
        return Endpoint(self.daemon_process.child.pid, self.daemon_process.socket)

    def ask(self, message: dict[str, object], what: str) -> object:
        try:
            reply = request(self.endpoint, message)
        except ControlError as error:
            self.report.count("control requests unanswered", f"{what}: {error}")
            return None
        if not isinstance(reply, dict) or "ok" not in reply:
            self.report.count("control requests unanswered", f"{what}: replied {reply!r}")
            return None
        return reply

    def status(self) -> None:
        self.counts["status requests"] += 1
        reply = self.ask({"op": "status"}, "status")
        if isinstance(reply, dict) and not reply.get("ok"):
            self.report.count("control requests unanswered", f"status not ok: {reply}")

    def reload(self) -> None:
        paths = [] if self.rng.random() < 0.5 else ["providers/torture_ui.py"]
        if not self.reloading():
            return
        try:
            self.counts["reload requests"] += 1
            self.ask({"op": "reload", "paths": paths}, f"reload {paths}")
        finally:
            self.gate.release()

    def hostile(self) -> None:
        data, read = hostile_line(self.rng)
        raw = exchange(str(self.endpoint.path), data, read)
        self.counts["hostile lines"] += 1
        if read and (raw is None or raw.count(b"\n") != 1):
            self.report.count("hostile lines without one reply", f"{data[:40]!r} got {raw!r}")

    def idle_burst(self) -> None:
        """80 idle connections (it serves 64 at once), a status among them, then let go."""
        idle = []
        try:
            for _ in range(80):
                client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                idle.append(client)
                client.connect(str(self.endpoint.path))
            self.counts["idle bursts (80 connections)"] += 1
            self.status()
            self.stopping.wait(self.rng.uniform(0.1, 1.0))
        except OSError as error:
            self.report.count("control requests unanswered", f"idle connection: {error}")
        finally:
            for client in idle:
                client.close()

    def command(self) -> None:
        """The real ``hotseam status --json`` or ``hotseam reload``."""
        args = ["status", "--json", "torture"] if self.rng.random() < 0.5 else ["reload"]
        args += [] if args[0] == "status" else ["--to", "torture"]
        if args[0] == "reload" and not self.reloading():
            return
        try:
            done = subprocess.run(
                [sys.executable, "-m", "hotseam", *args],
                cwd=self.daemon_process.project,
                env=self.daemon_process.env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        finally:
            if args[0] == "reload":
                self.gate.release()
        self.counts[f"hotseam {args[0]} commands"] += 1
        allowed = (0,) if args[0] == "status" else (0, 1)  # reload: 1 when a module failed
        ok = done.returncode in allowed
        if ok and args[0] == "status":
            ok = json.loads(done.stdout).get("ok") is True
        if ok and done.returncode == 1:
            ok = "failed" in done.stdout + done.stderr
        if not ok:
            self.report.count(
                "hotseam status/reload commands failed",
                f"{args}: exit {done.returncode}: {(done.stdout + done.stderr)[-300:]!r}",
            )


class CliTorture:
    """One run against a real ``hotseam run``."""

    def __init__(self, project: Path, settings: CliSettings) -> None:
        self.project = project
        self.settings = settings
        self.rng = random.Random(settings.seed)
        self.report = Report(
            settings, "hotseam run", title="Daemon torture (CLI)", zero_names=CLI_ZERO
        )
        self.ledgers = Ledgers(project / "ledger")
        self.files = CliFiles(project, self.ledgers.folder, random.Random(settings.seed + 1))
        self.windows: list[tuple[str, float, float]] = []  # within-the-grace episodes
        self.converged: list[float] = []  # seconds from a folder settled to converged
        self.episodes: list[str] = []  # the kinds left in this round
        self.daemon: Daemon | None = None
        self.client: Client | None = None
        self.stopped = 0.0

    def run(self) -> Report:
        started = time.perf_counter()
        self.files.create(git=self.settings.git)
        self.daemon = daemon = Daemon(self.project, self.settings)
        self.client = client = Client(daemon, self.report, self.settings.seed + 2)
        try:
            if not daemon.started.wait(60) or self.wait_answer(time.time(), 60) is None:
                self.report.problems.append("the daemon did not start answering")
                return self.report
            client.start()
            for _ in range(self.settings.edits):
                if not daemon.alive():
                    break
                self.step()
            client.stopping.set()
            client.join(120)
            if daemon.alive():
                self.quiesce("after the last step")
        finally:
            client.stopping.set()
            self.stop(daemon)
            self.report.seconds = time.perf_counter() - started
        self.tally(daemon)
        return self.report

    # -- steps ------------------------------------------------------------------------------------

    def step(self) -> None:
        kind = self.rng.choices(list(STEPS), list(STEPS.values()))[0]
        if kind == "SIGHUP":
            self.sighup()
        elif kind == "episode":
            if not self.episodes:
                self.episodes = [k for k in EPISODES if self.settings.git or "git" not in k]
                self.rng.shuffle(self.episodes)
            kind = self.episodes.pop()
            self.report.edits[kind] += 1
            self.episode(kind)
            return
        else:
            self.report.edits[self.files.edit(kind)] += 1
        time.sleep(self.rng.uniform(0.02, 0.3))

    def sighup(self) -> None:
        """SIGHUP reloads every module, unchanged ones too: within 10 s its "SIGHUP: N
        module(s) reloaded" line, and a new generation of the barrier module (never changed
        between two SIGHUPs; reload requests are held meanwhile, so only SIGHUP reloads it)."""
        assert self.daemon is not None
        assert self.client is not None
        self.client.hold_reloads()
        try:
            index = self.daemon.mark()
            self.daemon.child.send_signal(signal.SIGHUP)
            self.report.edits["SIGHUP (every module reloaded)"] += 1
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline and self.daemon.alive():
                said = [str(e.get("event", "")) for _, e in self.daemon.since(index)]
                if any(line.startswith("SIGHUP: ") and " reloaded" in line for line in said):
                    if not self.daemon.committed_since(index, "torture_barrier"):
                        shown = [line for line in said if line.startswith("SIGHUP")]
                        self.report.count(
                            "SIGHUP without its reload", f"{shown}: the barrier module not reloaded"
                        )
                    return
                time.sleep(0.02)
            self.report.count("SIGHUP without its reload", "no 'SIGHUP: N module(s) reloaded'")
        finally:
            self.client.release_reloads()

    def episode(self, kind: str) -> None:
        """Quiet and converged first; the edits; converged again; what the grace says of
        the window."""
        if not self.quiesce(f"before '{kind}'"):
            return
        assert self.daemon is not None
        files, rng = self.files, self.rng
        within = "past" not in kind
        new = rng.random() < 0.5
        index = self.daemon.mark()
        started = time.time()
        if kind.startswith("grace: deleted"):
            source = files.ui.read_text(encoding="utf-8")
            files.ui.unlink()
            self.away(within, index, folder=False)
            files.write_ui(files.next_version() if new else source)
        elif kind.startswith("grace: renamed away"):
            moved = files.ui.with_name("torture_ui.py.moved")
            os.replace(files.ui, moved)
            self.away(within, index, folder=False)
            if new:
                moved.write_text(files.next_version(), encoding="utf-8")
            os.replace(moved, files.ui)
        elif kind == "folder: rm -rf and made again":
            files.remake(new_version=new)
        elif kind == "folder: atomic deploy by renames":
            files.deploy(new_version=new)
        elif kind.startswith("folder: moved away"):
            away = files.move_away()
            self.away(within, index, folder=True)
            files.move_back(away, new_version=new)
        elif kind.startswith("folder: git stash"):
            files.git("stash", "push", "--include-untracked", "--quiet", "--", "providers")
            self.away(within, index, folder=True)
            files.git("stash", "pop", "--quiet")
        else:
            raise ValueError(f"unknown episode {kind!r}")
        if self.converge(kind, time.time()) and within:
            # The window stays open past the grace and the folders' check (1 s in hotseam
            # run): a module unloaded at the end of its grace falls inside it.
            time.sleep(max(0.0, started + self.settings.grace + 1.2 - time.time()))
            self.quiesce(f"{kind}, once past the grace")
        ended = time.time()
        self.report.section("episodes")["episodes"] += 1
        if within:
            self.windows.append((kind, started, ended))
            for module in self.daemon.unloaded(index, started, ended):
                self.report.count("unloaded within the grace", f"{kind}: {module}")

    def away(self, within: bool, index: int, *, folder: bool) -> None:
        """Within the grace: gone a moment. Past it: gone until the log says unloaded."""
        grace = self.settings.grace
        if within:
            time.sleep(self.rng.uniform(0, 0.4 * grace))
            return
        assert self.daemon is not None
        bound = grace + (1.0 if folder else 0.0) + 5.0  # hotseam run checks folders each 1 s
        deadline = time.monotonic() + bound
        while time.monotonic() < deadline:
            if "torture_ui" in self.daemon.unloaded(index, 0.0, float("inf")):
                return
            time.sleep(0.02)
        self.report.count("not unloaded past the grace", f"still loaded {bound:g} s after")

    def quiesce(self, what: str) -> bool:
        """Good content back, a barrier module's commit in the log, converged."""
        assert self.daemon is not None
        self.files.restore()
        index = self.daemon.mark()
        name = self.files.write_barrier()
        deadline = time.monotonic() + self.settings.converge_within
        while not self.daemon.committed_since(index, name):
            if time.monotonic() > deadline or not self.daemon.alive():
                self.report.count("did not converge to the files", f"{what}: no barrier commit")
                return False
            time.sleep(0.02)
        return self.converge(what, time.time())

    def converge(self, what: str, settled: float) -> bool:
        """An ask made after ``settled`` is answered by the version on disk, in time."""
        took = self.wait_answer(settled, self.settings.converge_within)
        if took is None:
            expected = self.files.expected_suffix()
            self.report.count(
                "did not converge to the files",
                f"{what}: no answer ending {expected!r} within {self.settings.converge_within} s",
            )
            return False
        self.report.section("convergence")["converged"] += 1
        self.converged.append(took)
        return True

    def wait_answer(self, since: float, bound: float) -> float | None:
        """Seconds until an ask made after ``since`` got an answer of the version on disk."""
        expected = self.files.expected_suffix()
        deadline = time.monotonic() + bound
        while time.monotonic() < deadline:
            if self.ledgers.answered_since(since, expected):
                return time.time() - since
            if self.daemon is not None and not self.daemon.alive():
                return None
            time.sleep(0.02)
        return None

    # -- the end ----------------------------------------------------------------------------------

    def stop(self, daemon: Daemon) -> None:
        """SIGTERM (if it still runs): it must exit 0."""
        self.stopped = time.time()
        died = not daemon.alive()
        if not died:
            daemon.child.send_signal(signal.SIGTERM)
        try:
            code = daemon.child.wait(60)
        except subprocess.TimeoutExpired:
            daemon.child.kill()
            code = daemon.child.wait()
        daemon.reader.join(10)
        assert daemon.child.stderr is not None
        daemon.child.stderr.close()
        if died:
            last = [json.dumps(e)[:300] for _, e in daemon.since(0)[-3:]]
            self.report.count("daemon exited before SIGTERM", f"exit {code}; last lines {last}")
        elif code != 0:
            self.report.count("exit status at SIGTERM not 0", f"exit {code}")

    def tally(self, daemon: Daemon) -> None:
        self.ledgers.tally(
            self.report,
            daemon.no_provider_moments(),
            self.windows,
            self.stopped,
            self.settings.hang_after,
        )
        errors = [
            e
            for _, e in daemon.since(0)
            if e.get("level") == "error" and e.get("event") != "reload.aborted"
        ]
        for event in errors:
            self.report.count("unexpected error log lines", json.dumps(event)[:300])
        seen = Counter(str(e.get("event")) for _, e in daemon.since(0))
        self.report.section("daemon log")["lines"] = sum(seen.values())
        for name in ("reload.committed", "reload.aborted", "reload.unloaded", "log.dropped"):
            self.report.section("daemon log")[name] = seen[name]
        if self.converged:
            times = sorted(self.converged)
            self.report.figures["converged: n / median / max"] = (
                f"{len(times)} / {times[len(times) // 2]:.3f} s / {times[-1]:.3f} s"
            )


def run_cli(settings: CliSettings) -> int:
    with tempfile.TemporaryDirectory(prefix="torture-cli-") as tmp:
        report = CliTorture(Path(tmp), settings).run()
        print(report.render())
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if report.ok else 1
