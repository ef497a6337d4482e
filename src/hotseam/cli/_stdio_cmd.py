"""What the commands a client launches over stdio share (``hotseam acp``, ``hotseam mcp``).

Such a command owns its process: stdout carries protocol messages only
(:func:`stdout_reserved`), the pipes are read and written on the event loop
(:func:`stdio_pipes`), and SIGTERM or Ctrl-C stops it cleanly (:func:`stop_on_signals`).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, BinaryIO

from .._core import get_logger
from ._log_sink import OutputCapture

if TYPE_CHECKING:
    import asyncio

    import anyio

__all__ = [
    "positive_float",
    "positive_int",
    "stdio_pipes",
    "stdout_reserved",
    "stop_on_signals",
]

_log = get_logger("hotseam.cli")
# The reader's buffer, not the longest line: a longer line is read in pieces of this size,
# up to --max-line-bytes (16 MiB by default), and a line over that is discarded as it
# arrives. (The SDK's default, 50 MiB, would buffer a runaway line that far before any check.)
_STDIO_CHUNK = 1024 * 1024


async def stop_on_signals(scope: anyio.CancelScope, command: str) -> None:
    """Cancel ``scope`` at the first SIGTERM or SIGINT, logged as ``{command}.signal``."""
    import anyio

    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            _log.info(f"{command}.signal", signal=signal.Signals(signum).name)
            scope.cancel()
            return


@contextmanager
def stdout_reserved() -> Iterator[BinaryIO]:
    """Keep stdout for protocol messages only, and the program's own output from blocking.

    The protocol gets a private copy of the stdout file descriptor. When stderr is a pipe
    or a file (a client launched the command), everything the program, provider modules
    and libraries write to stdout or stderr, ``print`` and writes to descriptors 1 and 2
    alike, goes through the log sink, so a client that never reads stderr costs lines
    (counted), never a frozen session: see :class:`OutputCapture`. On a terminal, fd 1 and
    ``sys.stdout`` point at stderr, which someone is reading.
    """
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


async def stdio_pipes(
    protocol_out: BinaryIO,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """stdin and ``protocol_out`` (from :func:`stdout_reserved`) as asyncio streams."""
    import asyncio

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_STDIO_CHUNK)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, protocol_out
    )
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


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
