"""structlog configuration for the ``hotseam`` command (the library never configures it).

Every mode writes log lines to stderr: in ACP mode stdout carries protocol messages only,
and in ``demo``/``dev`` mode stdout is the agent's own output.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal, TextIO

import structlog

__all__ = ["LogStyle", "configure_logging"]

LogStyle = Literal["console", "json"]


def configure_logging(
    style: LogStyle, *, level: str = "info", stream: TextIO | None = None
) -> None:
    """Send structlog events (and stdlib ``logging``) to ``stream`` (default stderr).

    ``console`` is human-readable (colours only on a terminal); ``json`` is one JSON object
    per line with no colours, for daemons and log collectors.
    """
    out = stream if stream is not None else sys.stderr
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
