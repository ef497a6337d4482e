"""ask(): put a question to whichever provider is active, and survive provider swaps."""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import nullcontext

import anyio
import anyio.lowlevel

from .._core import (
    DEFAULT_SWAP_WAIT,
    BaseContext,
    HarnessError,
    abort_exception,
    current_context,
    get_logger,
)
from . import _pending
from ._crash import log_provider_crash
from ._errors import ErrorCode, UserInteractionError
from ._journaled import answer_recorded, partial_keeper, place, replay
from ._model import (
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    Question,
    QuestionAnswer,
    check_answer,
    check_partial_answer,
    entries_of,
    validate_request,
    where,
)
from ._pending import PendingAsk, ProviderWait
from ._provider import USER_INTERACTION, UserInteractionProvider, takes_several
from ._runs import current_run

_log = get_logger("hotseam.interaction")

Keep = Callable[[Sequence[QuestionAnswer]], Awaitable[None]]
"""What is handed the answers given so far to an ask of several (a journal keeps them)."""


async def ask(
    request: AskUserQuestionRequest,
    *,
    context: BaseContext | None = None,
    timeout: float | None = None,
    swap_timeout: float = DEFAULT_SWAP_WAIT,
    key: str | None = None,
) -> AskUserQuestionAnswer:
    """Ask the human through the active user-interaction provider and return the answer.

    Args:
        request: The question; validated before any provider sees it.
        context: Where to find the provider (default: the current context).
        timeout: An optional time limit for the human; when it passes the ask fails with
            ``ASK_TIMEOUT``. No option is ever picked on the human's behalf.
        swap_timeout: How long to wait for a provider swap in progress (default 10 s).
        key: Inside an agent run (:meth:`~hotseam.interaction.journal.JournalDaemon.run`), names the
            ask for the journal, so a resumed run replays it wherever it comes in the run;
            without one, an ask is known by its position in the run and its question.

    A provider replaced by a swap (a hot reload) has the question withdrawn and its
    replacement is asked; the caller just gets the answer.

    Several questions go whole to a provider whose ``multiple_questions`` is true; any other
    is asked them one by one
    (:meth:`~hotseam.interaction.AskUserQuestionRequest.parts`), and a question answered
    stays answered across a swap. A decline or a dismissal of any question ends the ask.
    Inside :func:`~hotseam.interaction.waiting_for_provider`, a question that finds no
    provider (or loses it with nothing to take over) waits for one.

    Inside an agent run, the ask is journaled: a resumed run replays what was answered, an
    answer given in another process's inbox is taken (the prompt here is withdrawn), and a
    cancelled ask stays pending for the resume.

    Raises:
        UserInteractionError: ``NO_PROVIDER``, ``ASK_ABORTED`` (the request's signal fired,
            or the provider was disposed with nothing to take over), ``ASK_CANCELLED`` and
            ``ASK_DECLINED`` (from the UI), ``ASK_TIMEOUT``, ``INVALID_REQUEST``,
            ``INVALID_ANSWER`` or ``PROVIDER_FAILED``. Cancellation of the calling task
            propagates as cancellation.
    """
    request = validate_request(request)
    ctx = context if context is not None else current_context()
    run = current_run()
    signal = request.signal
    if signal is not None and signal.aborted:
        raise _aborted(signal.reason)
    record = None if run is None else await place(run, request, key)
    if record is not None and not record.pending:
        assert run is not None
        run.answered_from_journal += 1
        run.last_replayed = record
        return replay(record, request)
    question_id = uuid.uuid4().hex[:12] if record is None else record.id
    agent = request.agent.id if request.agent is not None else None
    started = time.perf_counter()
    _log.info(
        "ask.started",
        question_id=question_id,
        agent=agent,
        header=request.header,
        options=len(request.choices),
        questions=len(request.questions),
    )
    pending = PendingAsk(question_id, agent, request.header, ctx.name)
    _pending.opened(pending)
    ended: tuple[str | None, str | None] = ("ASK_ABORTED", "cancelled")
    try:
        if record is None:
            answer = await _ask_in_time(ctx, request, question_id, timeout, swap_timeout, pending)
        else:
            assert run is not None

            given, keep = record.partial, partial_keeper(run, record)

            async def ask_here() -> AskUserQuestionAnswer:
                with _pending.deadline_of(timeout):  # providers show the time left
                    return await _ask_until_answered(
                        ctx, request, question_id, swap_timeout, pending, given, keep
                    )

            answer = await answer_recorded(
                run, record, request, ask_here, timeout=timeout, signal=signal
            )
    except HarnessError as error:
        ended = (error.code, str(error))
        _log.info(
            "ask.failed",
            question_id=question_id,
            agent=agent,
            provider=pending.provider,
            code=error.code,
            duration_ms=_since(started),
        )
        raise
    else:
        ended = (None, None)
    finally:
        _pending.closed(pending, *ended)
    _log.info(
        "ask.answered",
        question_id=question_id,
        agent=agent,
        provider=pending.provider,
        option=answer.option is not None,
        questions=len(answer.answers),
        attempts=pending.attempts,
        duration_ms=_since(started),
    )
    _log.debug("ask.answer_text", question_id=question_id, answer=answer.answer)
    return answer


async def _ask_in_time(
    ctx: BaseContext,
    request: AskUserQuestionRequest,
    question_id: str,
    timeout: float | None,
    swap_timeout: float,
    pending: PendingAsk,
) -> AskUserQuestionAnswer:
    """:func:`_ask_until_answered` within ``timeout`` and the request's signal: when either
    ends the ask first, ``ASK_TIMEOUT`` or ``ASK_ABORTED``."""
    signal = request.signal
    aborted = signal.cancel_scope(raise_reason=False) if signal is not None else nullcontext(None)
    # move_on_after(None) never fires; deadline_of(None) shows none.
    with anyio.move_on_after(timeout), _pending.deadline_of(timeout), aborted as abort_scope:
        return await _ask_until_answered(ctx, request, question_id, swap_timeout, pending)
    # Only the deadline or the signal ends the block without a return.
    if abort_scope is not None and abort_scope.cancelled_caught:
        assert signal is not None
        raise _aborted(signal.reason)
    raise UserInteractionError(
        f"no answer within the time limit of {timeout} s (nothing was chosen for the human)",
        ErrorCode.ASK_TIMEOUT,
    )


async def _ask_until_answered(
    ctx: BaseContext,
    request: AskUserQuestionRequest,
    question_id: str,
    swap_timeout: float,
    pending: PendingAsk,
    given: Sequence[QuestionAnswer] = (),
    keep: Keep | None = None,
) -> AskUserQuestionAnswer:
    """Ask the active provider; on a swap, its replacement (``pending`` records which, and
    how many). An answer returned stands even when its lease was revoked in the same turn:
    the question was answered, so it is never asked again. ``given``: the answers a
    journal kept for some questions before a restart; ``keep`` is handed each new one."""
    # One lease for every attempt: after a swap it rejoins in the caller's arrival order.
    lease = ctx.lease(USER_INTERACTION, timeout=swap_timeout, rejoin=True)
    # The questions of the request answered so far.
    answered: dict[str, QuestionAnswer] = {entry.id: entry for entry in given}
    migrated = False
    wait = _pending.provider_wait()
    deadline = None if wait is None else time.monotonic() + wait.timeout
    try:
        while True:
            entered = asking = returned = False
            answer: object = None
            provider: object = None
            try:
                async with lease:
                    entered = True
                    provider = lease.provider
                    pending.provider = _describe(provider)
                    pending.attempts += 1
                    asking = True
                    answer = await _put(lease.provider, request, answered, pending, keep)
                    returned = True
            except HarnessError as error:
                if not entered and error.code == ErrorCode.NO_PROVIDER and wait is not None:
                    assert deadline is not None
                    await _wait_for_provider(ctx, wait, deadline, pending, error)
                    continue
                if migrated and not entered and error.code == ErrorCode.NO_PROVIDER:
                    raise _withdrawn(
                        pending.provider, "the swap that replaced it ended without a provider"
                    ) from error
                if not lease.revoked:
                    raise
            except Exception as failure:
                if asking and not returned:  # raised by the provider's code: say where
                    log_provider_crash(
                        _log,
                        failure,
                        provider,
                        question_id=question_id,
                        agent=pending.agent,
                        withdrawn=lease.revoked,
                    )
                if not lease.revoked:
                    raise UserInteractionError(
                        f"the user-interaction provider {pending.provider} failed: "
                        f"{type(failure).__name__}: {failure}",
                        ErrorCode.PROVIDER_FAILED,
                        cause=failure,
                    ) from failure
            if returned or not lease.revoked:
                return check_answer(request, answer)
            if not lease.replaced and wait is None:
                raise _withdrawn(pending.provider, "nothing replaced it")
            migrated = True
            _log.info("ask.migrated", question_id=question_id, from_provider=pending.provider)
    finally:
        lease.close()


async def _put(
    provider: UserInteractionProvider,
    request: AskUserQuestionRequest,
    answered: dict[str, QuestionAnswer],
    pending: PendingAsk,
    keep: Keep | None = None,
) -> object:
    """Ask ``provider`` the parts of ``request`` not in ``answered`` yet; return the whole
    request's answer. A part that is the whole request is answered as is (``ask()`` checks
    it); any other part's answers are checked and kept in ``answered`` at once, so that a
    swap in between leaves them answered and the next provider is asked only the rest.
    """
    parts = request.parts(answered, together=takes_several(provider))
    if parts and parts[0] is request:
        return await provider.ask(request)
    for number, part in enumerate(parts):
        if number:
            # Not to a provider revoked (or a caller cancelled, or a signal fired) in the
            # turn the previous question was answered: the rest goes to the replacement.
            await anyio.lowlevel.checkpoint_if_cancelled()
        entries = _answers_to(request, part.questions, await provider.ask(part))
        before = len(answered)
        answered.update((entry.id, entry) for entry in entries)
        if keep is not None:  # kept before it is said: a kill after the line finds it kept
            await keep(tuple(answered.values()))
        for count, entry in enumerate(entries, before + 1):
            _log.info(
                "ask.question_answered",
                question_id=pending.question_id,
                question=entry.id,
                answered=count,
                of=len(request.questions),
                summary=f"question {entry.id} ({count} of {len(request.questions)}) "
                f"of ask {pending.question_id} answered",
            )
    return AskUserQuestionAnswer.of([answered[str(item.id)] for item in request.questions], request)


def _answers_to(
    request: AskUserQuestionRequest, asked: Sequence[Question], answer: object
) -> tuple[QuestionAnswer, ...]:
    """The checked answers to the questions ``asked`` (named in errors by their place in
    ``request``)."""
    if not isinstance(answer, AskUserQuestionAnswer):
        raise UserInteractionError(
            f"the provider returned {type(answer).__name__}, not an AskUserQuestionAnswer",
            ErrorCode.INVALID_ANSWER,
        )
    checked = check_partial_answer(request, entries_of(answer, asked))
    given = {entry.id for entry in checked}
    missing = [item for item in asked if item.id not in given]
    if missing:
        index = request.questions.index(missing[0])
        raise UserInteractionError(
            f"{where(missing[0], index)} has no answer (the provider answered "
            f"{len(checked)} of the {len(asked)} question(s) it was asked; one entry per "
            "question)",
            ErrorCode.INVALID_ANSWER,
        )
    if [entry.id for entry in checked] != [item.id for item in asked]:
        raise UserInteractionError(
            f"the provider answered {len(checked)} of the {len(asked)} question(s) it was "
            "asked (one entry per question)",
            ErrorCode.INVALID_ANSWER,
        )
    return checked


async def _wait_for_provider(
    ctx: BaseContext,
    wait: ProviderWait,
    deadline: float,
    pending: PendingAsk,
    missing: HarnessError,
) -> None:
    """Until a provider is active in ``ctx``; ``NO_PROVIDER`` once ``deadline`` passes."""
    if ctx.lookup(USER_INTERACTION) is not None:
        return  # one appeared since the lease looked: take it
    _log.info("ask.waiting_for_provider", question_id=pending.question_id, context=ctx.name)
    with _pending.waiting(pending, wait, USER_INTERACTION.name):
        try:
            await ctx.wait_provided(USER_INTERACTION, timeout=max(deadline - time.monotonic(), 0))
        except HarnessError as error:
            if error.code != ErrorCode.NO_PROVIDER:
                raise
            raise UserInteractionError(
                f"no provider of {USER_INTERACTION.name!r} appeared within "
                f"{wait.timeout:g} s in context {ctx.name!r}",
                ErrorCode.NO_PROVIDER,
            ) from missing
    _log.info("ask.provider_appeared", question_id=pending.question_id, context=ctx.name)


def _withdrawn(provider: str | None, why: str) -> UserInteractionError:
    return UserInteractionError(
        f"the user-interaction provider {provider} was disposed while the question was open, "
        f"and {why}",
        ErrorCode.ASK_ABORTED,
    )


def _describe(provider: object) -> str:
    return f"{type(provider).__module__}.{type(provider).__qualname__}"


def _aborted(reason: object) -> UserInteractionError:
    """ASK_ABORTED for a signal's reason (any value), carried as ``reason`` and the cause."""
    detail = f": {reason}" if reason is not None and str(reason) else ""
    error = UserInteractionError(
        f"the question was aborted by the caller's signal{detail}",
        ErrorCode.ASK_ABORTED,
        cause=abort_exception(reason),
        details={"reason": repr(reason)},
    )
    error.reason = reason
    return error


def _since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
