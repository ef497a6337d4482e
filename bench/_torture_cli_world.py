"""The CLI torture's project: the provider, helper and agent it writes, the edits it makes,
and the ledger files and marker files they leave, read back and checked at the end.

The provider and the agent run inside the ``hotseam run`` child, so everything they report
goes through files: ``ledger/asks.log`` (the agent: ``asked``, ``answered``, ``failed``
lines with the time), ``ledger/answers.log`` (providers: each answer returned, and any
carried socket found closed), and ``ledger/markers/`` (one file per setup, disposer run,
carried value made and disposed; made exclusively, so a second one is an ``again`` marker).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from _torture_folder import GIT
from _torture_ledger import Report

__all__ = ["CliFiles", "Ledgers"]

PROVIDER = '''\
import os
import random
import socket
import uuid

import anyio
import torture_words as words
from hotseam.interaction import USER_INTERACTION, AskUserQuestionAnswer

VERSION = {version}
COUNTER_VERSION = {counter_version}
LISTENER = {listener}
LEDGER = {ledger!r}


def mark(name):
    """A marker file, made exclusively: a second one of the same name is an 'again' one."""
    path = os.path.join(LEDGER, "markers", name)
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        mark(f"{{name}}.again-{{uuid.uuid4().hex}}")


def note(*fields):
    line = "\\t".join(str(field) for field in fields) + "\\n"
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    descriptor = os.open(os.path.join(LEDGER, "answers.log"), flags)
    try:
        os.write(descriptor, line.encode())
    finally:
        os.close(descriptor)


class Tally:
    def __init__(self):
        self.id = uuid.uuid4().hex
        mark(f"value-{{self.id}}.made")


class Listener(Tally):
    def __init__(self):
        super().__init__()
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(8)
        self.socket.settimeout(2.0)

    def probe(self):
        if self.socket.fileno() == -1:
            return "closed"
        try:
            with socket.create_connection(self.socket.getsockname(), timeout=2.0):
                self.socket.accept()[0].close()
        except OSError as error:
            return repr(error)
        return None


def dispose(value):
    mark(f"value-{{value.id}}.disposed")
    if isinstance(value, Listener):
        if value.socket.fileno() == -1:
            mark(f"value-{{value.id}}.closed-before-dispose")
        value.socket.close()


class Provider:
    def __init__(self, generation, listener):
        self.generation = generation
        self.listener = listener

    async def ask(self, request):
        if self.listener is not None and random.random() < 0.3:
            problem = self.listener.probe()
            if problem is not None:
                note("socket", self.generation, problem)
        if random.random() < 0.6:
            await anyio.sleep(random.uniform(0, 0.03))
        answer = f"{{request.question}}@{{self.generation}}:v{{VERSION}}:{{words.WORD}}"
        note("returned", request.question, answer)
        return AskUserQuestionAnswer(answer)


def setup(scope):
    generation = uuid.uuid4().hex[:12]
    scope.carry("counter", Tally, dispose=dispose, version=COUNTER_VERSION)
    listener = None
    if LISTENER:
        listener = scope.carry("listener", Listener, dispose=dispose, version=1)
    scope.provide(USER_INTERACTION, Provider(generation, listener))
    mark(f"generation-{{generation}}.set-up")
    scope.defer(lambda: mark(f"generation-{{generation}}.disposed"))
{setup_line}
'''

AGENT = """\
import os
import random
import time

import anyio

LEDGER = {ledger!r}


def note(*fields):
    line = "\\t".join(str(field) for field in fields) + "\\n"
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    descriptor = os.open(os.path.join(LEDGER, "asks.log"), flags)
    try:
        os.write(descriptor, line.encode())
    finally:
        os.close(descriptor)


async def main(context):
    async with anyio.create_task_group() as tasks:
        for index in range({askers}):
            tasks.start_soon(asker, context, index)


async def asker(context, index):
    rng = random.Random(index)
    number = 0
    while True:
        number += 1
        question = f"a{{index}}-q{{number}}"
        note("asked", question, time.time())
        result = await context.tools.execute("ask_user_question", {{"question": question}})
        if result.ok:
            note("answered", question, time.time(), result.output["answer"])
            await anyio.sleep(0)
        else:
            note("failed", question, time.time(), result.error["code"])
            await anyio.sleep(rng.uniform(0.01, 0.05))
"""


class CliFiles:
    """The project folder and the edits made to ``providers/`` (plain, blocking file I/O)."""

    def __init__(self, project: Path, ledger: Path, rng: random.Random) -> None:
        self.project = project
        self.folder = project / "providers"
        self.ledger = ledger
        self.rng = rng
        self.number = 0
        self.counter_version = 1
        self.listener = True
        self.barrier = 0
        self.good_version = 0
        self.good_ui = self.provider(0)
        self.good_word = 0

    @property
    def ui(self) -> Path:
        return self.folder / "torture_ui.py"

    @property
    def words(self) -> Path:
        return self.folder / "torture_words.py"

    def provider(self, version: int, setup_line: str = "") -> str:
        return PROVIDER.format(
            version=version,
            counter_version=self.counter_version,
            listener=self.listener,
            ledger=str(self.ledger),
            setup_line=setup_line,
        )

    def expected_suffix(self) -> str:
        """How an answer of the version on disk ends."""
        return f":v{self.good_version}:w{self.good_word}"

    def create(self, *, git: bool, askers: int = 4) -> None:
        (self.ledger / "markers").mkdir(parents=True)
        self.folder.mkdir()
        agent = AGENT.format(ledger=str(self.ledger), askers=askers)
        (self.project / "agent.py").write_text(agent, encoding="utf-8")
        self.restore()
        self.write_barrier()
        if git:
            ignore = "__pycache__/\n/providers.*/\n/ledger/\n/rt/\n/state/\n/agent.py\n"
            (self.project / ".gitignore").write_text(ignore, encoding="utf-8")
            self.git("init", "--quiet")
            self.git("add", ".gitignore")
            self.git("commit", "--quiet", "-m", "the torture's project")

    def git(self, *args: str) -> None:
        subprocess.run([*GIT, *args], cwd=self.project, check=True, capture_output=True)

    def write_ui(self, source: str, *, atomic: bool = False) -> None:
        self.ui.with_name("torture_ui.py.moved").unlink(missing_ok=True)
        if atomic:
            staging = self.ui.with_name("torture_ui.py.tmp")
            staging.write_text(source, encoding="utf-8")
            os.replace(staging, self.ui)
        else:
            self.ui.write_text(source, encoding="utf-8")

    def next_version(self) -> str:
        """A new good provider version (not written): its source."""
        self.number += 1
        self.good_version = self.number
        self.good_ui = self.provider(self.number)
        return self.good_ui

    def restore(self) -> None:
        """The modules under their own names with their last good content (written only
        where it differs)."""
        self.ui.with_name("torture_ui.py.moved").unlink(missing_ok=True)
        for path, source in (
            (self.words, f'WORD = "w{self.good_word}"\n'),
            (self.ui, self.good_ui),
        ):
            if not path.exists() or path.read_text(encoding="utf-8") != source:
                path.write_text(source, encoding="utf-8")

    def write_barrier(self) -> str:
        self.barrier += 1
        (self.folder / "torture_barrier.py").write_text(f"TOKEN = {self.barrier}\n")
        return "torture_barrier"

    def edit(self, kind: str) -> str:
        """One ordinary edit; what was done."""
        if kind in ("provider: valid version", "provider: atomic save"):
            self.write_ui(self.next_version(), atomic=kind.endswith("atomic save"))
        elif kind == "provider: syntax error":
            self.number += 1
            self.write_ui(self.provider(self.number) + "\ndef broken(:\n")
        elif kind == "provider: exception in setup":
            self.number += 1
            line = f"    raise RuntimeError('torture: setup of version {self.number} fails')"
            self.write_ui(self.provider(self.number, line))
        elif kind == "provider: deleted":
            if not self.ui.exists():
                self.write_ui(self.next_version())
                return "provider: re-created"
            self.ui.unlink()
        elif kind == "provider: renamed away":
            moved = self.ui.with_name("torture_ui.py.moved")
            if self.ui.exists():
                os.replace(self.ui, moved)
            elif moved.exists():
                os.replace(moved, self.ui)
                return "provider: renamed back"
            else:
                self.write_ui(self.next_version())
                return "provider: re-created"
        elif kind == "helper: valid version":
            self.number += 1
            self.good_word = self.number
            self.words.write_text(f'WORD = "w{self.number}"\n', encoding="utf-8")
        elif kind == "helper: syntax error":
            self.words.write_text("WORD = (\n", encoding="utf-8")
        elif kind == "carry: counter version changed":
            self.counter_version += 1
            self.write_ui(self.next_version())
        elif kind == "carry: listener dropped or carried again":
            self.listener = not self.listener
            self.write_ui(self.next_version())
            return "carry: listener " + ("carried again" if self.listener else "dropped")
        else:
            raise ValueError(f"unknown edit {kind!r}")
        return kind

    # -- the whole folder -------------------------------------------------------------------------

    def content(self, *, new_version: bool) -> dict[str, bytes]:
        files = {path.name: path.read_bytes() for path in self.folder.iterdir() if path.is_file()}
        if new_version:
            files["torture_ui.py"] = self.next_version().encode()
        return files

    def remake(self, *, new_version: bool) -> None:
        files = self.content(new_version=new_version)
        shutil.rmtree(self.folder)
        self._fill(self.folder, files)

    def deploy(self, *, new_version: bool) -> None:
        staging, old = self._sibling("new"), self._sibling("old")
        self._fill(staging, self.content(new_version=new_version))
        os.rename(self.folder, old)
        os.rename(staging, self.folder)
        shutil.rmtree(old)

    def move_away(self) -> Path:
        away = self._sibling("away")
        os.rename(self.folder, away)
        return away

    def move_back(self, away: Path, *, new_version: bool) -> None:
        if new_version:
            (away / "torture_ui.py").write_text(self.next_version(), encoding="utf-8")
        os.rename(away, self.folder)

    def _sibling(self, suffix: str) -> Path:
        path = self.folder.with_name(f"providers.{suffix}")
        if path.exists():
            shutil.rmtree(path)
        return path

    @staticmethod
    def _fill(folder: Path, files: dict[str, bytes]) -> None:
        folder.mkdir()
        for name, data in files.items():
            (folder / name).write_bytes(data)


@dataclass
class Ask:
    """One question of the agent, as its ledger tells it."""

    asked: float
    ended: float | None = None
    answer: str | None = None
    code: str | None = None


class Ledgers:
    """``ledger/``: read as the run goes (answers of the version on disk) and at the end."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.asks: dict[str, Ask] = {}
        self.answered: list[tuple[float, str, str]] = []  # (when, question, answer)
        self._offset = 0
        self._rest = b""

    def _read(self) -> None:
        path = self.folder / "asks.log"
        if not path.exists():
            return
        with path.open("rb") as log:
            log.seek(self._offset)
            data = self._rest + log.read()
            self._offset = log.tell()
        *lines, self._rest = data.split(b"\n")
        for line in lines:
            kind, question, when, *rest = line.decode().split("\t")
            if kind == "asked":
                self.asks[question] = Ask(float(when))
                continue
            ask = self.asks[question]
            ask.ended = float(when)
            if kind == "answered":
                ask.answer = rest[0]
                self.answered.append((float(when), question, rest[0]))
            else:
                ask.code = rest[0]

    def answered_since(self, since: float, suffix: str) -> bool:
        """An ask made after ``since`` got an answer ending with ``suffix``."""
        self._read()
        for when, question, answer in reversed(self.answered):
            if when < since:
                return False
            if self.asks[question].asked >= since and answer.endswith(suffix):
                return True
        return False

    def tally(
        self,
        report: Report,
        gaps: list[tuple[float, float]],
        windows: list[tuple[str, float, float]],
        stopped: float,
        hang_after: float,
    ) -> None:
        """Every must-be-0 counter that the ledger files and markers tell."""
        self._read()
        returned: defaultdict[str, list[str]] = defaultdict(list)
        for line in (self.folder / "answers.log").read_text().splitlines():
            kind, *fields = line.split("\t")
            if kind == "returned":
                returned[fields[0]].append(fields[1])
            else:
                report.count("carried socket closed while still carried", line)
        asks = report.asks
        last = {q.rpartition("-q")[0]: q for q in self.asks}  # each task's last question
        for question, ask in self.asks.items():
            asks["started"] += 1
            given = returned.get(question, [])
            if len(given) > 1:
                report.count("answers given twice", f"{question}: {given}")
            if ask.ended is None or (ask.code is not None and ask.ended >= stopped):
                if last[question.rpartition("-q")[0]] != question:
                    report.count("asks hung", f"{question}: no outcome, not the last ask")
                elif stopped - ask.asked > hang_after:
                    report.count(
                        "asks hung", f"{question}: {stopped - ask.asked:.1f} s at the stop"
                    )
                else:
                    asks["cut by the stop"] += 1
                continue
            if given and ask.answer not in given:
                report.count(
                    "answers discarded", f"{question}: {given}, got {ask.answer or ask.code}"
                )
            if ask.answer is not None:
                asks["answered"] += 1
                if ask.answer.partition("@")[0] != question:
                    report.count("wrong question", f"{question} got {ask.answer}")
                continue
            lost = next(
                (k for k, start, end in windows if ask.asked <= end and ask.ended >= start), None
            )
            if lost is not None:
                report.count("questions lost within the grace", f"{lost}: {question} {ask.code}")
            no_provider = any(
                ask.asked - 0.05 <= end and ask.ended + 0.05 >= start for start, end in gaps
            )
            if ask.code in ("NO_PROVIDER", "ASK_ABORTED") and no_provider:
                asks["failed legitimately"] += 1
                report.legitimate[str(ask.code)] += 1
            else:
                report.unexplained[str(ask.code)] += 1
                report.count("unexplained failures", f"{question}: {ask.code}")
        self._markers(report)

    def _markers(self, report: Report) -> None:
        names = [path.name for path in (self.folder / "markers").iterdir()]
        made: dict[str, int] = defaultdict(int)
        for name in names:
            stem, _, what = name.partition(".")
            made[f"{stem}.{what.partition('.again')[0]}"] += 1
        carry = report.section("carry")
        for stem in {name.partition(".")[0] for name in names}:
            if stem.startswith("generation-"):
                carry["generations set up"] += 1
                if made[f"{stem}.disposed"] != 1:
                    report.count(
                        "disposers not run exactly once",
                        f"{stem}: set up {made[f'{stem}.set-up']}x, disposed "
                        f"{made[f'{stem}.disposed']}x",
                    )
            elif stem.startswith("value-"):
                carry["carried values made"] += 1
                if made[f"{stem}.disposed"] != 1:
                    report.count(
                        "carried values not disposed exactly once",
                        f"{stem}: disposed {made[f'{stem}.disposed']}x",
                    )
                if made[f"{stem}.closed-before-dispose"]:
                    report.count("carried socket closed while still carried", f"{stem}")
