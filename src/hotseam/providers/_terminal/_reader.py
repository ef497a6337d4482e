"""Cancellable line reading that never takes more than the line it returns.

A question that is withdrawn must not leave anything behind that would take the human's next
line away from the next question: a reader thread blocked in ``readline()`` does exactly that
(measured, see ``terminal-prompts.md`` §3.3). So a file descriptor is read only after
``anyio.wait_readable`` says it has data (asyncio's ``add_reader`` or trio's
``wait_readable``, both removed on cancellation), one byte at a time up to the newline:
the kernel keeps the rest of the input for whoever reads next, even another provider
instance after a hot reload. A line cut short by a cancellation is kept for the next reader
of the same descriptor. Regular files and ``/dev/null`` refuse polling; they never block,
so they are read directly.

Objects without a file descriptor (``io.StringIO`` in tests) are read with ``readline()``.
"""

from __future__ import annotations

import os
import select
import stat
from typing import IO, Any

import anyio

__all__ = ["LineReader", "fileno_of"]

# Partial lines of withdrawn reads, by (fd, device, inode), so the next reader continues them.
_partial: dict[tuple[int, int, int], bytes] = {}


def fileno_of(source: object) -> int | None:
    """The file descriptor of ``source`` (an int or a file object), or ``None``."""
    if isinstance(source, int):
        return source
    fileno = getattr(source, "fileno", None)
    if fileno is None:
        return None
    try:
        fd = fileno()
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        return None
    return fd if isinstance(fd, int) else None


class LineReader:
    """Reads lines from a file descriptor (or an in-memory stream) one ``readline`` at a time.

    Args:
        source: A file descriptor, a file object with one (``sys.stdin``), or a stream
            without one, read with its own ``readline()``.
    """

    __slots__ = ("_fd", "_stream")

    def __init__(self, source: int | IO[Any]) -> None:
        self._fd = fileno_of(source)
        self._stream: IO[Any] | None = None
        if self._fd is None and not isinstance(source, int):
            self._stream = source

    @property
    def is_terminal(self) -> bool:
        """True when reading a terminal, which echoes what the human types by itself."""
        if self._fd is not None:
            return os.isatty(self._fd)
        isatty = getattr(self._stream, "isatty", None)
        return bool(isatty()) if isatty is not None else False

    async def readline(self) -> str | None:
        """Return the next line without its line ending, or ``None`` at end of input."""
        if self._fd is None:
            return await self._read_stream()
        return await self._read_fd(self._fd)

    async def _read_stream(self) -> str | None:
        await anyio.lowlevel.checkpoint()
        assert self._stream is not None
        line: str | bytes = self._stream.readline()
        if isinstance(line, bytes):
            line = line.decode("utf-8", "replace")
        if not line:
            return None
        return line.rstrip("\r\n")

    async def _read_fd(self, fd: int) -> str | None:
        try:
            info = os.fstat(fd)
        except OSError:  # closed: the input ended
            await anyio.lowlevel.checkpoint()
            return None
        key = (fd, info.st_dev, info.st_ino)
        data = bytearray(_partial.pop(key, b""))
        pollable = not stat.S_ISREG(info.st_mode)
        try:
            while True:
                if pollable:
                    try:
                        await anyio.wait_readable(fd)
                    except PermissionError:  # /dev/null and the like: they never block
                        pollable = False
                    except anyio.ClosedResourceError:
                        return _decode(data) if data else None
                else:
                    await anyio.lowlevel.checkpoint()
                while True:
                    try:
                        byte = os.read(fd, 1)
                    except BlockingIOError:  # someone made the descriptor non-blocking
                        break
                    except OSError:  # closed, or the terminal went away: input ended
                        byte = b""
                    if not byte:
                        return _decode(data) if data else None
                    if byte == b"\n":
                        return _decode(data)
                    data += byte
                    if pollable and not _ready(fd):
                        break
        except BaseException:
            if data:
                _partial[key] = bytes(data)
            raise


def _ready(fd: int) -> bool:
    """True when a read of ``fd`` would not block (data, end of file or an error)."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)  # pragma: no cover - no poll() (Windows)
    return bool(readable)


def _decode(data: bytearray) -> str:
    return data.decode("utf-8", "replace").rstrip("\r")
