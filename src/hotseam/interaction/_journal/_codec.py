"""Rows to records and back: the one place that knows how a record is stored.

Both engines store the same columns, so a request or an answer makes the same JSON round
trip everywhere: what an engine gives back is what the other would.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._errors import JournalError, JournalErrorCode
from ._records import AskRecord, AskState, DaemonRecord, InboxEntry, RunRecord, RunState

if TYPE_CHECKING:
    from .._model import QuestionAnswer

ASK_COLUMNS = (
    "id",
    "run_id",
    "seq",
    "caller_key",
    "digest",
    "request",
    "state",
    "code",
    "answer",
    "settled_by",
    "created_at",
    "settled_at",
    "partial",
)
RUN_COLUMNS = ("id", "agent", "daemon_id", "state", "started_at", "claimed_at", "finished_at")
DAEMON_COLUMNS = (
    "id",
    "name",
    "host",
    "pid",
    "agent",
    "started_at",
    "heartbeat_at",
    "stopped_at",
)
"""Stored daemon columns; a read adds ``alive`` (computed by the engine) after them."""

Row = Sequence[Any]


def to_json(value: Any) -> str:
    """The stored form of a request or an answer (``to_dict``: a request's signal is not
    kept)."""
    return json.dumps(value.to_dict(), ensure_ascii=False, separators=(",", ":"))


def ask_from_row(row: Row) -> AskRecord:
    """An :class:`AskRecord` from a row in :data:`ASK_COLUMNS` order; its request has its
    options as a tuple, as ``validate_request`` (and so ``ask()``) gives them.

    Raises:
        JournalError: ``JOURNAL_CORRUPT`` naming the ask, when its request or answer cannot
            be read back.
    """
    from .._errors import UserInteractionError
    from .._model import AskUserQuestionAnswer, AskUserQuestionRequest

    (ask_id, run_id, seq, key, digest, request, state, code, answer) = row[:9]
    try:
        parsed_request = AskUserQuestionRequest.from_dict(json.loads(request))
        parsed_answer = (
            None if answer is None else AskUserQuestionAnswer.from_dict(json.loads(answer))
        )
        parsed_partial = _partial_from(row[12])
        ask_state = AskState(state)
    except (ValueError, TypeError, UserInteractionError) as error:
        raise JournalError(
            f"ask {ask_id} of run {run_id} cannot be read back: {error}",
            JournalErrorCode.JOURNAL_CORRUPT,
        ) from None
    return AskRecord(
        id=ask_id,
        run_id=run_id,
        seq=int(seq),
        key=key,
        digest=digest,
        request=parsed_request,
        state=ask_state,
        code=code,
        answer=parsed_answer,
        settled_by=row[9],
        created_at=float(row[10]),
        settled_at=None if row[11] is None else float(row[11]),
        partial=parsed_partial,
    )


def _partial_from(stored: str | None) -> tuple[QuestionAnswer, ...]:
    from .._model import QuestionAnswer

    entries = [] if stored is None else json.loads(stored)
    if not isinstance(entries, list):
        raise TypeError(f"its partial answer is {type(entries).__name__}, not a list")
    return tuple(QuestionAnswer.from_dict(entry) for entry in entries)


def partial_json(answers: Sequence[QuestionAnswer]) -> str:
    """The stored form of a pending ask's answers to some of its questions."""
    entries = [answer.to_dict() for answer in answers]
    return json.dumps(entries, ensure_ascii=False, separators=(",", ":"))


def run_from_row(row: Row) -> RunRecord:
    """A :class:`RunRecord` from a row in :data:`RUN_COLUMNS` order."""
    try:
        state = RunState(row[3])
    except ValueError:
        raise JournalError(
            f"run {row[0]} has an unknown state {row[3]!r}", JournalErrorCode.JOURNAL_CORRUPT
        ) from None
    return RunRecord(
        id=row[0],
        agent=row[1],
        daemon_id=row[2],
        state=state,
        started_at=float(row[4]),
        claimed_at=float(row[5]),
        finished_at=None if row[6] is None else float(row[6]),
    )


def daemon_from_row(row: Row) -> DaemonRecord:
    """A :class:`DaemonRecord` from a row in :data:`DAEMON_COLUMNS` order plus ``alive``."""
    return DaemonRecord(
        id=row[0],
        name=row[1],
        host=row[2],
        pid=int(row[3]),
        agent=row[4],
        started_at=float(row[5]),
        heartbeat_at=float(row[6]),
        stopped_at=None if row[7] is None else float(row[7]),
        alive=bool(row[8]),
    )


def entry_from_row(row: Row) -> InboxEntry:
    """An :class:`InboxEntry` from an ask row, a run row and a daemon row, end to end."""
    asks, runs = len(ASK_COLUMNS), len(RUN_COLUMNS)
    return InboxEntry(
        ask=ask_from_row(row[:asks]),
        run=run_from_row(row[asks : asks + runs]),
        daemon=daemon_from_row(row[asks + runs :]),
    )
