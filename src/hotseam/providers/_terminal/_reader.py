"""Cancellable line reading that never hands a reader more than the line it returns.

A withdrawn question must leave nothing behind that takes the human's next line from the
next question, as a reader thread blocked in ``readline()`` does (``terminal-prompts.md``
§3.3). So a descriptor is read only once ``anyio.wait_readable`` says it has data.

It is read in chunks (a byte per system call stalled the loop for seconds on a 4 MB line).
What a chunk brings past the newline, and a line cut short by a cancellation, is kept per
descriptor (fd, device, inode) for its next reader, even another provider instance after a
reload. Regular files are put back with ``lseek`` instead; files and ``/dev/null`` refuse
polling and never block, so they are read directly. A line over ``LINE_LIMIT`` bytes is
read to its end and discarded (``TOO_LONG``), never buffered whole. Objects without a
descriptor (``io.StringIO``) are read with ``readline()``, the limit in characters.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import IO, Any, Final

import anyio

LINE_LIMIT: Final = 64 * 1024
"""The longest reply line taken, in bytes: pages of pasted text fit; anything longer is a
runaway producer (a file piped by mistake, ``yes |``), discarded unkept and unechoed."""

_CHUNK = 64 * 1024


class TooLong:
    """What ``readline`` returns for a line longer than the limit (it was discarded)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "TOO_LONG"


TOO_LONG: Final = TooLong()


def too_long_reason() -> str:
    return f"That reply is longer than {LINE_LIMIT} bytes, so it was discarded: type a shorter one."


@dataclass(slots=True)
class _Pending:
    data: bytearray = field(default_factory=bytearray)
    discarding: bool = False  # inside a line over the limit: drop bytes up to its newline


# Per (fd, device, inode): bytes read past a line, or a line cut short by a withdrawal,
# so the next reader of the same descriptor continues exactly where this one stopped.
_partial: dict[tuple[int, int, int], _Pending] = {}


def fileno_of(source: object) -> int | None:
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


def isatty(source: object) -> bool:
    """True when ``source`` (a descriptor or a stream) is a terminal."""
    fd = fileno_of(source)
    if fd is not None:
        return os.isatty(fd)
    method = getattr(source, "isatty", None)
    return bool(method()) if callable(method) else False


class LineReader:
    """Reads lines from a file descriptor, a file with one, or a stream without one."""

    __slots__ = ("_fd", "_stream")

    def __init__(self, source: int | IO[Any]) -> None:
        self._fd = fileno_of(source)
        self._stream: IO[Any] | None = None
        if self._fd is None and not isinstance(source, int):
            self._stream = source

    @property
    def is_terminal(self) -> bool:
        """True when reading a terminal, which echoes what the human types by itself."""
        return isatty(self._fd if self._fd is not None else self._stream)

    async def readline(self) -> str | TooLong | None:
        """Return the next line without its line ending, ``TOO_LONG`` for a line over the
        limit (read to its end and discarded), or ``None`` at end of input."""
        if self._fd is None:
            return await self._read_stream()
        return await self._read_fd(self._fd)

    async def _read_stream(self) -> str | TooLong | None:
        await anyio.lowlevel.checkpoint()
        assert self._stream is not None
        line = _text(self._stream.readline(LINE_LIMIT + 1))
        if not line:
            return None
        if len(line) > LINE_LIMIT and not line.endswith("\n"):
            while (rest := _text(self._stream.readline(_CHUNK))) and not rest.endswith("\n"):
                await anyio.lowlevel.checkpoint()
            return TOO_LONG
        return line.rstrip("\r\n")

    async def _read_fd(self, fd: int) -> str | TooLong | None:
        try:
            info = os.fstat(fd)
        except OSError:  # closed: the input ended
            await anyio.lowlevel.checkpoint()
            return None
        key = (fd, info.st_dev, info.st_ino)
        pending = _partial.pop(key, None) or _Pending()
        regular = stat.S_ISREG(info.st_mode)
        pollable = not regular
        try:
            await anyio.lowlevel.checkpoint()  # cancelled here, nothing was taken yet
            while True:
                line = _take_line(pending)
                if line is not None:
                    return line
                if pollable:
                    try:
                        await anyio.wait_readable(fd)
                    except PermissionError:  # /dev/null and the like: they never block
                        pollable = False
                    except anyio.ClosedResourceError:
                        return _at_end(pending)
                else:
                    await anyio.lowlevel.checkpoint()
                try:
                    chunk = os.read(fd, _CHUNK)
                except BlockingIOError:  # someone made the descriptor non-blocking
                    continue
                except OSError:  # closed, or the terminal went away: input ended
                    chunk = b""
                if not chunk:
                    return _at_end(pending)
                pending.data += chunk
        finally:
            if regular and pending.data:
                pending.data = _put_back(fd, pending.data)
            if pending.data or pending.discarding:
                _partial[key] = pending


def _take_line(pending: _Pending) -> str | TooLong | None:
    """The first whole line of ``pending`` (removed from it), or ``None`` for none yet."""
    data = pending.data
    end = data.find(b"\n")
    if end < 0:
        if pending.discarding or len(data) > LINE_LIMIT:
            pending.discarding = True
            data.clear()
        return None
    line = data[:end]
    del data[: end + 1]
    if pending.discarding or len(line) > LINE_LIMIT:
        pending.discarding = False
        return TOO_LONG
    return _decode(line)


def _at_end(pending: _Pending) -> str | TooLong | None:
    """At end of input: the last line without a newline, if any; then ``None``."""
    if pending.discarding:
        pending.discarding = False
        pending.data.clear()
        return TOO_LONG
    if not pending.data:
        return None
    line = bytes(pending.data)
    pending.data.clear()
    return TOO_LONG if len(line) > LINE_LIMIT else _decode(line)


def _put_back(fd: int, data: bytearray) -> bytearray:
    """Seek a regular file back over ``data``; what could not be put back is kept."""
    try:
        os.lseek(fd, -len(data), os.SEEK_CUR)
    except OSError:
        return data
    return bytearray()


def _text(line: str | bytes) -> str:
    return line.decode("utf-8", "replace") if isinstance(line, bytes) else line


def _decode(data: bytes | bytearray) -> str:
    return data.decode("utf-8", "replace").rstrip("\r")
