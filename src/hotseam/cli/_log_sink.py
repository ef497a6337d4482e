"""A log sink that never blocks the program, for the ``hotseam`` command's stderr.

Clients that launch ``hotseam acp`` (Toad, the ACP SDK's ``spawn_agent_process``) may pipe
its stderr and read it only at exit. Once the pipe's buffer (64 KiB on Linux) is full, a
plain write blocks, and a log call on the event loop stalls the protocol with it. Here the
log call only queues the line: a writer thread does the blocking writes. The queue holds a
bounded number of bytes; beyond it the *oldest* queued lines are dropped and counted, so
what is kept is what the program did last, and the count is written exactly where the gap
is, as soon as the pipe takes data again. At exit the queue gets a bounded time to drain.
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable

__all__ = ["EXIT_WAIT", "QUEUE_BYTES", "StderrSink", "plain_report"]

QUEUE_BYTES = 256 * 1024
"""How many bytes of log lines wait for the writer before the oldest are dropped."""

EXIT_WAIT = 1.0
"""How long the exit waits for queued lines to be written (never forever: the pipe may be dead)."""

_BATCH = select.PIPE_BUF
"""Lines go out in writes of at most this many bytes (unless one line is longer): a pipe
write that small is atomic, so a ``print`` to stderr from another thread never lands in
the middle of a log line."""


def plain_report(count: int) -> str:
    """The line that says how many log lines were dropped (with its newline)."""
    lines = "log line" if count == 1 else "log lines"
    return f"hotseam: {count} {lines} dropped: stderr was not being read\n"


class StderrSink:
    """A text stream whose ``write`` queues bytes for a writer thread and never blocks.

    ``report(count)`` renders the dropped-lines line; the CLI sets it to match the log
    style (a JSON object for ``json``). Lines are counted by their newlines. Whoever owns
    the process calls :meth:`drain` at exit.
    """

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
        self._queue: deque[bytes] = deque()
        self._queued = 0
        self._unreported = 0
        self._dropped = 0
        self._writing = False
        self._broken = False
        self._thread: threading.Thread | None = None

    @property
    def dropped(self) -> int:
        """How many lines were dropped so far (reported or not)."""
        return self._dropped

    def write(self, text: str) -> int:
        """Queue ``text``; drop the oldest queued lines if the queue is over its limit."""
        if not text:
            return 0
        data = text.encode(self._encoding, "backslashreplace")
        with self._cond:
            if self._broken:  # nobody will ever read it
                return len(text)
            self._queue.append(data)
            self._queued += len(data)
            while self._queued > self._limit and len(self._queue) > 1:
                oldest = self._queue.popleft()
                self._queued -= len(oldest)
                lines = oldest.count(b"\n")
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
                    return len(text)
            self._cond.notify()
        return len(text)

    def flush(self) -> None:
        """Nothing to do: the writer thread writes as fast as the reader reads."""

    def isatty(self) -> bool:
        """Whether the file descriptor is a terminal."""
        return os.isatty(self._fd)

    @property
    def encoding(self) -> str:
        """The encoding lines are written in."""
        return self._encoding

    def drain(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for every queued line to be written.

        Return whether it was (false: the pipe is still full, or its reader is gone).
        """
        deadline = time.monotonic() + timeout
        with self._cond:
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
                    self._cond.wait()
                batch: list[bytes] = []
                size = 0
                while self._queue and (not batch or size + len(self._queue[0]) <= _BATCH):
                    chunk = self._queue.popleft()
                    batch.append(chunk)
                    size += len(chunk)
                self._queued -= size
                # Every line dropped so far came after what was written and before this
                # batch: the report goes exactly where the gap is.
                dropped, self._unreported = self._unreported, 0
                self._writing = True
            try:
                if dropped:
                    self._write_all(self.report(dropped).encode(self._encoding, "backslashreplace"))
                self._write_all(b"".join(batch))
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

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._fd, view)
            except BlockingIOError:  # someone made the descriptor non-blocking
                select.select([], [self._fd], [])
                continue
            view = view[written:]
