"""structlog configuration for the ``hotseam`` command (the library never configures it).

Every mode writes log lines to stderr: in ACP mode stdout carries protocol messages only,
and in ``demo``/``dev`` mode stdout is the agent's own output. Logging never blocks the
program: when stderr is a pipe or a file, lines go through :class:`StderrSink` (a bounded
queue and a writer thread), so a client that does not read the pipe costs log lines, which
are counted and reported, never a stalled event loop.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import sys
from datetime import UTC, datetime
from typing import Literal, TextIO

import structlog

from ._log_sink import EXIT_WAIT, StderrSink, plain_report

__all__ = ["CurrentStderr", "LogStyle", "configure_logging"]

LogStyle = Literal["console", "json"]


def configure_logging(
    style: LogStyle, *, level: str = "info", stream: TextIO | None = None
) -> None:
    """Send structlog events (and stdlib ``logging``) to ``stream`` (default stderr).

    ``console`` is human-readable (colours only on a terminal); ``json`` is one JSON object
    per line with no colours, for daemons and log collectors. The default stream resolves
    ``sys.stderr`` at each write, so that while a terminal prompt is open (and has patched
    the standard streams) log lines print above it instead of through it.
    """
    out: TextIO = stream if stream is not None else CurrentStderr()  # type: ignore[assignment]
    sink = _stderr_sink()
    if sink is not None:
        sink.report = _json_report if style == "json" else plain_report
    numeric = logging.getLevelNamesMapping()[level.upper()]
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.typing.Processor
    if style == "json":
        renderer = structlog.processors.JSONRenderer()
        shared.append(structlog.processors.format_exc_info)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=out.isatty())
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.WriteLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    # Third-party stdlib logging (watchfiles, acp...) goes to the same stream.
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                renderer,
            ],
            foreign_pre_chain=shared,
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(max(numeric, logging.INFO) if style == "console" else numeric)


class CurrentStderr:
    """A text stream that writes to whatever ``sys.stderr`` is at the time of the write.

    The process's own stderr (``sys.__stderr__``), when it is a pipe or a file, is written
    through the process-wide :class:`StderrSink`, which never blocks. Everything else is
    written directly, as before: a terminal, because someone is looking at it (so it is
    read) and log lines must appear in order with the prompt and the program's output; and
    a replacement stream (the terminal prompt's patch that prints above it, a test's
    capture), because it is in memory and must see each line at once.
    """

    def write(self, text: str) -> int:
        """Write to the current ``sys.stderr``, through the sink if it is the real one."""
        current = sys.stderr
        if current is sys.__stderr__:
            sink = _stderr_sink()
            if sink is not None:
                return sink.write(text)
        return current.write(text)

    def flush(self) -> None:
        """Flush the current ``sys.stderr`` (nothing to do for the sink)."""
        current = sys.stderr
        if current is not sys.__stderr__ or _stderr_sink() is None:
            current.flush()

    def isatty(self) -> bool:
        """Whether the current ``sys.stderr`` is a terminal (decides on colours)."""
        return sys.stderr.isatty()

    @property
    def encoding(self) -> str:
        """The current ``sys.stderr``'s encoding."""
        return sys.stderr.encoding


_sink: StderrSink | None = None
_sink_checked = False


def _stderr_sink() -> StderrSink | None:
    """The sink for the process's stderr: ``None`` if it is a terminal (or missing)."""
    global _sink, _sink_checked
    if not _sink_checked:
        _sink_checked = True
        stderr = sys.__stderr__
        try:
            fd = stderr.fileno() if stderr is not None else -1
            if fd >= 0 and not os.isatty(fd):
                _sink = StderrSink(fd, encoding=getattr(stderr, "encoding", None) or "utf-8")
                atexit.register(_sink.close, EXIT_WAIT)
        except (OSError, ValueError):  # no usable file descriptor: write directly
            pass
    return _sink


def _json_report(count: int) -> str:
    """The dropped-lines report as a JSON log line, like every other in ``json`` style."""
    timestamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    line = {
        "logger": "hotseam.cli",
        "dropped": count,
        "reason": "stderr was not being read",
        "message": plain_report(count).rstrip("\n"),
        "event": "log.dropped",
        "level": "warning",
        "timestamp": timestamp,
    }
    return json.dumps(line) + "\n"
