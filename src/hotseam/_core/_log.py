"""Structured lifecycle events that never reach stdout unless the application asks.

hotseam emits structlog events (``scope.closed``, ``provider.installed``, ...). A library must
not configure logging, and structlog's *unconfigured* default prints to stdout, which would
corrupt ACP's stdio channel. So each call checks :func:`structlog.is_configured`:

* configured (the ``hotseam`` CLI, ``structlog.testing.capture_logs``, the user's app): the
  event goes through structlog's pipeline, as any structlog event;
* not configured: the same event dict goes to the stdlib logger of the same name
  (``hotseam.scope``...) with the fields in ``extra``, so stdlib's defaults apply (WARNING
  and above to stderr, nothing else).

structlog is never imported here: it can only be configured once something imported it, so
its presence in ``sys.modules`` is checked first (``import hotseam`` stays free of its
~40 ms import).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

__all__ = ["EventLogger", "get_logger"]

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def _structlog_configured() -> bool:
    """True when structlog is imported and configured (so it owns the events)."""
    structlog = sys.modules.get("structlog")
    return structlog is not None and bool(structlog.is_configured())


class EventLogger:
    """A named logger that routes events to structlog when configured, else to stdlib."""

    __slots__ = ("_name", "_stdlib")

    def __init__(self, name: str) -> None:
        self._name = name
        self._stdlib = logging.getLogger(name)

    def enabled(self, level: str) -> bool:
        """Tell whether an event at ``level`` could be seen, so callers skip building it."""
        if _structlog_configured():
            return True
        return self._stdlib.isEnabledFor(_LEVELS[level])

    def _emit(self, level: str, event: str, exc_info: bool, fields: dict[str, Any]) -> None:
        if _structlog_configured():
            structlog: Any = sys.modules["structlog"]
            logger = structlog.get_logger(self._name).bind(logger=self._name)
            if exc_info:
                fields["exc_info"] = True
            getattr(logger, level)(event, **fields)
            return
        numeric = _LEVELS[level]
        if self._stdlib.isEnabledFor(numeric):
            rendered = " ".join(f"{key}={value!r}" for key, value in fields.items())
            self._stdlib.log(
                numeric,
                "%s %s",
                event,
                rendered,
                exc_info=exc_info,
                extra={"hotseam_event": event, "hotseam_fields": fields},
                stacklevel=3,
            )

    def debug(self, event: str, **fields: Any) -> None:
        """Log a debug event (answer texts and other personal data go here only)."""
        self._emit("debug", event, False, fields)

    def info(self, event: str, **fields: Any) -> None:
        """Log a lifecycle event."""
        self._emit("info", event, False, fields)

    def warning(self, event: str, **fields: Any) -> None:
        """Log something a user should look at."""
        self._emit("warning", event, False, fields)

    def error(self, event: str, *, exc_info: bool = False, **fields: Any) -> None:
        """Log a failure, with the current traceback when ``exc_info`` is true."""
        self._emit("error", event, exc_info, fields)


def get_logger(name: str) -> EventLogger:
    """Return the event logger for a hotseam component (``"hotseam.scope"``...)."""
    return EventLogger(name)
