"""An ask inside an agent run: recorded, replayed on resume, answerable from any inbox.

``ask()`` calls :func:`place` first: the ask takes its position in the run and replays the
record (an answer, or how it failed), or is recorded pending (re-attached under its id on a
resume). A pending ask is put to this process's provider *and* waited for in the journal
(:func:`answer_recorded`): the first settlement wins, in one transaction, whether given
here or in another process's inbox (the prompt here is then withdrawn).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass

import anyio

from .._core import AbortSignal, get_logger
from . import _pending
from ._errors import ErrorCode, UserInteractionError
from ._journal import (
    AskRecord,
    AskState,
    Journal,
    JournalError,
    JournalErrorCode,
    Settlement,
    question_digest,
)
from ._model import AskUserQuestionAnswer, AskUserQuestionRequest, QuestionAnswer, check_answer
from ._pending import AnsweredElsewhere
from ._runs import AgentRun, through_stop

_log = get_logger("hotseam.interaction")

_UNAVAILABLE = JournalErrorCode.JOURNAL_UNAVAILABLE.value


async def place(run: AgentRun, request: AskUserQuestionRequest, key: str | None) -> AskRecord:
    """The record of this ask in ``run``: the recorded one it replays or re-attaches to
    (same position or key, same question), or a new pending one.

    One at a time per run, so that a divergence abandons the superseded records before the
    next ask looks. While the journal is out of reach the ask waits before it is put to
    anyone; the request's signal ends that wait (``ASK_ABORTED``, nothing recorded).
    """
    async with run.placing:
        position = run.take_position(key)
        digest = question_digest(request)
        recorded = run.take_recorded(position, key)
        what = f"question {position + 1} of run {run.id[:12]}, not yet asked"
        journal = run.journal
        signal = request.signal
        if recorded is not None and recorded.digest != digest:
            diverged_at = recorded.seq
            await journal.persist(what, lambda: run.diverged(diverged_at), signal=signal)
            recorded = None
        if recorded is not None:
            run.replayed += 1
            return recorded
        ask_id = uuid.uuid4().hex[:12]  # one id for every try: recording it is idempotent
        return await journal.persist(
            what,
            lambda: journal.journal.record_ask(
                ask_id,
                run.id,
                position,
                request,
                key=key,
                digest=digest,
                owner=journal.daemon.id,
            ),
            signal=signal,
        )


def partial_keeper(
    run: AgentRun, record: AskRecord
) -> Callable[[Sequence[QuestionAnswer]], Awaitable[None]]:
    """What keeps the answers given so far to an ask of several asked one at a time, so that
    a restart asks only the rest. A journal that cannot take them is said at warning and
    does not hold the ask up: the answers stay in this process, and the whole answer is
    recorded when the last question is answered (waiting for the journal then)."""
    journal = run.journal.journal

    async def keep(answers: Sequence[QuestionAnswer]) -> None:
        # Shielded: a stop that comes as the human answers must not cut the one write that
        # keeps the answer (the engines bound it: one attempt, their own timeouts).
        try:
            with anyio.CancelScope(shield=True):
                await journal.keep_partial(record.id, answers)
        except JournalError as error:
            _log.warning(
                "ask.partial_not_recorded",
                question_id=record.id,
                answered=len(answers),
                code=error.code,
                summary=f"the answers to {len(answers)} question(s) of ask {record.id} were "
                f"not recorded ({error}): a restart before the ask ends asks them again",
            )

    return keep


def replay(record: AskRecord, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
    """What a settled record says the ask returned: its answer, or its failure raised."""
    _log.info(
        "ask.replayed",
        question_id=record.id,
        run_id=record.run_id,
        position=record.seq,
        state=record.state.value,
        summary=f"question {record.seq + 1} of the resumed run replayed from the journal "
        f"({record.state.value})",
    )
    return _outcome(record, request)


async def answer_recorded(
    run: AgentRun,
    record: AskRecord,
    request: AskUserQuestionRequest,
    ask_here: Callable[[], Awaitable[AskUserQuestionAnswer]],
    *,
    timeout: float | None,
    signal: AbortSignal | None,
) -> AskUserQuestionAnswer:
    """Ask here (``ask_here``: this process's providers) while waiting for the record to be
    settled elsewhere; the first settlement wins. ``timeout`` and ``signal`` bound both.

    Cancelling the caller leaves the record pending, for the resume. With the journal out of
    reach, what ended the ask here is recorded once it is back (the deadline and the signal
    bound the asking, not the recording) and only then returned: an answer is never lost to
    the journal, nor asked again after a restart.
    """
    journal = run.journal.journal
    by = f"{run.journal.daemon.name} (pid {run.journal.daemon.pid})"
    here: AskRecord | AskUserQuestionAnswer | UserInteractionError | _Unrecorded | None = None
    elsewhere: AskRecord | None = None

    async def ask_this_process() -> None:
        nonlocal here
        here = await _settle_here(journal, record.id, ask_here, by)
        race.cancel_scope.cancel()

    async def wait_in_journal() -> None:
        nonlocal elsewhere
        elsewhere = await run.journal.persist(
            f"question {record.seq + 1}", lambda: journal.wait_settled(record.id), shown=False
        )
        if elsewhere.answer is not None and elsewhere.settled_by != by:
            # Before the prompt here is withdrawn: its provider can say who answered.
            outcome = AnsweredElsewhere(elsewhere.settled_by, elsewhere.answer)
            _pending.settled_elsewhere(record.id, outcome)
        race.cancel_scope.cancel()

    aborted = signal.cancel_scope(raise_reason=False) if signal is not None else nullcontext(None)
    with anyio.move_on_after(timeout), aborted as abort_scope:
        async with anyio.create_task_group() as race:
            race.start_soon(wait_in_journal)
            race.start_soon(ask_this_process)
    if isinstance(here, AskUserQuestionAnswer):  # answered here; the journal refused it
        return here
    settled: AskRecord
    if isinstance(here, _Unrecorded):
        later = await _record_later(run, record, here, by)
        if later is None:  # a failure this process's ask ended with, recorded so
            assert here.error is not None
            raise here.error
        settled = later
    elif isinstance(here, UserInteractionError):  # failed here, and recorded so (or refused)
        raise here
    elif here is not None:
        settled = here
    elif elsewhere is not None:
        settled = elsewhere
    else:  # the deadline or the signal came first
        cut = abort_scope is not None and abort_scope.cancelled_caught
        settled = await run.journal.persist(
            f"the end of question {record.seq + 1} ({'withdrawn' if cut else 'timed out'})",
            lambda: _record_end(journal, record.id, by, withdrawn=cut),
        )
    if settled.state is AskState.ANSWERED and settled.settled_by != by:
        _log.info(
            "ask.answered_elsewhere",
            question_id=record.id,
            settled_by=settled.settled_by,
            summary=f"question {record.id} was answered elsewhere ({settled.settled_by})",
        )
    return _outcome(settled, request, timeout=timeout, signal=signal)


@dataclass(frozen=True, slots=True)
class _Unrecorded:
    """How this process's ask ended, which the journal could not take yet: an answer, or
    the error it failed with (and the state and code to record)."""

    answer: AskUserQuestionAnswer | None = None
    error: UserInteractionError | None = None
    state: AskState = AskState.ANSWERED
    code: str | None = None


async def _record_later(
    run: AgentRun, record: AskRecord, unrecorded: _Unrecorded, by: str
) -> AskRecord | None:
    """Record what ended the ask here once the journal is back: the record as settled
    (first settlement wins), or None when this process's failure won."""
    journal = run.journal.journal
    if unrecorded.answer is not None:
        answer = unrecorded.answer
        what = f"the answer to question {record.seq + 1}, given and not yet recorded"

        async def write() -> Settlement:
            return await journal.answer_ask(record.id, answer, by=by)

    else:
        state, code = unrecorded.state, unrecorded.code
        what = f"how question {record.seq + 1} ended ({code or state.value}), not yet recorded"

        async def write() -> Settlement:
            return await journal.settle_ask(record.id, state, code=code, by=by)

    try:
        settlement = await run.journal.persist(what, write)
    except anyio.get_cancelled_exc_class():
        # A stop while an answer waits for the journal: the human's answer is worth the
        # wait a stop gives its own mark; recorded, the resume replays it.
        if unrecorded.answer is not None and await through_stop(journal, write, []) is not None:
            raise
        _log.error(
            "ask.answer_not_recorded" if unrecorded.answer is not None else "ask.not_recorded",
            question_id=record.id,
            summary=f"stopped before the journal recorded {what}: the run's resume asks it again",
        )
        raise
    if unrecorded.answer is None and (
        settlement.won or settlement.ask.settled_by == by  # a lost reply of a try that won
    ):
        return None
    return settlement.ask


async def _settle_here(
    journal: Journal,
    ask_id: str,
    ask_here: Callable[[], Awaitable[AskUserQuestionAnswer]],
    by: str,
) -> AskRecord | AskUserQuestionAnswer | UserInteractionError | _Unrecorded:
    """Ask this process's providers and record the outcome (first settlement wins).

    Returns the settled record; the error the ask ended with, when its settlement won;
    what to record once the journal is back (:class:`_Unrecorded`); or the answer given
    here when the journal refuses it (the run ended or was taken over meanwhile).

    The providers' answer is recorded shielded: it wins over a cancellation or an abort in
    the same turn (invariant 6), and a process stopping right then keeps it for its resume.
    """
    try:
        answer = await ask_here()
    except UserInteractionError as error:
        state = AskState.WITHDRAWN if error.code == ErrorCode.ASK_ABORTED else AskState.FAILED
        code = error.code if state is AskState.FAILED else None
        try:
            with anyio.CancelScope(shield=True):
                settlement = await journal.settle_ask(ask_id, state, code=code, by=by)
        except JournalError as failure:
            if failure.code != _UNAVAILABLE:
                _log.warning("ask.not_recorded", question_id=ask_id, code=failure.code)
                return error
            return _Unrecorded(error=error, state=state, code=code)
        return error if settlement.won else settlement.ask
    try:
        with anyio.CancelScope(shield=True):
            settlement = await journal.answer_ask(ask_id, answer, by=by)
    except JournalError as failure:
        if failure.code == _UNAVAILABLE:
            return _Unrecorded(answer=answer)
        _log.error(
            "ask.answer_not_recorded",
            question_id=ask_id,
            code=failure.code,
            summary=f"the answer to question {ask_id} could not be recorded in the journal "
            f"({failure.code}); it is returned, and would be asked again after a restart",
        )
        return answer
    return settlement.ask


async def _record_end(journal: Journal, ask_id: str, by: str, *, withdrawn: bool) -> AskRecord:
    """Record that the deadline or the signal ended the ask (an answer recorded meanwhile
    stands: the returned record says which came first)."""
    state, code = (
        (AskState.WITHDRAWN, None) if withdrawn else (AskState.FAILED, ErrorCode.ASK_TIMEOUT)
    )
    with anyio.CancelScope(shield=True):
        settlement = await journal.settle_ask(ask_id, state, code=code, by=by)
    return settlement.ask


def _outcome(
    record: AskRecord,
    request: AskUserQuestionRequest,
    *,
    timeout: float | None = None,
    signal: AbortSignal | None = None,
) -> AskUserQuestionAnswer:
    if record.state is AskState.ANSWERED:
        assert record.answer is not None
        return check_answer(request, record.answer)
    if record.state is AskState.FAILED:
        code = record.code or ErrorCode.ASK_ABORTED
        if code == ErrorCode.ASK_TIMEOUT and timeout is not None:
            message = f"no answer within the time limit of {timeout} s (nothing was chosen)"
        else:
            message = f"the question ended with {code} (recorded by {record.settled_by})"
        return _raise(UserInteractionError(message, code))
    reason = signal.reason if signal is not None and signal.aborted else None
    error = UserInteractionError(
        f"the question was {record.state.value}"
        + (f" by {record.settled_by}" if record.settled_by else ""),
        ErrorCode.ASK_ABORTED,
    )
    error.reason = reason
    return _raise(error)


def _raise(error: UserInteractionError) -> AskUserQuestionAnswer:
    raise error
