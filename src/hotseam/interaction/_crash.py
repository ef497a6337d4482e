"""Logging a provider's crash: where it raised, and its traceback, never what was asked.

The agent reads ``PROVIDER_FAILED``, but the person running the program reads the logs: a
crash is ``ask.provider_failed`` (warning when the question was being withdrawn anyway) with
the exception, the ``file:line`` in the provider's own file, and the traceback minus
``ask()``'s frames. It is formatted here without locals (a renderer showing them would print
the question and answers of every frame); the question and answer are never logged.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

from .._core import EventLogger

_PACKAGE_DIR = str(Path(__file__).resolve().parent)


def log_provider_crash(
    log: EventLogger,
    failure: BaseException,
    provider: object,
    *,
    question_id: str,
    agent: str | None,
    withdrawn: bool,
) -> None:
    """Log ``failure``, raised by ``provider.ask()`` (``withdrawn``: it was being replaced,
    so the question is asked again and the crash is a warning)."""
    level = "warning" if withdrawn else "error"
    if not log.enabled(level):
        return
    name = f"{type(provider).__module__}.{type(provider).__qualname__}"
    location = _location(failure, _own_files(provider))
    described = f"{type(failure).__name__}: {failure}" if str(failure) else type(failure).__name__
    where = f" at {location}" if location else ""
    then = (
        "it was being replaced, so the question is asked again"
        if withdrawn
        else "the ask fails with PROVIDER_FAILED"
    )
    getattr(log, level)(
        "ask.provider_failed",
        question_id=question_id,
        agent=agent,
        provider=name,
        error_type=type(failure).__name__,
        error=str(failure),
        location=location,
        withdrawn=withdrawn,
        traceback=_format(failure),
        summary=f"the user-interaction provider {name} failed: {described}{where}; {then}",
    )


def _own_files(provider: object) -> set[str]:
    """The files the provider's class and its ``ask`` are defined in."""
    files: set[str] = set()
    module = sys.modules.get(type(provider).__module__)
    file = getattr(module, "__file__", None)
    if isinstance(file, str):
        files.add(file)
    ask = getattr(type(provider), "ask", None)
    code = getattr(ask, "__code__", None)
    if code is not None:
        files.add(code.co_filename)
    return files


def _location(failure: BaseException, own: set[str]) -> str | None:
    """``file:line``: the innermost frame in the provider's own files, else the raising
    frame (``None`` without a traceback)."""
    frames = traceback.extract_tb(failure.__traceback__)
    for frame in reversed(frames):
        if frame.filename in own:
            return f"{frame.filename}:{frame.lineno}"
    if frames:
        return f"{frames[-1].filename}:{frames[-1].lineno}"
    return None


def _format(failure: BaseException) -> str:
    """The traceback as Python prints it (no locals), minus the frames of ``ask()``."""
    summary = traceback.TracebackException.from_exception(failure)
    kept = [frame for frame in summary.stack if not frame.filename.startswith(_PACKAGE_DIR)]
    summary.stack = traceback.StackSummary.from_list(kept)
    return "".join(summary.format())
