"""Start-up: how long the commands take from a fresh interpreter, and where the time goes.

    .venv/bin/python bench/startup.py [--rounds 20] [--hog N]

Wall time of fresh processes, every command once per round in a random order, after one
round of warm-up (not counted); median and p95 over the rounds, and the median minus the
bare interpreter's (``python -c pass``); ``hotseam`` is the console script of the venv, as
a user runs it:

* ``import hotseam``, ``hotseam --help``;
* ``hotseam status PID`` of a running ``hotseam run`` (a round trip over its control
  socket);
* ``hotseam run providers --agent ... --no-journal`` until its agent prints the answer to
  its first question, from a provider module that answers at once: an agent that calls
  ``ask()``, and one that calls the ask tool (``context.tools.execute``, a dict parsed),
  as the built-in demo agent does.

**Bytecode is cached**: hotseam is compiled before the run, and the children run without
``PYTHONDONTWRITEBYTECODE``, so hotseam and every library load from their ``.pyc`` files
(the provider and agent modules of the project are compiled from source, as hotseam loads
watched modules). Then, for ``hotseam run`` and ``hotseam status``, where the milliseconds
go: ``-X importtime``'s self times summed by top-level package, beyond the bare
interpreter's own imports (median of 5 runs; that flag slows imports a little, so the sum
is an upper bound), beside the wall time and the bare interpreter; and ``hotseam run``
step by step from its own log lines. The header says when the run was made, on what and
under what load; the end line the load when it ended. ``--hog N`` runs N busy processes
beside the run (``bench/_hog.py``).

**The goals** (issue 36), each hotseam row interleaved with its alternative in the same
rounds, median and p95 and their ratio:

* ``hotseam run`` → first answer against **the floor**: a script with the same libraries
  doing the same job (anyio, a structlog JSON log, a pydantic model for the question and
  the answer, an inotify watch of the providers' folder, a Unix socket listening, the
  provider module compiled and executed, the question asked and answered); goal at most 1.15 times;
* ``hotseam mcp`` and ``hotseam acp``: spawn → the first answer (``initialize``, and
  ``server/discover`` for MCP, Claude Code's probe) against **a plain server on the same
  SDK** doing the same (the mcp SDK's low-level ``Server`` on its ``stdio_server`` with
  one tool; an acp SDK agent on ``run_agent``); goal at most 0.5 times, and inside Claude Code's 3 s
  probe budget (p95) under load.

``--only goals`` measures those rows alone (no breakdowns).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import hotseam
from _hog import add_hog_option, hog

PROVIDER = """\
from hotseam.interaction import USER_INTERACTION, AskUserQuestionAnswer


class Provider:
    async def ask(self, request):
        return AskUserQuestionAnswer("fine")


def setup(scope):
    scope.provide(USER_INTERACTION, Provider())
"""
ASK_AGENT = """\
import time

import anyio
from hotseam.interaction import AskUserQuestionRequest, ask


async def main(context):
    answer = await ask(AskUserQuestionRequest("How are you?"), context=context)
    print("answer:", answer.answer, time.process_time(), time.time(), flush=True)
    if {wait}:
        await anyio.sleep_forever()
"""
TOOL_AGENT = """\
import time


async def main(context):
    result = await context.tools.execute("ask_user_question", {"question": "How are you?"})
    print("answer:", result.output["answer"], time.process_time(), flush=True)
"""

TOOLS = '''\
from pydantic import BaseModel

from hotseam import ToolCall, tool


class Text(BaseModel):
    text: str


@tool()
async def echo(input: Text, call: ToolCall) -> str:
    """Return the text."""
    return input.text


def setup(scope):
    scope.register_tool(echo)
'''
FLOOR_PROVIDER = """\
class Provider:
    async def ask(self, question):
        return {"answer": "fine"}
"""
FLOOR = """\
import os, socket, sys, tempfile, time

import anyio
import inotify_simple
import structlog
from pydantic import BaseModel


class Question(BaseModel):
    question: str


class Answer(BaseModel):
    answer: str


async def serve(listener, log):
    async def one(stream):
        async with stream:
            log.info("control.request", data=(await stream.receive()).decode())
    await listener.serve(one)


async def main():
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    log = structlog.get_logger("floor")
    notify = inotify_simple.INotify()
    flags = inotify_simple.flags
    notify.add_watch("floor_providers", flags.CLOSE_WRITE | flags.MOVED_TO | flags.DELETE)
    folder = tempfile.mkdtemp()
    listener = await anyio.create_unix_listener(os.path.join(folder, "control.sock"))
    async with anyio.create_task_group() as group:
        group.start_soon(serve, listener, log)
        log.info("control socket", path=folder)
        path = os.path.join("floor_providers", "ui.py")
        with open(path, encoding="utf-8") as file:
            namespace = {"__name__": "ui"}
            exec(compile(file.read(), path, "exec"), namespace)
        provider = namespace["Provider"]()
        log.info("reload.committed", module="ui")
        question = Question(question="How are you?")
        answer = Answer.model_validate(await provider.ask(question))
        print("answer:", answer.answer, time.process_time(), time.time(), flush=True)
        group.cancel_scope.cancel()


anyio.run(main)
"""
PLAIN_MCP = """\
import anyio
import mcp_types as types
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.stdio import stdio_server

ECHO = types.Tool(
    name="echo",
    description="Return the text.",
    input_schema={
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]
    },
)


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[ECHO])


async def main():
    server = Server("plain", version="1", on_list_tools=list_tools)
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read, write):
        await server.run(read, write, options)


anyio.run(main)
"""
PLAIN_ACP = """\
import asyncio

from acp import PROTOCOL_VERSION, run_agent
from acp.schema import AgentCapabilities, Implementation, InitializeResponse, NewSessionResponse


class Plain:
    async def initialize(self, protocol_version, client_capabilities=None, client_info=None,
                         **kwargs):
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(),
            agent_info=Implementation(name="plain", version="1"),
        )

    async def new_session(self, cwd, mcp_servers=None, **kwargs):
        return NewSessionResponse(session_id="one")


asyncio.run(run_agent(Plain()))
"""
_CLIENT = {"name": "claude-code", "title": "Claude Code", "version": "2.1.332"}
_CAPABILITIES = {"roots": {"listChanged": True}, "elicitation": {"form": {}, "url": {}}}
MCP_INITIALIZE = {
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": _CAPABILITIES,
        "clientInfo": _CLIENT,
    },
    "jsonrpc": "2.0",
    "id": 0,
}
MCP_DISCOVER = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "server/discover",
    "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": _CLIENT,
            "io.modelcontextprotocol/clientCapabilities": _CAPABILITIES,
        }
    },
}
ACP_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": 1,
        "clientCapabilities": {
            "fs": {"readTextFile": True, "writeTextFile": True},
            "terminal": True,
        },
        "clientInfo": {"name": "zed", "version": "0.231.0", "title": "Zed"},
    },
}

_SCRIPT = Path(sys.executable).with_name("hotseam")
HOTSEAM = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "hotseam"]
"""The console script, as a user runs ``hotseam`` (``python -m hotseam`` without one)."""
RUN = [*HOTSEAM, "run", "providers", "--no-journal", "--agent"]
ROWS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import hotseam": [sys.executable, "-c", "import hotseam"],
    "hotseam --help": [*HOTSEAM, "--help"],
    "hotseam status": [],  # the daemon's pid is known once it runs
    "hotseam run → first answer, ask()": [*RUN, "agent.py:main"],
    "hotseam run → first answer, the ask tool": [*RUN, "tool_agent.py:main"],
}
DAEMON_ROWS = ("hotseam run → first answer, ask()", "hotseam run → first answer, the ask tool")
FLOOR_ROW = "floor: the same libraries → first answer"
GOAL_ROWS: dict[str, list[str]] = {
    DAEMON_ROWS[0]: [*RUN, "agent.py:main"],
    FLOOR_ROW: [sys.executable, "floor.py"],
    "hotseam mcp → initialize answered": [*HOTSEAM, "mcp", "tools"],
    "plain mcp-SDK server → initialize answered": [sys.executable, "plain_mcp.py"],
    "hotseam mcp → server/discover answered": [*HOTSEAM, "mcp", "tools"],
    "plain mcp-SDK server → server/discover answered": [sys.executable, "plain_mcp.py"],
    "hotseam acp → initialize answered": [*HOTSEAM, "acp"],
    "plain acp-SDK agent → initialize answered": [sys.executable, "plain_acp.py"],
}
REQUESTS = dict(
    zip(
        list(GOAL_ROWS)[2:],
        [MCP_INITIALIZE] * 2 + [MCP_DISCOVER] * 2 + [ACP_INITIALIZE] * 2,
        strict=True,
    )
)
"""The rows timed to the first answer on stdout, and the line each writes to stdin."""
GOALS = [  # hotseam's row, its alternative's, the most the ratio of their medians may be
    (DAEMON_ROWS[0], FLOOR_ROW, 1.15),
    ("hotseam mcp → initialize answered", "plain mcp-SDK server → initialize answered", 0.5),
    (
        "hotseam mcp → server/discover answered",
        "plain mcp-SDK server → server/discover answered",
        0.5,
    ),
    ("hotseam acp → initialize answered", "plain acp-SDK agent → initialize answered", 0.5),
]
_PROBE_BUDGET = 3000.0
"""Claude Code's budget for an MCP server's answer to its server/discover probe (ms)."""


def environment() -> dict[str, str]:
    """This environment, with bytecode caching allowed (see the docstring)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def project(folder: Path) -> Path:
    (folder / "providers").mkdir()
    (folder / "providers" / "ui.py").write_text(PROVIDER, encoding="utf-8")
    (folder / "agent.py").write_text(ASK_AGENT.format(wait=False), encoding="utf-8")
    (folder / "waiting.py").write_text(ASK_AGENT.format(wait=True), encoding="utf-8")
    (folder / "tool_agent.py").write_text(TOOL_AGENT, encoding="utf-8")
    (folder / "tools").mkdir()
    (folder / "tools" / "echo.py").write_text(TOOLS, encoding="utf-8")
    (folder / "floor_providers").mkdir()
    (folder / "floor_providers" / "ui.py").write_text(FLOOR_PROVIDER, encoding="utf-8")
    (folder / "floor.py").write_text(FLOOR, encoding="utf-8")
    (folder / "plain_mcp.py").write_text(PLAIN_MCP, encoding="utf-8")
    (folder / "plain_acp.py").write_text(PLAIN_ACP, encoding="utf-8")
    return folder


def timed_answer(
    command: list[str], folder: Path, env: dict[str, str], request: dict[str, object]
) -> tuple[float, float]:
    """Wall seconds from starting ``command`` with ``request`` on its stdin until the first
    line of its stdout (the answer; checked), and the CPU time of the process then (from
    ``/proc``, every thread; it is then stopped)."""
    started = time.perf_counter()
    child = subprocess.Popen(
        command,
        cwd=folder,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert child.stdin is not None
    assert child.stdout is not None
    child.stdin.write(json.dumps(request, separators=(",", ":")).encode() + b"\n")
    child.stdin.flush()
    line = child.stdout.readline()
    elapsed = time.perf_counter() - started
    cpu = _cpu_seconds(child.pid)
    child.kill()
    child.wait()
    child.stdin.close()
    child.stdout.close()
    answer = json.loads(line)
    assert answer.get("id") == request["id"], line
    assert "result" in answer, line
    return elapsed, cpu


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure_goals(rounds: int, folder: Path) -> dict[str, list[tuple[float, float]]]:
    """The goal rows, interleaved: every row once per round, in a random order."""
    env = environment()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in GOAL_ROWS}
    for round_number in range(rounds + 1):
        for name in random.sample(list(GOAL_ROWS), len(GOAL_ROWS)):
            if name in REQUESTS:
                wall, cpu = timed_answer(GOAL_ROWS[name], folder, env, REQUESTS[name])
            else:
                wall, cpu = timed(GOAL_ROWS[name], folder, env, True)
            if round_number:  # the first round warms the caches
                samples[name].append((wall * 1000, cpu * 1000))
    return samples


def report_goals(samples: dict[str, list[tuple[float, float]]], rounds: int, hog: int) -> None:
    print(
        f"The goals (ms; {rounds} rounds, every row once a round in a random order, "
        f"{'--hog ' + str(hog) if hog else 'no hog'}; load average now {load()}):\n"
    )
    print("| row | wall median | wall p95 | CPU median |")
    print("|---|---:|---:|---:|")
    stats = {}
    for name, values in samples.items():
        wall = [each for each, _ in values]
        stats[name] = (statistics.median(wall), statistics.quantiles(wall, n=20)[-1])
        cpu = statistics.median(each for _, each in values)
        print(f"| `{name}` | {stats[name][0]:.1f} | {stats[name][1]:.1f} | {cpu:.1f} |")
    print("\n| figure | hotseam median / p95 | alternative median / p95 | ratio | goal | met |")
    print("|---|---:|---:|---:|---|---|")
    for ours, theirs, most in GOALS:
        ratio = stats[ours][0] / stats[theirs][0]
        met = ratio <= most
        goal = f"≤ {most}x"
        if "mcp" in ours or "acp" in ours:
            goal += f", p95 < {_PROBE_BUDGET / 1000:.0f} s"
            met = met and stats[ours][1] < _PROBE_BUDGET
        print(
            f"| `{ours}` | {stats[ours][0]:.1f} / {stats[ours][1]:.1f} | "
            f"{stats[theirs][0]:.1f} / {stats[theirs][1]:.1f} | {ratio:.2f}x | {goal} | "
            f"{'yes' if met else 'no'} |"
        )
    print()


def timed(
    command: list[str], folder: Path, env: dict[str, str], first_line: bool
) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, every thread) from starting ``command`` until it
    exits, or, with ``first_line``, until its agent printed the answer (with the CPU time
    it had used then; it is then stopped)."""
    started = time.perf_counter()
    child = subprocess.Popen(
        command, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert child.stdout is not None
    if first_line:
        line = child.stdout.readline()
        elapsed = time.perf_counter() - started
        child.terminate()
        child.wait()
        child.stdout.close()
        assert line.startswith(b"answer: fine "), line
        return elapsed, float(line.split()[2])
    child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    child.stdout.close()
    assert child.returncode == 0, command
    return elapsed, usage.ru_utime + usage.ru_stime


def measure(rounds: int, folder: Path) -> dict[str, list[tuple[float, float]]]:
    env = environment()
    daemon = subprocess.Popen(
        [*RUN, "waiting.py:main"],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    commands = dict(ROWS)
    commands["hotseam status"] = [*HOTSEAM, "status", str(daemon.pid)]
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    try:
        assert daemon.stdout is not None
        assert daemon.stdout.readline().startswith(b"answer: fine ")
        for round_number in range(rounds + 1):
            for name in random.sample(list(commands), len(commands)):
                wall, cpu = timed(commands[name], folder, env, name in DAEMON_ROWS)
                if round_number:  # the first round warms the caches
                    samples[name].append((wall * 1000, cpu * 1000))
        return samples
    finally:
        daemon.terminate()
        daemon.wait()
        if daemon.stdout is not None:
            daemon.stdout.close()


_IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)$")


def import_shares(command: list[str], folder: Path, first_line: bool) -> dict[str, float]:
    """``-X importtime`` self times (ms) of one run of ``command``, summed by top-level
    package (the standard library's modules as ``stdlib``)."""
    env = environment()
    script = command[1:] if command[0] == sys.executable else command
    argv = [sys.executable, "-X", "importtime", *script]
    if first_line:
        with tempfile.TemporaryFile() as err:  # not a pipe: it is read once the run ends
            child = subprocess.Popen(argv, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=err)
            assert child.stdout is not None
            assert child.stdout.readline().startswith(b"answer: fine ")
            child.terminate()
            child.wait()
            child.stdout.close()
            err.seek(0)
            text = err.read().decode()
    else:
        text = subprocess.run(
            argv, cwd=folder, env=env, capture_output=True, text=True, check=True
        ).stderr
    shares: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        found = _IMPORT_LINE.match(line)
        if found is None:
            continue
        top = found.group(4).partition(".")[0]
        shares[top if top in _THIRD_PARTY or top == "hotseam" else "stdlib"] += (
            int(found.group(1)) / 1000
        )
    return shares


_THIRD_PARTY = {
    "anyio",
    "sniffio",
    "structlog",
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "typing_extensions",
    "typing_inspection",
    "inotify_simple",
    "watchfiles",
    "idna",
    "_distutils_hack",
}


def breakdown(name: str, command: list[str], folder: Path, wall: float, bare: float) -> None:
    """The imports of ``command`` beyond those of the bare interpreter (``encodings``,
    ``site``...: part of ``python -c pass``), by package, and the rest of its wall time."""
    runs = [import_shares(command, folder, name in DAEMON_ROWS) for _ in range(5)]
    bare_runs = [import_shares([sys.executable, "-c", "pass"], folder, False) for _ in range(5)]
    packages = {package for run in runs for package in run}
    shares = {
        package: statistics.median(run[package] for run in runs)
        - statistics.median(run[package] for run in bare_runs)
        for package in packages
    }
    total = sum(shares.values())
    print(f"`{name}`: wall {wall:.1f} ms median; the bare interpreter {bare:.1f} ms;")
    print(
        f"imports beyond the bare interpreter's (`-X importtime`, self times summed, median "
        f"of 5 runs) {total:.1f} ms:\n"
    )
    print("| package | ms |")
    print("|---|---:|")
    for package, share in sorted(shares.items(), key=lambda item: -item[1]):
        if share >= 0.5:
            print(f"| {package} | {share:.1f} |")
    rest = wall - bare - total
    if rest >= 0:
        print(f"\nthe rest (arguments, logging set-up, the work itself) ≈ {rest:.1f} ms\n")
    else:  # the flag slows imports: its sum is an upper bound
        print(
            f"\nthe rest: none measurable (the imports' `-X importtime` sum, an upper bound, "
            f"exceeds the wall time beyond the interpreter by {-rest:.1f} ms)\n"
        )


def load() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--only", choices=["goals"], help="measure the goal rows alone")
    add_hog_option(parser)
    options = parser.parse_args()
    with hog(options.hog):
        if options.hog:
            print(f"With --hog {options.hog}: {options.hog} busy processes beside the run.")
        _run(options.rounds, options.hog, options.only == "goals")


def _run(rounds: int, hog_count: int = 0, goals_only: bool = False) -> None:
    random.seed(1)
    compileall.compile_dir(Path(hotseam.__file__).parent, quiet=1)
    uname = platform.uname()
    print(
        f"Run of {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {uname.system} {uname.release} "
        f"{uname.machine}, {os.cpu_count()} cores (nproc), Python {platform.python_version()}; "
        f"load average {load()}."
    )
    print(
        "Bytecode: cached — hotseam compiled first; hotseam and every library load from "
        "their .pyc files (the project's provider and agent modules are compiled from "
        "source).\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = project(Path(tmp))
        report_goals(measure_goals(rounds, folder), rounds, hog_count)
        if goals_only:
            print(f"Ended {datetime.now(UTC):%H:%M} UTC, load average {load()}.")
            return
        samples = measure(rounds, folder)
        walls = {name: [wall for wall, _ in values] for name, values in samples.items()}
        bare = statistics.median(walls["python -c pass"])
        print(
            f"A fresh process (ms; {rounds} rounds, the commands interleaved): wall time, "
            "and CPU time (user + system, all threads; what the load cannot stretch):\n"
        )
        print("| command | wall median | wall p95 | wall minus `python -c pass` | CPU median |")
        print("|---|---:|---:|---:|---:|")
        for name, values in samples.items():
            wall = [each for each, _ in values]
            median = statistics.median(wall)
            p95 = statistics.quantiles(wall, n=20)[-1]
            cpu = statistics.median(each for _, each in values)
            print(f"| `{name}` | {median:.1f} | {p95:.1f} | {median - bare:.1f} | {cpu:.1f} |")
        print()
        for name in DAEMON_ROWS:
            breakdown(name, ROWS[name], folder, statistics.median(walls[name]), bare)
        phases(folder, 10)
        status_breakdown(folder, statistics.median(walls["hotseam status"]), bare)
    print(f"Ended {datetime.now(UTC):%H:%M} UTC, load average {load()}.")


def phases(folder: Path, runs: int) -> None:
    """Where ``hotseam run``'s time goes, from the clock of the machine: the start, the
    daemon's own log lines (``control socket``: imports, options, the serving path
    imported, logging set up; the first ``reload.committed``: the watch and the first load)
    and the answer its agent prints (the agent started, its question asked and answered)."""
    env = environment()
    found: dict[str, list[float]] = defaultdict(list)
    for _ in range(runs):
        with tempfile.TemporaryFile() as err:
            started = time.time()
            child = subprocess.Popen(
                ROWS[DAEMON_ROWS[0]], cwd=folder, env=env, stdout=subprocess.PIPE, stderr=err
            )
            assert child.stdout is not None
            line = child.stdout.readline().split()
            child.terminate()
            child.wait()
            child.stdout.close()
            err.seek(0)
            lines = [json.loads(each) for each in err.read().splitlines() if each.startswith(b"{")]
        marks = {
            "the control socket serves (interpreter, imports, options, serving path)": next(
                entry for entry in lines if "control socket" in entry["event"]
            ),
            "the first load committed (the watch, the provider module)": next(
                entry for entry in lines if entry["event"] == "reload.committed"
            ),
        }
        previous = started
        for name, entry in marks.items():
            at = datetime.fromisoformat(entry["timestamp"]).timestamp()
            found[name].append((at - previous) * 1000)
            previous = at
        found["the agent's first question answered"].append((float(line[3]) - previous) * 1000)
    print(f"`hotseam run`, step by step from its own log lines (ms, median of {runs}):\n")
    print("| step | ms |")
    print("|---|---:|")
    for name, values in found.items():
        print(f"| {name} | {statistics.median(values):.1f} |")
    print()


def status_breakdown(folder: Path, wall: float, bare: float) -> None:
    """The imports of ``hotseam status`` against a running daemon, and its round trip."""
    env = environment()
    daemon = subprocess.Popen(
        [*RUN, "waiting.py:main"],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert daemon.stdout is not None
        assert daemon.stdout.readline().startswith(b"answer: fine ")
        breakdown("hotseam status", [*HOTSEAM, "status", str(daemon.pid)], folder, wall, bare)
        trips = []
        for _ in range(20):
            done = subprocess.run(
                [sys.executable, "-c", ROUND_TRIP, str(daemon.pid)],
                cwd=folder,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            trips.append(float(done.stdout))
        print(f"its round trip over the control socket: {statistics.median(trips):.2f} ms\n")
    finally:
        daemon.terminate()
        daemon.wait()
        if daemon.stdout is not None:
            daemon.stdout.close()


ROUND_TRIP = """\
import sys, time
from hotseam.cli._control_client import locate, request
endpoint, _ = locate(sys.argv[1])
started = time.perf_counter()
request(endpoint, {"op": "status"})
print((time.perf_counter() - started) * 1000)
"""


if __name__ == "__main__":
    main()
