"""Save → serve beside the peers, at equal settings and at each one's defaults.

    .venv/bin/python bench/peers.py [--saves 30] [--hmr-python PYTHON] [--hog N]

Every method runs twice, interleaved with all the others in a random order each round:

* **equal** — the same watcher timings for everyone: a batch once changes paused 8 ms, at
  the latest 50 ms after the first (watchfiles ``debounce=50, step=8``; jurigged's trailing
  debounce 8 ms; hotseam's native watcher ``step_ms=8, debounce_ms=50``, which on Linux
  reports a completed save at once and uses the 8 ms only for other changes);
* **defaults** — each method as its users get it: watchfiles ``awatch``/``watch``/
  ``run_process`` defaults (``debounce=1600, step=50``), jurigged's 50 ms debounce, hmr's
  ``watchfiles.watch()`` defaults, hotseam's ``Reloader`` defaults.

hotseam also runs with its watchfiles backend at the equal settings (what it used before
the event-driven watch), so the watcher's share is visible. The "equal settings" compare
hotseam's event-driven watch (a completed save reported at once) with watchfiles' *8 ms
polling step*; so ``importlib.reload`` on ``awatch`` and hmr also run at **step 1**
(``debounce=50, step=1``: a batch once changes paused 1 ms, the latency budget closest to
an event-driven watch, which those peers pay for with a wake-up every millisecond while
idle: ``scale.py``'s idle table). And **the floor** runs in the same rounds: a bare
process doing a blocking inotify read, read, ``compile``, ``exec`` and a call
(``bench/_floor.py``), timed by its own clock from the end of the write.

Methods:

* ``hotseam`` — a :class:`~hotseam.reload.Reloader` in a process of its own (as the peers
  that run in children; in this one the in-process peers' polling threads would take the
  interpreter lock from its loop); served = an ``ask`` answered. Its own work (the
  watcher's batch → the answer, by the child's clock) is reported too;
* ``importlib.reload`` — ``watchfiles.awatch`` in the same process, then
  ``importlib.reload`` of each changed module (at step 1, in a child process: see
  ``ImportlibReloadStep1``);
* ``run_process`` (module only / with hotseam) — ``watchfiles.run_process`` restarting a
  child that imports only the provider module, or hotseam as well;
* ``jurigged`` — ``jurigged.watch`` patching the running code (child process);
* ``hmr`` — the ``hmr`` command (needs Python ≥ 3.12: run from a venv of its own).

The peers are installed on demand: jurigged into this ``.venv`` (``pip install``), hmr into
a Python 3.12 venv made in the temporary folder (``--hmr-python`` picks the interpreter);
none is a dependency of hotseam. A method that cannot be installed is reported, not faked.

Bytecode: hotseam is compiled before the run and every library loads from its cached
bytecode, so a restart does not recompile hotseam; the edited modules are compiled from
source at every load, by every method (no process of the run writes bytecode:
``PYTHONDONTWRITEBYTECODE=1``), since a cached ``.pyc`` of a module saved twice in the same
second with the same size would be taken for current and serve the old version.

The clock starts once the write has completed; saves are spaced 0.15 s (+ up to 20 ms at
random) apart. Then each method goes through the same scenario (at the equal settings),
and the behaviour table says what it did: whether the old version's registration was
removed (the provider registers itself on load), whether a module importing the edited one
saw the change, and whether the old version kept serving after a syntax error and after an
exception raised while the module executes.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import importlib
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import anyio
import anyio.abc
from _floor import floor
from anyio.streams.text import TextReceiveStream

import hotseam
from _hog import add_hog_option, hog
from hotseam import Context
from hotseam.interaction import AskUserQuestionRequest, ask
from hotseam.reload import (
    FileChange,
    NativeWatcher,
    ReloadCommitted,
    Reloader,
    Watcher,
    WatchOptions,
    WatchRoot,
)
from hotseam.reload._watcher import Backend

SETTLE = 0.15
JITTER = 0.02  # a fixed pause would phase-lock the saves with the watchers' polling steps
DEBOUNCE, STEP = 50, 8  # the equal settings: hotseam's defaults, for every method
WF_DEBOUNCE, WF_STEP = 1600, 50  # watchfiles' own defaults (watch, awatch, run_process)
JURIGGED_DEFAULT = 0.05  # jurigged.watch's DEFAULT_DEBOUNCE (s)
QUESTION = AskUserQuestionRequest("Which version is serving?")

HELPER = "VALUE = {value}\n"
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
    "serving " + state().split()[0], flush=True), debounce={debounce})
"""
HOTSEAM_CHILD = """\
import signal, sys, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path[:0] = [{registries!r}]
import anyio, anyio.from_thread
from hotseam import Context
from hotseam.interaction import AskUserQuestionRequest, ask
from hotseam.reload import FileChange, NativeWatcher, ReloadCommitted, Reloader, WatchOptions
import registry_child as registry

QUESTION = AskUserQuestionRequest("Which version is serving?")
LAST_BATCH = [0.0]


class Timed:
    def __init__(self, inner):
        self.inner = inner

    def open(self, roots):
        return self._open(roots)

    @__import__("contextlib").asynccontextmanager
    async def _open(self, roots):
        async with self.inner.open(roots) as batches:
            async def timed():
                async for batch in batches:
                    LAST_BATCH[0] = time.perf_counter()
                    yield batch
            yield timed()


async def main():
    context = Context("peer")
    watcher = Timed(NativeWatcher(debounce_ms={debounce}, step_ms={step}, backend={backend!r}))

    async def answer():
        try:
            with anyio.fail_after(1):
                return (await ask(QUESTION, context=context)).answer
        except Exception:
            return "none"

    async with Reloader(context, [{folder!r}], watch=WatchOptions(watcher=watcher)) as reloader:
        async with reloader.events() as events:
            print("serving " + await answer(), flush=True)
            token = anyio.lowlevel.current_token()

            def serve():
                for line in sys.stdin:
                    now = anyio.from_thread.run(answer, token=token)
                    versions = ",".join(map(str, registry.REGISTRY)) or "-"
                    print(f"state {{line.strip()}} {{now}} {{versions}}", flush=True)

            threading.Thread(target=serve, daemon=True).start()
            while True:
                await events.next(ReloadCommitted)
                now = await answer()
                own = (time.perf_counter() - LAST_BATCH[0]) * 1000
                print(f"serving {{now}} {{own!r}}", flush=True)


anyio.run(main)
"""
AWATCH_RELOAD = """\
import asyncio, importlib, threading, watchfiles
async def _follow():
    async for _ in watchfiles.awatch({folder!r}, debounce={debounce}, step={step}):
        for name in ("helper", "provider"):
            try:
                importlib.reload(sys.modules[name])
            except Exception:
                pass
        print("serving " + state().split()[0], flush=True)
threading.Thread(target=asyncio.run, args=(_follow(),), daemon=True).start()
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
if {equal}:
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
    """One way of reloading; ``answer()``: what serves now (``None``: nothing).

    ``equal``: at the settings every method shares; else at its own defaults."""

    name = ""
    plain = True
    in_process = False
    step1 = False
    """At ``debounce=50, step=1`` (the closest a polling watcher gets to an event-driven one)."""
    served_at: float | None = None
    """When the last save was served by the method's own clock (``perf_counter``), if it
    keeps one; else the bench's clock at the answer is used."""
    last_own: float | None = None
    """hotseam: its own part of the last save served (the watcher's batch → the answer)."""

    def __init__(self, folder: Path, registries: Path, equal: bool, number: int) -> None:
        self.folder = folder
        self.registries = registries
        self.equal = equal
        # In-process methods share sys.modules: each gets module names of its own, and a
        # registry of its own.
        self.prefix = f"m{number}_" if self.in_process else ""
        self.registry = f"registry_m{number}" if self.in_process else "registry_child"

    @property
    def label(self) -> str:
        if self.step1:
            return f"{self.name}, step 1"
        return f"{self.name}, {'equal settings' if self.equal else 'its defaults'}"

    @property
    def settings(self) -> str:
        """The watcher settings, as the report shows them."""
        if self.step1:
            return f"debounce={DEBOUNCE}, step=1"
        return (
            f"debounce={DEBOUNCE}, step={STEP}"
            if self.equal
            else (f"debounce={WF_DEBOUNCE}, step={WF_STEP}")
        )

    def timings(self) -> tuple[int, int]:
        """watchfiles' ``(debounce, step)`` for this method."""
        if self.step1:
            return DEBOUNCE, 1
        return (DEBOUNCE, STEP) if self.equal else (WF_DEBOUNCE, WF_STEP)

    def provider(self, version: int, broken: str = "") -> str:
        registry = self.registry
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
        # Libraries load from their cached bytecode; the edited modules are compiled from
        # source at every load (see the module's docstring).
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}
        self.process = await stack.enter_async_context(
            await anyio.open_process(
                self.command,
                cwd=self.folder,
                env=env,
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
    """The child's script, beside ``folder`` (not in it: it is not watched)."""
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
        debounce, step = (DEBOUNCE, STEP) if self.equal else (WF_DEBOUNCE, WF_STEP)
        runner = RUN_PROCESS.format(debounce=debounce, step=step)
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

    @property
    def settings(self) -> str:
        return f"watchdog, debounce={STEP if self.equal else JURIGGED_DEFAULT * 1000:g} ms"

    async def start(self, stack: contextlib.AsyncExitStack) -> None:
        debounce = STEP / 1000 if self.equal else JURIGGED_DEFAULT
        watch = JURIGGED_WATCH.format(folder=str(self.folder), debounce=debounce)
        script = child_script(self.folder, self.registries, watch=watch)
        self.command = [sys.executable, str(script)]
        await super().start(stack)


class Hmr(Child):
    name = "hmr"
    python = ""

    async def start(self, stack: contextlib.AsyncExitStack) -> None:
        entry = self.folder / "entry.py"
        write(entry, HMR_ENTRY.format(registries=str(self.registries)))
        debounce, step = self.timings()
        launch = HMR_LAUNCH.format(equal=self.equal, debounce=debounce, step=step)
        self.command = [self.python, "-c", launch, str(entry)]
        await super().start(stack)


class TimedWatcher:
    """A :class:`~hotseam.reload.Watcher` that notes when each batch leaves the watcher,
    so that hotseam's own work (batch → served) can be told from the watcher's wait."""

    def __init__(self, inner: Watcher) -> None:
        self.inner = inner
        self.last_batch = 0.0

    def open(
        self, roots: Sequence[WatchRoot]
    ) -> AbstractAsyncContextManager[AsyncIterator[Collection[FileChange]]]:
        return self._open(roots)

    @asynccontextmanager
    async def _open(
        self, roots: Sequence[WatchRoot]
    ) -> AsyncIterator[AsyncIterator[Collection[FileChange]]]:
        async with self.inner.open(roots) as batches:

            async def timed() -> AsyncIterator[Collection[FileChange]]:
                async for batch in batches:
                    self.last_batch = time.perf_counter()
                    yield batch

            yield timed()


class Hotseam(Method):
    name = "hotseam"
    plain = False
    in_process = True
    backend: Backend = "auto"

    @property
    def label(self) -> str:
        if self.backend == "watchfiles":
            return "hotseam, watchfiles backend, equal settings"
        return f"hotseam ({NativeWatcher().backend}), its defaults = the equal settings"

    @property
    def settings(self) -> str:
        watcher = self.watcher.inner
        assert isinstance(watcher, NativeWatcher)
        return f"{watcher.backend}, step_ms={watcher.step_ms}, debounce_ms={watcher.debounce_ms}"

    async def start(self, stack: contextlib.AsyncExitStack) -> None:
        self.context = Context("peers")
        self.registry_module = importlib.import_module(self.registry)
        native = NativeWatcher(debounce_ms=DEBOUNCE, step_ms=STEP, backend=self.backend)
        self.watcher = TimedWatcher(native)
        reloader = await stack.enter_async_context(
            Reloader(self.context, [self.folder], watch=WatchOptions(watcher=self.watcher))
        )
        self.events = await stack.enter_async_context(reloader.events())

    async def until_serving(self, expected: str, timeout: float) -> bool:
        with anyio.move_on_after(timeout):
            while True:
                await self.events.next(ReloadCommitted)
                if (await self.state())[0] == expected:
                    self.last_own = time.perf_counter() - self.watcher.last_batch
                    return True
        return False

    async def state(self) -> tuple[str | None, list[int]]:
        try:
            with anyio.fail_after(1):
                answer: str | None = (await ask(QUESTION, context=self.context)).answer
        except Exception:  # no provider, or it failed
            answer = None
        return answer, list(self.registry_module.REGISTRY)


class HotseamWatchfiles(Hotseam):
    backend: Backend = "watchfiles"


class HotseamChild(Child):
    """hotseam in a process of its own, like the peers that run in children: in this one,
    the in-process peers' watcher threads (awatch polling every 8 ms) take the interpreter
    lock from its event loop, each time a wake-up of a sleeping thread (milliseconds on a
    loaded machine)."""

    name = "hotseam"
    plain = False
    backend: Backend = "auto"

    @property
    def label(self) -> str:
        if self.backend == "watchfiles":
            return "hotseam, watchfiles backend, equal settings"
        return f"hotseam ({NativeWatcher().backend}), its defaults = the equal settings"

    @property
    def settings(self) -> str:
        watcher = NativeWatcher(debounce_ms=DEBOUNCE, step_ms=STEP, backend=self.backend)
        return f"{watcher.backend}, step_ms={watcher.step_ms}, debounce_ms={watcher.debounce_ms}"

    async def start(self, stack: contextlib.AsyncExitStack) -> None:
        script = self.folder.parent / f"{self.folder.name}_hotseam.py"
        write(
            script,
            HOTSEAM_CHILD.format(
                registries=str(self.registries),
                folder=str(self.folder),
                debounce=DEBOUNCE,
                step=STEP,
                backend=self.backend,
            ),
        )
        self.command = [sys.executable, str(script)]
        await super().start(stack)

    async def until_serving(self, expected: str, timeout: float) -> bool:
        deadline = time.perf_counter() + timeout
        while (line := await self._line(deadline)) is not None:
            parts = line.split()
            if parts[:2] == ["serving", expected]:
                self.last_own = float(parts[2]) / 1000 if len(parts) > 2 else None
                return True
        return False


class HotseamChildWatchfiles(HotseamChild):
    backend: Backend = "watchfiles"


class ImportlibReload(Method):
    name = "importlib.reload"
    in_process = True

    async def start(self, stack: contextlib.AsyncExitStack) -> None:
        import watchfiles

        sys.path.insert(0, str(self.folder))
        stack.callback(sys.path.remove, str(self.folder))
        names = (f"{self.prefix}helper", f"{self.prefix}provider")
        stack.callback(lambda: [sys.modules.pop(n, None) for n in names])
        self.registry_module = importlib.import_module(self.registry)
        self.module = importlib.import_module(f"{self.prefix}provider")
        self.reloaded = anyio.Event()
        group = await stack.enter_async_context(anyio.create_task_group())
        stack.push_async_callback(self._stop, group)
        stop = anyio.Event()
        self._stop_event = stop

        debounce, step = self.timings()

        async def follow() -> None:
            async for batch in watchfiles.awatch(
                self.folder, debounce=debounce, step=step, stop_event=stop
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

    async def until_serving(self, expected: str, timeout: float) -> bool:
        with anyio.move_on_after(timeout):
            while (await self.state())[0] != expected:
                await self.reloaded.wait()
            return True
        return False

    async def state(self) -> tuple[str | None, list[int]]:
        try:
            answer: str | None = sys.modules[f"{self.prefix}provider"].answer()
        except Exception:
            answer = None
        return answer, list(self.registry_module.REGISTRY)


class ImportlibReloadStep1(Child):
    """``importlib.reload`` on ``awatch(step=1)``, in a process of its own: a watcher that
    wakes every millisecond would take the interpreter lock from the others in this one."""

    name = "importlib.reload"
    step1 = True

    async def start(self, stack: contextlib.AsyncExitStack) -> None:
        debounce, step = self.timings()
        watch = AWATCH_RELOAD.format(folder=str(self.folder), debounce=debounce, step=step)
        script = child_script(self.folder, self.registries, watch=watch)
        self.command = [sys.executable, str(script)]
        await super().start(stack)


class HmrStep1(Hmr):
    step1 = True


class Floor(Method):
    """The floor: a bare process (``bench/_floor.py``) serving the saved module's
    ``answer()`` after a blocking inotify read, a read, ``compile`` and ``exec``."""

    name = "floor (inotify read + read + compile + exec + call)"

    @property
    def label(self) -> str:
        return self.name

    @property
    def settings(self) -> str:
        return "a blocking inotify read"

    async def start(self, stack: contextlib.AsyncExitStack) -> None:
        self.bare = stack.enter_context(floor(self.folder))

    def save(self, version: int, broken: str = "") -> None:
        if hasattr(self, "bare"):  # version 0 is written when the floor starts
            self.bare.save(version)

    def save_helper(self, value: int) -> None:
        pass

    async def until_serving(self, expected: str, timeout: float) -> bool:
        version = int(expected[1:].partition("/")[0])
        with anyio.move_on_after(timeout):
            self.served_at = await anyio.to_thread.run_sync(self.bare.served, version)
            return True
        return False

    async def state(self) -> tuple[str | None, list[int]]:
        return None, []


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


def machine() -> str:
    """The machine, the interpreter and the load, for the report's header."""
    uname = platform.uname()
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    return (
        f"{uname.system} {uname.release} {uname.machine}; {os.cpu_count()} cores (nproc); "
        f"Python {platform.python_version()}; load average {load}"
    )


def compile_hotseam() -> None:
    """Write hotseam's bytecode now, so that no process of the run compiles its source."""
    compileall.compile_dir(Path(hotseam.__file__).parent, quiet=1)


async def main(saves: int, hmr_python: str | None) -> None:
    random.seed(1)
    compile_hotseam()
    sys.dont_write_bytecode = True  # the edited modules: compiled from source at every load
    header = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {machine()}"
    with tempfile.TemporaryDirectory() as tmp:
        top = Path(tmp)
        registries = top / "registries"
        registries.mkdir()
        write(registries / "registry_child.py", "REGISTRY = []\nCURRENT = None\n")
        sys.path.insert(0, str(registries))
        # hotseam's defaults are the equal settings: one row, and its watchfiles backend.
        kinds: list[tuple[type[Method], bool]] = [
            (HotseamChild, True),
            (HotseamChildWatchfiles, True),
        ]
        peers: list[type[Method]] = [ImportlibReload, RunProcess, RunProcessHotseam]
        missing: dict[str, str] = {}
        if (why := ensure_jurigged()) is None:
            peers.append(Jurigged)
        else:
            missing["jurigged"] = why
        interpreter, why_not = ensure_hmr(hmr_python, top)
        if interpreter is not None:
            Hmr.python = interpreter
            peers.append(Hmr)
        else:
            missing["hmr"] = why_not or "?"
        kinds += [(kind, equal) for kind in peers for equal in (True, False)]
        kinds.insert(1, (ImportlibReloadStep1, True))
        if Hmr in peers:
            kinds.insert(2, (HmrStep1, True))
        kinds.append((Floor, True))
        methods: list[Method] = []
        for number, (kind, equal) in enumerate(kinds):
            folder = top / f"m{number}"
            folder.mkdir()
            method = kind(folder, registries, equal, number)
            if method.in_process:
                write(registries / f"{method.registry}.py", "REGISTRY = []\nCURRENT = None\n")
            method.save_helper(0)
            method.save(0)
            methods.append(method)
        async with contextlib.AsyncExitStack() as stack:
            for method in methods:
                await method.start(stack)
                print(f"  started: {method.label}", file=sys.stderr)
            samples, own = await latencies(methods, saves)
            behaviour = {
                method.name: await scenario(method, saves + 2)
                for method in methods
                if method.equal
                and not method.step1
                and not isinstance(method, (HotseamWatchfiles, HotseamChildWatchfiles, Floor))
            }
        sys.path.remove(str(registries))
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    ended = f"{datetime.now(UTC):%H:%M} UTC, load average {load}"
    report(methods, samples, own, behaviour, missing, saves, header, ended)


async def latencies(
    methods: list[Method], saves: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Save → served per method (and hotseam's own part), every method in a random order
    each round; the first round warms every method up and is not counted."""
    samples: dict[str, list[float]] = {method.label: [] for method in methods}
    own: dict[str, list[float]] = {method.label: [] for method in methods}
    for version in range(1, saves + 2):
        for method in random.sample(methods, len(methods)):
            await anyio.sleep(SETTLE + random.uniform(0, JITTER))
            method.save(version)
            started = time.perf_counter()
            method.last_own = method.served_at = None
            if await method.until_serving(f"v{version}/0", 5) and version > 1:
                served = method.served_at or time.perf_counter()
                samples[method.label].append(served - started)
                if (part := _own_part(method)) is not None:
                    own[method.label].append(part)
    return samples, own


def _own_part(method: Method) -> float | None:
    """What ``until_serving`` noted (read through a call: the await changed it)."""
    return method.last_own


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


def _p95(values: list[float]) -> float:
    return statistics.quantiles(sorted(values), n=100, method="inclusive")[94]


def report(
    methods: list[Method],
    samples: dict[str, list[float]],
    own: dict[str, list[float]],
    behaviour: dict[str, dict[str, bool]],
    missing: dict[str, str],
    saves: int,
    header: str,
    ended: str,
) -> None:
    print(f"Run of {header}; ended {ended}.")
    print(
        "Bytecode: hotseam and the libraries from their cached bytecode (compiled first); the "
        "edited modules compiled from source at every load (no process writes bytecode).\n"
    )
    print(
        f"Save → serving, clock started after the write, {saves} saves each (after one "
        "round of warm-up), every method in a random order each round (ms):\n"
    )
    base = statistics.median(samples[methods[0].label]) if samples[methods[0].label] else 1.0
    floors = samples.get(Floor.name) or [base]
    bottom = statistics.median(floors)
    print("| method | watcher settings | saves served | median | p95 | x hotseam | x floor |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for method in methods:
        values = samples[method.label]
        if not values:
            print(f"| {method.label} | {method.settings} | 0 | - | - | - | - |")
            continue
        median = statistics.median(values)
        print(
            f"| {method.label} | {method.settings} | {len(values)} | {median * 1000:.2f} | "
            f"{_p95(values) * 1000:.2f} | {median / base:.2f}x | {median / bottom:.2f}x |"
        )
    print()
    for method in methods:
        if own[method.label]:
            print(
                f"{method.label}: own work (the watcher's batch → the answer) median "
                f"{statistics.median(own[method.label]) * 1000:.2f} ms, p95 "
                f"{_p95(own[method.label]) * 1000:.2f} ms"
            )
    print()
    cells = next(iter(behaviour.values())).keys()
    print("| method | " + " | ".join(cells) + " |")
    print("|---|" + "---|" * len(cells))
    for name, row in behaviour.items():
        print(f"| {name} | " + " | ".join("yes" if row[c] else "no" for c in cells) + " |")
    for name, why in missing.items():
        print(f"\n{name}: not measured ({why.strip()})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saves", type=int, default=30)
    parser.add_argument("--hmr-python", help="a Python >= 3.12 to make hmr's venv with")
    add_hog_option(parser)
    options = parser.parse_args()
    with hog(options.hog):
        if options.hog:
            print(f"With --hog {options.hog}: {options.hog} busy processes beside the run.")
        anyio.run(main, options.saves, options.hmr_python)
