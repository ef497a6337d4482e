"""What the commands a client launches over stdio share (``hotseam acp``, ``hotseam mcp``).

Such a command owns its process: stdout carries protocol messages only
(:func:`stdout_reserved`), the pipes are read and written on the event loop
(:func:`stdio_pipes`), and SIGTERM or Ctrl-C stops it cleanly, however many a host sends
(:class:`StopSignals`).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import functools
import os
import signal
import stat
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, BinaryIO, NoReturn

from .._core import get_logger
from ._log_sink import OutputCapture

if TYPE_CHECKING:
    import asyncio

    import anyio

    from ._early import HandOff

_log = get_logger("hotseam.cli")
# The reader's buffer, not the longest line (--max-line-bytes): a longer one is read in pieces
# (the SDK's default, 50 MiB, would buffer a runaway line that far before any check).
_STDIO_CHUNK = 1024 * 1024


EXIT_OK = 0
EXIT_FATAL = 1
EXIT_BAD_INPUT = 2
"""The exit codes of every command (bad input: one line on stderr saying what is wrong)."""


class UsageError(Exception):
    """Bad command-line input: one line on stderr, exit code 2."""


def fail(command: str, error: object, code: int = EXIT_BAD_INPUT) -> int:
    """Say what went wrong in one line on stderr; return ``code``."""
    print(f"{command}: {error}", file=sys.stderr)
    return code


def existing(path: str, flag: str = "") -> Path:
    """``path`` resolved, when it exists (``flag`` names the option in the error)."""
    given = Path(path)
    if not given.exists():
        raise UsageError(f"{flag}{path}: no such file or directory")
    return given.resolve()


def check_stdio(peer: str, command: str) -> None:
    """A ``peer`` talks over pipes (or a terminal); a regular file is a usage error."""
    for name, fd in (("stdin", 0), ("stdout", 1)):
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            raise UsageError(f"{name} is closed; {peer} talks over stdin and stdout") from None
        if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
            raise UsageError(
                f"{name} is a file; {peer} launches '{command}' with pipes "
                "(or try it in a terminal)"
            )


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_FORCED_REPORT_WAIT = 1.0
"""How long a forced exit waits for its log line (the loop thread may hold the log stream)."""


class StopSignals:
    """SIGINT and SIGTERM for the whole life of a command that owns its process.

    The first stop signal cancels the scope bound with :meth:`cancelling`. The second is
    logged and changes nothing: hosts send two (Claude Code: SIGINT, then SIGTERM 100 ms
    later), and a stop in progress must finish. The third exits at once with ``128 +`` its
    number, as uvicorn and pytest do. The handlers stay until the process exits (a signal
    during the shut-down would otherwise get its default action); a handler only counts and
    wakes the loop, which logs.

    Args:
        command: The events' prefix: ``{command}.signal``, ``{command}.forced_exit``.
        report: Logs a signal in the loop, given its name and how many came so far
            (default: ``{command}.signal``)."""

    def __init__(self, command: str, *, report: Callable[[str, int], None] | None = None) -> None:
        self.command = command
        self.received: list[int] = []
        """The stop signals received, in order."""
        self._report = report if report is not None else self._log_signal
        self._wake: Callable[[Callable[[], None]], None] | None = None
        self._cancel: Callable[[], None] | None = None
        self._seen = 0  # the signals the loop has seen (counted there: handlers can nest)

    def install(self) -> None:
        """Handle SIGINT and SIGTERM from now until the process exits (main thread only)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._handle)

    @contextmanager
    def cancelling(self, scope: anyio.CancelScope) -> Iterator[None]:
        """While the block runs, the first stop signal cancels ``scope``."""
        wake = _loop_waker()
        self._cancel = scope.cancel
        self._wake = wake
        try:
            with _woken_by_signals():
                if self.received:  # one came before the loop listened
                    self._seen = 1
                    self._report(signal.Signals(self.received[0]).name, 1)
                    scope.cancel()
                yield
        finally:
            self._wake = None
            self._cancel = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)
        count = len(self.received)
        if count >= 3:
            self._force_exit(signum)
            return
        wake = self._wake
        if wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closing: nothing to wake
                wake(functools.partial(self._in_loop, signum))

    def _in_loop(self, signum: int) -> None:
        # The first is decided here, not in the handler: a second signal's handler can run
        # inside the first one's, and both would count two. Every signal cancels.
        self._seen += 1
        self._report(signal.Signals(signum).name, self._seen)
        cancel = self._cancel
        if cancel is not None:
            cancel()

    def _log_signal(self, name: str, count: int) -> None:
        if count == 1:
            _log.info(f"{self.command}.signal", signal=name)
        else:
            _log.info(
                f"{self.command}.signal",
                signal=name,
                summary=f"{name} while stopping: the stop goes on (a third signal exits at "
                "once, without disposing)",
            )

    def _force_exit(self, signum: int) -> None:
        """Log the forced exit from a thread of its own (bounded), then exit."""
        name = signal.Signals(signum).name
        code = 128 + signum

        def report() -> None:
            _log.warning(
                f"{self.command}.forced_exit",
                signal=name,
                exit_code=code,
                summary=f"a third stop signal ({name}): exiting with {code} without "
                "waiting for the stop to finish",
            )

        reporter = threading.Thread(target=report, name="hotseam: forced exit", daemon=True)
        reporter.start()
        reporter.join(_FORCED_REPORT_WAIT)
        _exit_at_once(code)


@contextmanager
def _woken_by_signals() -> Iterator[None]:
    """Wake asyncio's loop when a signal arrives, whichever thread the kernel gave it to:
    one delivered to the log writer would leave the main thread asleep in ``epoll_wait``,
    but the wakeup descriptor gets a byte in any thread. One set already (trio's) is kept."""
    import sniffio

    if (
        threading.current_thread() is not threading.main_thread()
        or sniffio.current_async_library() != "asyncio"
    ):
        yield
        return
    import asyncio
    import socket

    loop = asyncio.get_running_loop()
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    if previous != -1:  # someone wakes the loop already: keep theirs
        signal.set_wakeup_fd(previous)
        reader.close()
        writer.close()
        yield
        return

    def drain() -> None:
        with contextlib.suppress(OSError):
            while reader.recv(4096):
                pass

    loop.add_reader(reader.fileno(), drain)
    try:
        yield
    finally:
        loop.remove_reader(reader.fileno())
        signal.set_wakeup_fd(-1)
        reader.close()
        writer.close()


def _loop_waker() -> Callable[[Callable[[], None]], None]:
    """How to run a callback in the current event loop from a signal handler."""
    import sniffio

    if sniffio.current_async_library() == "trio":
        import trio

        return trio.lowlevel.current_trio_token().run_sync_soon
    import asyncio

    loop = asyncio.get_running_loop()

    def wake(callback: Callable[[], None]) -> None:
        loop.call_soon_threadsafe(callback)

    return wake


def exit_process(code: int) -> NoReturn:
    """End the process once a command stopped, without the interpreter's finalization: it
    takes longer than the stop, and restores the default action of SIGTERM (a host's second
    signal would kill a stopped process). Output and the exit handlers run first."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    atexit._run_exitfuncs()
    os._exit(code)


def _exit_at_once(code: int) -> None:
    """End the process now; the queued log lines get a bounded time to be written."""
    from ._logging import _stderr_sink

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    sink = _stderr_sink()
    if sink is not None:
        with contextlib.suppress(Exception):
            sink.drain(_FORCED_REPORT_WAIT)
    os._exit(code)


@contextmanager
def stdout_reserved() -> Iterator[BinaryIO]:
    """Keep stdout for protocol messages only (the protocol gets a copy of fd 1), and the
    program's own output from blocking: through the log sink (:class:`OutputCapture`) when
    stderr is a pipe or a file, else to stderr."""
    from ._logging import _stderr_sink  # the one sink of the process: logs and output share it

    sys.stdout.flush()
    protocol_out = os.fdopen(os.dup(1), "wb", buffering=0)
    try:
        sink = _stderr_sink()
        with OutputCapture(sink) if sink is not None else _stdout_to_stderr():
            yield protocol_out
    finally:
        protocol_out.close()


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    saved_fd = os.dup(1)
    saved_stdout = sys.stdout
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout = saved_stdout
        os.dup2(saved_fd, 1)
        os.close(saved_fd)


async def served(command: str, signals: StopSignals, serve: Callable[[], Awaitable[int]]) -> int:
    """Run ``serve`` until it ends or a stop signal cancels it: its exit code when not 0,
    else 0 (``{command}.stopped``); 1 when it raised (``{command}.failed``)."""
    import anyio

    stop = anyio.CancelScope()
    try:
        with signals.cancelling(stop), stop:
            code = await serve()
            if code:
                return code
    except Exception as error:
        _log.error(f"{command}.failed", exc_info=True, error=f"{type(error).__name__}: {error}")
        return 1
    _log.info(f"{command}.stopped")
    return 0


@contextlib.asynccontextmanager
async def stdio_pipes(
    protocol_out: BinaryIO, early: HandOff
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """stdin and ``protocol_out`` (from :func:`stdout_reserved`) as asyncio streams, after what
    the early front read and answered (``early``, handed off by the caller: when is its
    business): its bytes are read first, the SDK's answers to its answers dropped. A stdin
    the loop cannot poll (``/dev/null``) is read in a worker thread, so that its end is seen."""
    import asyncio

    import anyio

    from ._early import SkippingWriter

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_STDIO_CHUNK)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, protocol_out
    )
    # One writer on the pipe: a second one, dropped, would close it as it is collected.
    writer = (
        SkippingWriter(transport, protocol, early.answered, _log)
        if early.answered
        else asyncio.StreamWriter(transport, protocol, None, loop)
    )
    reader.feed_data(early.prefix)  # before the pipe is connected: nothing can come first
    if early.ended:
        reader.feed_eof()
        yield reader, writer
        return
    fd = sys.stdin.fileno()
    if _pollable(fd):
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        yield reader, writer
        return
    pump = _FilePump(reader, fd)
    async with anyio.create_task_group() as group:
        group.start_soon(pump.run)
        try:
            yield reader, writer
        finally:
            group.cancel_scope.cancel()


def _pollable(fd: int) -> bool:
    """Whether the event loop's selector takes ``fd`` (a pipe, a socket, a terminal do;
    ``/dev/null`` and regular files do not: epoll refuses them)."""
    import selectors

    with selectors.DefaultSelector() as selector:
        try:
            selector.register(fd, selectors.EVENT_READ)
        except (OSError, ValueError):
            return False
    return True


class _FilePump:
    """Feeds a stream reader from a descriptor that cannot be polled, from a worker thread,
    pausing while the reader holds more than its limit, as a pipe transport does."""

    def __init__(self, reader: asyncio.StreamReader, fd: int) -> None:
        import anyio

        self._reader = reader
        self._fd = fd
        self._resumed = anyio.Event()
        self._resumed.set()
        reader.set_transport(self)  # type: ignore[arg-type] # pause_reading/resume_reading

    def pause_reading(self) -> None:
        import anyio

        if self._resumed.is_set():
            self._resumed = anyio.Event()

    def resume_reading(self) -> None:
        self._resumed.set()

    async def run(self) -> None:
        import anyio.to_thread

        while True:
            await self._resumed.wait()
            try:
                data = await anyio.to_thread.run_sync(
                    os.read, self._fd, _STDIO_CHUNK, abandon_on_cancel=True
                )
            except OSError as error:  # nohup's stdin is opened write-only: EBADF
                _log.info("stdin.unreadable", error=f"{type(error).__name__}: {error}")
                data = b""
            if not data:
                self._reader.feed_eof()
                return
            self._reader.feed_data(data)


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (``--max-line-bytes`` and the like)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value
