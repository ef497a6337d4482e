"""The journal's one async interface, :class:`Journal`: every operation written once.

Each public method checks its arguments, then runs its statements (:mod:`._sql`) in one
transaction of its engine, ``_write`` or ``_read``: with its start, stop and wake-ups, all
an engine implements (``memory:`` is SQLite, see :mod:`._sqlite`). An open journal belongs
to the event loop that opened it (``open_journal``).
"""

from __future__ import annotations

import abc
import contextlib
import math
import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, NoReturn, TypeVar

import anyio
import anyio.abc

from ..._core import get_logger
from ._codec import (
    DAEMON_COLUMNS,
    RUN_COLUMNS,
    ask_from_row,
    daemon_from_row,
    entry_from_row,
    partial_json,
    run_from_row,
    to_json,
)
from ._errors import JournalError, JournalErrorCode
from ._notices import Notices, Subscription
from ._records import (
    SETTLED_STATES,
    AskRecord,
    AskState,
    DaemonRecord,
    InboxEntry,
    PurgeReport,
    RunOverview,
    RunRecord,
    RunState,
    Settlement,
    question_digest,
)
from ._refusals import (
    ask_conflict,
    known,
    not_abandoned,
    run_claimed,
    run_exists,
    run_finished,
)
from ._rules import (
    ApprovalRule,
    RuleScope,
    add_rule,
    check_rule,
    list_rules,
    note_use,
    revoke_rule,
)
from ._schema import SCHEMA_VERSION
from ._sql import (
    ASK,
    DAEMON_D,
    ENTRY_FROM,
    RUN,
    RUN_R,
    SETTLED,
    Db,
    columns,
    limited,
    marks,
)

if TYPE_CHECKING:
    from .._model import AskUserQuestionAnswer, AskUserQuestionRequest, QuestionAnswer

T = TypeVar("T")
E = TypeVar("E", AskState, RunState)

_log = get_logger("hotseam.journal")

_BEAT_RETRY_MAX = 2.0
"""The longest wait between two heartbeats tried through an outage (seconds): as a write's."""


class Journal(abc.ABC):
    """An open ask journal: daemons, their agents' runs, and every ask with its answer.

    Obtained from :func:`open_journal` (``async with open_journal(url) as journal``). The
    two engines (``sqlite``, also for ``memory:``, and ``postgresql``) run the same
    statements; a contract test suite holds each to every method's documented behaviour.

    Attributes:
        engine: ``"sqlite"`` or ``"postgresql"``.
        url: Where the journal is, fit to show (a password is replaced by ``***``).
        liveness_timeout: A daemon is alive while its last heartbeat is younger than this
            many seconds (and it was not marked stopped).
    """

    engine: str

    def __init__(self, url: str, *, liveness_timeout: float) -> None:
        if not liveness_timeout > 0 or math.isinf(liveness_timeout):
            raise ValueError(f"liveness_timeout must be seconds > 0, got {liveness_timeout!r}")
        self.url = url
        self.liveness_timeout = float(liveness_timeout)
        self._notices = Notices()
        self._closed = False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"

    # -- what an engine implements ------------------------------------------------------------

    @abc.abstractmethod
    async def _write(self, operation: Callable[[Db], T], *, durable: bool = False) -> T:
        """Run ``operation`` in one write transaction (committed, or rolled back if it
        raises). ``durable``: the commit must survive a power cut, not only a crash of this
        process (an answer, how an ask or a run ended); the engine may make other commits
        cheaper."""

    @abc.abstractmethod
    async def _read(self, operation: Callable[[Db], T]) -> T:
        """Run ``operation`` (one query)."""

    async def _start(self, task_group: anyio.abc.TaskGroup) -> None:  # noqa: B027
        """Open connections and start background tasks in ``task_group``."""

    async def _stop(self) -> None:  # noqa: B027
        """Close connections (background tasks are cancelled by the caller)."""

    async def _attach(self, subscription: Subscription) -> None:
        """Start telling ``subscription`` the changes from now on (it was registered, not yet
        armed: an engine whose changes arrive late arms it once the earlier ones are in)."""
        subscription.arm()

    def _changed(self, asks: Sequence[AskRecord], *, cleared: bool = False) -> None:
        """These asks were created, settled or (``cleared``) removed through this object:
        wake their waiters (a cleared ask's find it gone)."""
        if cleared:
            self._notices.wake(ask.id for ask in asks)
        else:
            self._notices.wake_with(asks)

    def _migrated(self, found: int | None, where: object, **fields: str) -> None:
        if found is not None and found < SCHEMA_VERSION:
            _log.info(
                "journal.migrated",
                summary=f"the journal {where} was migrated from schema version {found} "
                f"to {SCHEMA_VERSION}",
                **fields,
                from_version=found,
            )

    @property
    def closed(self) -> bool:
        """True once the journal was closed: every call then raises ``JOURNAL_UNAVAILABLE``."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise JournalError(
                f"the journal {self.url} is closed", JournalErrorCode.JOURNAL_UNAVAILABLE
            )

    async def _closing(self) -> None:
        """Refuse new calls and wake every waiter and reader (they see the journal closed)."""
        self._closed = True
        self._notices.close()

    # -- daemons ------------------------------------------------------------------------------

    async def register_daemon(
        self,
        name: str,
        *,
        agent: str | None = None,
        host: str | None = None,
        pid: int | None = None,
    ) -> DaemonRecord:
        """Record a daemon process (alive from now on); ``host``/``pid`` default to this one."""
        self._check_open()
        _nonblank("name", name)
        daemon_id = uuid.uuid4().hex
        place = (
            host if host is not None else socket.gethostname(),
            pid if pid is not None else os.getpid(),
        )

        def register(db: Db) -> DaemonRecord:
            db.count(
                "INSERT INTO hotseam_daemons (id, name, host, pid, agent, started_at,"
                " heartbeat_at) VALUES (?, ?, ?, ?, ?, {now}, {now})",
                (daemon_id, name, *place, agent),
            )
            return db.known_daemon(daemon_id)

        daemon = await self._write(register)
        _log.info(
            "journal.daemon_registered",
            daemon_id=daemon.id,
            name=name,
            host=daemon.host,
            pid=daemon.pid,
            agent=agent,
        )
        return daemon

    async def heartbeat(self, daemon_id: str) -> DaemonRecord:
        """Say the daemon is alive now.

        Raises:
            JournalError: ``DAEMON_UNKNOWN``; ``DAEMON_STOPPED`` when it was marked stopped
                (another process found it dead and may have taken its runs).
        """
        self._check_open()
        return await self._write(lambda db: db.heartbeat(daemon_id))

    async def stop_daemon(self, daemon_id: str) -> DaemonRecord:
        """Mark a daemon stopped (itself at a clean stop, or another one found dead): its
        runs can be claimed at once. Stopping a stopped daemon changes nothing.

        Raises:
            JournalError: ``DAEMON_UNKNOWN``.
        """
        self._check_open()

        def stop(db: Db) -> DaemonRecord:
            db.count(
                "UPDATE hotseam_daemons SET stopped_at = {now} WHERE id = ? AND stopped_at IS NULL",
                (daemon_id,),
            )
            return db.known_daemon(daemon_id)

        daemon = await self._write(stop)
        _log.info("journal.daemon_stopped", daemon_id=daemon_id, name=daemon.name)
        return daemon

    async def get_daemon(self, daemon_id: str) -> DaemonRecord:
        """The daemon as it is now (``alive`` included). Raises ``DAEMON_UNKNOWN``."""
        self._check_open()
        return known("daemon", daemon_id, await self._read(lambda db: db.daemon(daemon_id)))

    async def daemons(self) -> list[DaemonRecord]:
        """Every daemon in the journal, in the order they registered."""
        self._check_open()
        rows = await self._read(
            lambda db: db.all(
                f"SELECT {DAEMON_D} FROM hotseam_daemons d ORDER BY d.started_at, d.id", (db.ttl,)
            )
        )
        return [daemon_from_row(row) for row in rows]

    async def keep_alive(self, daemon_id: str, *, interval: float | None = None) -> NoReturn:
        """Heartbeat every ``interval`` seconds (default: a third of ``liveness_timeout``)
        until cancelled. A journal out of reach is warned about and tried again with
        back-off (from 0.2 s up to every 2 s, or ``interval`` when shorter), so the beat
        resumes within about 2 s of the journal's return.

        Raises:
            JournalError: ``DAEMON_STOPPED`` or ``DAEMON_UNKNOWN``: the daemon lost its place.
        """
        period = self.liveness_timeout / 3 if interval is None else interval
        unreachable = False
        wait = period
        while True:
            await anyio.sleep(wait)
            try:
                await self.heartbeat(daemon_id)
            except JournalError as error:
                if error.code != JournalErrorCode.JOURNAL_UNAVAILABLE:
                    raise
                if not unreachable:
                    _log.warning(
                        "journal.heartbeat_failed",
                        summary=f"cannot reach the journal {self.url} to say this daemon is "
                        f"alive ({error}); trying again soon, then every {period:g} s",
                        daemon_id=daemon_id,
                    )
                    wait = min(period, 0.1)
                # Soon after an outage ends, not a whole period later: a beat missed for
                # longer than the liveness would let another daemon take this one's runs.
                wait = min(period, _BEAT_RETRY_MAX, wait * 2)
                unreachable = True
            else:
                if unreachable:
                    _log.info("journal.heartbeat_recovered", daemon_id=daemon_id)
                unreachable = False
                wait = period

    # -- runs ---------------------------------------------------------------------------------

    async def start_run(self, agent: str, daemon_id: str) -> RunRecord:
        """Start a run of ``agent`` owned by ``daemon_id``.

        Raises:
            JournalError: ``RUN_EXISTS`` when the agent has an unfinished run (resume it
                with :meth:`claim_run`, or :meth:`abandon_run` it first; the existing run's
                id is in ``details``); ``DAEMON_UNKNOWN``; ``DAEMON_STOPPED``.
        """
        self._check_open()
        _nonblank("agent", agent)
        run_id = uuid.uuid4().hex

        def start(db: Db) -> RunRecord:
            db.heartbeat(daemon_id)
            row = db.one(
                "INSERT INTO hotseam_runs (id, agent, daemon_id, state, started_at, claimed_at)"
                " VALUES (?, ?, ?, ?, {now}, {now}) ON CONFLICT DO NOTHING"
                f" RETURNING {RUN}",
                (run_id, agent, daemon_id, RunState.RUNNING.value),
            )
            if row is None:  # the agent's one unfinished run exists (a unique index says so)
                existing = db.unfinished_run(agent)
                assert existing is not None
                raise run_exists(existing)
            return run_from_row(row)

        run = await self._write(start)
        _log.info("journal.run_started", run_id=run.id, agent=agent, daemon_id=daemon_id)
        return run

    async def get_run(self, run_id: str) -> RunRecord:
        """The run as it is now. Raises ``RUN_UNKNOWN``."""
        self._check_open()
        return known("run", run_id, await self._read(lambda db: db.run(run_id)))

    async def unfinished_run(self, agent: str) -> RunRecord | None:
        """The agent's run that neither finished nor was abandoned, if there is one."""
        self._check_open()
        return await self._read(lambda db: db.unfinished_run(agent))

    async def runs(
        self,
        *,
        states: Collection[RunState] | None = None,
        agent: str | None = None,
        limit: int | None = None,
    ) -> list[RunOverview]:
        """Runs in these states (default: all), of ``agent`` when given, newest first (by
        their start), at most ``limit``; each with its owner daemon and how many asks it
        holds in each state (what an operator reads to learn why an agent resumed)."""
        self._check_open()
        chosen = _chosen(RunState, states, limit)
        if not chosen:
            return []
        of_agent = "" if agent is None else " AND agent = ?"
        params = [*chosen] if agent is None else [*chosen, agent]
        grouped = f"{RUN_R}, {columns(DAEMON_COLUMNS, 'd')}, a.state"
        rows = await self._read(
            lambda db: db.all(
                f"SELECT {RUN_R}, {DAEMON_D}, a.state, COUNT(a.id) FROM"
                f" (SELECT {RUN} FROM hotseam_runs WHERE state IN ({marks(chosen)}){of_agent}"
                f" ORDER BY started_at DESC, id DESC{limited(limit)}) r"
                " JOIN hotseam_daemons d ON d.id = r.daemon_id"
                " LEFT JOIN hotseam_asks a ON a.run_id = r.id"
                f" GROUP BY {grouped} ORDER BY r.started_at DESC, r.id DESC",
                [db.ttl, *params],
            )
        )
        width = len(RUN_COLUMNS)
        found: dict[str, tuple[RunRecord, DaemonRecord, dict[AskState, int]]] = {}
        for row in rows:  # in order: a run's rows follow one another
            run_id, state, count = row[0], row[-2], row[-1]
            if run_id not in found:
                found[run_id] = (run_from_row(row[:width]), daemon_from_row(row[width:-2]), {})
            if state is not None:
                found[run_id][2][AskState(state)] = int(count)
        return [RunOverview(run, daemon, asks) for run, daemon, asks in found.values()]

    async def claim_run(self, run_id: str, daemon_id: str) -> RunRecord:
        """Make ``daemon_id`` the owner of an unfinished run, to resume it.

        Atomic: of two processes claiming the same run at once, exactly one wins. A run
        whose owner is alive (and is not ``daemon_id``) cannot be claimed; one whose owner
        is dead or stopped can. Claiming a run one already owns returns it.

        Raises:
            JournalError: ``RUN_CLAIMED`` (the live owner's id in ``details``),
                ``RUN_FINISHED``, ``RUN_UNKNOWN``, ``DAEMON_UNKNOWN``, ``DAEMON_STOPPED``.
        """
        self._check_open()

        def claim(db: Db) -> RunRecord:
            # The run's row locked, then decided: of two claimers, the second sees the
            # first's claim (and its owner alive) once the first commits.
            db.heartbeat(daemon_id)
            run = db.locked_run(run_id, db.dialect.update)
            if run.daemon_id != daemon_id:
                owner = db.daemon(run.daemon_id)
                if owner is not None and owner.alive:
                    raise run_claimed(run, daemon_id)
            row = db.one(
                "UPDATE hotseam_runs SET daemon_id = ?, claimed_at = {now} WHERE id = ?"
                f" RETURNING {RUN}",
                (daemon_id, run_id),
            )
            assert row is not None
            return run_from_row(row)

        run = await self._write(claim)
        _log.info("journal.run_claimed", run_id=run_id, agent=run.agent, daemon_id=daemon_id)
        return run

    async def finish_run(
        self, run_id: str, *, failed: bool = False, owner: str | None = None
    ) -> RunRecord:
        """End a run whose agent function returned (``failed``: raised). Its pending asks
        are withdrawn in the same transaction: a finished run is never answered again.

        Args:
            owner: When given, the run must still belong to this daemon (``RUN_CLAIMED``
                otherwise): a daemon that stalled past its liveness cannot end a run that
                another daemon took over.

        Raises:
            JournalError: ``RUN_FINISHED``, ``RUN_UNKNOWN``, ``RUN_CLAIMED``.
        """
        self._check_open()
        state = RunState.FAILED if failed else RunState.FINISHED
        run, settled = await self._end_run(run_id, state, owner)
        self._changed(settled)
        _log.info("journal.run_ended", run_id=run_id, state=state.value, withdrawn=len(settled))
        return run

    async def abandon_run(self, run_id: str) -> RunRecord:
        """Give up an unfinished run (a fresh start, an operator): its pending asks become
        ``abandoned``, answers to them are refused, and it is never resumed.

        Raises:
            JournalError: ``RUN_FINISHED``, ``RUN_UNKNOWN``.
        """
        self._check_open()
        run, settled = await self._end_run(run_id, RunState.ABANDONED, None)
        self._changed(settled)
        _log.info("journal.run_abandoned", run_id=run_id, agent=run.agent, asks=len(settled))
        return run

    async def _end_run(
        self, run_id: str, state: RunState, owner: str | None
    ) -> tuple[RunRecord, list[AskRecord]]:
        """End the run (finished, failed or abandoned) and settle its pending asks, in one
        transaction: withdrawn, or abandoned with an abandoned run."""
        ask_state = AskState.ABANDONED if state is RunState.ABANDONED else AskState.WITHDRAWN

        def end(db: Db) -> tuple[RunRecord, list[AskRecord]]:
            run = db.locked_run(run_id, db.dialect.update)
            if owner is not None and run.daemon_id != owner:
                raise run_claimed(run, owner)
            row = db.one(
                "UPDATE hotseam_runs SET state = ?, finished_at = {now} WHERE id = ?"
                f" RETURNING {RUN}",
                (state.value, run_id),
            )
            assert row is not None
            settled = db.asks(
                "UPDATE hotseam_asks SET state = ?, settled_at = {now}"
                f" WHERE run_id = ? AND state = ? RETURNING {ASK}",
                (ask_state.value, run_id, AskState.PENDING.value),
            )
            settled.sort(key=lambda ask: (ask.seq, ask.created_at))
            db.announce(settled)
            return run_from_row(row), settled

        return await self._write(end, durable=True)

    # -- asks ---------------------------------------------------------------------------------

    async def record_ask(
        self,
        ask_id: str,
        run_id: str,
        seq: int,
        request: AskUserQuestionRequest,
        *,
        key: str | None = None,
        digest: str | None = None,
        owner: str | None = None,
    ) -> AskRecord:
        """Record a pending ask at position ``seq`` of an unfinished run.

        Idempotent: when ``ask_id`` is already recorded, that record is returned unchanged
        (whatever its run, position, digest or state: compare them).

        Args:
            digest: Default ``question_digest(request)``.
            owner: When given, the run must belong to this daemon (``RUN_CLAIMED``).

        Raises:
            JournalError: ``RUN_FINISHED``, ``RUN_UNKNOWN``, ``RUN_CLAIMED``, and
                ``ASK_CONFLICT`` when another live (not abandoned) ask holds ``seq``.
        """
        self._check_open()
        _nonblank("ask_id", ask_id)
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise ValueError(f"seq must be an int >= 0, got {seq!r}")
        values = (
            ask_id,
            run_id,
            seq,
            key,
            digest if digest is not None else question_digest(request),
            to_json(request),
            AskState.PENDING.value,
        )

        def record(db: Db) -> tuple[AskRecord, bool]:
            # Within a share lock on the run: an ask is never added to a run that finishes.
            run = db.locked_run(run_id, db.dialect.share)
            if owner is not None and run.daemon_id != owner:
                raise run_claimed(run, owner)
            existing = db.ask(ask_id)
            if existing is not None:
                return existing, False
            row = db.one(
                "INSERT INTO hotseam_asks (id, run_id, seq, caller_key, digest, request, state,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, {now})"
                f" ON CONFLICT DO NOTHING RETURNING {ASK}",
                values,
            )
            if row is None:
                existing = db.ask(ask_id)
                if existing is not None:  # recorded at the same instant by another process
                    return existing, False
                raise ask_conflict(run_id, seq, ask_id, key)
            ask = ask_from_row(row)
            db.announce([ask])
            return ask, True

        ask, created = await self._write(record)
        if created:
            self._changed([ask])
            _log.debug("journal.ask_recorded", ask_id=ask_id, run_id=run_id, seq=seq)
        return ask

    async def get_ask(self, ask_id: str) -> AskRecord:
        """The ask as it is now. Raises ``ASK_UNKNOWN``."""
        self._check_open()
        return known("ask", ask_id, await self._read(lambda db: db.ask(ask_id)))

    async def run_asks(self, run_id: str) -> list[AskRecord]:
        """The asks of a run in ``seq`` order (abandoned ones included, before the live ask
        that took their place)."""
        self._check_open()
        return await self._read(
            lambda db: db.asks(
                f"SELECT {ASK} FROM hotseam_asks WHERE run_id = ? ORDER BY seq, created_at, id",
                (run_id,),
            )
        )

    async def list_asks(
        self, *, states: Collection[AskState] | None = None, limit: int | None = None
    ) -> list[AskRecord]:
        """Asks in these states (default: all), newest first, at most ``limit``."""
        self._check_open()
        chosen = _chosen(AskState, states, limit)
        if not chosen:
            return []
        return await self._read(
            lambda db: db.asks(
                f"SELECT {ASK} FROM hotseam_asks WHERE state IN ({marks(chosen)})"
                f" ORDER BY created_at DESC, id DESC{limited(limit)}",
                chosen,
            )
        )

    async def list_entries(
        self,
        *,
        states: Collection[AskState] | None = None,
        agent: str | None = None,
        limit: int | None = None,
    ) -> list[InboxEntry]:
        """Like :meth:`list_asks` (newest first), each ask with its run and the run's daemon;
        only the asks of ``agent``'s runs when given."""
        self._check_open()
        chosen = _chosen(AskState, states, limit)
        if not chosen:
            return []
        of_agent = "" if agent is None else " AND r.agent = ?"
        params = [*chosen] if agent is None else [*chosen, agent]
        rows = await self._read(
            lambda db: db.all(
                f"{ENTRY_FROM} WHERE a.state IN ({marks(chosen)}){of_agent}"
                f" ORDER BY a.created_at DESC, a.id DESC{limited(limit)}",
                [db.ttl, *params],
            )
        )
        return [entry_from_row(row) for row in rows]

    async def answer_ask(
        self, ask_id: str, answer: AskUserQuestionAnswer, *, by: str | None = None
    ) -> Settlement:
        """Record the answer to a pending ask: the first answer wins, in one statement.

        Args:
            by: Who answers, for the record and for losers (an inbox, a host, a client).

        Returns:
            ``Settlement(won=True, ...)`` for the winner; ``won=False`` with the record as
            settled first (:meth:`Settlement.error` gives ``ALREADY_ANSWERED``).

        Raises:
            JournalError: ``ASK_UNKNOWN``; ``RUN_FINISHED`` for a pending ask whose run is
                no longer running (refused; never recorded).
        """
        self._check_open()
        return await self._settle(ask_id, AskState.ANSWERED, None, to_json(answer), by)

    async def keep_partial(self, ask_id: str, answers: Sequence[QuestionAnswer]) -> bool:
        """Record the answers given so far to some questions of a pending ask of several
        (asked one at a time), replacing what was kept before: a resumed run asks only the
        rest. The ask stays pending; its whole answer is still recorded by :meth:`answer_ask`.

        Returns:
            False when the ask is no longer pending (nothing is written).

        Raises:
            JournalError: ``JOURNAL_UNAVAILABLE``.
        """
        self._check_open()
        stored = partial_json(answers)

        def keep(db: Db) -> bool:
            return (
                db.count(
                    "UPDATE hotseam_asks SET partial = ? WHERE id = ? AND state = ?",
                    (stored, ask_id, AskState.PENDING.value),
                )
                > 0
            )

        return await self._write(keep, durable=True)

    async def settle_ask(
        self, ask_id: str, state: AskState, *, code: str | None = None, by: str | None = None
    ) -> Settlement:
        """Settle a pending ask as ``failed`` (with ``code``), ``withdrawn`` or ``abandoned``.

        Only a pending ask changes; otherwise ``won`` is False and the record says what
        happened first.

        Raises:
            JournalError: ``ASK_UNKNOWN``.
            ValueError: ``answered`` (use :meth:`answer_ask`) or ``pending``; a ``failed``
                without a code, or a code with another state.
        """
        self._check_open()
        state = AskState(state)
        if state not in SETTLED_STATES or state is AskState.ANSWERED:
            raise ValueError(
                f"settle_ask takes failed, withdrawn or abandoned, not {state} (an answer is "
                "recorded by answer_ask)"
            )
        if (state is AskState.FAILED) != (code is not None):
            raise ValueError("a code is given with state failed, and only then")
        return await self._settle(ask_id, state, code, None, by)

    async def abandon_asks(self, run_id: str, from_seq: int) -> list[AskRecord]:
        """Mark every ask of an unfinished run at ``seq >= from_seq`` abandoned, whatever
        its state (a resumed run asked something else there: those records are superseded).

        Returns the asks it changed, in ``seq`` order.

        Raises:
            JournalError: ``RUN_FINISHED``, ``RUN_UNKNOWN``.
        """
        self._check_open()

        def abandon(db: Db) -> list[AskRecord]:
            # With the run's row locked first, as ending a run does: the two never deadlock.
            db.locked_run(run_id, db.dialect.update)
            asks = db.asks(
                "UPDATE hotseam_asks SET state = ?, settled_at = COALESCE(settled_at, {now})"
                f" WHERE run_id = ? AND seq >= ? AND state <> ? RETURNING {ASK}",
                (AskState.ABANDONED.value, run_id, from_seq, AskState.ABANDONED.value),
            )
            asks.sort(key=lambda ask: (ask.seq, ask.created_at))
            db.announce(asks)
            return asks

        abandoned = await self._write(abandon)
        self._changed(abandoned)
        if abandoned:
            _log.info(
                "journal.asks_abandoned", run_id=run_id, from_seq=from_seq, asks=len(abandoned)
            )
        return abandoned

    async def wait_settled(self, ask_id: str) -> AskRecord:
        """Wait until the ask is no longer pending and return it as settled.

        Woken at once by a settlement made through this journal object; from other
        processes by ``NOTIFY`` on PostgreSQL (milliseconds) and by polling on SQLite
        (within ``poll_interval``). Cancel it (a timeout, a signal) to stop waiting.

        Raises:
            JournalError: ``ASK_UNKNOWN``; ``JOURNAL_UNAVAILABLE`` once the journal closed.
        """
        self._check_open()
        with self._notices.watch(ask_id) as watch:
            while True:
                ask = await self.get_ask(ask_id)
                if not ask.pending:
                    return ask
                await watch.wait()
                self._check_open()
                if watch.settled is not None:  # settled through this object: as it was
                    return watch.settled

    async def clear(self, ask_id: str) -> AskRecord:
        """Remove an abandoned ask from the journal (nobody will read an answer to it): the
        change feed tells ``cleared``, so every inbox that shows it drops it.

        Returns:
            The ask as it was recorded.

        Raises:
            JournalError: ``ASK_UNKNOWN`` (never recorded, or cleared or purged already);
                ``ASK_NOT_ABANDONED`` for a pending ask (answer or dismiss it) or one
                settled otherwise (it stays until purged).
        """
        self._check_open()

        def clear(db: Db) -> AskRecord:
            # One DELETE decides (an abandoned ask stays abandoned: of two clears, one wins
            # and the other finds it gone).
            row = db.one(
                f"DELETE FROM hotseam_asks WHERE id = ? AND state = ? RETURNING {ASK}",
                (ask_id, AskState.ABANDONED.value),
            )
            if row is None:
                raise not_abandoned(known("ask", ask_id, db.ask(ask_id)))
            ask = ask_from_row(row)
            db.announce([ask], cleared=True)
            return ask

        ask = await self._write(clear)
        self._changed([ask], cleared=True)
        _log.info("journal.ask_cleared", ask_id=ask.id, run_id=ask.run_id)
        return ask

    async def inbox(self) -> list[InboxEntry]:
        """Every pending ask of every daemon, oldest first, with its run and its daemon
        (``daemon.alive``: is the asker up? An ask of a dead daemon still takes an answer,
        held for its resume)."""
        self._check_open()
        rows = await self._read(
            lambda db: db.all(
                f"{ENTRY_FROM} WHERE a.state = ? ORDER BY a.created_at, a.id",
                (db.ttl, AskState.PENDING.value),
            )
        )
        return [entry_from_row(row) for row in rows]

    @contextlib.asynccontextmanager
    async def subscribe(self) -> AsyncIterator[Subscription]:
        """Within the block, an async iterator of :class:`JournalEvent` (created, settled,
        resync) for changes made from now on, by any process. Subscribe, then list: no
        change falls in between."""
        self._check_open()
        with self._notices.subscribe() as subscription:
            await self._attach(subscription)
            yield subscription

    async def purge(
        self,
        *,
        older_than: float,
        states: Collection[AskState] = SETTLED_STATES,
        dry_run: bool = False,
    ) -> PurgeReport:
        """Delete what retention no longer keeps: asks in ``states`` settled more than
        ``older_than`` seconds ago, then ended runs left without asks, then stopped or
        dead daemons left without runs (each also older than that). Pending asks and
        unfinished runs are never purged.

        Args:
            dry_run: Count what would be deleted, in the same transaction, and delete
                nothing (it is rolled back).

        Raises:
            ValueError: ``pending`` among ``states``, or a negative age.
        """
        self._check_open()
        chosen = frozenset(map(AskState, states))
        if AskState.PENDING in chosen:
            raise ValueError("pending asks are never purged: abandon their run first")
        if not older_than >= 0:
            raise ValueError(f"older_than must be seconds >= 0, got {older_than!r}")
        age = float(older_than)
        values = sorted(state.value for state in chosen)

        def purge(db: Db) -> PurgeReport:
            asks = 0
            if values:
                asks = db.count(
                    f"DELETE FROM hotseam_asks WHERE state IN ({marks(values)})"
                    " AND settled_at < {now} - ?",
                    [*values, age],
                )
            runs = db.count(
                "DELETE FROM hotseam_runs WHERE state <> ? AND finished_at < {now} - ? AND NOT"
                " EXISTS (SELECT 1 FROM hotseam_asks a WHERE a.run_id = hotseam_runs.id)",
                (RunState.RUNNING.value, age),
            )
            daemons = db.count(
                "DELETE FROM hotseam_daemons WHERE heartbeat_at < {now} - ?"
                " AND (stopped_at IS NOT NULL OR heartbeat_at < {now} - ?) AND NOT EXISTS"
                " (SELECT 1 FROM hotseam_runs r WHERE r.daemon_id = hotseam_daemons.id)",
                (age, db.ttl),
            )
            report = PurgeReport(asks, runs, daemons)
            if dry_run:
                raise _RolledBack(report)
            return report

        try:
            report = await self._write(purge)
        except _RolledBack as done:  # the transaction was rolled back: nothing deleted
            return done.report
        _log.info(
            "journal.purged",
            asks=report.asks,
            runs=report.runs,
            daemons=report.daemons,
            older_than=older_than,
        )
        return report

    # -- approval rules -----------------------------------------------------------------------

    async def add_rule(
        self,
        tool: str,
        *,
        allow: bool,
        where: Mapping[str, str] | None = None,
        scope: RuleScope = "journal",
        scope_id: str | None = None,
        reason: str | None = None,
        by: str | None = None,
    ) -> ApprovalRule:
        """Record an approval rule: always allow (or reject) calls of ``tool`` whose
        arguments match ``where``, in ``scope`` (``scope_id``: the run's or daemon's id).

        Raises:
            JournalError: ``INVALID_RULE`` naming what is wrong.
        """
        self._check_open()
        patterns = dict(where or {})
        check_rule(tool, patterns, scope, scope_id)
        rule = await self._write(
            lambda db: add_rule(db, tool, allow, patterns, scope, scope_id, reason, by),
            durable=True,
        )
        _log.info("journal.rule_added", rule_id=rule.id, rule=rule.describe(), by=by)
        return rule

    async def rules(self, *, revoked: bool = False) -> list[ApprovalRule]:
        """The approval rules, oldest first (``revoked``: the revoked ones too)."""
        self._check_open()
        return await self._read(lambda db: list_rules(db, revoked=revoked))

    async def revoke_rule(self, rule_id: str, *, by: str | None = None) -> ApprovalRule:
        """Revoke a rule: it decides nothing more (revoking it again changes nothing).

        Raises:
            JournalError: ``RULE_UNKNOWN``.
        """
        self._check_open()
        rule = await self._write(lambda db: revoke_rule(db, rule_id, by), durable=True)
        _log.info("journal.rule_revoked", rule_id=rule_id, rule=rule.describe(), by=by)
        return rule

    async def note_rule_use(
        self, rule_id: str, digest: str, *, run_id: str | None = None, agent: str | None = None
    ) -> ApprovalRule:
        """Record that the rule decided the call of ``digest`` (the audit of its use), in
        the transaction that checks it is still in force.

        Raises:
            JournalError: ``RULE_UNKNOWN``; ``RULE_REVOKED`` (the call must be asked).
        """
        self._check_open()
        return await self._write(
            lambda db: note_use(db, rule_id, digest, run_id, agent), durable=True
        )

    # -- shared -------------------------------------------------------------------------------

    async def _settle(
        self, ask_id: str, state: AskState, code: str | None, answer: str | None, by: str | None
    ) -> Settlement:
        """One UPDATE decides: only a pending ask changes (first answer wins), and an answer
        only while its run is running (a finished run is never answered)."""
        running = ""
        params: list[object] = [state.value, code, answer, by, ask_id, AskState.PENDING.value]
        if state is AskState.ANSWERED:
            running = (
                " AND EXISTS (SELECT 1 FROM hotseam_runs r WHERE r.id = hotseam_asks.run_id"
                " AND r.state = ?{share})"
            )
            params.append(RunState.RUNNING.value)

        def settle(db: Db) -> Settlement:
            row = db.one(
                f"UPDATE hotseam_asks SET {SETTLED} WHERE id = ? AND state = ?{running}"
                f" RETURNING {ASK}",
                params,
            )
            if row is not None:
                ask = ask_from_row(row)
                db.announce([ask])
                return Settlement(True, ask)
            current = known("ask", ask_id, db.ask(ask_id))
            if current.pending:  # only an answer can miss a pending ask: its run ended
                run = db.run(current.run_id)
                assert run is not None
                raise run_finished(run)
            return Settlement(False, current)

        settlement = await self._write(settle, durable=True)
        ask = settlement.ask
        if settlement.won:
            self._changed([ask])
        _log.info(
            "journal.ask_settled" if settlement.won else "journal.ask_settle_lost",
            ask_id=ask.id,
            run_id=ask.run_id,
            state=ask.state.value,
            code=ask.code,
            by=ask.settled_by,
        )
        return settlement


class _RolledBack(Exception):  # noqa: N818 (not an error: how a dry run ends its transaction)
    """Raised inside a write transaction to roll it back, carrying what it counted."""

    def __init__(self, report: PurgeReport) -> None:
        super().__init__("dry run")
        self.report = report


def _chosen(kind: type[E], states: Collection[E] | None, limit: int | None) -> list[str]:
    """The values of the chosen states (default: all), sorted: the parameters of an IN;
    none when ``limit`` is 0 (a listing of nothing)."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be an int >= 0, got {limit!r}")
    chosen = sorted({kind(state).value for state in (kind if states is None else states)})
    return [] if limit == 0 else chosen


def _nonblank(what: str, value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")
