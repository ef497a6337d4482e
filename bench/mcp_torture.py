"""MCP reload torture: four host sessions calling tools while the tool modules are edited.

    .venv/bin/python bench/mcp_torture.py [--edits 1000] [--callers 4] [--seed 1]

Four callers, each a real client session of the SDK (``mcp.Client``) with its own
``hotseam mcp DIR`` subprocess over stdio, as a host runs it; two speak the 2025-11-25
handshake era (a question is an ``elicitation/create`` sent during the call), two speak
2026-07-28 (a question comes back as ``input_required`` and the client calls again with
the answer). Every server watches the same folder with its real watcher; nothing is
reloaded by hand. The folder holds:

* ``tort_echo_0..3.py``: a tool ``echo_N`` that sleeps 0-20 ms and returns the call's
  token, its module's version and a word from the helper module;
* ``tort_ask_0..1.py``: a tool ``ask_N`` that asks the human a question naming the call's
  token (two options), records the answer it got in a ledger file and returns it;
* ``tort_words.py``, the helper both import; ``tort_churn.py``, created and deleted (a
  tool nobody calls: the list changes under the callers);
* ``tort_ui.py``, which provides the tools' context's own ``McpProvider`` (shadowing the
  command's): each save withdraws the questions it shows (``notifications/cancelled`` on
  2025-11-25) and its new generation asks them again (on 2026-07-28 the question keeps
  its key: the host is not asked twice).

Each caller calls a random echo or ask tool back to back, each call with a token of its
own. Its elicitation callback answers after 0-30 ms, as a human would, picking the option
``token-a`` the first time a token is asked and ``token-b`` if the same token is asked
again (a question withdrawn by a reload and asked again), so the answer a call returns
names the question that won. Meanwhile the edit loop makes ``--edits`` random edits a few
ms to 50 ms apart (one pause in seven is 0.1-0.3 s): a tool module saved in place or
atomically (a temporary file renamed over it), with a syntax error, raising at import,
raising in ``setup`` after registering, or with the same bytes; the helper valid, broken
or raising; the provider saved (in place or atomically); the churn module created or
deleted.

**Must be 0** (counted as they happen, printed at the end; exit status 1 otherwise):

* *lost answers*: a call that got no result within ``--hang-after`` seconds, or failed;
* *answered twice*: a call whose tool recorded more than one answer, or two calls that
  recorded the same token;
* *wrong answers*: a result that does not carry the call's own token, or an answer the
  client never gave for it;
* *unknown tool*: a call of a tool that always exists answered "no such tool"
  (``TOOL_NOT_FOUND`` or the protocol's -32602): a call during a swap must wait for it;
* *shown twice on 2026-07-28*: a question the host was shown twice on that era (a
  question keeps its key for the life of the call, whatever reloads withdraw and re-ask
  it; on 2025-11-25 a withdrawn question is asked again, counted as information).

**Final state**: all modules get their last version back, and every caller's next calls
must reach that version's code within ``--settle`` seconds.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path, and bench/mcp.py would
# shadow the `mcp` SDK: drop the folder before importing it.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [entry for entry in sys.path if Path(entry or os.curdir).resolve() != _HERE]

import argparse  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import Counter, defaultdict  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import IO  # noqa: E402

import anyio  # noqa: E402
import mcp_types as types  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.session import ClientRequestContext, IncomingMessage  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp_types import CONNECTION_CLOSED  # noqa: E402

HOTSEAM = str(Path(sys.executable).with_name("hotseam"))
ECHO_TOOLS = [f"echo_{index}" for index in range(4)]
ASK_TOOLS = [f"ask_{index}" for index in range(2)]
ERAS = ("legacy", "2026-07-28")
LEDGER_VARIABLE = "HOTSEAM_MCP_TORTURE_LEDGER"
# What reaches the servers' environment (the SDK passes only a few variables on):
# PYTHONPATH lets a run break a guarantee on purpose with a sitecustomize module.
FORWARDED = ("PYTHONPATH", "XDG_STATE_HOME", LEDGER_VARIABLE)

ECHO_MODULE = '''\
import random

import anyio
import tort_words
from pydantic import BaseModel

from hotseam import ToolCall, tool

VERSION = {version}


class Token(BaseModel):
    token: str


@tool("{tool}")
async def run(input: Token, call: ToolCall) -> str:
    """Return the token, the version serving and the helper's word."""
    await anyio.sleep(random.uniform(0, 0.02))
    return f"{{input.token}}|{tool}|v{{VERSION}}|{{tort_words.WORD}}"


def setup(scope):
    scope.register_tool(run)
{tail}'''

ASK_MODULE = '''\
import os

import tort_words
from pydantic import BaseModel

from hotseam import ToolCall, tool
from hotseam.interaction import AskUserQuestionOption, AskUserQuestionRequest, ask

VERSION = {version}


class Token(BaseModel):
    token: str


@tool("{tool}")
async def run(input: Token, call: ToolCall) -> str:
    """Ask which of two answers, record the one given, return it."""
    question = AskUserQuestionRequest(
        f"Token {{input.token}}: which one?",
        options=[
            AskUserQuestionOption(f"{{input.token}}-a"),
            AskUserQuestionOption(f"{{input.token}}-b"),
        ],
        allow_custom=False,
    )
    answer = (await ask(question, context=call.context)).answer
    with open(os.environ["{ledger}"], "a") as ledger:
        ledger.write(f"{{input.token}} {{answer}}\\n")
    return f"{{input.token}}|{tool}|v{{VERSION}}|{{answer}}|{{tort_words.WORD}}"


def setup(scope):
    scope.register_tool(run)
{tail}'''

PROVIDER_MODULE = '''\
"""The human-interaction provider of the tools' context, shadowing the command's: a save
withdraws the questions it shows, and the new generation asks them again."""
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.mcp import McpProvider

VERSION = {version}


def setup(scope):
    scope.provide(USER_INTERACTION, McpProvider())
'''

CHURN_MODULE = '''\
from pydantic import BaseModel

from hotseam import ToolCall, tool


class Nothing(BaseModel):
    pass


@tool("churn")
async def run(input: Nothing, call: ToolCall) -> str:
    """A tool that comes and goes."""
    return "churn"


def setup(scope):
    scope.register_tool(run)
'''

TAILS = {
    "valid": "",
    "exception in setup": '    raise RuntimeError("torture: setup failed after registering")\n',
}
BROKEN = {
    "syntax error": "def broken(:\n",
    "exception at import": 'raise RuntimeError("torture: import failed")\n',
}
EDITS = {
    "tool: valid, in place": 30,
    "tool: valid, atomic": 20,
    "tool: syntax error": 6,
    "tool: exception at import": 5,
    "tool: exception in setup": 5,
    "tool: same bytes again": 5,
    "helper: valid, in place": 8,
    "helper: valid, atomic": 4,
    "helper: syntax error": 3,
    "helper: exception at import": 3,
    "provider: valid, in place": 6,
    "provider: valid, atomic": 4,
    "churn: created": 5,
    "churn: deleted": 5,
}


@dataclass
class Tally:
    """What happened, and the counters that must stay 0."""

    calls: Counter[str] = field(default_factory=Counter)
    edits: Counter[str] = field(default_factory=Counter)
    zero: Counter[str] = field(
        default_factory=lambda: Counter(
            dict.fromkeys(
                [
                    "lost answers",
                    "answered twice",
                    "wrong answers",
                    "unknown tool",
                    "shown twice on 2026-07-28",
                ],
                0,
            )
        )
    )
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    problems: list[str] = field(default_factory=list)
    list_changed: Counter[str] = field(default_factory=Counter)

    def bad(self, counter: str, example: str) -> None:
        self.zero[counter] += 1
        if len(self.examples[counter]) < 5:
            self.examples[counter].append(example)


class Files:
    """The watched folder and the last good content of each module."""

    def __init__(self, folder: Path, rng: random.Random) -> None:
        self.folder = folder
        self.rng = rng
        self.version = 0
        self.versions: dict[str, int] = {}
        self.word = "w0"
        for tool in ECHO_TOOLS + ASK_TOOLS:
            self.save_tool(tool, atomic=False)
        self.save_helper(atomic=False)
        self.save_provider(atomic=False)

    def module(self, tool: str) -> Path:
        prefix = "tort_echo" if tool.startswith("echo") else "tort_ask"
        return self.folder / f"{prefix}_{tool.rsplit('_', 1)[1]}.py"

    def tool_source(self, tool: str, tail: str = "") -> str:
        template = ECHO_MODULE if tool.startswith("echo") else ASK_MODULE
        return template.format(
            tool=tool, version=self.versions[tool], tail=tail, ledger=LEDGER_VARIABLE
        )

    def write(self, path: Path, source: str, *, atomic: bool) -> None:
        if atomic:
            temporary = path.with_name(f".{path.name}.tmp")
            temporary.write_text(source)
            os.replace(temporary, path)
        else:
            path.write_text(source)

    def save_tool(self, tool: str, *, atomic: bool, tail: str = "") -> None:
        self.version += 1
        self.versions[tool] = self.version
        self.write(self.module(tool), self.tool_source(tool, tail), atomic=atomic)

    def save_helper(self, *, atomic: bool) -> None:
        self.version += 1
        self.word = f"w{self.version}"
        self.write(self.folder / "tort_words.py", f'WORD = "{self.word}"\n', atomic=atomic)

    def save_provider(self, *, atomic: bool) -> None:
        self.version += 1
        source = PROVIDER_MODULE.format(version=self.version)
        self.write(self.folder / "tort_ui.py", source, atomic=atomic)

    def edit(self, kind: str) -> None:
        tool = self.rng.choice(ECHO_TOOLS + ASK_TOOLS)
        atomic = kind.endswith("atomic")
        if kind.startswith("tool: valid"):
            self.save_tool(tool, atomic=atomic)
        elif kind == "tool: exception in setup":
            self.save_tool(tool, atomic=False, tail=TAILS["exception in setup"])
        elif kind == "tool: same bytes again":
            path = self.module(tool)
            path.write_bytes(path.read_bytes())
        elif kind.startswith("tool: "):
            self.module(tool).write_text(BROKEN[kind.removeprefix("tool: ")])
        elif kind.startswith("helper: valid"):
            self.save_helper(atomic=atomic)
        elif kind.startswith("helper: "):
            (self.folder / "tort_words.py").write_text(BROKEN[kind.removeprefix("helper: ")])
        elif kind.startswith("provider: valid"):
            self.save_provider(atomic=atomic)
        elif kind == "churn: created":
            (self.folder / "tort_churn.py").write_text(CHURN_MODULE)
        elif kind == "churn: deleted":
            (self.folder / "tort_churn.py").unlink(missing_ok=True)

    def restore(self, final: int) -> None:
        """Every module's good content, at version ``final`` and the word ``final``."""
        for tool in ECHO_TOOLS + ASK_TOOLS:
            self.versions[tool] = final
            self.write(self.module(tool), self.tool_source(tool), atomic=True)
        self.word = "final"
        self.write(self.folder / "tort_words.py", 'WORD = "final"\n', atomic=True)
        self.save_provider(atomic=True)


class Torture:
    """One run: the servers and their callers, the edit loop, the final state, the tally."""

    def __init__(self, folder: Path, options: argparse.Namespace, errlog: IO[str]) -> None:
        self.folder = folder
        self.options = options
        self.errlog = errlog
        self.rng = random.Random(options.seed)
        self.tally = Tally()
        self.files = Files(folder, random.Random(options.seed + 1))
        self.ledger = folder.parent / "ledger.txt"
        self.ledger.touch()
        self.given: dict[str, list[str]] = defaultdict(list)  # token -> answers the client gave
        self.stopping = False
        self.connected = 0
        self.all_connected = anyio.Event()
        self.final: int | None = None

    def environment(self) -> dict[str, str]:
        env = {LEDGER_VARIABLE: str(self.ledger)}
        for name in FORWARDED:
            if name in os.environ and name != LEDGER_VARIABLE:
                env[name] = os.environ[name]
        return env

    async def answer(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        """The human: reads the token from the question, answers after a short while."""
        message = params.message
        token = message.removeprefix("Token ").split(":", 1)[0]
        await anyio.sleep(self.rng.uniform(0, 0.03))
        choice = f"{token}-{'ab'[min(len(self.given[token]), 1)]}"
        schema = params.requested_schema  # type: ignore[union-attr]
        [name] = [n for n, f in schema["properties"].items() if "oneOf" in f or "enum" in f]
        self.given[token].append(choice)
        return types.ElicitResult(action="accept", content={name: choice})

    async def caller(self, index: int, era: str) -> None:
        server = StdioServerParameters(
            command=HOTSEAM,
            args=["mcp", "--log-level", "warning", str(self.folder)],
            env=self.environment(),
        )

        async def notified(message: IncomingMessage) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                self.tally.list_changed[era] += 1

        client = Client(
            stdio_client(server, errlog=self.errlog),  # type: ignore[arg-type]
            mode=era,
            elicitation_callback=self.answer,
            message_handler=notified,
            cache=None,
        )
        async with client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            missing = set(ECHO_TOOLS + ASK_TOOLS) - listed
            if missing:
                self.tally.problems.append(f"caller {index} ({era}) listed no {sorted(missing)}")
            # One question before the edits start: a server's first question imports what
            # forms need (about a second on a busy machine), which is not what is measured.
            await self.call(client, index, era, ASK_TOOLS[index % len(ASK_TOOLS)], f"c{index}n0")
            self.connected += 1
            if self.connected == self.options.callers:
                self.all_connected.set()
            rng = random.Random(self.options.seed * 1000 + index)
            number = 0
            while not self.stopping:
                number += 1
                tool = rng.choice(ECHO_TOOLS + ASK_TOOLS)
                if not await self.call(client, index, era, tool, f"c{index}n{number}"):
                    self.tally.problems.append(f"caller {index} ({era}): its server went away")
                    return
            try:
                await self.check_settled(client, index, era)
            except MCPError as error:
                self.tally.problems.append(f"caller {index} ({era}): {error.error.message}")

    async def call(self, client: Client, index: int, era: str, tool: str, token: str) -> bool:
        """One call, checked and counted; False when the server is gone."""
        tally = self.tally
        started = time.perf_counter()
        result: types.CallToolResult | None = None
        with anyio.move_on_after(self.options.hang_after):
            try:
                result = await client.call_tool(tool, {"token": token})
            except MCPError as error:
                if error.error.code == CONNECTION_CLOSED:
                    tally.bad("lost answers", f"{token} {tool} ({era}): {error.error.message}")
                    return False
                if error.error.code == -32602 and "tool" in error.error.message.lower():
                    tally.bad("unknown tool", f"{token} {tool} ({era}): {error.error.message}")
                else:
                    tally.bad("lost answers", f"{token} {tool} ({era}): error {error.error}")
                return True
        if result is None:
            tally.bad(
                "lost answers",
                f"{token} {tool} ({era}): no result after {time.perf_counter() - started:.1f} s",
            )
            return True
        text = " ".join(b.text for b in result.content if isinstance(b, types.TextContent))
        if result.is_error:
            structured = result.structured_content or {}
            if structured.get("code") == "TOOL_NOT_FOUND":
                tally.bad("unknown tool", f"{token} {tool} ({era}): {text}")
            else:
                tally.bad("lost answers", f"{token} {tool} ({era}): {text}")
            return True
        parts = text.split("|")
        if parts[:2] != [token, tool]:
            tally.bad("wrong answers", f"{token} {tool} ({era}) got {text!r}")
            return True
        tally.calls[f"{era}: {tool.split('_')[0]} answered"] += 1
        if tool.startswith("ask"):
            answer = parts[3]
            if answer not in self.given[token]:
                tally.bad(
                    "wrong answers", f"{token} got {answer!r}; the client gave {self.given[token]}"
                )
            if len(self.given[token]) > 1 and era == "legacy":
                tally.calls[f"{era}: ask asked again (withdrawn by a reload)"] += 1
            elif len(self.given[token]) > 1:  # a retry carries the answer to the key shown
                tally.bad("shown twice on 2026-07-28", f"{token}: shown {self.given[token]}")
        return True

    async def check_settled(self, client: Client, index: int, era: str) -> None:
        """The next calls of every tool reach the final version (within --settle s)."""
        wanted = f"v{self.final}"
        with anyio.move_on_after(self.options.settle) as bound:
            for tool in ECHO_TOOLS + ASK_TOOLS:
                while True:
                    result = await client.call_tool(tool, {"token": f"final{index}{tool}"})
                    text = " ".join(
                        b.text for b in result.content if isinstance(b, types.TextContent)
                    )
                    parts = text.split("|")
                    if len(parts) > 2 and parts[2] == wanted and parts[-1] == "final":
                        break
                    await anyio.sleep(0.02)
        if bound.cancelled_caught:
            self.tally.problems.append(
                f"caller {index} ({era}) did not reach the final version within "
                f"{self.options.settle} s"
            )

    async def edit_loop(self) -> None:
        kinds, weights = list(EDITS), list(EDITS.values())
        for _ in range(self.options.edits):
            kind = self.rng.choices(kinds, weights)[0]
            self.files.edit(kind)
            self.tally.edits[kind] += 1
            if self.rng.random() < 1 / 7:
                await anyio.sleep(self.rng.uniform(0.1, 0.3))
            else:
                await anyio.sleep(self.rng.uniform(0.002, 0.05))

    async def run(self) -> None:
        async with anyio.create_task_group() as group:
            for index in range(self.options.callers):
                group.start_soon(self.caller, index, ERAS[index % 2])
            with anyio.fail_after(60):
                await self.all_connected.wait()
            await self.edit_loop()
            self.final = self.files.version + 1
            self.files.restore(self.final)
            self.stopping = True
        self.check_ledger()

    def check_ledger(self) -> None:
        """Each asked token recorded by its tool exactly once, with an answer it was given."""
        recorded: Counter[str] = Counter()
        for line in self.ledger.read_text().splitlines():
            token, answer = line.split(" ", 1)
            recorded[token] += 1
            if answer not in self.given[token]:
                self.tally.bad("wrong answers", f"ledger: {token} recorded {answer!r}")
        for token, count in recorded.items():
            if count > 1:
                self.tally.bad("answered twice", f"{token}: its tool recorded {count} answers")


def report(tally: Tally, options: argparse.Namespace, seconds: float) -> int:
    print(
        f"# hotseam mcp torture: {options.callers} callers, {options.edits} edits, seed "
        f"{options.seed}; {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, load average "
        f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}; {seconds:.1f} s"
    )
    print("\n| calls | count |\n|---|---:|")
    for name, count in sorted(tally.calls.items()):
        print(f"| {name} | {count} |")
    for era, count in sorted(tally.list_changed.items()):
        print(f"| {era}: tools/list_changed received | {count} |")
    print("\n| edits | count |\n|---|---:|")
    for name, count in sorted(tally.edits.items()):
        print(f"| {name} | {count} |")
    print("\n| must be 0 | count |\n|---|---:|")
    for name, count in tally.zero.items():
        print(f"| {name} | {count} |")
    for name, examples in tally.examples.items():
        print(f"\n{name}, for example:", *examples, sep="\n- ")
    for problem in tally.problems:
        print(f"\nFINAL STATE: {problem}")
    failed = any(tally.zero.values()) or bool(tally.problems)
    answered = sum(tally.calls.values())
    if not answered:
        print("\nno call was answered")
    print("\nFAILED" if failed or not answered else "\nOK: every guarantee held")
    return 1 if failed or not answered else 0


async def main(options: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "tools"
        folder.mkdir()
        log = Path(tmp) / "servers.log"
        # The servers' stderr goes to a file (printed on failure), as a host keeps it.
        with log.open("w") as errlog:
            torture = Torture(folder, options, errlog)
            started = time.perf_counter()
            await torture.run()
        status = report(torture.tally, options, time.perf_counter() - started)
        if status:
            print("\nlast lines the servers wrote on stderr:")
            print(*log.read_text(errors="replace").splitlines()[-30:], sep="\n")
        return status


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=1000)
    parser.add_argument("--callers", type=int, default=4, help="client sessions (eras alternate)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hang-after", type=float, default=20.0, help="seconds per call")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds to the final state")
    sys.exit(anyio.run(main, parser.parse_args()))
