"""The human as the tool gate: a call needing approval is asked through the user-interaction
seam, and the decision is a one-time grant for that exact call.

A grant (:class:`Grant`) is what a decision to run becomes: bound to the digest of the call
it lets run, to the run and agent it was given in, optionally to an expiry, and used once
(:meth:`Grants.redeem`). The gate redeems its grant for the call it is about to let
through, so a decision can never reach another call, nor the same call twice.

Inside an agent run the approval is an ask like any other: the journal records it (the
request holds the approval, so its digest is the call's), a resumed run replays the decision
only at the same position for the same call, and a changed call is asked again.
"""

from __future__ import annotations

import json
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from .._core import AbortSignal, GateVerdict, HarnessError, Tool, ToolCall, get_logger
from ._approval import ALL_DECISIONS, Approval, ApprovalDecision, Decision, call_digest
from ._approval_questions import ApprovalAnswerError, approval_request, read_decision
from ._ask import ask
from ._errors import ErrorCode, UserInteractionError
from ._gate_rules import ProcessRules, RuleBook, deciding_rule
from ._journal import ApprovalRule, RuleScope

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .._core import BaseContext
    from ._runs import AgentRun

_log = get_logger("hotseam.approvals")

TRIES = 3
"""Answers that make no decision (an edit that is not valid input...) before the approval
fails ``INVALID_ANSWER``."""


class GrantRefusedError(HarnessError):
    """A grant that cannot be used for this call: ``code`` says why
    (``APPROVAL_USED``, ``APPROVAL_MISMATCH``, ``APPROVAL_EXPIRED``, ``APPROVAL_ELSEWHERE``,
    ``APPROVAL_UNKNOWN``)."""


@dataclass(frozen=True, slots=True)
class Grant:
    """A decision to run one call: its digest, where it was given, until when."""

    id: str
    digest: str
    decision: ApprovalDecision
    run_id: str | None
    agent: str | None
    expires_at: float | None = None
    issued_at: float = field(default_factory=time.time)


class Grants:
    """The grants of one gate, each used at most once."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._open: dict[str, Grant] = {}
        self._issued = 0  # ids are g1, g2...: one issued and no longer open was used

    def issue(
        self,
        decision: ApprovalDecision,
        *,
        run_id: str | None,
        agent: str | None,
        expires_at: float | None = None,
    ) -> Grant:
        """A grant for the call ``decision`` lets run (its digest)."""
        if not decision.runs:
            raise ValueError(f"a {decision.decision.value} decision lets nothing run")
        self._issued += 1
        grant = Grant(
            f"g{self._issued}",
            decision.digest,
            decision,
            run_id,
            agent,
            expires_at,
            self._clock(),
        )
        self._open[grant.id] = grant
        return grant

    def redeem(self, grant_id: str, digest: str, *, run_id: str | None, agent: str | None) -> Grant:
        """Use the grant for the call of ``digest`` in that run, once.

        Raises:
            GrantRefusedError: the grant was used, is for another call, another run or
                agent, has expired, or is unknown — the grant stays as it was.
        """
        grant = self._open.get(grant_id)
        if grant is None:
            number = grant_id[1:]
            if grant_id[:1] == "g" and number.isdecimal() and 0 < int(number) <= self._issued:
                raise GrantRefusedError(f"grant {grant_id} was used already", "APPROVAL_USED")
            raise GrantRefusedError(f"no grant {grant_id}", "APPROVAL_UNKNOWN")
        if grant.digest != digest:
            raise GrantRefusedError(
                f"grant {grant_id} approves another call (digest {grant.digest[:12]}, this "
                f"call {digest[:12]})",
                "APPROVAL_MISMATCH",
            )
        if (grant.run_id, grant.agent) != (run_id, agent):
            raise GrantRefusedError(
                f"grant {grant_id} was given in another run or for another agent",
                "APPROVAL_ELSEWHERE",
            )
        if grant.expires_at is not None and self._clock() >= grant.expires_at:
            raise GrantRefusedError(f"grant {grant_id} has expired", "APPROVAL_EXPIRED")
        del self._open[grant_id]
        return grant

    def discard(self, grant_id: str) -> None:
        """Drop a grant that will not be used (its call refused): no grant is kept longer
        than its call, so a long-running gate holds none."""
        self._open.pop(grant_id, None)


async def ask_approval(
    approval: Approval,
    *,
    context: BaseContext | None = None,
    input_model: type[BaseModel] | None = None,
    timeout: float | None = None,
    tries: int = TRIES,
    signal: AbortSignal | None = None,
) -> ApprovalDecision:
    """Ask the human to decide ``approval`` and return the decision.

    An answer that makes no decision (an edit that is not valid input, a rejection without
    a reason) is asked again with what to change, up to ``tries`` answers.

    Raises:
        UserInteractionError: as :func:`~hotseam.interaction.ask` does; ``INVALID_ANSWER``
            after ``tries`` answers that made no decision.
    """
    note: str | None = None
    for _ in range(tries):
        request = approval_request(approval, note=note).with_signal(signal)
        answer = await ask(request, context=context, timeout=timeout)
        try:
            return read_decision(approval, answer, input_model=input_model)
        except ApprovalAnswerError as refused:
            note = f"Not taken: {refused}."
    raise UserInteractionError(
        f"no decision on {approval.describe()} after {tries} answers ({note})",
        ErrorCode.INVALID_ANSWER,
    )


ReasonOf = Callable[[Tool[Any], "BaseModel", ToolCall], "str | None"]

_SCHEMAS: weakref.WeakKeyDictionary[type[BaseModel], str] = weakref.WeakKeyDictionary()
"""Each input model's JSON schema, as JSON text: pydantic makes a schema anew each time
(about 200 µs, two thirds of a gated call), so it is made once per model class (a reloaded
tool's new class gets its own)."""


def _input_schema(tool: Tool[Any]) -> dict[str, Any]:
    """``tool.input_schema``, made once per input model; each approval gets its own copy
    (loading the text takes a few µs), so a surface that changes it changes no other."""
    model = tool.input_model
    text = _SCHEMAS.get(model)
    if text is None:
        text = _SCHEMAS[model] = json.dumps(tool.input_schema)
    schema: dict[str, Any] = json.loads(text)
    return schema


class HumanGate:
    """The tool gate that asks the human (provide it as :data:`~hotseam.TOOL_GATE`).

    Args:
        context: Where the user-interaction provider is found (default: the call's).
        timeout: The question's deadline (``ASK_TIMEOUT`` refuses the call).
        expires_in: Seconds a decision may be used once this gate has it (None: no limit);
            used later, the call is refused ``APPROVAL_EXPIRED``.
        reason: ``(tool, input, call) -> str | None``: the agent's reason, shown with the call.
        rules: Where the approval rules are (a :class:`~hotseam.interaction.journal.Journal`
            is one). Default: inside a journaled run, the run's journal (shared with every
            daemon and ``hotseam approvals``); else this gate's own :attr:`rules`.
        offer_rules: Also offer "Always allow" and "Always reject", which add a rule for
            the tool (scoped by ``rule_scope``) besides deciding the call.
        rule_scope: The scope of a rule added by such a decision: ``run`` (default),
            ``daemon`` or ``journal`` (outside a journaled run: this gate).
    """

    def __init__(
        self,
        *,
        context: BaseContext | None = None,
        timeout: float | None = None,
        expires_in: float | None = None,
        reason: ReasonOf | None = None,
        clock: Callable[[], float] = time.time,
        rules: RuleBook | None = None,
        offer_rules: bool = False,
        rule_scope: RuleScope = "run",
    ) -> None:
        self._context = context
        self._timeout = timeout
        self._expires_in = expires_in
        self._reason = reason
        self._clock = clock
        self.grants = Grants(clock)
        self._book = rules
        self.rules = ProcessRules()
        """The rules of this gate, used outside a journaled run unless ``rules`` is given."""
        self._decisions = (
            (*ALL_DECISIONS, Decision.ALWAYS, Decision.NEVER) if offer_rules else (ALL_DECISIONS)
        )
        self._rule_scope = rule_scope

    async def review(self, tool: Tool[Any], input: BaseModel, call: ToolCall) -> GateVerdict:
        from ._runs import current_run

        approval = Approval.of(
            tool.name,
            input.model_dump(mode="json"),
            reason=self._reason(tool, input, call) if self._reason is not None else None,
            decisions=self._decisions,
            input_schema=_input_schema(tool),
        )
        run = current_run()
        run_id = run.record.id if run is not None else None
        agent = call.agent.id if call.agent is not None else None
        book = self._book_for(run)
        ruled = await self._by_rule(book, run, approval, agent)
        if ruled is not None:
            by_rule = {
                "decision": "approve" if ruled.allow else "reject",
                "digest": approval.digest,
                "rule": ruled.id,
            }
            _log.info(
                "approval.ruled",
                tool=tool.name,
                rule_id=ruled.id,
                digest=approval.digest,
                allow=ruled.allow,
                summary=f"{ruled.describe()} decided {tool.name} (rule {ruled.id})",
            )
            if ruled.allow:
                return GateVerdict.run(input, **by_rule)
            because = f": {ruled.reason}" if ruled.reason else ""
            return GateVerdict.refuse(
                f"a rule rejects the call of {tool.name!r}{because}", **by_rule
            )
        context = self._context if self._context is not None else cast("BaseContext", call.context)
        replays = run.answered_from_journal if run is not None else 0
        try:
            decision = await ask_approval(
                approval,
                context=context,
                input_model=tool.input_model,
                timeout=self._timeout,
                signal=call.signal,  # the call's abort withdraws its question
            )
        except UserInteractionError as failed:
            return GateVerdict.refuse(
                f"the call of {tool.name!r} was not approved: {failed}",
                "APPROVAL_UNANSWERED",
                reason=str(failed.code),
                digest=approval.digest,
            )
        details: dict[str, Any] = {"decision": decision.decision.value, "digest": approval.digest}
        # A decision replayed from the journal made its rule when it was given: adding it
        # again would bring back a rule revoked since.
        replayed = run is not None and run.answered_from_journal > replays
        if decision.decision in (Decision.ALWAYS, Decision.NEVER) and not replayed:
            rule = await self._add_rule(book, run, tool.name, decision)
            details["rule"] = rule.id
        if decision.decision in (Decision.REJECT, Decision.NEVER):
            return GateVerdict.refuse(
                f"the human rejected the call of {tool.name!r}: {decision.message}", **details
            )
        if decision.decision is Decision.RESPOND:
            return GateVerdict.respond(decision.message, **details)
        # The expiry counts from the decision: as this gate got it, or, replayed after a
        # restart, as the journal recorded it (a decision does not grow younger by a resume).
        decided_at = self._clock()
        if replayed and run is not None and run.last_replayed is not None:
            decided_at = run.last_replayed.settled_at or decided_at
        expires_at = None if self._expires_in is None else decided_at + self._expires_in
        grant = self.grants.issue(decision, run_id=run_id, agent=agent, expires_at=expires_at)
        assert decision.arguments is not None
        edited = tool.input_model.model_validate(decision.arguments)
        # What runs is what was approved: the digest of the input the tool gets.
        try:
            self.grants.redeem(
                grant.id,
                call_digest(tool.name, edited.model_dump(mode="json")),
                run_id=run_id,
                agent=agent,
            )
        finally:
            self.grants.discard(grant.id)  # used, or refused: either way, gone
        return GateVerdict.run(edited, **details, runs_as=decision.digest)

    @property
    def rule_book(self) -> RuleBook:
        """The rules this gate reads outside a journaled run: those it was given
        (``rules=``), else its own :attr:`rules`."""
        return self._book_for(None)

    def _book_for(self, run: AgentRun | None) -> RuleBook:
        if self._book is not None:
            return self._book
        return run.journal.journal if run is not None else self.rules

    async def _by_rule(
        self, book: RuleBook, run: AgentRun | None, approval: Approval, agent: str | None
    ) -> ApprovalRule | None:
        """The rule deciding the call (its use recorded), or None; a journal out of reach
        is waited for, as a question is."""

        async def look() -> ApprovalRule | None:
            return await deciding_rule(
                book,
                approval.tool,
                approval.arguments,
                approval.digest,
                run_id=run.record.id if run is not None else None,
                daemon_id=run.journal.daemon.id if run is not None else None,
                agent=agent,
            )

        if run is not None and book is run.journal.journal:
            return await run.journal.persist("the approval rules", look, shown=False)
        return await look()

    async def _add_rule(
        self, book: RuleBook, run: AgentRun | None, tool: str, decision: ApprovalDecision
    ) -> ApprovalRule:
        """The rule an "always" decision adds, scoped by ``rule_scope`` (a journal rule
        outside a journaled run)."""
        scope: RuleScope = self._rule_scope if run is not None else "journal"
        scope_id = None
        if scope == "run" and run is not None:
            scope_id = run.record.id
        elif scope == "daemon" and run is not None:
            scope_id = run.journal.daemon.id

        async def add() -> ApprovalRule:
            return await book.add_rule(
                tool,
                allow=decision.decision is Decision.ALWAYS,
                scope=scope,
                scope_id=scope_id,
                reason=decision.message,
                by=decision.decided_by or "a decision",
            )

        if run is not None and book is run.journal.journal:
            return await run.journal.persist("an approval rule", add)
        return await add()
