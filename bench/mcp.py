"""`hotseam mcp` measured the way a host meets it, side by side with a plain `mcp` SDK server.

    .venv/bin/python bench/mcp.py [--calls 400] [--saves 60] [--modules 100] [--asks 150]
                                  [--plain-only | --saves-only]

Every server is a real subprocess spoken to over stdio by the SDK's own client
(``mcp.Client``), on both protocol eras: ``legacy`` (the 2025-11-25 ``initialize``
handshake, a server-sent ``elicitation/create`` inside the call) and ``2026-07-28`` (no
handshake; an ask returns ``input_required`` and the client retries with the answer).
Prints markdown tables:

1. **Tool call round trip**: ``echo`` on ``hotseam mcp DIR`` (a tool module registering
   it) and on a plain ``MCPServer`` script with the same tool, ``--calls`` rounds
   interleaved in one run (one call on each server per round, the order alternating), so
   drift and load hit both alike. Median, p95 and the ratio; goal: hotseam ≤ 1.2x plain.
2. **Save → the host's next call runs new code**: ``--modules`` tool modules, one tool
   each; ``--saves`` times a random module is saved with a new version (written in place,
   or atomically: a temporary file renamed over it), and the client calls that tool
   back to back until an answer carries the new version. Measured from the end of the
   write to that answer. Goal: median ≤ 25 ms at 100 modules. A call that ever answers
   "unknown tool" is counted (must be 0).
3. **Elicitation round trip**: ``pick`` asks one question (two options) and returns the
   answer; the client answers at once. hotseam's tool calls ``ask()``; the plain server's
   resolves an ``Elicit`` (the SDK's way that works on both eras). The overhead is the
   ``pick`` median minus the same server's ``echo`` median; interleaved as in 1.

Machine, load average (before and after) and versions are printed with the tables.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path, and this file (bench/mcp.py)
# would shadow the `mcp` SDK it measures: drop the folder before importing it.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [entry for entry in sys.path if Path(entry or os.curdir).resolve() != _HERE]

import argparse  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import AsyncIterator  # noqa: E402
from contextlib import AsyncExitStack, asynccontextmanager  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from importlib.metadata import version  # noqa: E402
from typing import IO, Any  # noqa: E402

import anyio  # noqa: E402
import mcp_types as types  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.session import ClientRequestContext  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

ERAS = ("legacy", "2026-07-28")  # the client's modes; "legacy" negotiates 2025-11-25
REVISION = {"legacy": "2025-11-25", "2026-07-28": "2026-07-28"}
HOTSEAM = str(Path(sys.executable).with_name("hotseam"))

PLAIN_SERVER = '''\
"""The same tools as bench/mcp.py's hotseam modules, on the SDK's own MCPServer."""
from typing import Annotated, Literal

from pydantic import BaseModel
from mcp.server.mcpserver import Elicit, MCPServer, Resolve

app = MCPServer("plain")


@app.tool()
async def echo(text: str) -> str:
    """Return the text."""
    return text


class Choice(BaseModel):
    approach: Literal["quick", "thorough"]


def ask_choice() -> Elicit[Choice]:
    return Elicit("Which approach?", Choice)


@app.tool()
async def pick(choice: Annotated[Choice, Resolve(ask_choice)]) -> str:
    """Ask which approach, and return it."""
    return choice.approach


app.run()
'''

HOTSEAM_TOOLS = '''\
"""echo and pick for `hotseam mcp`: the plain server's tools, as a hotseam tool module."""
from pydantic import BaseModel

from hotseam import ToolCall, tool
from hotseam.interaction import AskUserQuestionOption, AskUserQuestionRequest, ask


class Text(BaseModel):
    text: str


class Nothing(BaseModel):
    pass


@tool()
async def echo(input: Text, call: ToolCall) -> str:
    """Return the text."""
    return input.text


@tool()
async def pick(input: Nothing, call: ToolCall) -> str:
    """Ask which approach, and return it."""
    question = AskUserQuestionRequest(
        "Which approach?",
        options=[AskUserQuestionOption("quick"), AskUserQuestionOption("thorough")],
        allow_custom=False,
    )
    return (await ask(question, context=call.context)).answer


def setup(scope):
    scope.register_tool(echo)
    scope.register_tool(pick)
'''

VERSIONED_TOOL = '''\
from pydantic import BaseModel

from hotseam import ToolCall, tool

VERSION = {version}


class Nothing(BaseModel):
    pass


@tool("{name}")
async def run(input: Nothing, call: ToolCall) -> str:
    """Say which version of {name} is serving."""
    return f"{name} v{{VERSION}}"


def setup(scope):
    scope.register_tool(run)
'''


# -- the client side: what a host does -------------------------------------------------------


def accept_first(params: types.ElicitRequestFormParams | Any) -> types.ElicitResult:
    """Answer a form the way a human who takes the first choice does: every required
    field (or the first one, when none is required) gets its first option, or text."""
    schema = params.requested_schema
    properties: dict[str, Any] = dict(schema.get("properties", {}))
    wanted = list(schema.get("required") or list(properties)[:1])
    content: dict[str, Any] = {}
    for name in wanted:
        field = properties[name]
        choices = [o["const"] for o in field.get("oneOf", [])] or field.get("enum", [])
        if field.get("type") == "array":
            items = field.get("items", {})
            listed = [o["const"] for o in items.get("anyOf", [])] or items.get("enum", [])
            content[name] = listed[:1]
        elif choices:
            content[name] = choices[0]
        elif field.get("type") == "boolean":
            content[name] = True
        elif field.get("type") in ("number", "integer"):
            content[name] = 1
        else:
            content[name] = "an answer"
    return types.ElicitResult(action="accept", content=content)


async def answer_at_once(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    return accept_first(params)


@asynccontextmanager
async def connect(command: list[str], mode: str, errlog: IO[str]) -> AsyncIterator[Client]:
    """A host's client session with ``command`` as its subprocess over stdio."""
    # The SDK passes only a few variables on; PYTHONPATH lets a run try a change to the
    # server (a sitecustomize module) without editing it.
    env = {name: os.environ[name] for name in ("PYTHONPATH",) if name in os.environ}
    server = StdioServerParameters(command=command[0], args=command[1:], env=env)
    client = Client(
        stdio_client(server, errlog=errlog),  # type: ignore[arg-type]
        mode=mode,
        elicitation_callback=answer_at_once,
        cache=None,
    )
    async with client:
        yield client


def text_of(result: types.CallToolResult | Any) -> str:
    """The text a call answered, or a line naming its error."""
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    joined = " ".join(texts)
    return f"ERROR: {joined}" if result.is_error else joined


async def timed_call(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[float, str]:
    """Seconds one call took, and the text it answered."""
    started = time.perf_counter()
    result = await client.call_tool(tool, arguments)
    return time.perf_counter() - started, text_of(result)


# -- statistics and printing ----------------------------------------------------------------


def median_p95(samples: list[float]) -> tuple[float, float]:
    """Median and 95th percentile, in milliseconds."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p95 * 1000


def load() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def machine() -> str:
    try:
        uname = subprocess.run(
            ["uname", "-srmv"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        uname = " ".join(platform.uname())
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        model = platform.processor() or "unknown CPU"
    return (
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; `{uname}`; {model}, {os.cpu_count()} CPUs "
        f"(nproc); Python {platform.python_version()}; mcp {version('mcp')}, hotseam "
        f"{version('hotseam')}; load average {load()}"
    )


# -- 1 and 3: round trips, interleaved -------------------------------------------------------


async def round_trips(
    servers: dict[str, list[str]], calls: int, asks: int, errlog: IO[str]
) -> list[tuple[str, str, str, list[float]]]:
    """(era, server, tool, samples) for echo and pick on every server, interleaved."""
    rows: list[tuple[str, str, str, list[float]]] = []
    for era in ERAS:
        async with AsyncExitStack() as stack:
            clients = {
                name: await stack.enter_async_context(connect(command, era, errlog))
                for name, command in servers.items()
            }
            for tool, arguments, rounds in (
                ("echo", {"text": "hello"}, calls),
                ("pick", {}, asks),
            ):
                samples: dict[str, list[float]] = {name: [] for name in clients}
                order = list(clients)
                for name in order:  # warm up: imports, first validation, caches
                    for _ in range(5):
                        await clients[name].call_tool(tool, arguments)
                for index in range(rounds):
                    for name in order if index % 2 == 0 else order[::-1]:
                        seconds, answer = await timed_call(clients[name], tool, arguments)
                        if answer != ("hello" if tool == "echo" else "quick"):
                            raise SystemExit(f"{name} {tool} answered {answer!r}")
                        samples[name].append(seconds)
                rows.extend((era, name, tool, samples[name]) for name in clients)
    return rows


def print_round_trips(rows: list[tuple[str, str, str, list[float]]]) -> None:
    medians = {(era, name, tool): median_p95(s)[0] for era, name, tool, s in rows}
    print("Tool call round trip, `echo` (ms; client session → server → client, stdio):\n")
    print("| era | server | calls | median | p95 | x plain (median) |")
    print("|---|---|---:|---:|---:|---:|")
    for era, name, tool, samples in rows:
        if tool != "echo":
            continue
        median, p95 = median_p95(samples)
        ratio = median / medians[(era, "plain mcp", "echo")]
        print(
            f"| {REVISION[era]} | {name} | {len(samples)} | {median:.2f} | {p95:.2f} | "
            f"{ratio:.2f}x |"
        )
    print("\nElicitation round trip, `pick` (one question, answered at once by the client):\n")
    print("| era | server | asks | median | p95 | overhead over echo | x plain (median) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for era, name, tool, samples in rows:
        if tool != "pick":
            continue
        median, p95 = median_p95(samples)
        overhead = median - medians[(era, name, "echo")]
        ratio = median / medians[(era, "plain mcp", "pick")]
        print(
            f"| {REVISION[era]} | {name} | {len(samples)} | {median:.2f} | {p95:.2f} | "
            f"{overhead:.2f} | {ratio:.2f}x |"
        )
    print()


# -- 2: save → next call runs new code -----------------------------------------------------------


def write_tool(folder: Path, name: str, number: int, atomic: bool) -> None:
    source = VERSIONED_TOOL.format(name=name, version=number)
    path = folder / f"{name}.py"
    if atomic:
        temporary = folder / f".{name}.py.tmp"
        temporary.write_text(source)
        os.replace(temporary, path)
    else:
        path.write_text(source)


async def save_to_new_code(
    modules: int, saves: int, era: str, errlog: IO[str], seed: int = 1
) -> tuple[list[float], int, int]:
    """Latencies (s) from a save's end to the first answer of the new version, the calls
    made while waiting, and the calls that answered anything but a version of the tool."""
    rng = random.Random(seed)
    names = [f"tool_{index:03d}" for index in range(modules)]
    latencies: list[float] = []
    calls = strays = 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "tools"
        folder.mkdir()
        versions = dict.fromkeys(names, 0)
        for name in names:
            write_tool(folder, name, 0, atomic=False)
        async with connect([HOTSEAM, "mcp", str(folder)], era, errlog) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            if not set(names) <= listed:
                raise SystemExit(f"hotseam mcp lists {len(listed)} tools, not the {modules} saved")
            for index in range(saves):
                name = rng.choice(names)
                versions[name] += 1
                wanted = f"{name} v{versions[name]}"
                await anyio.sleep(rng.uniform(0.15, 0.25))  # past the watcher's coalescing
                write_tool(folder, name, versions[name], atomic=index % 2 == 1)
                saved = time.perf_counter()
                with anyio.fail_after(10):
                    while True:
                        answer = text_of(await client.call_tool(name, {}))
                        calls += 1
                        if answer == wanted:
                            latencies.append(time.perf_counter() - saved)
                            break
                        if not answer.startswith(f"{name} v"):
                            strays += 1
    return latencies, calls, strays


def print_saves(results: dict[str, tuple[list[float], int, int]], modules: int) -> None:
    print(f"Save → the next call runs the new code, {modules} tool modules (ms):\n")
    print("| era | saves | median | p95 | max | calls while waiting | other answers |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for era, (latencies, calls, strays) in results.items():
        median, p95 = median_p95(latencies)
        print(
            f"| {REVISION[era]} | {len(latencies)} | {median:.1f} | {p95:.1f} | "
            f"{max(latencies) * 1000:.1f} | {calls - len(latencies)} | {strays} |"
        )
    print()


# -- main ------------------------------------------------------------------------------------


async def main(options: argparse.Namespace) -> None:
    print(f"Run of {machine()}.\n")
    # The servers' stderr (their logs) goes to a file, as a host keeps it out of its UI.
    with tempfile.TemporaryDirectory() as tmp, open(Path(tmp) / "servers.log", "w") as errlog:  # noqa: ASYNC230
        plain = Path(tmp) / "plain_server.py"
        plain.write_text(PLAIN_SERVER)
        tools = Path(tmp) / "tools"
        tools.mkdir()
        (tools / "bench_tools.py").write_text(HOTSEAM_TOOLS)
        servers = {"plain mcp": [sys.executable, str(plain)]}
        if not options.plain_only:
            servers["hotseam mcp"] = [HOTSEAM, "mcp", str(tools)]
        if not options.saves_only:
            rows = await round_trips(servers, options.calls, options.asks, errlog)
            print_round_trips(rows)
        if not options.plain_only:
            saves = {
                era: await save_to_new_code(options.modules, options.saves, era, errlog)
                for era in ERAS
            }
            print_saves(saves, options.modules)
    print(f"Ended {datetime.now(UTC):%H:%M} UTC, load average {load()}.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="echo rounds per era")
    parser.add_argument("--asks", type=int, default=150, help="pick rounds per era")
    parser.add_argument("--saves", type=int, default=60)
    parser.add_argument("--modules", type=int, default=100)
    parser.add_argument(
        "--plain-only", action="store_true", help="the plain mcp server alone (a baseline)"
    )
    parser.add_argument("--saves-only", action="store_true", help="only save → next call")
    anyio.run(main, parser.parse_args())
