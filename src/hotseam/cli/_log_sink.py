"""A log sink that never blocks the program, for the ``hotseam`` command's stderr.

Clients that launch ``hotseam acp`` may read its stderr pipe only at exit: once the pipe is
full a plain write blocks, and a log call on the event loop stalls the protocol. Here a log
call only queues the line (or a function that renders it, :meth:`StderrSink.write_later`)
for a writer thread. Past a bounded size the *oldest* lines are dropped and counted, the
count written where the gap is; the exit drains for a bounded time.

The writer wakes once the log is quiet for :data:`SETTLE` (at most :data:`BURST_WAIT` after
the first line), not at each line: a save logs half a dozen lines in milliseconds, and a
writer woken for each took the interpreter lock from the loop as often.

:class:`OutputCapture` puts the program's own output (``print``, fds 1 and 2) through the
same queue: a stray ``print()`` in an agent blocked the protocol as a log line did.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import select
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

QUEUE_BYTES = 256 * 1024
"""How many bytes of log lines wait for the writer before the oldest are dropped."""

EXIT_WAIT = 1.0
"""How long the exit waits for queued lines to be written (never forever: the pipe may be dead)."""

SETTLE = 0.02
"""Seconds without a new line after which the writer writes what is queued (a drain or the
exit does not wait)."""

BURST_WAIT = 0.25
"""The longest a line waits for the log to be quiet (a program that logs without pause)."""

_KICK_OVERDUE = 3 * SETTLE
"""A line that finds the loop's timer this late past its time wakes the writer itself."""

_DEFERRED_BYTES = 256
"""What a line not rendered yet counts for against :data:`QUEUE_BYTES`."""

Render = Callable[[], bytes]
"""A function that renders one log line (its newline included), called by the writer."""

_BATCH = select.PIPE_BUF
"""Lines go out in writes of at most this many bytes (unless one is longer): atomic on a
pipe, so a ``print`` from another thread never lands in the middle of a log line."""


def plain_report(count: int) -> str:
    """The line that says how many lines were dropped (with its newline)."""
    lines = "line" if count == 1 else "lines"
    return f"hotseam: {count} {lines} dropped: stderr was not being read\n"


def _running_loop() -> Any:
    """The asyncio loop running on this thread, if any (without importing asyncio)."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return None
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _call_later(loop: Any, delay: float, callback: Callable[[], object]) -> bool:
    """Have ``loop`` call ``callback`` in ``delay`` seconds: the loop's own timer wakes
    the writer after a burst at no wake-up of its own; ``False`` if the loop is closing."""
    try:
        loop.call_later(delay, callback)
    except RuntimeError:  # the loop is closing
        return False
    return True


class StderrSink:
    """A text stream whose ``write`` queues bytes for a writer thread and never blocks.

    ``report(count)`` renders the dropped-lines line (the CLI matches the log style). The
    owner calls :meth:`close` when done (the CLI: at exit)."""

    def __init__(
        self,
        fd: int,
        *,
        encoding: str = "utf-8",
        limit: int = QUEUE_BYTES,
        report: Callable[[int], str] = plain_report,
    ) -> None:
        self.report = report
        self._fd = fd
        self._encoding = encoding
        self._limit = limit
        # An RLock (Condition's default): a signal handler that logs while this thread is
        # inside write() must not deadlock on it.
        self._cond = threading.Condition()
        self._queue: deque[bytes | Render] = deque()
        self._queued = 0
        self._idle = False  # the writer waits for a first line (only then is it notified)
        self._hurry = False  # a drain or the exit waits: no settling
        self._kick_pending = False  # the event loop wakes the writer once the log is quiet
        self._kick_due = 0.0  # when the loop's timer is due
        self._first_at = 0.0  # when the first line the timer waits for was queued
        self._last_at = 0.0  # when the last one was
        self._unreported = 0
        self._dropped = 0
        self._writing = False
        self._broken = False
        self._closed = False
        self._thread: threading.Thread | None = None

    @property
    def dropped(self) -> int:
        return self._dropped

    def write(self, text: str) -> int:
        """Queue ``text``; drop the oldest queued lines if the queue is over its limit."""
        if text:
            self.write_bytes(text.encode(self._encoding, "backslashreplace"))
        return len(text)

    def write_bytes(self, data: bytes) -> None:
        """Queue ``data`` as it is (a program's output, which need not be text)."""
        if data:
            self._put(data, len(data))

    def write_later(self, render: Render) -> None:
        """Queue a line the writer renders when it writes it (a failing render is written
        as a line that says so)."""
        self._put(render, _DEFERRED_BYTES)

    def _put(self, item: bytes | Render, size: int) -> None:
        with self._cond:
            if self._broken or self._closed:  # nobody will ever read it / nobody writes it
                return
            self._queue.append(item)
            self._queued += size
            while self._queued > self._limit and len(self._queue) > 1:
                oldest = self._queue.popleft()
                if isinstance(oldest, bytes):
                    self._queued -= len(oldest)
                    lines = oldest.count(b"\n")
                else:
                    self._queued -= _DEFERRED_BYTES
                    lines = 1
                self._unreported += lines
                self._dropped += lines
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="hotseam-log-writer", daemon=True
                )
                try:
                    self._thread.start()
                except RuntimeError:  # interpreter shutdown: no new threads; lose the line
                    self._broken = True
                    return
            if self._idle:
                loop = _running_loop()
                if self._kick_pending and loop is not None:
                    now = self._last_at = time.monotonic()
                    overdue = now - self._kick_due > _KICK_OVERDUE  # a blocked loop
                    if overdue or self._queued * 2 > self._limit:  # or a flood: write it
                        self._wake()
                elif loop is not None and _call_later(loop, SETTLE, self._kick):
                    # The loop's timer wakes the writer after the burst, settled.
                    self._kick_pending = True
                    now = self._first_at = self._last_at = time.monotonic()
                    self._kick_due = now + SETTLE
                else:  # another thread (the loop may be blocked), or no loop
                    self._wake()

    def _wake(self) -> None:
        """Wake the idle writer now (holding the lock)."""
        self._idle = False
        self._cond.notify()

    def _kick(self) -> None:
        """The loop's timer: wake the writer once the log is settled, else look again."""
        loop = _running_loop()
        with self._cond:
            if not self._idle or not (self._queue or self._unreported):
                self._kick_pending = False  # woken meanwhile (a drain, a flood, a thread)
                return
            now = time.monotonic()
            due = min(self._last_at + SETTLE, self._first_at + BURST_WAIT)
            if due > now and loop is not None and _call_later(loop, due - now, self._kick):
                self._kick_due = due
                return
            self._kick_pending = False
            self._idle = False
            self._hurry = True
            self._cond.notify()

    def write_to(self, fd: int) -> None:
        """Write to ``fd`` from the next batch on (:class:`OutputCapture` takes fd 2)."""
        with self._cond:
            self._fd = fd

    def flush(self) -> None:
        """Nothing to do: the writer thread writes as fast as the reader reads."""

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    @property
    def encoding(self) -> str:
        return self._encoding

    def drain(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for every queued line to be written; whether
        it was (false: the pipe is still full, or its reader is gone)."""
        with self._cond:
            return self._written_by(time.monotonic() + timeout)

    def close(self, timeout: float = EXIT_WAIT) -> bool:
        """Wait at most ``timeout`` seconds for the queued lines, then stop and join the
        writer (later writes are discarded); whether every line was written. A writer
        blocked on a pipe nobody reads cannot be interrupted: it is joined only until the
        deadline and ends with its pipe or the process."""
        deadline = time.monotonic() + timeout
        with self._cond:
            written = self._written_by(deadline)
            self._closed = True
            self._queue.clear()
            self._queued = 0
            self._unreported = 0
            # Everything written, or the pipe broken: the writer is waiting or returning.
            idle = written or self._broken
            thread = self._thread
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(None if idle else max(deadline - time.monotonic(), 0))
        return written

    def _written_by(self, deadline: float) -> bool:
        """Wait (holding the lock) until everything is written or ``deadline`` passes."""
        if self._queue or self._unreported:
            self._hurry = True  # the writer stops settling (or wakes, if a kick is due)
            self._idle = False
            self._cond.notify_all()
        while (self._queue or self._writing or self._unreported) and not self._broken:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._cond.wait(remaining)
        return not self._broken

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._unreported:
                    if self._closed:
                        return
                    self._hurry = False
                    self._idle = True
                    self._cond.wait()
                self._idle = False
                if not self._hurry and not self._closed:
                    # The rest of the burst joins it (nobody notifies meanwhile).
                    self._cond.wait(SETTLE)
                items = list(self._queue)
                self._queue.clear()
                self._queued = 0
                # Every line dropped so far came after what was written and before these:
                # the report goes exactly where the gap is.
                dropped, self._unreported = self._unreported, 0
                self._writing = True
                fd = self._fd
            try:
                if dropped:
                    report = self.report(dropped).encode(self._encoding, "backslashreplace")
                    self._write_all(fd, report)
                for chunk in self._chunks(items):
                    self._write_all(fd, chunk)
            except OSError:  # the reader is gone (EPIPE) or stderr was closed
                with self._cond:
                    self._broken = True
                    self._queue.clear()
                    self._queued = 0
                    self._writing = False
                    self._cond.notify_all()
                return
            with self._cond:
                self._writing = False
                self._cond.notify_all()

    def _chunks(self, items: list[bytes | Render]) -> list[bytes]:
        """The items rendered, joined into writes of at most :data:`_BATCH` bytes."""
        chunks: list[bytes] = []
        batch: list[bytes] = []
        size = 0
        for item in items:
            data = item if isinstance(item, bytes) else self._render(item)
            if batch and size + len(data) > _BATCH:
                chunks.append(b"".join(batch))
                batch, size = [], 0
            batch.append(data)
            size += len(data)
        if batch:
            chunks.append(b"".join(batch))
        return chunks

    def _render(self, render: Render) -> bytes:
        try:
            return render()
        except Exception as error:
            text = f"hotseam: a log line could not be rendered: {type(error).__name__}: {error}\n"
            return text.encode(self._encoding, "backslashreplace")

    @staticmethod
    def _write_all(fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                written = os.write(fd, view)
            except BlockingIOError:  # someone made the descriptor non-blocking
                select.select([], [fd], [])
                continue
            view = view[written:]


LINE_LIMIT = 64 * 1024
"""An unfinished line longer than this is written as it is (output with no newline at all
must not pile up)."""

_DRAIN_WAIT = 0.25
"""How long :meth:`OutputCapture.stop` waits for the rest of the pipe (only a child process
still holding it makes this wait)."""

QUIET = 0.05
"""How long the output pipe stays quiet before an unfinished line on it is written."""

_PIPE_SIZE = 1024 * 1024
"""The output pipe's buffer (64 KiB by default): C code writing to fd 2 while holding the
interpreter lock cannot let the draining thread run, so the pipe must take it whole."""


class OutputCapture:
    """Send what the program writes to stdout and stderr through ``sink``, a whole line at
    a time (so a ``print()`` is never cut by a log line): ``sys.stdout`` and ``sys.stderr``
    as text streams, and fds 1 and 2 as a pipe a thread drains, for what bypasses ``sys``
    (a C extension's ``printf``, a child process). The sink writes to a copy of the
    original stderr; :meth:`stop` puts everything back. A caller that needs the original
    stdout (the ACP protocol) copies fd 1 first."""

    def __init__(self, sink: StderrSink) -> None:
        self._sink = sink
        self._saved: dict[int, int] = {}
        self._streams: tuple[TextIO, TextIO] | None = None
        self._pump: threading.Thread | None = None

    def start(self) -> None:
        """Take descriptors 1 and 2 and the ``sys`` streams."""
        if self._pump is not None:
            raise RuntimeError("the output capture is already started")
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        self._saved = {fd: os.dup(fd) for fd in (1, 2)}
        # From the next batch on, the sink writes to the original stderr, not to fd 2.
        self._sink.write_to(self._saved[2])
        read_end, write_end = os.pipe()
        with contextlib.suppress(OSError, AttributeError):  # Linux only; a bigger buffer
            fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
        for fd in (1, 2):
            os.dup2(write_end, fd)
        os.close(write_end)
        self._streams = (sys.stdout, sys.stderr)
        sys.stdout = _text_stream(_Lines(self._sink), 1)
        sys.stderr = _text_stream(_Lines(self._sink), 2)
        self._pump = threading.Thread(
            target=_pump, args=(read_end, _Lines(self._sink)), name="hotseam-output", daemon=True
        )
        self._pump.start()

    def stop(self, timeout: float = _DRAIN_WAIT) -> None:
        """Put the descriptors and streams back; wait at most ``timeout`` for the pipe to
        be drained (a child process may keep it open: it is then left to the thread)."""
        if self._pump is None or self._streams is None:
            return
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        sys.stdout, sys.stderr = self._streams
        for fd, saved in self._saved.items():
            os.dup2(saved, fd)  # the pipe's last write ends (but a child's) close here
        os.close(self._saved[1])
        # The original stderr's copy stays open: the sink's writer may be writing to it.
        self._pump.join(timeout)
        self._pump = None
        self._streams = None

    def __enter__(self) -> OutputCapture:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class _Lines:
    """Bytes in, whole lines out to the sink; the tail waits for its newline."""

    def __init__(self, sink: StderrSink) -> None:
        self._sink = sink
        # Reentrant: a signal handler that prints while this thread is in feed() must not
        # deadlock on it (as in StderrSink).
        self._lock = threading.RLock()
        self._tail = b""

    def feed(self, data: bytes) -> None:
        with self._lock:
            data = self._tail + data
            end = data.rfind(b"\n") + 1
            if len(data) - end > LINE_LIMIT:
                end = len(data)
            self._tail = data[end:]
            self._sink.write_bytes(data[:end])

    def flush(self) -> None:
        """Write the unfinished line as it is."""
        with self._lock:
            tail, self._tail = self._tail, b""
            self._sink.write_bytes(tail)

    @property
    def pending(self) -> bool:
        return bool(self._tail)


class _SinkWriter(io.RawIOBase):
    """The binary side of a captured ``sys`` stream; ``fileno()`` is the captured pipe, for
    code that hands the stream to a child process or to ``faulthandler``."""

    def __init__(self, lines: _Lines, fd: int) -> None:
        super().__init__()
        self._lines = lines
        self._fd = fd

    def writable(self) -> bool:
        return True

    def write(self, data: ReadableBuffer) -> int:
        chunk = bytes(data)
        self._lines.feed(chunk)
        return len(chunk)

    def flush(self) -> None:
        self._lines.flush()

    @property
    def name(self) -> str:
        """As the standard streams' own names."""
        return "<stdout>" if self._fd == 1 else "<stderr>"

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return False


def _text_stream(lines: _Lines, fd: int) -> io.TextIOWrapper:
    return io.TextIOWrapper(
        _SinkWriter(lines, fd),
        encoding="utf-8",
        errors="backslashreplace",
        write_through=True,
    )


def _pump(fd: int, lines: _Lines) -> None:
    """Drain the output pipe into ``lines`` until every write end is closed."""
    try:
        while True:
            if lines.pending and not select.select([fd], [], [], QUIET)[0]:
                lines.flush()  # quiet: the unfinished line goes out as it is
                continue
            chunk = os.read(fd, _PIPE_SIZE)
            if not chunk:
                break
            lines.feed(chunk)
    except OSError:  # pragma: no cover - the descriptor was closed under us
        pass
    finally:
        lines.flush()
        with contextlib.suppress(OSError):
            os.close(fd)
