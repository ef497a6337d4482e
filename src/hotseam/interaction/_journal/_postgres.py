"""The PostgreSQL engine: the same tables and SQL as SQLite, for several processes or machines.

psycopg 3 (the ``hotseam[postgres]`` extra) with *sync* connections run in anyio worker
threads, so that asyncio and trio behave the same (psycopg's async connections run on
asyncio only). Up to four connections serve operations; a fifth, dedicated one ``LISTEN``s:
its thread blocks in ``conn.notifies()`` and hands each notification to the event loop with
``anyio.from_thread``. Every transaction that changes an ask calls ``pg_notify`` (delivered
at commit, to every listening process), so a waiter in another process wakes within
milliseconds. If the listening connection is lost, it is re-established and readers are
told ``resync`` (waiters re-read their ask): nothing that happened meanwhile is missed.

Times come from the server's clock, so daemons on machines whose clocks disagree still
agree on which of them are alive. Tables live in the connection's current schema (choose
one with ``options=-csearch_path%3Dname`` in the URL); the notification channel is named
after it, so journals in two schemas of one database do not wake each other.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.abc
import anyio.from_thread
import anyio.to_thread

from ..._core import get_logger
from ._errors import JournalError, JournalErrorCode
from ._notices import Subscription
from ._records import JournalEvent, change_event
from ._schema import SCHEMA_VERSION, ensure_schema, schema_is_current
from ._sql import Db, Dialect
from ._store import Journal

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")

_log = get_logger("hotseam.journal")

POOL_SIZE = 4
"""Connections serving operations at once (the listener has its own)."""

_SYNC = "sync "  # a notification that only marks a point of the stream

_SCHEMA_LOCK = 0x686F747365616D  # "hotseam": the advisory lock of schema creation

DIALECT = Dialect(
    now="(EXTRACT(EPOCH FROM clock_timestamp())::float8)",
    share=" FOR SHARE",
    update=" FOR UPDATE",
    change_log=False,
    param="%s",
    real="DOUBLE PRECISION",
    table_exists="SELECT 1 WHERE to_regclass(?) IS NOT NULL",
)


class _PostgresDb(Db):
    def __init__(self, connection: Any, channel: str, ttl: float) -> None:
        super().__init__(connection, DIALECT, ttl)
        self.channel = channel

    def publish(self, changes: Sequence[tuple[str, str, str]]) -> None:
        self.connection.execute(
            "SELECT pg_notify(%s, payload) FROM unnest(%s::text[]) AS payload",
            (self.channel, [json.dumps(list(change)) for change in changes]),
        )


class PostgresJournal(Journal):
    """A journal in a PostgreSQL database."""

    engine = "postgresql"

    def __init__(self, conninfo: str, *, shown: str, liveness_timeout: float) -> None:
        super().__init__(shown, liveness_timeout=liveness_timeout)
        self._conninfo = conninfo
        self._channel = "hotseam_journal"
        self._idle: list[psycopg.Connection[Any]] = []
        self._limiter = anyio.CapacityLimiter(POOL_SIZE)
        self._stopping = threading.Event()
        self._arming: dict[str, Subscription] = {}

    # -- lifecycle ----------------------------------------------------------------------------

    async def _start(self, task_group: anyio.abc.TaskGroup) -> None:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise JournalError(
                f"the journal {self.url} needs psycopg 3: pip install 'hotseam[postgres]'",
                JournalErrorCode.JOURNAL_UNAVAILABLE,
            ) from None
        found, schema = await self._write(self._prepare)
        self._channel = _channel(schema)
        self._migrated(found, self.url, url=self.url)
        listener = await anyio.to_thread.run_sync(self._open_listener)
        task_group.start_soon(self._listen, listener)

    def _prepare(self, db: Db) -> tuple[int | None, str]:
        schema = db.one("SELECT current_schema()")
        if schema is None or schema[0] is None:
            raise JournalError(
                "the journal's connection has no current schema (its search_path names "
                "none that exists)",
                JournalErrorCode.JOURNAL_UNAVAILABLE,
            )
        where = f"{self.url} (schema {schema[0]})"
        if schema_is_current(db, where):
            return SCHEMA_VERSION, str(schema[0])
        db.one("SELECT pg_advisory_xact_lock(?)", (_SCHEMA_LOCK,))  # one creator at a time
        return ensure_schema(db, where), str(schema[0])

    async def _closing(self) -> None:
        self._stopping.set()
        await super()._closing()
        if self._idle:  # wake the listener at once rather than at its next timeout
            connection = self._idle[-1]
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                await anyio.to_thread.run_sync(
                    _quietly,
                    lambda: connection.execute("SELECT pg_notify(%s, '')", (self._channel,)),
                )

    async def _stop(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            await anyio.to_thread.run_sync(connection.close)

    def _connect(self) -> psycopg.Connection[Any]:
        import psycopg

        try:
            return psycopg.connect(
                self._conninfo, autocommit=True, connect_timeout=10, application_name="hotseam"
            )
        except psycopg.Error as error:
            raise self._failed(f"cannot connect to the journal {self.url}", error) from None

    def _failed(self, what: str, error: BaseException) -> JournalError:
        return JournalError(
            f"{what}: {_first_line(error)}", JournalErrorCode.JOURNAL_UNAVAILABLE, cause=error
        )

    # -- transactions -------------------------------------------------------------------------

    async def _write(self, operation: Callable[[Db], T], *, durable: bool = False) -> T:
        # Every commit is durable here (synchronous_commit stays the server's).
        return await self._with_connection(operation, write=True)

    async def _read(self, operation: Callable[[Db], T]) -> T:
        return await self._with_connection(operation, write=False)

    async def _with_connection(self, operation: Callable[[Db], T], *, write: bool) -> T:
        """Run ``operation`` on a pooled connection. One that turns out broken (the server
        restarted) is dropped with every idle one, since they share its fate; a read is then
        tried once more on a new connection (a write is not: it may have committed)."""
        async with self._limiter:
            for attempt in (1, 2):
                reused = self._idle.pop() if self._idle else None
                connection, outcome = await anyio.to_thread.run_sync(
                    self._call, reused, operation, write
                )
                if connection is not None:
                    self._idle.append(connection)
                    break
                if reused is None:
                    break
                stale, self._idle = self._idle, []
                for idle in stale:
                    await anyio.to_thread.run_sync(idle.close)
                if write or attempt == 2:
                    break
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _call(
        self, connection: psycopg.Connection[Any] | None, operation: Callable[[Db], T], write: bool
    ) -> tuple[psycopg.Connection[Any] | None, T | BaseException]:
        """In a worker thread: run ``operation`` on a healthy connection; give back the
        connection (``None`` when it broke) and the result or the exception."""
        import psycopg

        try:
            if connection is None or connection.closed or connection.broken:
                if connection is not None:
                    connection.close()
                connection = None
                connection = self._connect()
            db = _PostgresDb(connection, self._channel, self.liveness_timeout)
            if not write:
                return connection, operation(db)
            with connection.transaction():
                return connection, operation(db)
        except psycopg.Error as error:
            failure: BaseException = self._failed(f"the journal {self.url} failed", error)
        except BaseException as error:
            failure = error
        if connection is not None and (connection.closed or connection.broken):
            connection.close()
            connection = None
        return connection, failure

    # -- notifications ------------------------------------------------------------------------

    def _open_listener(self) -> psycopg.Connection[Any]:
        """A new connection that LISTENs on the journal's channel."""
        import psycopg
        from psycopg import sql

        connection = self._connect()
        try:
            connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
        except psycopg.Error as error:
            connection.close()
            raise self._failed(f"cannot listen to the journal {self.url}", error) from None
        return connection

    async def _listen(self, connection: psycopg.Connection[Any]) -> None:
        await anyio.to_thread.run_sync(
            self._listen_in_thread, connection, limiter=anyio.CapacityLimiter(1)
        )

    def _listen_in_thread(self, connection: psycopg.Connection[Any] | None) -> None:
        """Hand each notification to the event loop until the journal stops; reconnect
        (and tell readers ``resync``) when the connection drops."""
        try:
            while not self._stopping.is_set():
                if connection is None:
                    connection = self._reopen_listener()
                    continue
                self._relay(connection)
                connection.close()
                connection = None
        finally:
            if connection is not None:
                connection.close()

    def _reopen_listener(self) -> psycopg.Connection[Any] | None:
        try:
            connection = self._open_listener()
        except JournalError as error:
            _log.debug("journal.listen_retry", url=self.url, error=str(error))
            self._stopping.wait(1.0)
            return None
        _log.info("journal.listen_recovered", url=self.url)
        anyio.from_thread.run_sync(self._heard, None)
        return connection

    def _relay(self, connection: psycopg.Connection[Any]) -> None:
        """Until the journal stops or the connection fails: notifications to the loop."""
        import psycopg

        try:
            while not self._stopping.is_set():
                for notification in connection.notifies(timeout=1.0):
                    if self._stopping.is_set():
                        return
                    if notification.payload:
                        anyio.from_thread.run_sync(self._heard, notification.payload)
        except psycopg.Error as error:
            if not self._stopping.is_set():
                _log.warning(
                    "journal.listen_lost",
                    summary=f"lost the notification connection to the journal {self.url} "
                    f"({_first_line(error)}); reconnecting (answers from other processes "
                    "wake waiters again once it is back)",
                )

    async def _attach(self, subscription: Subscription) -> None:
        """Arm the reader when a notification sent now comes back: every change committed
        before was heard before it (notifications arrive in commit order)."""
        token = uuid.uuid4().hex
        self._arming[token] = subscription
        try:
            # The server out of reach (a restart, a failover) is waited for, with back-off:
            # a subscriber (an inbox starting, a daemon's question) starts once it is back.
            # The listener's reconnection arms every waiting subscriber (and says resync).
            delay = 0.05
            while not subscription.armed.is_set():
                try:
                    await self._read(
                        lambda db: db.one("SELECT pg_notify(?, ?)", (self._channel, _SYNC + token))
                    )
                    break
                except JournalError as error:
                    if error.code != JournalErrorCode.JOURNAL_UNAVAILABLE:
                        raise
                    _log.debug("journal.subscribe_retry", url=self.url, error=str(error))
                with anyio.move_on_after(delay):
                    await subscription.armed.wait()
                delay = min(delay * 2, 2.0)
            with anyio.fail_after(10):
                await subscription.armed.wait()
        except TimeoutError:
            raise JournalError(
                f"the journal {self.url} did not echo a notification within 10 s",
                JournalErrorCode.JOURNAL_UNAVAILABLE,
            ) from None
        finally:
            self._arming.pop(token, None)

    def _heard(self, payload: str | None) -> None:
        """In the event loop: one notification (``None``: the listener reconnected, and what
        was sent meanwhile is lost: readers waiting for their echo are armed, and told to
        list again)."""
        if payload is None:
            for waiting in self._arming.values():
                waiting.arm()
            self._notices.publish([JournalEvent("resync")])
            return
        if payload.startswith(_SYNC):
            arming = self._arming.pop(payload[len(_SYNC) :], None)
            if arming is not None:
                arming.arm()
            return
        try:
            ask_id, run_id, mark = json.loads(payload)
            event = change_event(str(ask_id), str(run_id), str(mark))
        except (ValueError, TypeError):
            _log.debug("journal.notification_ignored", payload=payload[:200])
            return
        self._notices.publish([event])


def _channel(schema: str) -> str:
    """The notification channel of the journal in ``schema`` (at most 63 bytes)."""
    name = "hotseam_journal" if schema == "public" else f"hotseam_journal:{schema}"
    if len(name.encode("utf-8")) > 63:
        name = "hotseam_journal:" + hashlib.sha256(schema.encode("utf-8")).hexdigest()[:40]
    return name


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _quietly(call: Callable[[], object]) -> None:
    try:
        call()
    except Exception:
        return
