"""The approval rules an inbox shows and revokes: which rule book, and the API's words for it.

The fleet inbox shows its journal's rules. A daemon's own inbox shows the rules its gate
decides by: the journal's when the daemon has one (shared with every daemon and ``hotseam
approvals``), else its :class:`~hotseam.interaction.approvals.HumanGate`'s own, else none.
The book is looked up at each request, as the journal or the gate may be provided after
the inbox starts serving (``hotseam dev`` opens its journal after its inbox).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..._core import TOOL_GATE, BaseContext
from ...interaction.approvals import HumanGate, RuleBook
from ...interaction.journal import JOURNALING, Journal, JournalError, JournalErrorCode
from ._answers import InboxError

T = TypeVar("T")

RuleSource = Callable[[], RuleBook | None]
"""Where an inbox reads its rules at a request (``None``: it has none)."""

REVOKED_BY = "web inbox"
"""Who a rule revoked from a page is recorded as revoked by."""


def daemon_rules(context: BaseContext | None) -> RuleBook | None:
    """The rules a daemon's own inbox shows: its journal's, else its ``HumanGate``'s own."""
    if context is None:
        return None
    journaling = context.lookup(JOURNALING)
    if journaling is not None:
        return journaling.journal
    gate = context.lookup(TOOL_GATE)
    return gate.rule_book if isinstance(gate, HumanGate) else None


async def listed(book: RuleBook | None, *, revoked: bool) -> dict[str, Any]:
    """``GET /api/rules``: where the rules are kept, and each rule (oldest first).

    Raises:
        InboxError: 503 ``JOURNAL_UNAVAILABLE`` when the journal cannot be read.
    """
    if book is None:
        return {"source": None, "rules": []}
    rules = await _call(book.rules(revoked=revoked), None)
    source = "journal" if isinstance(book, Journal) else "process"
    return {"source": source, "rules": [rule.to_dict() for rule in rules]}


async def revoked(book: RuleBook | None, rule_id: str) -> dict[str, Any]:
    """``POST /api/rules/{id}/revoke``: the rule as revoked (revoking it again changes nothing).

    Raises:
        InboxError: 404 ``UNKNOWN_RULE``; 503 ``JOURNAL_UNAVAILABLE`` (nothing changed).
    """
    if book is None:
        raise _unknown(rule_id)
    rule = await _call(book.revoke_rule(rule_id, by=REVOKED_BY), rule_id)
    return {"ok": True, "rule": rule.to_dict()}


async def _call(call: Awaitable[T], rule_id: str | None) -> T:
    """A rule book's call; its refusals as the API's errors (a JSON body, never a traceback)."""
    try:
        return await call
    except JournalError as error:
        if error.code == JournalErrorCode.RULE_UNKNOWN and rule_id is not None:
            raise _unknown(rule_id) from None
        if error.code == JournalErrorCode.JOURNAL_UNAVAILABLE:
            raise InboxError(
                503,
                "JOURNAL_UNAVAILABLE",
                f"the journal cannot be used right now ({error}): retry",
            ) from None
        raise InboxError(500, str(error.code), str(error)) from None


def _unknown(rule_id: str) -> InboxError:
    return InboxError(404, "UNKNOWN_RULE", f"no approval rule {rule_id!r}", {"rule": rule_id})
