"""The embedded engine: one SQLite file, the standard library's ``sqlite3`` in worker threads.

The file (and its ``-wal`` and ``-shm``) is created mode 0600, in WAL mode (readers and one
writer at once, across processes of one machine), committed with ``synchronous=FULL`` for
what must survive a power cut (an answer, how an ask or a run ended) and ``NORMAL`` for the
rest (that survives a crash, and the next durable commit syncs it: the log is synced in
order). Every write is one ``BEGIN IMMEDIATE`` transaction, so writers queue for the lock (up
to the busy timeout) instead of failing halfway. Deleted records are overwritten
(``secure_delete``) and a purge empties the write-ahead log: a purged answer (personal data)
leaves no trace in the files.

SQLite cannot notify another process: while someone here waits or reads the change feed, the
journal polls ``PRAGMA data_version`` every ``poll_interval`` seconds (another process's
answer is seen in about 0.1 s; for milliseconds, use PostgreSQL). The feed is read back from
``hotseam_changes``, appended to in each change's transaction (writers are serialised, so
the numbers follow commit order); entries older than ten minutes are trimmed, and a reader
that fell further behind is told ``resync``.

Files removed under a live process (a tmp cleaner, an operator) would split the journal in
two unseen: SQLite goes on writing to the unlinked files while later openers of the path see
another journal. So before each transaction the files the path names (by device and inode)
are compared with those held open, and a difference is logged at error level and repaired,
with nothing of this process's view lost:

* the ``-wal`` or ``-shm`` removed: the view copied aside (``rm -rf`` removes the log
  before the file, and a closed connection holds nothing), the log checkpointed into the
  file, the connection reopened, and the copy dropped once the file is found still there
  (put in its place otherwise);
* the file or its folder removed: the folder made again (owner-only), the connection's whole
  view copied (SQLite's backup) into a new file, the connection to the removed files closed
  (freeing their space: on a small disk they would keep it full), the copy renamed into
  place and opened (until it is, the copy holds the view, and each transaction tries again);
* the path naming another file (a peer repaired it first, a copy was restored): this process
  switches to it, keeping its connection to the replaced file open until the journal closes
  (closing it earlier could remove the new file's ``-wal``).

Readers of the feed are then told ``resync``; what another process wrote to its own split-off
files meanwhile is not merged.

In memory (``memory:``, ``path=None``): one private database, no file, no polling, nothing
to repair; its transactions run on the event loop itself (no disk: each is one step of the
loop). Tests use it for speed with every statement the file engine runs.
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

from ..._core import get_logger
from ._errors import JournalError, JournalErrorCode
from ._notices import Subscription
from ._records import SETTLED_STATES, AskRecord, AskState, JournalEvent, PurgeReport, change_event
from ._schema import SCHEMA_VERSION, ensure_schema, schema_is_current
from ._sql import Db, Dialect
from ._store import Journal

T = TypeVar("T")

_log = get_logger("hotseam.journal")

BUSY_TIMEOUT = 10.0
"""Seconds a writer waits for another process's write transaction."""

DIALECT = Dialect(
    now="hotseam_now()",
    share="",
    update="",
    change_log=True,
    param="?",
    real="REAL",
    table_exists="SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
)


_SYNC = {True: "FULL", False: "NORMAL"}
"""The ``synchronous`` level of a durable commit, and of any other."""

LOG_KEPT = 600.0
"""Seconds an entry of the change log is kept (trimmed every 1,000 entries)."""


class _SqliteDb(Db):
    def publish(self, changes: Sequence[tuple[str, str, str]]) -> None:
        for ask_id, run_id, mark in changes:
            row = self.one(
                "INSERT INTO hotseam_changes (ask_id, run_id, state, at) VALUES (?, ?, ?, {now})"
                " RETURNING change_no",
                (ask_id, run_id, mark),
            )
            if row is not None and row[0] % 1000 == 0:
                self.count("DELETE FROM hotseam_changes WHERE at < {now} - ?", (LOG_KEPT,))


class SqliteJournal(Journal):
    """A journal in an SQLite file, or (``path`` None) in this process's memory."""

    engine = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        *,
        liveness_timeout: float,
        poll_interval: float,
        make_folder: bool = False,
    ) -> None:
        shown = "memory:" if path is None else str(path)
        super().__init__(shown, liveness_timeout=liveness_timeout)
        if not poll_interval > 0:
            raise ValueError(f"poll_interval must be seconds > 0, got {poll_interval!r}")
        self._in_memory = path is None
        self.path = Path(":memory:" if path is None else path)
        # In memory nobody else commits: the feed waits for this process's own nudges only.
        self._poll_interval = math.inf if path is None else poll_interval
        self._make_folder = make_folder
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._limiter = anyio.CapacityLimiter(1)
        self._nudged = anyio.Event()
        self._catching_up = anyio.Lock()
        self._data_version = 0
        self._last_change = 0
        self._identity: dict[str, tuple[int, int] | None] = {}  # suffix -> (dev, ino)
        self._retired: list[sqlite3.Connection] = []  # to files replaced under this one
        self._repaired = False  # tell the feed's readers to resync
        self._reopen = False  # a repair closed the connection and could not open a new one
        self._restoring: Path | None = None  # a copy of the view not yet renamed into place

    # -- lifecycle ----------------------------------------------------------------------------

    async def _start(self, task_group: anyio.abc.TaskGroup) -> None:
        await anyio.to_thread.run_sync(self._open_file, limiter=self._limiter)
        task_group.start_soon(self._watch_changes)

    async def _stop(self) -> None:
        await anyio.to_thread.run_sync(self._close_file, limiter=self._limiter)

    def _open_file(self) -> None:
        self._connection = self._connect()
        if not self._in_memory:
            self._note_files()

    def _connect(self) -> sqlite3.Connection:
        """A new connection to the file at the path, in WAL mode, its schema current."""
        created = self._in_memory or self._create_private()
        try:
            connection = sqlite3.connect(
                self.path,
                timeout=BUSY_TIMEOUT,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as error:
            raise self._unavailable(error) from None
        try:
            if not self._in_memory:  # a database in memory keeps its log in memory
                self._use_wal(connection)
            # SQLite's own clock ticks in milliseconds: asks made in one would tie.
            connection.create_function("hotseam_now", 0, time.time)
            connection.execute("PRAGMA synchronous = FULL")
            # What is deleted (a purge, a clear) is overwritten, not left in free space:
            # answers are personal data (some builds do this by default, not all).
            connection.execute("PRAGMA secure_delete = ON")
            connection.execute("PRAGMA foreign_keys = ON")
            where = str(self.path)
            found: int | None = SCHEMA_VERSION
            if not self._transaction(
                connection, lambda db: schema_is_current(db, where), sync=None
            ):
                found = self._transaction(
                    connection, lambda db: ensure_schema(db, where), sync="FULL"
                )
            self._data_version = connection.execute("PRAGMA data_version").fetchone()[0]
            self._last_change = self._current_change(connection)
        except sqlite3.Error as error:
            connection.close()
            raise self._unavailable(error) from None
        except BaseException:
            connection.close()
            raise
        if not created:
            self._warn_if_shared()
        self._migrated(found, self.path, path=str(self.path))
        return connection

    def _use_wal(self, connection: sqlite3.Connection) -> None:
        mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise JournalError(
                f"the journal {self.path} cannot use WAL mode (got {mode!r})",
                JournalErrorCode.JOURNAL_UNAVAILABLE,
            )

    def _close_file(self) -> None:
        with self._lock, contextlib.suppress(JournalError):
            self._settle_copy()  # a restored view not yet at the path: the last chance
        with self._lock:
            self._reopen = False
            connection, self._connection = self._connection, None
            retired, self._retired = self._retired, []
        if connection is not None:
            connection.close()
        for old in retired:  # after the new file's connection: see the module docstring
            with contextlib.suppress(sqlite3.Error):
                old.close()

    # -- files removed under this process -----------------------------------------------------

    def _named(self, suffix: str) -> tuple[int, int] | None:
        """The (device, inode) the path (with ``suffix``) names now; None when nothing."""
        try:
            found = os.stat(f"{self.path}{suffix}")
        except (FileNotFoundError, NotADirectoryError):
            return None
        return (found.st_dev, found.st_ino)

    def _note_files(self) -> None:
        """Remember which files the connection holds: the path names them now."""
        self._identity = {suffix: self._named(suffix) for suffix in ("", "-wal", "-shm")}

    def _moved(self) -> str | None:
        """What happened to the files the connection holds (None: the path names them)."""
        try:
            for suffix, held in self._identity.items():
                named = self._named(suffix)
                if held is None:  # not there when opened (SQLite makes it on first use)
                    self._identity[suffix] = named
                elif named != held:
                    name = f"{self.path}{suffix}"
                    return f"{name} was removed" if named is None else f"{name} was replaced"
        except OSError:  # cannot tell (a file system stalled, a permission): say nothing
            return None
        return None

    def _repair(self, connection: sqlite3.Connection, what: str) -> sqlite3.Connection | None:
        """Make the path name a journal holding this connection's whole view again, and
        return a connection to it (see the module docstring); None when the old connection
        was closed and a new one could not be opened yet (the next transaction tries
        again). Runs under ``_lock``; raises ``JOURNAL_UNAVAILABLE`` with the old
        connection untouched when the repair cannot be made now."""
        main = self._identity.get("")
        named = self._named("")
        try:
            if named is not None and named != main:  # replaced: switch to it
                fresh = self._connect()
                try:
                    merged = _merge(connection, self.path)
                except BaseException:
                    fresh.close()
                    raise
                how = f"switched to the file now at that path, {merged} merged into it"
                self._retired.append(connection)
            elif named is not None:  # the -wal or -shm removed
                how = "its write-ahead log was checkpointed into the file and reopened"
                # A copy first: the file may go next (``rm -rf`` removes the -wal before
                # it), and once the connection is closed nothing else holds the view. The
                # copy is dropped once the file is found still there.
                self._restoring = self._copy_view(connection)
                connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                # Closed before reopening: SQLite shares one -shm mapping per file in a
                # process, and the new log must not meet the removed one's.
                connection.close()
                self._log_repair(what, how)
                self._settle_copy()
                fresh = self._connect()
            else:  # the file or its folder removed
                how = "it was made again from this process's copy"
                copy = self._copy_view(connection)
                if self._path_is_free():
                    # Nothing at the path for SQLite's close to delete: closing now frees
                    # the removed files' space (a small disk would stay full otherwise).
                    connection.close()
                else:
                    self._retired.append(connection)
                self._restoring = copy
                self._settle_copy()
                fresh = self._connect()
        except sqlite3.Error as error:
            raise self._unavailable(error) from None
        self._note_files()
        self._data_version = fresh.execute("PRAGMA data_version").fetchone()[0]
        self._repaired = True
        if named is None or named != main:
            self._log_repair(what, how)
        return fresh

    def _log_repair(self, what: str, how: str) -> None:
        _log.error(
            "journal.files_removed",
            path=str(self.path),
            what=what,
            summary=f"the journal's files were removed under this process ({what}): {how}; "
            "nothing this process held is lost, and readers are told to list again",
        )

    def _copy_view(self, connection: sqlite3.Connection) -> Path:
        """Copy the connection's whole view into a new file beside the path (its folder made
        again, owner-only), synced; the connection is untouched."""
        folder = self.path.parent
        copy = folder / f".{self.path.name}.restoring-{os.getpid()}"
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                copy.unlink()
            os.close(os.open(copy, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
            # The removed log emptied into the removed file first: its space is freed.
            with contextlib.suppress(sqlite3.Error):
                connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            target = sqlite3.connect(copy, isolation_level=None)
            try:
                connection.backup(target)
            finally:
                target.close()  # a copy in WAL mode, its log checkpointed into it
            fd = os.open(copy, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except (OSError, sqlite3.Error) as error:
            with contextlib.suppress(OSError):
                copy.unlink()
            raise self._unavailable(error) from None
        return copy

    def _path_is_free(self) -> bool:
        """True when nothing is at the path, its ``-wal`` or its ``-shm``: closing a
        connection to removed files deletes its log by name, which must not be another's."""
        return all(self._named(suffix) is None for suffix in ("", "-wal", "-shm"))

    def _settle_copy(self) -> None:
        """Put the copy :meth:`_copy_view` made at the path: renamed into place, or, when
        another process made a journal there meanwhile, merged into it. Until then the copy
        holds this process's view (its connection may be closed): a failure leaves it, and
        the next transaction tries again before opening anything."""
        copy = self._restoring
        if copy is None:
            return
        named = self._named("")
        try:
            if named is not None and named == self._identity.get(""):  # the file is still
                for suffix in ("", "-wal", "-shm"):  # there: the copy is not needed
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(f"{copy}{suffix}")
            elif named is None:
                for suffix in ("-wal", "-shm"):  # of no file now: they must not meet the copy
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(f"{self.path}{suffix}")
                os.replace(copy, self.path)
            else:  # a peer made the journal again first
                source = sqlite3.connect(copy, isolation_level=None)
                try:
                    merged = _merge(source, self.path)
                finally:
                    source.close()
                for suffix in ("", "-wal", "-shm"):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(f"{copy}{suffix}")
                self._log_repair(
                    f"{self.path} was made again by another process first",
                    f"{merged} of this process's copy merged into it",
                )
        except (OSError, sqlite3.Error) as error:
            raise self._unavailable(error) from None
        self._restoring = None

    def _create_private(self) -> bool:
        """Create the file owner-only when missing; True when this call created it."""
        folder = self.path.parent
        if self._make_folder:
            try:
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as error:
                raise self._unavailable(error) from None
        elif not folder.is_dir():
            raise JournalError(
                f"cannot open the journal {self.path}: the folder {folder} does not exist",
                JournalErrorCode.JOURNAL_UNAVAILABLE,
            )
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        try:
            os.close(os.open(self.path, flags, 0o600))
        except FileExistsError:
            return False
        except OSError as error:
            raise self._unavailable(error) from None
        return True

    def _warn_if_shared(self) -> None:
        with contextlib.suppress(OSError):
            mode = stat.S_IMODE(self.path.stat().st_mode)
            if mode & 0o077:
                _log.warning(
                    "journal.file_shared",
                    summary=f"the journal {self.path} can be read by other users (mode "
                    f"{mode:o}) and holds answers, which are personal data: run chmod 600 "
                    f"{self.path} unless this is meant",
                    path=str(self.path),
                )

    # -- transactions -------------------------------------------------------------------------

    async def _write(self, operation: Callable[[Db], T], *, durable: bool = False) -> T:
        # In memory there is no disk: no synchronous level to set.
        return await self._on_thread(operation, "" if self._in_memory else _SYNC[durable])

    async def _read(self, operation: Callable[[Db], T]) -> T:
        return await self._on_thread(operation, None)

    async def _on_thread(self, operation: Callable[[Db], T], sync: str | None) -> T:
        """:meth:`_run` in the worker thread; in memory, on the event loop (see the module
        docstring)."""
        if self._in_memory:
            await anyio.lowlevel.checkpoint()
            return self._run(operation, sync)
        try:
            return await anyio.to_thread.run_sync(self._run, operation, sync, limiter=self._limiter)
        finally:
            self._resync_if_repaired()

    def _resync_if_repaired(self) -> None:
        """After a repair (the files removed), readers of the feed list again."""
        if self._repaired:
            self._repaired = False
            self._notices.publish([JournalEvent("resync")])

    def _run(self, operation: Callable[[Db], T], sync: str | None) -> T:
        """Run ``operation``: a read (``sync`` None), or a write committed with that
        ``synchronous`` level (empty: the level as it is)."""
        with self._lock:
            if self._connection is None and self._reopen:  # a repair closed it
                self._settle_copy()
                self._open_file()
                self._reopen = False
            if self._connection is None:
                raise JournalError(
                    f"the journal {self.path} is closed", JournalErrorCode.JOURNAL_UNAVAILABLE
                )
            moved = None if self._in_memory else self._moved()
            if moved is not None:
                connection, self._connection = self._connection, None
                try:
                    self._connection = self._repair(connection, moved)
                except JournalError:
                    if not _closed(connection):
                        self._connection = connection  # untouched: tried again next time
                    raise
                finally:
                    self._reopen = self._connection is None
            assert self._connection is not None
            try:
                return self._transaction(
                    self._connection, operation, sync=sync, ttl=self.liveness_timeout
                )
            except sqlite3.Error as error:
                raise self._unavailable(error) from None

    @staticmethod
    def _transaction(
        connection: sqlite3.Connection,
        operation: Callable[[Db], T],
        *,
        sync: str | None,
        ttl: float = 0.0,
    ) -> T:
        db = _SqliteDb(connection, DIALECT, ttl)
        if sync is None:
            return operation(db)
        if sync:
            connection.execute(f"PRAGMA synchronous = {sync}")  # outside a transaction only
        connection.execute("BEGIN IMMEDIATE")
        try:
            result = operation(db)
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")
        return result

    def _unavailable(self, error: BaseException) -> JournalError:
        reason = getattr(error, "strerror", None) or error
        return JournalError(
            f"the journal {self.path} cannot be used: {reason}",
            JournalErrorCode.JOURNAL_UNAVAILABLE,
            cause=error,
        )

    async def purge(
        self,
        *,
        older_than: float,
        states: Collection[AskState] = SETTLED_STATES,
        dry_run: bool = False,
    ) -> PurgeReport:
        report = await super().purge(older_than=older_than, states=states, dry_run=dry_run)
        if not dry_run and not self._in_memory and report != PurgeReport(0, 0, 0):
            # The removed records' former pages stay in the write-ahead log (which daemons
            # that hold the journal open keep) until it is checkpointed: copy it into the
            # file, where they were overwritten, and empty it now.
            done = await self._read(lambda db: db.one("PRAGMA wal_checkpoint(TRUNCATE)"))
            if done is None or done[0]:
                _log.warning(
                    "journal.checkpoint_busy",
                    summary=f"the journal {self.path} was purged, but its write-ahead log "
                    f"({self.path}-wal) is in use and still holds the removed records until "
                    "its next checkpoint: purge again later to empty it",
                )
        return report

    # -- changes ------------------------------------------------------------------------------

    def _changed(self, asks: Sequence[AskRecord], *, cleared: bool = False) -> None:
        super()._changed(asks, cleared=cleared)  # this process's waiters, at once
        if self._notices.has_subscribers:
            self._nudged.set()  # the feed reads it back in order

    async def _attach(self, subscription: Subscription) -> None:
        await self._catch_up()  # what was logged before goes to the readers already there
        subscription.arm()

    async def _watch_changes(self) -> None:
        """While anyone waits or reads the feed: catch up when nudged by a local change, or
        when ``PRAGMA data_version`` says another process committed (polled)."""
        while True:
            await self._notices.wait_interest()
            with anyio.move_on_after(self._poll_interval):
                await self._nudged.wait()
            nudged = self._nudged.is_set()
            self._nudged = anyio.Event()
            if not self._notices.interested:
                continue
            try:
                version = await self._read(lambda db: db.one("PRAGMA data_version"))
                if version is not None and version[0] != self._data_version:
                    self._data_version = version[0]
                    nudged = True
                if nudged:
                    await self._catch_up()
            except JournalError as error:
                _log.warning(
                    "journal.poll_failed",
                    summary=f"cannot read the journal {self.path} for changes: {error}",
                )
                await anyio.sleep(1.0)

    async def _catch_up(self) -> None:
        """Publish, in order, the changes numbered above the last one seen."""
        async with self._catching_up:
            since = self._last_change
            rows = await self._read(
                lambda db: db.all(
                    "SELECT change_no, ask_id, run_id, state FROM hotseam_changes"
                    " WHERE change_no > ? OR change_no = (SELECT MIN(change_no)"
                    " FROM hotseam_changes) ORDER BY change_no",
                    (since,),
                )
            )
            if not rows or rows[-1][0] <= since:
                return
            events = []
            if rows[0][0] > since + 1:  # trimmed before this reader saw them
                events.append(JournalEvent("resync"))
            for change_no, ask_id, run_id, mark in rows:
                if change_no > since:
                    events.append(change_event(ask_id, run_id, mark))
            self._last_change = rows[-1][0]
            self._notices.publish(events)

    @staticmethod
    def _current_change(connection: sqlite3.Connection) -> int:
        """The number of the last change logged (trimmed or not)."""
        row = connection.execute(
            "SELECT seq FROM sqlite_sequence WHERE name = 'hotseam_changes'"
        ).fetchone()
        return int(row[0]) if row is not None else 0


def _closed(connection: sqlite3.Connection) -> bool:
    """True once ``connection`` was closed."""
    try:
        connection.total_changes  # noqa: B018 (raises on a closed connection)
    except sqlite3.ProgrammingError:
        return True
    return False


_MERGED = (
    "hotseam_daemons",
    "hotseam_runs",
    "hotseam_asks",
    "hotseam_rules",
    "hotseam_rule_uses",
)
"""The tables a view is merged from, in the order their foreign keys need."""

_NEWER = {
    # the row of the file at the path is brought up to the view's where the view knows
    # more: a settled ask, an ended run, a later claim, a later heartbeat or a stop
    "hotseam_daemons": (
        "o.heartbeat_at > t.heartbeat_at OR (o.stopped_at IS NOT NULL AND t.stopped_at IS NULL)"
    ),
    "hotseam_runs": (
        "(t.state = 'running' AND o.state <> 'running')"
        " OR (t.state = o.state AND o.claimed_at > t.claimed_at)"
    ),
    "hotseam_asks": (
        "(t.state = 'pending' AND o.state <> 'pending')"
        " OR (t.state = o.state AND t.partial IS NULL AND o.partial IS NOT NULL)"
    ),
    "hotseam_rules": "t.revoked_at IS NULL AND o.revoked_at IS NOT NULL",
    "hotseam_rule_uses": "0",
}


def _merge(source: sqlite3.Connection, path: Path) -> str:
    """Merge what ``source`` (a connection to a view of the journal split off the path)
    holds into the journal at ``path``, in one transaction: rows the file lacks are added
    (an ask only with its run, a run only where its agent has no other unfinished run), and
    a row the view knows more of (:data:`_NEWER`) is brought up to it. The change log is
    not merged: readers are told to list again. Returns what was merged, for the log."""
    source.execute("ATTACH DATABASE ? AS target", (str(path),))
    try:
        source.execute("BEGIN IMMEDIATE")
        try:
            added = updated = 0
            for table in _MERGED:
                columns = _shared_columns(source, table)
                if not columns:  # a layout without the table (an older journal)
                    continue
                listed = ", ".join(columns)
                fresh = [column for column in columns if column != "id"]
                assignments = ", ".join(
                    f"{column} = (SELECT o.{column} FROM main.{table} AS o WHERE o.id = t.id)"
                    for column in fresh
                )
                updated += source.execute(
                    f"UPDATE target.{table} AS t SET {assignments} WHERE EXISTS (SELECT 1 FROM"
                    f" main.{table} AS o WHERE o.id = t.id AND ({_NEWER[table]}))"
                ).rowcount
                only = {
                    "hotseam_daemons": "",
                    "hotseam_runs": " WHERE daemon_id IN (SELECT id FROM target.hotseam_daemons)",
                    "hotseam_asks": " WHERE run_id IN (SELECT id FROM target.hotseam_runs)",
                    "hotseam_rules": "",
                    "hotseam_rule_uses": (
                        " WHERE rule_id IN (SELECT id FROM target.hotseam_rules)"
                    ),
                }[table]
                added += source.execute(
                    f"INSERT OR IGNORE INTO target.{table} ({listed})"
                    f" SELECT {listed} FROM main.{table}{only}"
                ).rowcount
            source.execute("COMMIT")
        except BaseException:
            if source.in_transaction:
                source.execute("ROLLBACK")
            raise
    finally:
        source.execute("DETACH DATABASE target")
    return f"{added} record(s) added and {updated} brought up to date"


def _shared_columns(source: sqlite3.Connection, table: str) -> list[str]:
    """The columns ``table`` has in both the view and the file (an older layout lacks some,
    and may order them differently)."""

    def names(schema: str) -> list[str]:
        return [row[1] for row in source.execute(f"PRAGMA {schema}.table_info({table})")]

    there = set(names("target"))
    return [column for column in names("main") if column in there]
