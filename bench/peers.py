"""Save → serve beside the peers, and what each one does on the way (every cell measured).

    .venv/bin/python bench/peers.py [--saves 30]

Methods, each watching its own folder with watchfiles at ``debounce=50, step=8`` (jurigged
uses watchdog; its debounce is set to the same 50 ms):

* ``hotseam`` — a :class:`~hotseam.reload.Reloader`; served = an ``ask`` answered;
* ``importlib.reload`` — ``watchfiles.awatch`` in the same process, then
  ``importlib.reload`` of each changed module;
* ``run_process`` (module only / with hotseam) — ``watchfiles.run_process`` restarting a
  child that imports only the provider module, or hotseam as well;
* ``jurigged`` — ``jurigged.watch`` patching the running code (child process);
* ``hmr`` — the ``hmr`` command (needs Python ≥ 3.12: run from a venv of its own).

The peers are installed on demand: jurigged into this ``.venv`` (``pip install``), hmr into
a Python 3.12 venv made in the temporary folder (``--hmr-python`` picks the interpreter);
none is a dependency of hotseam. A method that cannot be installed is reported, not faked.

The clock starts once the write has completed; saves are spaced 0.15 s apart and the
methods run in a random order each round. Then each method goes through the same scenario,
and the behaviour table says what it did: whether the old version's registration was
removed (the provider registers itself on load), whether a module importing the edited
one saw the change, and whether the old version kept serving after a syntax error and after
an exception raised while the module executes.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import anyio.abc
from anyio.streams.text import TextReceiveStream

from hotseam import Context
from hotseam.interaction import AskUserQuestionRequest, ask
from hotseam.reload import ReloadCommitted, Reloader

SETTLE = 0.15
JITTER = 0.02  # a fixed pause would phase-lock the saves with the watchers' polling steps
DEBOUNCE, STEP = 50, 8  # hotseam's defaults, for every method
QUESTION = AskUserQuestionRequest("Which version is serving?")

HELPER = "VALUE = {value}\n"
# In-process methods share sys.modules: each gets module names of its own.
NAMES = {"hotseam": "hs_", "importlib.reload": "il_"}
# Registers itself at import (a registry outside the watched folder), the way plugin
# modules do; hmr's on_dispose is the one peer that can undo it.
PLAIN = """\
import {prefix}helper as helper
import {registry} as registry
{dispose_import}
VERSION = {version}
VALUE = helper.VALUE
registry.REGISTRY.append(VERSION)
{dispose}
{broken}

def answer():
    return "v{version}/" + str(VALUE)
"""
HOTSEAM = """\
import {prefix}helper as helper
import {registry} as registry
from hotseam.interaction import USER_INTERACTION, AskUserQuestionAnswer

VALUE = helper.VALUE
{broken}

class Provider:
    async def ask(self, request):
        return AskUserQuestionAnswer("v{version}/" + str(VALUE))


def setup(scope):
    registry.REGISTRY.append({version})
    scope.defer(lambda: registry.REGISTRY.remove({version}))
    scope.provide(USER_INTERACTION, Provider())
"""
BROKEN = {
    "": "",
    "syntax": "def broken(:\n",
    "raise": "raise RuntimeError('import-time failure')\n",
}

# A child: prints "serving <answer>" on each (re)load, "state <answer> <registrations>" for
# each line read on stdin.
CHILD = """\
import signal, sys, threading
# A shell's background job starts with SIGINT ignored, which run_process's children would
# inherit: they would then wait for its SIGKILL after 5 s instead of stopping at SIGINT.
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path[:0] = [{folder!r}, {registries!r}]
{extra}
import registry_child as registry
import provider

def state():
    module = sys.modules.get("provider")
    versions = ",".join(map(str, registry.REGISTRY)) or "-"
    try:
        return f"{{module.answer()}} {{versions}}"
    except Exception:
        return f"none {{versions}}"

print("serving " + provider.answer(), flush=True)
{watch}
for line in sys.stdin:
    print(f"state {{line.strip()}} " + state(), flush=True)
"""
JURIGGED_WATCH = """\
import jurigged
jurigged.watch(pattern={folder!r} + "/*.py", logger=lambda event: print(
    "serving " + state().split()[0], flush=True), debounce=0.05)
"""
HMR_ENTRY = """\
import builtins, sys, threading
sys.path.insert(0, {registries!r})
import registry_child as registry
import provider

print("serving " + provider.answer(), flush=True)
registry.CURRENT = provider


def _serve():
    for line in sys.stdin:
        versions = ",".join(map(str, registry.REGISTRY)) or "-"
        try:
            print(f"state {{line.strip()}} {{registry.CURRENT.answer()}} {{versions}}", flush=True)
        except Exception:
            print(f"state {{line.strip()}} none {{versions}}", flush=True)


if not getattr(builtins, "_peer_serving", False):
    builtins._peer_serving = True
    threading.Thread(target=_serve, daemon=True).start()
"""
HMR_LAUNCH = """\
import functools, sys, watchfiles
watchfiles.watch = functools.partial(watchfiles.watch, debounce={debounce}, step={step})
from reactivity.hmr.run import run_path
run_path(sys.argv[1], sys.argv[1:])
"""
RUN_PROCESS = """\
import sys
from watchfiles import run_process
run_process(sys.argv[1], target=sys.argv[2], target_type="command", debounce={debounce},
            step={step})
"""


def write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


class Method:
    """One way of reloading; ``answer()``: what serves now (``None``: nothing)."""

    name = ""
    plain = True

    def __init__(self, folder: Path, registries: Path) -> None:
        self.folder = folder
        self.registries = registries

    @property
    def prefix(self) -> str:
        return NAMES.get(self.name, "")

    def provider(self, version: int, broken: str = "", registry: str = "registry_child") -> str:
        if not self.plain:
            return HOTSEAM.format(
                version=version, registry=registry, broken=BROKEN[broken], prefix=self.prefix
            )
        dispose_import = "from reactivity.hmr import on_dispose" if self.name == "hmr" else ""
        dispose = "on_dispose(lambda: registry.REGISTRY.remove(VERSION))" if dispose_import else ""
        return PLAIN.format(
            prefix=self.prefix,
            version=version,
            registry=registry,
            broken=BROKEN[broken],
            dispose=dispose,
            dispose_import=dispose_import,
        )

    async def start(self, stack: contextlib.AsyncExitStack) -> None:
        raise NotImplementedError

    async def until_serving(self, expected: str, timeout: float) -> bool:
        raise NotImplementedError

    async def state(self) -> tuple[str | None, list[int]]:
        """What serves now (``None``: nothing) and the versions registered."""
        raise NotImplementedError

    def save(self, version: int, broken: str = "") -> None:
        write(self.folder / f"{self.prefix}provider.py", self.provider(version, broken))

    def save_helper(self, value: int) -> None:
        write(self.folder / f"{self.prefix}helper.py", HELPER.format(value=value))


class Child(Method):
    """A method that runs in other processes, talking over stdin/stdout."""

    command: list[str]
    process: anyio.abc.Process

    async def start(self, stack: contextlib.AsyncExitStack) -> None:
        self.process = await stack.enter_async_context(
            await anyio.open_process(
                self.command,
                cwd=self.folder,
                env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"},
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
        stack.callback(self._kill)
        assert self.process.stdout is not None
        self.lines = TextReceiveStream(self.process.stdout)
        self.buffer = ""
        if not await self.until_serving("v0/0", 60):
            raise RuntimeError(f"{self.name} did not start")

    def _kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, 9)

    async def _line(self, deadline: float) -> str | None:
        while "\n" not in self.buffer:
            with anyio.move_on_after(max(deadline - time.perf_counter(), 0)):
                self.buffer += await self.lines.receive()
                continue
            return None
        line, self.buffer = self.buffer.split("\n", 1)
        return line

    async def until_serving(self, expected: str, timeout: float) -> bool:
        deadline = time.perf_counter() + timeout
        while (line := await self._line(deadline)) is not None:
            if line == f"serving {expected}":
                return True
        return False

    async def state(self) -> tuple[str | None, list[int]]:
        assert self.process.stdin is not None
        self.queries = getattr(self, "queries", 0) + 1
        await self.process.stdin.send(f"{self.queries}\n".encode())
        deadline = time.perf_counter() + 2.0
        while (line := await self._line(deadline)) is not None:
            parts = line.split()
            if parts[:2] == ["state", str(self.queries)]:  # older, unanswered queries skipped
                versions = [] if parts[3] == "-" else [int(v) for v in parts[3].split(",")]
                return (None if parts[2] == "none" else parts[2]), versions
        return None, []


def child_script(folder: Path, registries: Path, extra: str = "", watch: str = "") -> Path:
    script = folder.parent / f"{folder.name}_child.py"
    write(
        script,
        CHILD.format(folder=str(folder), registries=str(registries), extra=extra, watch=watch),
    )
    return script


class RunProcess(Child):
    name = "run_process, module only"
    extra = ""

    async def start(self, stack: contextlib.AsyncExitStack) -> None:
        script = child_script(self.folder, self.registries, self.extra)
        runner = RUN_PROCESS.format(debounce=DEBOUNCE, step=STEP)
        self.command = [
            sys.executable,
            "-c",
            runner,
            str(self.folder),
            f"{sys.executable} {script}",
        ]
        await super().start(stack)


class RunProcessHotseam(RunProcess):
    name = "run_process, child imports hotseam"
    extra = "import hotseam, hotseam.interaction"


class Jurigged(Child):
    name = "jurigged"

    async def start(self, stack: contextlib.AsyncExitStack) -> None:
        watch = JURIGGED_WATCH.format(folder=str(self.folder))
        script = child_script(self.folder, self.registries, watch=watch)
        self.command = [sys.executable, str(script)]
        await super().start(stack)


class Hmr(Child):
    name = "hmr"
    python = ""

    async def start(self, stack: contextlib.AsyncExitStack) -> None:
        entry = self.folder / "entry.py"
        write(entry, HMR_ENTRY.format(registries=str(self.registries)))
        launch = HMR_LAUNCH.format(debounce=DEBOUNCE, step=STEP)
        self.command = [self.python, "-c", launch, str(entry)]
        await super().start(stack)


class Hotseam(Method):
    name = "hotseam"
    plain = False

    async def start(self, stack: contextlib.AsyncExitStack) -> None:
        self.context = Context("peers")
        self.registry = importlib.import_module("registry_hotseam")
        reloader = await stack.enter_async_context(Reloader(self.context, [self.folder]))
        self.events = await stack.enter_async_context(reloader.events())

    def provider(self, version: int, broken: str = "", registry: str = "registry_hotseam") -> str:
        return super().provider(version, broken, registry)

    async def until_serving(self, expected: str, timeout: float) -> bool:
        with anyio.move_on_after(timeout):
            while True:
                await self.events.next(ReloadCommitted)
                if (await self.state())[0] == expected:
                    return True
        return False

    async def state(self) -> tuple[str | None, list[int]]:
        try:
            with anyio.fail_after(1):
                answer: str | None = (await ask(QUESTION, context=self.context)).answer
        except Exception:  # no provider, or it failed
            answer = None
        return answer, list(self.registry.REGISTRY)


class ImportlibReload(Method):
    name = "importlib.reload"

    async def start(self, stack: contextlib.AsyncExitStack) -> None:
        import watchfiles

        sys.path.insert(0, str(self.folder))
        stack.callback(sys.path.remove, str(self.folder))
        stack.callback(lambda: [sys.modules.pop(n, None) for n in ("il_helper", "il_provider")])
        self.registry = importlib.import_module("registry_importlib")
        self.module = importlib.import_module("il_provider")
        self.reloaded = anyio.Event()
        group = await stack.enter_async_context(anyio.create_task_group())
        stack.push_async_callback(self._stop, group)
        stop = anyio.Event()
        self._stop_event = stop

        async def follow() -> None:
            async for batch in watchfiles.awatch(
                self.folder, debounce=DEBOUNCE, step=STEP, stop_event=stop
            ):
                for name in sorted({Path(path).stem for _, path in batch}):
                    module = sys.modules.get(name)
                    if module is not None:
                        with contextlib.suppress(Exception):
                            importlib.reload(module)
                self.reloaded.set()
                self.reloaded = anyio.Event()

        group.start_soon(follow)
        await anyio.sleep(0.2)  # the watch is set up in a thread; awatch does not say when

    async def _stop(self, group: anyio.abc.TaskGroup) -> None:
        self._stop_event.set()
        group.cancel_scope.cancel()

    def provider(self, version: int, broken: str = "", registry: str = "registry_importlib") -> str:
        return super().provider(version, broken, registry)

    async def until_serving(self, expected: str, timeout: float) -> bool:
        with anyio.move_on_after(timeout):
            while (await self.state())[0] != expected:
                await self.reloaded.wait()
            return True
        return False

    async def state(self) -> tuple[str | None, list[int]]:
        try:
            answer: str | None = sys.modules["il_provider"].answer()
        except Exception:
            answer = None
        return answer, list(self.registry.REGISTRY)


# -- installing the peers -----------------------------------------------------------------------


def have(module: str, python: str = sys.executable) -> bool:
    probe = subprocess.run([python, "-c", f"import {module}"], capture_output=True, check=False)
    return probe.returncode == 0


def ensure_jurigged() -> str | None:
    """None when importable (installed into this venv if needed), else why not."""
    if have("jurigged"):
        return None
    pip = [sys.executable, "-m", "pip", "install", "-q", "jurigged"]
    done = subprocess.run(pip, capture_output=True, text=True, check=False)
    return None if done.returncode == 0 and have("jurigged") else done.stderr[-300:]


def ensure_hmr(python: str | None, where: Path) -> tuple[str | None, str | None]:
    """(the interpreter of a venv with hmr, None) or (None, why not)."""
    candidates = [python] if python else []
    candidates += [shutil.which(f"python3.{minor}") or "" for minor in (13, 12)]
    candidates += [
        str(path) for path in sorted(Path.home().glob(".pyenv/versions/3.1[2-9]*/bin/python"))
    ]
    for base in filter(None, candidates):
        check = subprocess.run(
            [base, "-c", "import sys; assert sys.version_info >= (3, 12)"],
            capture_output=True,
            check=False,
        )
        if check.returncode:
            continue
        venv = where / "hmr-venv"
        subprocess.run([base, "-m", "venv", str(venv)], check=True, capture_output=True)
        interpreter = str(venv / "bin" / "python")
        pip = [interpreter, "-m", "pip", "install", "-q", "hmr"]
        done = subprocess.run(pip, capture_output=True, text=True, check=False)
        if done.returncode == 0 and have("reactivity.hmr", interpreter):
            return interpreter, None
        return None, done.stderr[-300:]
    return None, "no Python >= 3.12 found (hmr needs it); pass --hmr-python"


# -- the run --------------------------------------------------------------------------------------


async def main(saves: int, hmr_python: str | None) -> None:
    random.seed(1)
    with tempfile.TemporaryDirectory() as tmp:
        top = Path(tmp)
        registries = top / "registries"
        registries.mkdir()
        for name in ("registry_hotseam", "registry_importlib", "registry_child"):
            write(registries / f"{name}.py", "REGISTRY = []\nCURRENT = None\n")
        sys.path.insert(0, str(registries))
        kinds: list[type[Method]] = [Hotseam, ImportlibReload, RunProcess, RunProcessHotseam]
        missing: dict[str, str] = {}
        if (why := ensure_jurigged()) is None:
            kinds.append(Jurigged)
        else:
            missing["jurigged"] = why
        interpreter, why_not = ensure_hmr(hmr_python, top)
        if interpreter is not None:
            Hmr.python = interpreter
            kinds.append(Hmr)
        else:
            missing["hmr"] = why_not or "?"
        methods: list[Method] = []
        for number, kind in enumerate(kinds):
            folder = top / f"m{number}"
            folder.mkdir()
            method = kind(folder, registries)
            method.save_helper(0)
            method.save(0)
            methods.append(method)
        async with contextlib.AsyncExitStack() as stack:
            for method in methods:
                await method.start(stack)
                print(f"  started: {method.name}", file=sys.stderr)
            samples = await latencies(methods, saves)
            behaviour = {method.name: await scenario(method, saves + 1) for method in methods}
        sys.path.remove(str(registries))
    report(samples, behaviour, missing, saves)


async def latencies(methods: list[Method], saves: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {method.name: [] for method in methods}
    for version in range(1, saves + 1):
        for method in random.sample(methods, len(methods)):
            await anyio.sleep(SETTLE + random.uniform(0, JITTER))
            method.save(version)
            started = time.perf_counter()
            if await method.until_serving(f"v{version}/0", 5):
                samples[method.name].append(time.perf_counter() - started)
    return samples


async def scenario(method: Method, version: int) -> dict[str, bool]:
    """The behaviour cells of one method; ``version`` is the next version to save.

    The provider registers itself when it loads, and undoes that where the method lets it
    (hotseam's ``scope.defer``, hmr's ``on_dispose``). "disposes old registrations": the new
    version serves and the registry holds its registration alone; "reloads dependents": a
    module that copied a value of the edited one at import serves the new value; "keeps
    serving": a good save was applied, and after a broken save the same answer comes back
    and the registry is exactly as before it.
    """
    cells: dict[str, bool] = {}
    last = version - 1
    answer, registered = await method.state()
    cells["disposes old registrations"] = answer == f"v{last}/0" and registered == [last]
    method.save_helper(1)
    cells["reloads dependents"] = await method.until_serving(f"v{last}/1", 3)
    for broken, cell in (
        ("syntax", "keeps serving after a syntax error"),
        ("raise", "keeps serving after an import-time exception"),
    ):
        await anyio.sleep(SETTLE + random.uniform(0, JITTER))
        method.save(version + 1)  # a good version first
        await anyio.sleep(2.0)  # a restart that imports hotseam takes over 1 s on a busy VM
        good, before = await method.state()
        await anyio.sleep(SETTLE + random.uniform(0, JITTER))
        method.save(version + 2, broken)
        await anyio.sleep(1.0)  # every method has seen it by then (>= 10x its latency)
        answer, registered = await method.state()
        applied = good is not None and good.startswith(f"v{version + 1}/")
        cells[cell] = applied and answer == good and registered == before  # untouched
        version += 2
    return cells


def report(
    samples: dict[str, list[float]],
    behaviour: dict[str, dict[str, bool]],
    missing: dict[str, str],
    saves: int,
) -> None:
    print(
        f"Save → serving, watchfiles debounce={DEBOUNCE} ms step={STEP} ms, clock started "
        f"after the write, {saves} saves each, methods in random order each round (ms):\n"
    )
    base = statistics.median(samples["hotseam"])
    print("| method | saves served | median | p95 | x hotseam |")
    print("|---|---:|---:|---:|---:|")
    for name, values in samples.items():
        if not values:
            print(f"| {name} | 0 | - | - | - |")
            continue
        p95 = statistics.quantiles(sorted(values), n=100, method="inclusive")[94]
        median = statistics.median(values)
        print(
            f"| {name} | {len(values)} | {median * 1000:.1f} | {p95 * 1000:.1f} | "
            f"{median / base:.2f}x |"
        )
    cells = next(iter(behaviour.values())).keys()
    print("\n| method | " + " | ".join(cells) + " |")
    print("|---|" + "---|" * len(cells))
    for name, row in behaviour.items():
        print(f"| {name} | " + " | ".join("yes" if row[c] else "no" for c in cells) + " |")
    for name, why in missing.items():
        print(f"\n{name}: not measured ({why.strip()})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saves", type=int, default=30)
    parser.add_argument("--hmr-python", help="a Python >= 3.12 to make hmr's venv with")
    options = parser.parse_args()
    anyio.run(main, options.saves, options.hmr_python)
