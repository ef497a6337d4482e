"""The fleet inbox: every pending ask of a journal, on the web inbox's page.

``hotseam inbox --journal URL`` serves a :class:`JournalInbox`: the web inbox (the same
page, API, refusals and guard as a daemon's own) over a mirror of the journal's pending
asks, each with its run and asking daemon. The change feed adds and removes questions as
any process records or settles them; every ``refresh`` seconds the asks are listed again
for what the feed does not carry (a daemon shown *down*, whose questions still take an
answer held for its resume; one stopped; a run taken over). A question whose run is
abandoned stays, marked so, until cleared (``Journal.clear``: every inbox drops it).

Deciding goes to the journal: ``answer_ask`` records the first answer in one transaction,
so of two inboxes answering at once one gets ``200`` and the other ``409
ALREADY_ANSWERED`` with what was answered and by whom. A question keeps the journal's ask
id, the one the asking daemon's own inbox shows. The page's Rules are the journal's
approval rules (``GET /api/rules``), revoked in it for every daemon.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import anyio.abc

from ..._core import get_logger
from ...interaction import AskUserQuestionAnswer, ErrorCode
from ...interaction.journal import (
    AskRecord,
    AskState,
    DaemonRecord,
    InboxEntry,
    Journal,
    JournalError,
    JournalErrorCode,
    JournalEvent,
    RunRecord,
    Settlement,
)
from ._answers import InboxError, question_dict, shown_answer
from ._app import build_app
from ._inbox import Decision, Entry, Inbox, not_abandoned, refusal, unknown
from ._security import DEFAULT_HOST, HostPolicy, checked_host, load_token, warn_if_remote
from ._server import DRAIN_GRACE, Listener, WebServer

T = TypeVar("T")

DEFAULT_REFRESH = 2.0
"""Seconds between two listings of the journal (liveness and run owners are not on the
change feed); less under a short liveness timeout."""

DEFAULT_FLEET_PORT = 8766
"""The fleet inbox's port: one above a daemon's own inbox (8765), so both run side by side."""

CLOSING_NOTE = "the fleet inbox is shutting down"
"""What open pages are told when the fleet inbox stops."""

_BURST = 16  # more changes than this at once: list everything again instead

_log = get_logger("hotseam.providers.web")


def inbox_identity() -> str:
    """How this inbox signs what it settles in the journal: ``inbox HOST:PID``."""
    return f"inbox {socket.gethostname()}:{os.getpid()}"


@dataclass(eq=False, slots=True)
class _Shown(Entry):
    """One question on the pages: the ask with its run and daemon as last read."""

    ask: AskRecord | None = None
    run: RunRecord | None = None
    daemon: DaemonRecord | None = None
    abandoned: bool = False

    @classmethod
    def of(cls, ask: AskRecord, run: RunRecord, daemon: DaemonRecord, seq: int) -> _Shown:
        return cls(ask.id, seq, ask.request, ask.created_at, ask=ask, run=run, daemon=daemon)

    @property
    def asker(self) -> DaemonRecord:
        assert self.daemon is not None
        return self.daemon

    def to_dict(self) -> dict[str, Any]:
        daemon, run = self.asker, self.run
        assert run is not None
        return {
            **question_dict(self.id, self.seq, self.asked_at, self.request),
            "state": "abandoned" if self.abandoned else "pending",
            "daemon": {
                "id": daemon.id,
                "name": daemon.name,
                "host": daemon.host,
                "pid": daemon.pid,
                "agent": daemon.agent,
                "up": daemon.alive,
                "stopped": daemon.stopped_at is not None,
            },
            "run": {"id": run.id, "agent": run.agent},
        }

    def looks(self) -> tuple[object, ...]:
        """What a page shows of the asker (a heartbeat alone changes nothing shown)."""
        daemon, run = self.asker, self.run
        assert run is not None
        return (run.id, daemon.id, daemon.alive, daemon.stopped_at is None, self.abandoned)


class JournalInbox(Inbox):
    """The web inbox over ``journal``: every pending ask of it, decided in it.

    Run :meth:`follow` in a task to keep the mirror; ``by`` signs what is settled here.
    """

    def __init__(
        self, journal: Journal, *, by: str | None = None, refresh: float | None = None
    ) -> None:
        super().__init__(OrderedDict())
        if refresh is None:
            refresh = min(DEFAULT_REFRESH, journal.liveness_timeout / 4)
        if not (refresh > 0 and math.isfinite(refresh)):
            raise ValueError(f"refresh must be seconds > 0, got {refresh!r}")
        self.journal = journal
        self.by = inbox_identity() if by is None else by
        self.refresh = refresh
        self._stale = False

    def close(self, note: str) -> None:
        """End every stream with ``closing`` (the questions stay in the journal)."""
        self._end_streams(note)

    # -- deciding, in the journal (the steps of Inbox.submit_*) ---------------------------------

    async def _answer(
        self, entry: Entry, answer: AskUserQuestionAnswer, client: str | None
    ) -> dict[str, Any]:
        assert isinstance(entry, _Shown)
        question_id, daemon = entry.id, entry.asker
        await self._won(entry, self.journal.answer_ask(question_id, answer, by=self.by))
        held = daemon.name if not daemon.alive else None
        entry.answer = answer
        self.settle(entry, "answered", _answered(held), client=client, held_for=held)
        up = daemon.alive
        _log.info(
            "web.fleet_answered", ask_id=question_id, daemon=daemon.name, daemon_up=up, by=self.by
        )
        return {} if held is None else {"heldFor": held}

    async def _dismiss(self, entry: Entry, client: str | None) -> dict[str, Any]:
        """Settle the ask as failed with ``ASK_CANCELLED`` (its agent's ask raises it)."""
        assert isinstance(entry, _Shown)
        code = ErrorCode.ASK_CANCELLED
        await self._won(
            entry, self.journal.settle_ask(entry.id, AskState.FAILED, code=code, by=self.by)
        )
        self.settle(entry, "dismissed", "dismissed", client=client)
        _log.info("web.fleet_dismissed", ask_id=entry.id, by=self.by)
        return {}

    async def _clear(self, question_id: str, client: str | None) -> dict[str, Any]:
        """Remove an abandoned question from the journal (and so from every inbox).

        Raises:
            InboxError: 409 ``NOT_ABANDONED`` for a question still waiting for its answer;
                404 for an unknown one; 409 for one settled otherwise; 503 when the journal
                cannot be reached (nothing changes).
        """
        entry = self._mirrored(question_id)
        if entry is not None and not entry.abandoned:
            raise not_abandoned(question_id)
        if entry is None:
            recent = self._decided.get(question_id)
            if recent is not None and recent.outcome == "cleared":
                return {}
        try:
            await self.journal.clear(question_id)
        except JournalError as error:
            if error.code == JournalErrorCode.ASK_NOT_ABANDONED:
                ask = await self._ask(question_id)
                raise (not_abandoned(question_id) if ask.pending else self._lost(ask)) from None
            if error.code != JournalErrorCode.ASK_UNKNOWN:
                raise _unavailable(error) from None
            if entry is None:
                raise unknown(question_id) from None
            # Shown here, gone from the journal: cleared elsewhere (or purged) already.
        if entry is not None:
            self._remove(question_id, Decision("cleared", "cleared", client))
        _log.info("web.fleet_cleared", ask_id=question_id, by=self.by)
        return {}

    # -- keeping the mirror ---------------------------------------------------------------------

    async def follow(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Keep the mirror until cancelled or the journal closes; started once listed.

        Everything is listed again every ``refresh`` seconds, and after a ``resync``, a
        burst, or a journal out of reach (warned about once, and tried again).
        """
        async with self.journal.subscribe() as feed:
            for item in await self.journal.inbox():
                self._add(item)
            task_status.started()
            due = anyio.current_time() + self.refresh
            ended = False
            while not ended:
                batch: list[JournalEvent | None] = []
                with anyio.move_on_after(max(0.0, due - anyio.current_time())):
                    batch.append(await anext(feed, None))
                    with anyio.move_on_after(0):  # what else is queued already
                        while len(batch) <= _BURST and batch[-1] is not None:
                            batch.append(await anext(feed, None))
                ended = None in batch  # the journal closed
                events = [event for event in batch if event is not None]
                full = (
                    self._stale
                    or anyio.current_time() >= due
                    or len(events) > _BURST
                    or any(event.kind == "resync" for event in events)
                )
                try:
                    if full:
                        due = anyio.current_time() + self.refresh
                        await self._relist()
                    else:
                        for event in events:
                            await self._apply(event)
                except JournalError as error:
                    if error.code != JournalErrorCode.JOURNAL_UNAVAILABLE:
                        raise
                    if not self._stale:
                        _log.warning(
                            "web.fleet_journal_unreachable",
                            summary=f"cannot read the journal {self.journal.url} ({error}); "
                            f"the inbox shows what it knew, and tries again every "
                            f"{self.refresh:g} s",
                        )
                    self._stale = True
                    continue
                if self._stale:
                    _log.info("web.fleet_journal_recovered", url=self.journal.url)
                    self._stale = False

    async def _apply(self, event: JournalEvent) -> None:
        ask_id = event.ask_id
        if ask_id is None or ask_id in self._deciding:
            return  # a decision made here in flight tells the pages itself
        if event.kind == "cleared":
            if ask_id in self._entries:
                self._remove(ask_id, Decision("cleared", "cleared in another inbox"))
            return
        if event.kind == "created" and ask_id not in self._entries:
            try:
                ask = await self.journal.get_ask(ask_id)
                if ask.pending:
                    run = await self.journal.get_run(ask.run_id)
                    daemon = await self.journal.get_daemon(run.daemon_id)
                    known = self._entries.keys() | self._deciding.keys() | self._decided.keys()
                    if ask_id not in known:  # nothing decided it while this was read
                        self._add(InboxEntry(ask, run, daemon))
                    return
            except JournalError as error:
                if error.code == JournalErrorCode.JOURNAL_UNAVAILABLE:
                    raise
                return  # purged meanwhile, or unreadable: the next listing says
        await self._settled(ask_id)

    async def _relist(self) -> None:
        """List every pending ask again: add the new, refresh the askers, settle the gone."""
        listing = await self.journal.inbox()
        pending = set()
        for item in listing:
            pending.add(item.ask.id)
            entry = self._mirrored(item.ask.id)
            if entry is None:
                if item.ask.id not in self._deciding and item.ask.id not in self._decided:
                    self._add(item)
                continue
            before = entry.looks()
            entry.run, entry.daemon = item.run, item.daemon
            if entry.looks() != before:
                self._changed(entry)
        gone = [entry.id for entry in self._shown() if not entry.abandoned]
        for ask_id in gone:
            if ask_id not in pending:
                await self._settled(ask_id)
        abandoned = [entry.id for entry in self._shown() if entry.abandoned]
        for ask_id in abandoned:  # cleared or purged while the feed missed it
            purged = await self._recorded(ask_id) is None
            if purged and ask_id in self._entries and ask_id not in self._deciding:
                self._remove(ask_id, Decision("cleared", "no longer in the journal"))

    async def _recorded(self, ask_id: str) -> AskRecord | None:
        """The ask as the journal has it, ``None`` once it is gone (purged, or unreadable)."""
        try:
            return await self.journal.get_ask(ask_id)
        except JournalError as error:
            if error.code == JournalErrorCode.JOURNAL_UNAVAILABLE:
                raise
            return None

    async def _settled(self, ask_id: str) -> None:
        """A shown question left ``pending`` somewhere: say how on every page."""
        entry = self._mirrored(ask_id)
        if entry is None or entry.abandoned or ask_id in self._deciding:
            return
        ask = await self._recorded(ask_id)
        if ask is None:
            if self._entries.get(ask_id) is entry:
                self._remove(ask_id, Decision("withdrawn", "no longer in the journal"))
            return
        if ask.pending or self._entries.get(ask_id) is not entry or ask_id in self._deciding:
            return
        if ask.state is AskState.ABANDONED:
            entry.ask, entry.abandoned = ask, True
            self._changed(entry)
            return
        self._remove(ask_id, self._decision_of(ask, entry))

    def _add(self, item: InboxEntry) -> None:
        self._show(_Shown.of(item.ask, item.run, item.daemon, self._next_seq()))

    def _mirrored(self, ask_id: str) -> _Shown | None:
        entry = self._entries.get(ask_id)
        return entry if isinstance(entry, _Shown) else None

    def _shown(self) -> list[_Shown]:
        return [entry for entry in self._entries.values() if isinstance(entry, _Shown)]

    # -- what a decision reads ----------------------------------------------------------------

    async def _open(self, ask_id: str) -> Entry:
        """The question to decide, with its request and daemon; refused when not open.
        One not (yet) mirrored is read from the journal: answerable before the feed brings it."""
        recent = self._decided.get(ask_id)
        if recent is not None:
            raise refusal(recent)
        entry = self._mirrored(ask_id)
        if entry is not None:
            if entry.abandoned:
                raise _abandoned(" (clear it)")
            return entry
        ask = await self._ask(ask_id)
        if not ask.pending:
            raise self._lost(ask)
        run = await self._call(self.journal.get_run(ask.run_id))
        daemon = await self._call(self.journal.get_daemon(run.daemon_id))
        return _Shown.of(ask, run, daemon, 0)  # read, not shown

    async def _ask(self, ask_id: str) -> AskRecord:
        try:
            return await self.journal.get_ask(ask_id)
        except JournalError as error:
            if error.code == JournalErrorCode.ASK_UNKNOWN:
                raise unknown(ask_id) from None
            raise _unavailable(error) from None

    async def _call(self, call: Awaitable[T]) -> T:
        """A journal call for a decision; its refusals as the API's errors."""
        try:
            return await call
        except JournalError as error:
            if error.code == JournalErrorCode.ASK_UNKNOWN:
                raise InboxError(404, "UNKNOWN_QUESTION", str(error)) from None
            if error.code == JournalErrorCode.RUN_FINISHED:
                raise InboxError(
                    409,
                    "NOT_PENDING",
                    f"the question is no longer pending: {error}",
                    {"note": "its run ended"},
                ) from None
            raise _unavailable(error) from None

    async def _won(self, entry: _Shown, settling: Awaitable[Settlement]) -> None:
        settlement = await self._call(settling)
        if not settlement.won:
            raise self._lost(settlement.ask, entry)

    def _lost(self, ask: AskRecord, entry: _Shown | None = None) -> InboxError:
        """The 409 of a decision that came second; the pages are told the first one."""
        if ask.state is AskState.ABANDONED:
            if entry is not None and self._entries.get(ask.id) is entry and not entry.abandoned:
                entry.ask, entry.abandoned = ask, True
                self._changed(entry)
            return _abandoned()
        decision = self._decision_of(ask, entry)
        if ask.id in self._entries:
            self._remove(ask.id, decision)
        return refusal(decision)

    def _decision_of(self, ask: AskRecord, entry: _Shown | None) -> Decision:
        """How a question settled elsewhere ended, as pages are told."""
        by = None if ask.settled_by == self.by else ask.settled_by
        if ask.state is AskState.ANSWERED:
            held = None
            if entry is not None and not entry.asker.alive:
                held = entry.asker.name
            shown = None if ask.answer is None else shown_answer(ask.answer, ask.request)
            return Decision("answered", _answered(held), None, shown, by=by, held_for=held)
        if ask.state is AskState.FAILED and ask.code == ErrorCode.ASK_CANCELLED:
            return Decision("dismissed", "dismissed", None, by=by)
        if ask.state is AskState.FAILED and ask.code == ErrorCode.ASK_TIMEOUT:
            return Decision("timed_out", "timed out", by=by)
        if ask.state is AskState.FAILED:
            return Decision("failed", f"it failed ({ask.code})", by=by)
        return Decision(
            "withdrawn",
            "withdrawn by its agent (its signal or time limit, or its run ended)",
            by=by,
        )


def _answered(held: str | None) -> str:
    return "answered" if held is None else f"answered; held for {held}'s resume"


def _abandoned(hint: str = "") -> InboxError:
    return InboxError(
        409,
        "NOT_PENDING",
        f"the question is no longer pending: its run was abandoned, nobody will read an "
        f"answer{hint}",
        {"note": "abandoned"},
    )


def _unavailable(error: JournalError) -> InboxError:
    return InboxError(
        503, "JOURNAL_UNAVAILABLE", f"the journal cannot be used right now ({error}): retry"
    )


@dataclass(frozen=True, slots=True)
class FleetInbox:
    """A served :class:`JournalInbox`: where it listens and its page's address."""

    inbox: JournalInbox
    listener: Listener
    token: str

    @property
    def port(self) -> int:
        return self.listener.port

    @property
    def url(self) -> str:
        """The page's address, with the token."""
        return self.listener.url(self.token)


@contextlib.asynccontextmanager
async def serve_journal_inbox(
    journal: Journal,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_FLEET_PORT,
    token: str | None = None,
    token_file: str | os.PathLike[str] | None = None,
    allow_remote: bool = False,
    allowed_hosts: tuple[str, ...] = (),
    refresh: float | None = None,
    by: str | None = None,
) -> AsyncIterator[FleetInbox]:
    """Serve every pending ask of ``journal`` on the web inbox's page, for the block.

    The same server, guard and token rules as :meth:`WebProvider.serve`. At the end of the
    block open pages are told :data:`CLOSING_NOTE`, requests in flight get
    :data:`~._server.DRAIN_GRACE` seconds, and the server stops (the questions stay).

    Raises:
        ValueError: a bad host or port, a token that cannot be read, or a non-loopback
            host without ``allow_remote``.
        OSError: the port cannot be listened on.
        JournalError: the journal cannot be listed.
    """
    host = checked_host(host, port, allow_remote)
    secret = load_token(token, token_file)
    inbox = JournalInbox(journal, refresh=refresh, by=by)
    server = WebServer(Listener(host, port))
    listener = server.listener
    warn_if_remote(
        listener.loopback, listener.address, "the fleet inbox", "every daemon's questions"
    )
    hosts = HostPolicy(host, listener.port, tuple(allowed_hosts))
    serving = True
    app = build_app(lambda: inbox if serving else None, secret, hosts, lambda: journal)
    served = FleetInbox(inbox, listener, secret)
    async with anyio.create_task_group() as tasks:
        server.start(tasks)
        mount = None
        try:
            await tasks.start(inbox.follow)
            mount = server.mount(app)
            _log.info(
                "web.serving",
                summary=f"web inbox: {served.url} (every daemon of the journal {journal.url})",
                address=listener.address,
                url=served.url,
                journal=journal.url,
                first=True,
            )
            yield served
        finally:
            with anyio.CancelScope(shield=True):
                inbox.close(CLOSING_NOTE)
                if mount is not None:
                    await server.unmount(mount, DRAIN_GRACE)
                serving = False
                await server.aclose()
            tasks.cancel_scope.cancel()
        _log.info("web.stopped", address=listener.address, reason="shutdown")
