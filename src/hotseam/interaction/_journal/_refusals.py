"""The refusals every engine raises the same way, worded once."""

from __future__ import annotations

from typing import TypeVar

from ._errors import JournalError, JournalErrorCode
from ._records import AskRecord, DaemonRecord, RunRecord

T = TypeVar("T")

_UNKNOWN = {
    "daemon": JournalErrorCode.DAEMON_UNKNOWN,
    "run": JournalErrorCode.RUN_UNKNOWN,
    "ask": JournalErrorCode.ASK_UNKNOWN,
}


def unknown(kind: str, ident: str) -> JournalError:
    """``DAEMON_UNKNOWN``, ``RUN_UNKNOWN`` or ``ASK_UNKNOWN`` (``kind``: daemon, run, ask)."""
    return JournalError(f"no {kind} {ident} in the journal", _UNKNOWN[kind])


def known(kind: str, ident: str, found: T | None) -> T:
    """``found``, or :func:`unknown` raised when the lookup found nothing."""
    if found is None:
        raise unknown(kind, ident)
    return found


def run_finished(run: RunRecord) -> JournalError:
    """``RUN_FINISHED`` for a run that is no longer running."""
    return JournalError(
        f"run {run.id} of agent {run.agent!r} is {run.state.value}: it takes no more asks "
        "or answers",
        JournalErrorCode.RUN_FINISHED,
        details={"run_id": run.id, "state": run.state.value},
    )


def run_claimed(run: RunRecord, by: str) -> JournalError:
    """``RUN_CLAIMED`` for a run owned by another (live) daemon."""
    return JournalError(
        f"run {run.id} of agent {run.agent!r} belongs to daemon {run.daemon_id}, not {by}",
        JournalErrorCode.RUN_CLAIMED,
        details={"run_id": run.id, "owner": run.daemon_id},
    )


def daemon_stopped(daemon: DaemonRecord) -> JournalError:
    """``DAEMON_STOPPED`` for a daemon that was marked stopped."""
    return JournalError(
        f"daemon {daemon.id} ({daemon.name} on {daemon.host}, pid {daemon.pid}) was marked stopped",
        JournalErrorCode.DAEMON_STOPPED,
        details={"daemon_id": daemon.id},
    )


def run_exists(run: RunRecord) -> JournalError:
    """``RUN_EXISTS`` for an agent that already has an unfinished run."""
    return JournalError(
        f"agent {run.agent!r} already has an unfinished run {run.id} (owned by daemon "
        f"{run.daemon_id}): resume it or abandon it first",
        JournalErrorCode.RUN_EXISTS,
        details={"run_id": run.id, "owner": run.daemon_id},
    )


def ask_conflict(run_id: str, seq: int, ask_id: str, key: str | None = None) -> JournalError:
    """``ASK_CONFLICT``: another live ask holds this position (or this key) of the run."""
    where = f"position {seq}" if key is None else f"key {key!r}"
    return JournalError(
        f"{where} of run {run_id} is held by another live ask than {ask_id}: abandon it "
        "first (abandon_asks)",
        JournalErrorCode.ASK_CONFLICT,
        details={"run_id": run_id, "seq": seq, "key": key},
    )


def not_abandoned(ask: AskRecord) -> JournalError:
    """``ASK_NOT_ABANDONED``: only an abandoned ask is cleared."""
    if ask.pending:
        why = "it is pending (answer or dismiss it)"
    else:
        why = f"it was {ask.state.value} (a settled ask stays until purged)"
    return JournalError(
        f"ask {ask.id} cannot be cleared: {why}; only an abandoned ask is cleared",
        JournalErrorCode.ASK_NOT_ABANDONED,
        details={"ask_id": ask.id, "state": ask.state.value},
    )
