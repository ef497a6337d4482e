"""open_journal(): a journal by its URL, open for the duration of an ``async with``."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator

import anyio

from ..._core import get_logger
from ._errors import JournalError, JournalErrorCode
from ._store import Journal
from ._url import default_journal_path, parse_journal_url

DEFAULT_LIVENESS_TIMEOUT = 15.0
"""Seconds without a heartbeat after which a daemon counts as dead."""

DEFAULT_POLL_INTERVAL = 0.2
"""Seconds between two looks for other processes' changes (SQLite only)."""

_log = get_logger("hotseam.journal")


@contextlib.asynccontextmanager
async def open_journal(
    url: str | os.PathLike[str] | None = None,
    *,
    liveness_timeout: float = DEFAULT_LIVENESS_TIMEOUT,
    poll_interval: float = DEFAULT_POLL_INTERVAL,
) -> AsyncIterator[Journal]:
    """Open the journal at ``url`` (default: ``journal.sqlite3`` in hotseam's state folder).

    The schema is created or migrated on open. Within the block the journal serves the
    event loop that opened it; at its end, waiters and feed readers are woken (they see
    ``JOURNAL_UNAVAILABLE``) and connections are closed.

    Args:
        url: ``sqlite:///PATH``, a file path, ``postgresql://...``, or ``memory:`` (SQLite
            in this process's memory, empty at each open: for tests).
        liveness_timeout: Seconds without a heartbeat after which a daemon is dead.
        poll_interval: SQLite only: seconds between looks for other processes' changes.

    Raises:
        JournalError: ``JOURNAL_INVALID_URL``, ``JOURNAL_UNAVAILABLE`` (no such folder, no
            server, no driver), ``JOURNAL_NEWER``.
    """
    engine = "sqlite" if url is None else parse_journal_url(url).engine
    # The engine's modules (and for PostgreSQL psycopg, a second or more to import, five on
    # a busy machine) are imported in a worker thread: an import on the event loop would
    # stall it that long, and a daemon's watchdog would report it.
    await anyio.to_thread.run_sync(_import_engine, engine)
    journal = _build(url, liveness_timeout, poll_interval)
    # Errors leave as they are, not in the group of the task group that holds the
    # journal's background tasks.
    failure: BaseException | None = None
    async with anyio.create_task_group() as task_group:
        try:
            try:
                await journal._start(task_group)
            except BaseException as error:
                failure = error
            else:
                _log.info("journal.opened", engine=journal.engine, url=journal.url)
                try:
                    yield journal
                except BaseException as error:
                    failure = error
        finally:
            await journal._closing()
            task_group.cancel_scope.cancel()
            with anyio.CancelScope(shield=True):
                await journal._stop()
    if failure is not None:
        raise failure
    _log.info("journal.closed", engine=journal.engine, url=journal.url)


def _import_engine(engine: str) -> None:
    """Import what opening a journal on ``engine`` imports (a missing driver is left for
    the engine to report, with the extra to install)."""
    if engine == "postgresql":
        from . import _postgres  # noqa: F401

        with contextlib.suppress(ImportError):
            import psycopg  # noqa: F401
    else:  # a file, or memory: SQLite both
        from . import _sqlite  # noqa: F401


def _build(
    url: str | os.PathLike[str] | None, liveness_timeout: float, poll_interval: float
) -> Journal:
    location = None if url is None else parse_journal_url(url)
    if location is not None and location.engine == "postgresql":
        from ._postgres import PostgresJournal

        return PostgresJournal(
            location.target, shown=location.shown, liveness_timeout=liveness_timeout
        )
    from ._sqlite import SqliteJournal

    path: str | os.PathLike[str] | None
    if location is not None:
        path = location.target if location.engine == "sqlite" else None
    else:
        try:
            path = default_journal_path()
        except RuntimeError as error:  # Path.home(): no $HOME and no password entry
            raise JournalError(
                f"no state folder for the default journal ({error}): give a journal URL",
                JournalErrorCode.JOURNAL_UNAVAILABLE,
            ) from None
    return SqliteJournal(
        path,
        liveness_timeout=liveness_timeout,
        poll_interval=poll_interval,
        make_folder=location is None,
    )
