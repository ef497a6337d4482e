"""Running provider code so that it cannot kill, freeze or outlive the reloader.

One concept, how provider code is run: in a guarded thread or task with a time bound, or —
for a module body whose bytecode shows it cannot block — inline, on the loop. Both halves
answer the same question (may this code stall the loop?), so they live together.

**The guards.** Provider code runs in three guarded ways:

* module bodies execute in a daemon thread (:class:`Worker`): a body that
  blocks the thread (``while True: pass``) leaves the event loop serving; past its time
  bound it is *abandoned* — the thread keeps running (Python cannot kill a thread), but its
  module object is never installed;
* ``setup`` and generation closes run in a *detached* task (:func:`start_detached`), which no
  task group waits for: past its time bound the reloader stops waiting and reports it, even
  when the code is blocked in a worker thread or under a shielded cancel scope;
* every ``BaseException`` raised by provider code is a failure of that code
  (:func:`is_fatal` tells the two that are not: the backend's cancellation, and a
  ``KeyboardInterrupt`` that may be the user's Ctrl-C).

Where code is stuck is found from the live stack: ``sys._current_frames()`` for a thread,
the ``cr_await`` chain of the coroutine for a task.

**Inert bodies: told from their bytecode before they run.** Handing a module body to the
:class:`Worker` and back is two wake-ups of a sleeping thread: a few hundredths of a
millisecond on an idle machine, milliseconds on a busy one, where each wake-up waits for the
scheduler (and for the interpreter lock). Most of a save's time on a loaded machine was
those two waits. The first grows with the loop's own work before it: at a load of 22, a
thread woken right after the loop thread ran 2 ms of Python waited 6-10 ms for a core
(0.03-0.06 ms with no such run before), with a queue and an event or with two bare locks
alike, so no cheaper hand-off removes it; only not hopping does.

A body whose code *cannot* run anything but itself needs no thread: :func:`inert` reads the
compiled code and says yes only for straight-line code (no backward jump, so no loop) that
calls nothing (the calls allowed are ``class X:`` without bases or decorators, whose own
body is held to the same rule, attributes included, and ``X()`` of such a class defined
above it that defines no dunder method: ``object``'s own ``__new__`` and ``__init__``, in C,
are all that runs) and imports only what is already imported (every module of the dotted
name in ``sys.modules`` or serving, every name it takes already there: an import that would
execute a module, read a file or reach a module's ``__getattr__`` says no). Such a body ends
after at most as many steps as it has instructions, so the loader executes it on the event
loop's thread, at once. Anything else (a decorator, a call, a loop, a new import, an unknown
instruction) still goes to the thread with its time bound, as before. It is a conservative
test: a no costs a thread hop, never a guarantee.
"""

from __future__ import annotations

import contextlib
import contextvars
import dis
import math
import queue
import signal
import sys
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Collection, Iterator, Sequence
from pathlib import Path
from types import CodeType, FrameType, ModuleType
from typing import Any

import anyio
import anyio.from_thread
import sniffio

__all__ = [
    "HANDOFF_WAIT",
    "Detached",
    "Resolve",
    "ThreadRun",
    "Worker",
    "current_run",
    "inert",
    "interrupted",
    "is_fatal",
    "start_detached",
    "stuck_location",
]


_LIBRARY_DIRS = (
    *(
        str(Path(module.__file__).resolve().parent)
        for module in (anyio, sniffio)
        if module.__file__
    ),
    str(Path(__file__).resolve().parent.parent),
)


def _library(filename: str) -> bool:
    return filename.startswith(_LIBRARY_DIRS) or "/trio/" in filename or "/asyncio/" in filename


def _sigint_may_raise() -> bool:
    """True when a SIGINT would raise ``KeyboardInterrupt`` in this thread (not routed to a
    signal receiver such as ``anyio.open_signal_receiver``, which ``hotseam dev`` uses)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    handler: Any = signal.getsignal(signal.SIGINT)
    if handler is signal.default_int_handler:
        return True
    func = getattr(handler, "func", handler)  # asyncio.Runner wraps its handler in a partial
    module = str(getattr(func, "__module__", "") or "")
    return module in ("trio._core._ki", "asyncio.runners")


def is_fatal(error: BaseException) -> bool:
    """True for what must propagate instead of being reported as provider code's failure.

    That is the backend's cancellation, and a ``KeyboardInterrupt`` on the event-loop thread
    while SIGINT raises it (it may be the user's Ctrl-C). With SIGINT routed to a signal
    receiver, a ``KeyboardInterrupt`` can only come from code, and is reported.
    """
    if isinstance(error, BaseExceptionGroup):
        return any(is_fatal(inner) for inner in error.exceptions)
    if isinstance(error, anyio.get_cancelled_exc_class()):
        return True
    return isinstance(error, KeyboardInterrupt) and _sigint_may_raise()


def interrupted(error: BaseException) -> bool:
    """A KeyboardInterrupt that may be the user's Ctrl-C (see :func:`is_fatal`)."""
    return isinstance(error, KeyboardInterrupt) and is_fatal(error)


# -- locating stuck code --------------------------------------------------------------------------


def _frames_of_coroutine(coro: object) -> Iterator[FrameType]:
    """The frames of a suspended coroutine and of everything it awaits, outermost first."""
    seen = 0
    while coro is not None and seen < 200:
        seen += 1
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            yield frame
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)


def _frames_of_thread(ident: int | None) -> list[FrameType]:
    """The frames of a running thread, outermost first."""
    frame = sys._current_frames().get(ident) if ident is not None else None
    frames: list[FrameType] = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    frames.reverse()
    return frames


def stuck_location(frames: Collection[FrameType], watched: Collection[str]) -> str | None:
    """``file:line`` where code is stuck: the innermost frame of a watched file, else the
    innermost frame outside hotseam and the async libraries."""
    ordered = list(frames)
    for frame in reversed(ordered):
        if frame.f_code.co_filename in watched:
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
    for frame in reversed(ordered):
        if not _library(frame.f_code.co_filename):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
    return None


# -- detached tasks -------------------------------------------------------------------------------


class Detached:
    """A task that no task group waits for; ``done`` is set when it ended."""

    __slots__ = ("_coro", "cancel_scope", "done", "error", "label")

    def __init__(self, label: str) -> None:
        self.label = label
        self.done = anyio.Event()
        self.error: BaseException | None = None
        self.cancel_scope = anyio.CancelScope()
        self._coro: object = None

    def location(self, watched: Collection[str]) -> str | None:
        """Where the task is stuck right now (``None`` once it ended)."""
        if self.done.is_set():
            return None
        return stuck_location(list(_frames_of_coroutine(self._coro)), watched)


_KEEP: set[object] = set()  # asyncio keeps only weak references to tasks


def start_detached(label: str, func: Callable[[], Awaitable[object]]) -> Detached:
    """Start ``await func()`` in a task of its own, in a copy of the current context.

    It never raises: an exception (a cancellation included) is stored in ``error``. Nothing
    waits for it: a caller that stops waiting *abandons* it (it runs on until it returns).
    """
    handle = Detached(label)

    async def body() -> None:
        try:
            with handle.cancel_scope:
                await func()
        except BaseException as error:  # stored for the waiter, which decides
            handle.error = error
        finally:
            handle.done.set()

    coro = body()
    handle._coro = coro
    if sniffio.current_async_library() == "trio":
        import trio

        async def run() -> None:
            await coro

        trio.lowlevel.spawn_system_task(run, name=label, context=contextvars.copy_context())
    else:
        import asyncio

        task = asyncio.get_running_loop().create_task(coro, name=label)
        _KEEP.add(task)
        task.add_done_callback(_KEEP.discard)
    return handle


# -- the module-body thread ------------------------------------------------------------------------


class ThreadRun:
    """Steps of work running in a :class:`Worker`'s daemon thread; ``abandoned`` once the
    event loop stopped waiting for one of them (its thread runs on, and runs no more steps)."""

    __slots__ = ("abandoned", "current", "done", "error", "ident", "label")

    def __init__(self, label: str) -> None:
        self.label = label
        self.done = anyio.Event()
        self.error: BaseException | None = None
        self.ident: int | None = None
        self.abandoned = False
        self.current: tuple[int, float] | None = None
        """The step running and when it started (``time.monotonic()``); set by the thread."""

    @property
    def running(self) -> bool:
        return not self.done.is_set()

    def location(self, watched: Collection[str]) -> str | None:
        """Where the thread is stuck right now (``None`` once it ended)."""
        if self.done.is_set():
            return None
        return stuck_location(_frames_of_thread(self.ident), watched)


_CURRENT = threading.local()
_STOP = object()

HANDOFF_WAIT = 0.001
"""Seconds :meth:`Worker.run` waits for its steps blocking (the GIL released) before it
waits on the event loop: a typical module body executes well within it. The loop serves
nothing meanwhile: at most this long once per run, below the interpreter's switch interval
(5 ms) that a body running Python imposes on the loop anyway."""


def _call_soon_threadsafe() -> Callable[[Callable[[], object]], object]:
    """The running loop's own "call this soon, from any thread", looked up on the loop.

    Not ``anyio.lowlevel.current_token()``: before anyio 4.11 it is the bare loop or
    ``TrioToken``, with no ``backend_class`` to call through. Looked up here, on the loop,
    so a mismatch fails the run loudly instead of inside the thread, where the loop would
    never learn that the body ended.
    """
    if sniffio.current_async_library() == "trio":
        import trio

        return trio.lowlevel.current_trio_token().run_sync_soon
    import asyncio

    return asyncio.get_running_loop().call_soon_threadsafe


def current_run() -> ThreadRun | None:
    """The :class:`ThreadRun` whose thread this is, if any."""
    run: ThreadRun | None = getattr(_CURRENT, "run", None)
    return run


def _serve(jobs: queue.SimpleQueue[Any]) -> None:
    """A worker thread's life: run jobs until told to stop, or until one is abandoned."""
    while True:
        job = jobs.get()
        if job is _STOP:
            return
        keep_serving = job()
        del job  # what it ran (a batch and its sources) must not wait here for the next job
        if not keep_serving:
            return  # abandoned: a fresh thread takes the next job


class Worker:
    """One reusable daemon thread for module bodies, so a body that blocks leaves the event
    loop serving.

    Starting a thread costs about twice a hand-off to a waiting one, and a start loads
    every module, so the thread is kept between reloads. A step that overruns its time
    bound is *abandoned*: Python cannot stop a thread, so that thread runs on, runs no
    further step, and the next steps go to a new thread.
    """

    __slots__ = ("__weakref__", "_jobs", "_stopper")

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Any] | None = None
        self._stopper: weakref.finalize[Any, Worker] | None = None

    def close(self) -> None:
        """Let the idle thread end (a busy one ends after its job)."""
        if self._jobs is not None:
            self._jobs.put(_STOP)
        self._retire()

    def _submit(self, job: Callable[[], bool]) -> None:
        jobs = self._jobs
        if jobs is None:
            jobs = self._jobs = queue.SimpleQueue()
            thread = threading.Thread(
                target=_serve, args=(jobs,), name="hotseam: module bodies", daemon=True
            )
            thread.start()
            # A worker nobody closed ends with it (the thread holds only the queue).
            self._stopper = weakref.finalize(self, jobs.put, _STOP)
        jobs.put(job)

    def _retire(self) -> None:
        """The thread is stuck in an abandoned step: the next job starts a new one."""
        self._jobs = None
        if self._stopper is not None:
            self._stopper.detach()
            self._stopper = None

    async def run(
        self,
        label: str,
        steps: Sequence[Callable[[], object]],
        timeout: float,
        *,
        on_slow: tuple[float, Callable[[int], object]] | None = None,
    ) -> tuple[ThreadRun, int | None]:
        """Run ``steps`` in order in the thread (in a copy of the current context), each
        bounded by ``timeout`` seconds from its own start; return the run and the index of
        the step abandoned at its bound (``None``: all ran). A step's exception ends the
        run (``error``): steps are expected to catch their own.

        ``on_slow=(seconds, notify)`` calls ``notify(index)`` once for a step still running
        after ``seconds``. The loop is woken once for the whole run, not once per step: it
        sleeps until the running step's deadline (or slow notice), which it reads from
        ``run.current``; once a step was slow, it also looks every ``seconds / 4`` for the
        next one.

        Cancellation stops the waiting (the run is abandoned) and propagates.
        """
        run = ThreadRun(label)
        call_soon = _call_soon_threadsafe()
        context = contextvars.copy_context()
        handoff = threading.Lock()
        finished = threading.Event()
        blocking = True  # the loop thread is in its short blocking wait (see HANDOFF_WAIT)

        def job() -> bool:
            run.ident = threading.get_ident()
            _CURRENT.run = run
            try:
                for index, step in enumerate(steps):
                    if run.abandoned:
                        break
                    run.current = (index, time.monotonic())
                    context.run(step)
            except BaseException as error:  # reported by the waiter
                run.error = error
            finally:
                run.current = None
                _CURRENT.run = None
                with handoff:
                    told = blocking
                    if told:
                        finished.set()
                if not told:
                    # Scheduled, not waited for: the thread is free at once (a blocking call
                    # would have it wait for the loop, then compete with it for the GIL).
                    # The loop is gone (asyncio: closed; trio: RunFinishedError): nobody waits.
                    with contextlib.suppress(RuntimeError):
                        call_soon(run.done.set)
            return not run.abandoned

        slow, notify = on_slow if on_slow is not None else (math.inf, None)
        notified = -1
        abandoned: int | None = None
        self._submit(job)
        try:
            # A short blocking wait first, the GIL released: the thread starts at once and
            # says it is done through a lock, not the loop's wake-up pipe (two hand-overs
            # that were a fifth of a save's own work). A body that runs Python holds the
            # GIL anyway, so the loop could hardly have run meanwhile; one that waits (I/O,
            # a sleep, the loop itself) holds the loop up for HANDOFF_WAIT at most, once
            # per run (a reload's bodies are one run), then is waited for on the loop.
            if finished.wait(min(HANDOFF_WAIT, timeout)):
                run.done.set()
            else:
                # From here the thread tells the loop; if it finished in between (it saw
                # ``blocking`` still true, so it told nobody), it is done now.
                with handoff:
                    blocking = False
                if finished.is_set():
                    run.done.set()
            while not run.done.is_set():
                current = run.current
                now = time.monotonic()
                if current is None:  # not started yet, or just ended
                    with anyio.move_on_after(min(slow, timeout)):
                        await run.done.wait()
                    continue
                index, started = current
                if now - started >= timeout:
                    abandoned = index
                    break
                if notify is not None and index != notified and now - started >= slow:
                    notified = index
                    notify(index)
                wake = started + timeout
                if index != notified and slow < timeout:
                    wake = started + slow
                elif index == notified:  # a slow run: look for the next step now and then
                    wake = min(wake, now + slow / 4)
                with anyio.move_on_after(max(wake - now, 0.0)):
                    await run.done.wait()
        finally:
            if not run.done.is_set():
                run.abandoned = True
                self._retire()
        return run, abandoned


# -- inert module bodies ---------------------------------------------------------------------------

Resolve = Callable[[str, "tuple[str, ...] | None", int], "ModuleType | None"]
"""``resolve(name, fromlist, level)``: the module ``IMPORT_NAME`` would return without
running any code (``None``: it might run some)."""

_OP = dis.opmap
_CACHE = _OP.get("CACHE", 0)
_EXTENDED_ARG = _OP["EXTENDED_ARG"]
_HAVE_ARGUMENT = dis.HAVE_ARGUMENT


def _ops(*names: str) -> frozenset[int]:
    return frozenset(_OP[name] for name in names if name in _OP)


# Instructions that touch nothing but the frame's stack, its namespace (a plain dict) and
# fresh objects: none of them can run code of anyone else.
_PLAIN = _ops(
    "NOP",
    "RESUME",
    "POP_TOP",
    "COPY",
    "SWAP",
    "LOAD_CONST",
    "STORE_NAME",
    "RETURN_VALUE",
    "RETURN_CONST",
    "BUILD_TUPLE",
    "BUILD_LIST",
    "MAKE_CELL",
    "LOAD_CLOSURE",
    "COPY_FREE_VARS",
    "PUSH_NULL",
)
_LOAD_NAME = _OP["LOAD_NAME"]
_LOAD_CONST = _OP["LOAD_CONST"]
_MAKE_FUNCTION = _OP["MAKE_FUNCTION"]
_LOAD_BUILD_CLASS = _OP["LOAD_BUILD_CLASS"]
_PUSH_NULL = _OP["PUSH_NULL"]
_NULL_AFTER = sys.version_info >= (3, 13)  # ``LOAD_NAME X, PUSH_NULL``, not the reverse
_PRECALL = _OP.get("PRECALL", -1)
_CALL = _OP["CALL"]
_IMPORT_NAME = _OP["IMPORT_NAME"]
_IMPORT_FROM = _OP["IMPORT_FROM"]
_SETUP_ANNOTATIONS = _OP["SETUP_ANNOTATIONS"]
_STORE_SUBSCR = _OP["STORE_SUBSCR"]
_STORE_NAME = _OP["STORE_NAME"]
_LOAD_ATTR = _OP["LOAD_ATTR"]
_ATTR_SHIFT = 1 if sys.version_info >= (3, 12) else 0  # 3.12 packs a method flag in
_LIST_EXTEND = _OP["LIST_EXTEND"]
_BUILD_CONST_KEY_MAP = _OP.get("BUILD_CONST_KEY_MAP", -1)
_MAX_INSTRUCTIONS = 20_000
"""A longer body goes to the thread: its steps are bounded, but not by little."""


def _instructions(code: CodeType) -> list[tuple[int, int]]:
    """``(opcode, argument)`` pairs of ``code``, inline caches skipped (``dis`` builds an
    object per instruction: fifty times slower, and this runs once per save)."""
    raw = code.co_code
    result: list[tuple[int, int]] = []
    extended = 0
    for offset in range(0, len(raw), 2):
        op = raw[offset]
        if op == _CACHE:
            continue
        arg = raw[offset + 1] | extended if op >= _HAVE_ARGUMENT else 0
        if op == _EXTENDED_ARG:
            extended = arg << 8
            continue
        extended = 0
        result.append((op, arg))
    return result


def _plain_module(value: object) -> ModuleType | None:
    """``value`` if it is a module whose attributes are read from its ``__dict__`` alone."""
    if type(value) is not ModuleType:
        return None
    return value


def inert(code: CodeType, resolve: Resolve, *, class_body: bool = False) -> bool:
    """True when executing ``code`` (a module body, or a class body inside one) can run no
    code but its own, and so ends within its length: see the module's docstring."""
    ops = _instructions(code)
    if len(ops) > _MAX_INSTRUCTIONS:
        return False
    consts: Sequence[object] = code.co_consts
    names = code.co_names
    imported: ModuleType | None = None  # the module the last IMPORT_NAME pushed
    chain: list[str] = []  # the rest of a dotted ``import a.b as c``, taken by IMPORT_FROM
    modules: dict[str, ModuleType] = {}  # names this body bound to a plain module
    pushed: ModuleType | None = None  # the plain module the last instruction pushed
    classes: set[str] = set()  # names this body bound to a bare class (see _bare_class)
    built = False  # the last instruction pushed a bare class this body built
    for index, (op, arg) in enumerate(ops):
        produced, pushed = pushed, None
        was_built, built = built, False
        if op == _STORE_NAME:
            if names[arg] == "__annotations__":
                return False  # annotations would then be stored into whatever this is
            if produced is not None:
                modules[names[arg]] = produced
            else:
                modules.pop(names[arg], None)
            if was_built:
                classes.add(names[arg])
            else:
                classes.discard(names[arg])
            continue
        if op in _PLAIN:
            continue
        if op == _LOAD_ATTR:
            # ``helper.VALUE`` (``os.path.sep``) of a module this body imported, the name
            # in its __dict__: a dict lookup (a missing one would reach __getattr__).
            owner = produced
            attribute = names[arg >> _ATTR_SHIFT]
            if class_body or owner is None or attribute not in owner.__dict__:
                return False
            pushed = _plain_module(owner.__dict__[attribute])
            continue
        if op == _LOAD_NAME:
            pushed = modules.get(names[arg])
            # A class body may read only ``__name__`` (its prologue): a value it stored
            # could have a ``__set_name__`` that ``type()`` calls.
            if class_body and names[arg] != "__name__":
                return False
            continue
        if op == _MAKE_FUNCTION:
            continue  # defaults, annotations and closures are values already on the stack
        if op == _LOAD_BUILD_CLASS:
            if not _class_statement(ops, index, consts, resolve):
                return False
            continue
        if op in (_PRECALL, _CALL):
            # The call of ``__build_class__`` that _class_statement checked, or ``X()`` of a
            # bare class this body built and bound to ``X``.
            call = index if op == _CALL else index + 1
            if _builds_class(ops, call):
                built = op == _CALL and _bare_class(consts[ops[_build_start(ops, call)][1]])
                continue
            if class_body or not _instantiates(ops, call, names, classes):
                return False
            continue
        if op == _SETUP_ANNOTATIONS:
            continue
        if op in (_LIST_EXTEND, _BUILD_CONST_KEY_MAP):
            # ``["a", "b"]`` extends a list by a constant tuple; keyword defaults build a
            # dict from a constant tuple of names: iterating a tuple, hashing a str.
            if index < 1 or ops[index - 1][0] != _LOAD_CONST:
                return False
            keys = consts[ops[index - 1][1]]
            if not isinstance(keys, tuple) or (
                op == _BUILD_CONST_KEY_MAP and not all(type(key) is str for key in keys)
            ):
                return False
            continue
        if op == _STORE_SUBSCR:
            # ``x: T = v`` stores T in ``__annotations__['x']`` (a dict, a str key).
            if (
                index < 2
                or "__annotations__" not in names
                or ops[index - 2] != (_LOAD_NAME, names.index("__annotations__"))
            ):
                return False
            if ops[index - 1][0] != _LOAD_CONST or not isinstance(consts[ops[index - 1][1]], str):
                return False
            continue
        if op == _IMPORT_NAME:
            if class_body or index < 2:
                return False
            (level_op, level), (from_op, from_arg) = ops[index - 2], ops[index - 1]
            if level_op != _LOAD_CONST or from_op != _LOAD_CONST:
                return False
            level_value, fromlist = consts[level], consts[from_arg]
            if not isinstance(level_value, int) or not (
                fromlist is None
                or (isinstance(fromlist, tuple) and all(isinstance(i, str) for i in fromlist))
            ):
                return False
            if fromlist is not None and "*" in fromlist:
                return False
            imported = _plain_module(resolve(names[arg], fromlist, level_value))
            if imported is None:
                return False
            chain = names[arg].split(".")[1:] if fromlist is None else []
            pushed = imported if not chain else None
            continue
        if op == _IMPORT_FROM:
            if imported is None:
                return False
            attribute = names[arg]
            if chain:
                # ``import a.b.c as d``: IMPORT_FROM b, then c, each from the one before.
                if chain[0] != attribute:
                    return False
                chain.pop(0)
                value = imported.__dict__.get(attribute)
                following = _plain_module(value)
                if following is None:
                    return False
                imported = pushed = following
                continue
            if attribute not in imported.__dict__:
                return False
            pushed = _plain_module(imported.__dict__[attribute])
            continue
        return False  # a call, a loop, an attribute, an operator... or unknown: the thread
    return True


def _class_statement(
    ops: Sequence[tuple[int, int]], index: int, consts: Sequence[object], resolve: Resolve
) -> bool:
    """``class X:`` with no bases, keywords or decorators, whose body is inert too."""
    if not _builds_class(ops, _call_after(ops, index)):
        return False
    body = consts[ops[index + 1][1]]
    return isinstance(body, CodeType) and inert(body, resolve, class_body=True)


def _call_after(ops: Sequence[tuple[int, int]], index: int) -> int:
    """Where the CALL of the ``__build_class__`` loaded at ``index`` should be."""
    position = index + 4
    if position < len(ops) and ops[position][0] == _PRECALL:
        position += 1
    return position


_BARE_DUNDERS = frozenset(
    {
        "__module__",
        "__qualname__",
        "__doc__",
        "__firstlineno__",
        "__static_attributes__",
        "__classcell__",
    }
)
"""The dunder names a class body may bind and still be bare: the compiler's own."""


def _bare_class(body: object) -> bool:
    """True when the class body ``body`` binds no dunder but the compiler's own: then
    ``type.__call__`` on its class (no bases, no metaclass) runs ``object.__new__`` and
    ``object.__init__`` only, and an instance dropped at once has no ``__del__`` to run."""
    if not isinstance(body, CodeType):
        return False
    stored = {body.co_names[arg] for op, arg in _instructions(body) if op == _STORE_NAME}
    return all(
        name in _BARE_DUNDERS or not (name.startswith("__") and name.endswith("__"))
        for name in stored
    )


def _instantiates(
    ops: Sequence[tuple[int, int]], call: int, names: Sequence[str], classes: Collection[str]
) -> bool:
    """True when ``ops[call]`` is ``CALL 0`` of ``X`` loaded by name just before (with its
    ``NULL``, and a ``PRECALL 0`` where there is one), ``X`` bound to a bare class."""
    if call >= len(ops) or ops[call] != (_CALL, 0):
        return False
    load = call - 1
    if ops[load] == (_PRECALL, 0):
        load -= 1
    null_after = _NULL_AFTER and load >= 1 and ops[load][0] == _PUSH_NULL
    if null_after:
        load -= 1
    if load < 0 or ops[load][0] != _LOAD_NAME or names[ops[load][1]] not in classes:
        return False
    return null_after or (load >= 1 and ops[load - 1][0] == _PUSH_NULL)


def _build_start(ops: Sequence[tuple[int, int]], call: int) -> int:
    """Where the ``LOAD_CONST <code>`` of the class body is, for the ``__build_class__``
    call at ``call`` that :func:`_builds_class` accepted."""
    return call - (4 if ops[call - 1][0] == _PRECALL else 3)


def _builds_class(ops: Sequence[tuple[int, int]], call: int) -> bool:
    """True when ``ops[call]`` is ``CALL 2`` right after ``LOAD_BUILD_CLASS, LOAD_CONST
    <code>, MAKE_FUNCTION 0, LOAD_CONST <name>`` (and a ``PRECALL 2`` where there is one)."""
    if call >= len(ops) or ops[call] != (_CALL, 2):
        return False
    start = call - 4
    if ops[call - 1][0] == _PRECALL:
        if ops[call - 1][1] != 2:
            return False
        start -= 1
    if start < 0:
        return False
    build, body, function, name = ops[start : start + 4]
    return (
        build[0] == _LOAD_BUILD_CLASS
        and body[0] == _LOAD_CONST
        and function == (_MAKE_FUNCTION, 0)
        and name[0] == _LOAD_CONST
    )
