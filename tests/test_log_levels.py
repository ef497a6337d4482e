"""hotseam's events and structlog's level: nothing is built for a level no one sees.

The ``hotseam`` command configures structlog with a filtering bound logger (``--log-level``);
a reload or an ask checks ``enabled(level)`` before building an event's fields, and that
answer must be structlog's, not "configured, so yes". The bound logger is kept between
events, and a new configuration is followed at once.
"""

from __future__ import annotations

import io
import json
import logging

import structlog

from hotseam._core import get_logger


def _configure(stream: io.StringIO, level: int) -> None:
    structlog.configure(
        processors=[structlog.processors.JSONRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.WriteLoggerFactory(file=stream),
    )


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_enabled_is_structlogs_filtering_level() -> None:
    stream = io.StringIO()
    _configure(stream, logging.INFO)
    log = get_logger("hotseam.levels")
    assert [log.enabled(level) for level in ("debug", "info", "warning", "error")] == [
        False,
        True,
        True,
        True,
    ]
    log.debug("levels.hidden", n=0)
    log.info("levels.shown", n=1)
    assert _lines(stream) == [{"n": 1, "logger": "hotseam.levels", "event": "levels.shown"}]


def test_a_new_configuration_is_followed_by_a_logger_already_used() -> None:
    first, second = io.StringIO(), io.StringIO()
    log = get_logger("hotseam.levels")
    _configure(first, logging.WARNING)
    log.info("levels.dropped")
    log.warning("levels.first")
    assert not log.enabled("info")
    _configure(second, logging.DEBUG)
    assert log.enabled("debug")
    log.debug("levels.second")
    with structlog.testing.capture_logs() as captured:
        log.info("levels.captured", n=2)
    assert [line["event"] for line in _lines(first)] == ["levels.first"]
    assert [line["event"] for line in _lines(second)] == ["levels.second"]
    assert captured == [
        {"n": 2, "logger": "hotseam.levels", "event": "levels.captured", "log_level": "info"}
    ]


def test_without_structlog_configured_the_stdlib_level_decides() -> None:
    structlog.reset_defaults()
    log = get_logger("hotseam.levels")
    stdlib = logging.getLogger("hotseam.levels")
    stdlib.setLevel(logging.ERROR)
    try:
        assert not log.enabled("warning") and log.enabled("error")
    finally:
        stdlib.setLevel(logging.NOTSET)
