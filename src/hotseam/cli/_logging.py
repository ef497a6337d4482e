"""structlog configuration for the ``hotseam`` command (the library never configures it).

Every mode writes log lines to stderr: in ACP mode stdout carries protocol messages only,
and in ``demo``/``dev`` mode stdout is the agent's own output.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal, TextIO

import structlog

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
    """A text stream that writes to whatever ``sys.stderr`` is at the time of the write."""

    def write(self, text: str) -> int:
        """Write to the current ``sys.stderr``."""
        return sys.stderr.write(text)

    def flush(self) -> None:
        """Flush the current ``sys.stderr``."""
        sys.stderr.flush()

    def isatty(self) -> bool:
        """Whether the current ``sys.stderr`` is a terminal (decides on colours)."""
        return sys.stderr.isatty()

    @property
    def encoding(self) -> str:
        """The current ``sys.stderr``'s encoding."""
        return sys.stderr.encoding
