"""structlog configuration for the ``hotseam`` command (the library never configures it).

Every mode logs to stderr (stdout carries protocol messages or the agent's own output).
When stderr is a pipe or a file, lines go through :class:`StderrSink`, so a client that does
not read it costs log lines, never a stalled loop; and a line bound for the sink is rendered
by its writer thread (:class:`_RenderLater`), what the call alone knows read at the call."""

from __future__ import annotations

import atexit
import functools
import json
import logging
import os
import sys
import time
from collections.abc import Callable, MutableMapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TextIO

import structlog

from ._log_sink import EXIT_WAIT, StderrSink, plain_report

LogStyle = Literal["console", "json"]


def configure_logging(
    style: LogStyle, *, level: str = "info", stream: TextIO | None = None
) -> None:
    """Send structlog events (and stdlib ``logging``) to ``stream`` (default: whatever
    ``sys.stderr`` is at each write, so lines print above an open terminal prompt) as
    ``console`` lines or ``json`` objects."""
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
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            _RenderLater(renderer, exc_info=style == "json", deferrable=stream is None),
        ],
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


def cli_log() -> Any:
    """The CLI's own logger: ``logger="hotseam.cli"`` keeps its lines past the quiet filter."""
    return structlog.get_logger("hotseam.cli").bind(logger="hotseam.cli")


def add_processors(*processors: structlog.typing.Processor) -> None:
    """Put ``processors`` in front of the renderer :func:`configure_logging` chose."""
    chain = list(structlog.get_config()["processors"])
    structlog.configure(processors=[*chain[:-1], *processors, chain[-1]])


def summary_lines(*prefixes: str, tracebacks: bool = False) -> structlog.typing.Processor:
    """A processor that shows an event with a one-line ``summary`` (named with one of
    ``prefixes``, if given) as that line; with ``tracebacks``, a warning's or error's
    traceback below it."""

    def processor(
        logger: object, method_name: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        summary = event_dict.get("summary")
        event = str(event_dict.get("event", ""))
        if not isinstance(summary, str) or (prefixes and not event.startswith(prefixes)):
            return event_dict
        report = {key: event_dict[key] for key in ("timestamp", "level") if key in event_dict}
        report["event"] = summary
        traceback = event_dict.get("traceback")
        if tracebacks and traceback and method_name in ("error", "warning"):
            report["exception"] = str(traceback).rstrip("\n")
        return report

    return processor


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _iso(nanoseconds: int) -> str:
    """``TimeStamper(fmt="iso", utc=True)``'s text for a ``time.time_ns()`` instant."""
    stamp = _EPOCH + timedelta(microseconds=nanoseconds // 1000)
    return stamp.isoformat().replace("+00:00", "Z")


def _kept(value: object, depth: int = 0) -> tuple[bool, object]:
    """Whether ``value`` renders the same later, and what to render then: a scalar, or a
    copy of a list, tuple or dict of such."""
    kind = type(value)
    if kind in _SCALARS:
        return True, value
    if depth > 2:
        return False, None
    if kind is list or kind is tuple:
        items = []
        for item in value:  # type: ignore[attr-defined]
            ok, copy = _kept(item, depth + 1)
            if not ok:
                return False, None
            items.append(copy)
        return True, items if kind is list else tuple(items)
    if kind is dict:
        copied = {}
        for key, item in value.items():  # type: ignore[attr-defined]
            ok, copy = _kept(item, depth + 1)
            if not ok or type(key) not in _SCALARS:
                return False, None
            copied[key] = copy
        return True, copied
    return False, None


class _RenderLater:
    """The last processor: stamps the event and renders it, on the sink's writer thread
    when every field renders the same later (the line then leaves structlog's path), else
    now (an ``exc_info`` is the exception being handled now)."""

    def __init__(self, renderer: Callable[..., Any], *, exc_info: bool, deferrable: bool) -> None:
        self._renderer = renderer
        self._exc_info = exc_info
        self._deferrable = deferrable

    def __call__(self, logger: object, method: str, event_dict: MutableMapping[str, Any]) -> Any:
        event_dict["timestamp"] = time.time_ns()
        sink = _stderr_sink() if self._deferrable and sys.stderr is sys.__stderr__ else None
        if sink is not None and "exc_info" not in event_dict:
            # The dict is this event's own (structlog makes one per call).
            copies: list[tuple[str, object]] = []
            for key, value in event_dict.items():
                if type(value) in _SCALARS:
                    continue
                ok, copy = _kept(value)
                if not ok:
                    break
                copies.append((key, copy))
            else:
                for key, copy in copies:
                    event_dict[key] = copy
                sink.write_later(
                    functools.partial(self._render_bytes, sink.encoding, logger, method, event_dict)
                )
                raise structlog.DropEvent
        return self._render(logger, method, event_dict)

    def _render(self, logger: object, method: str, event_dict: MutableMapping[str, Any]) -> Any:
        event_dict["timestamp"] = _iso(event_dict["timestamp"])
        if self._exc_info:
            event_dict = structlog.processors.format_exc_info(logger, method, event_dict)
        return self._renderer(logger, method, event_dict)

    def _render_bytes(
        self, encoding: str, logger: object, method: str, event_dict: MutableMapping[str, Any]
    ) -> bytes:
        text = self._render(logger, method, event_dict)
        if isinstance(text, bytes):
            return text + b"\n"
        return (str(text) + "\n").encode(encoding, "backslashreplace")


class CurrentStderr:
    """A text stream that writes to whatever ``sys.stderr`` is at the write: the process's
    own pipe or file through the :class:`StderrSink`; a terminal or a replacement (the
    prompt's patch, a test's capture) directly."""

    def write(self, text: str) -> int:
        current = sys.stderr
        if current is sys.__stderr__:
            sink = _stderr_sink()
            if sink is not None:
                return sink.write(text)
        return current.write(text)

    def flush(self) -> None:
        current = sys.stderr
        if current is not sys.__stderr__ or _stderr_sink() is None:
            current.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()

    @property
    def encoding(self) -> str:
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
