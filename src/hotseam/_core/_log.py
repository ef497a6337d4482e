"""Structured lifecycle events that never reach stdout unless the application asks.

A library must not configure logging, and structlog's unconfigured default prints to stdout
(which would corrupt ACP's stdio channel). So an event (``scope.closed``...) goes through
structlog only when it is configured (the ``hotseam`` CLI, ``capture_logs``, the user's
app), else to the stdlib logger of the same name with its fields in ``extra`` (stdlib's
defaults: WARNING and above to stderr). structlog is never imported here: ``import
hotseam`` stays free of its ~40 ms import, and only an importer can have configured it."""

from __future__ import annotations

import logging
import sys
from typing import Any

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

_CONFIG_ITEMS = ("processors", "wrapper_class", "logger_factory", "context_class")
"""What a bound logger is made of: a configuration that replaces one of them rebinds."""


def _configured_structlog() -> Any:
    """structlog's module when it is imported and configured (so it owns the events)."""
    structlog: Any = sys.modules.get("structlog")
    if structlog is not None and structlog.is_configured():
        return structlog
    return None


class EventLogger:
    """A named logger that routes events to structlog when configured, else to stdlib."""

    __slots__ = ("_bound", "_name", "_stdlib")

    def __init__(self, name: str) -> None:
        self._name = name
        self._stdlib = logging.getLogger(name)
        self._bound: tuple[tuple[object, ...], Any] = ((), None)
        """The configuration's objects, and the logger bound with them (one attribute, so
        that the loop and a module body's thread never see one's without the other)."""

    def enabled(self, level: str) -> bool:
        """Tell whether an event at ``level`` could be seen, so callers skip building it (a
        structlog wrapper class other than the filtering bound logger may see every level)."""
        structlog = _configured_structlog()
        if structlog is None:
            return self._stdlib.isEnabledFor(_LEVELS[level])
        is_enabled_for = getattr(self._structlog_logger(structlog), "is_enabled_for", None)
        return is_enabled_for is None or bool(is_enabled_for(_LEVELS[level]))

    def _structlog_logger(self, structlog: Any) -> Any:
        """The structlog logger of this name, bound once per configuration (binding one per event
        cost more than the event's fields). ``structlog.configure`` installs new objects, held
        here so that their identities tell a new configuration; ``capture_logs`` changes the
        processor list in place, which the bound logger shares."""
        config = structlog.get_config()
        used = tuple(config[item] for item in _CONFIG_ITEMS)  # held, so never a reused id
        cached, bound = self._bound
        if len(cached) != len(used) or any(a is not b for a, b in zip(cached, used, strict=True)):
            bound = structlog.get_logger(self._name).bind(logger=self._name)
            self._bound = (used, bound)
        return bound

    def _emit(self, level: str, event: str, exc_info: bool, fields: dict[str, Any]) -> None:
        structlog = _configured_structlog()
        if structlog is not None:
            if exc_info:
                fields["exc_info"] = True
            getattr(self._structlog_logger(structlog), level)(event, **fields)
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
