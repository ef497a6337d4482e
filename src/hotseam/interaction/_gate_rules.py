"""Where a gate finds its approval rules: the journal of the run (shared by every daemon and
the CLI), or, outside a journal, this process's own list.

A call that a rule in force covers is decided by the rule without asking — a reject rule
wins over an allow rule, so that "always reject" cannot be overridden by a wider "always
allow" — and the rule's use is recorded (the journal's ``hotseam_rule_uses``, or the
in-process list) before the call runs: a rule revoked meanwhile decides nothing, and the
call is asked.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol

from ._journal import ApprovalRule, JournalError, JournalErrorCode, RuleScope, check_rule


class RuleBook(Protocol):
    """Approval rules: added, listed, revoked, and each use recorded."""

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
    ) -> ApprovalRule: ...

    async def rules(self, *, revoked: bool = False) -> list[ApprovalRule]: ...

    async def revoke_rule(self, rule_id: str, *, by: str | None = None) -> ApprovalRule: ...

    async def note_rule_use(
        self, rule_id: str, digest: str, *, run_id: str | None = None, agent: str | None = None
    ) -> ApprovalRule: ...


class ProcessRules:
    """This process's rules, for a gate outside a journal (lost when the process ends)."""

    def __init__(self) -> None:
        self._rules: dict[str, ApprovalRule] = {}
        self.uses: list[tuple[str, str, str | None, str | None, float]] = []
        """Each use: (rule id, digest, run id, agent, when)."""

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
        patterns = dict(where or {})
        check_rule(tool, patterns, scope, scope_id)
        rule = ApprovalRule(
            uuid.uuid4().hex[:12], tool, allow, patterns, scope, scope_id, reason, by, time.time()
        )
        self._rules[rule.id] = rule
        return rule

    async def rules(self, *, revoked: bool = False) -> list[ApprovalRule]:
        return [rule for rule in self._rules.values() if revoked or rule.active]

    async def revoke_rule(self, rule_id: str, *, by: str | None = None) -> ApprovalRule:
        rule = self._known(rule_id)
        if rule.active:
            rule = replace(rule, revoked_at=time.time(), revoked_by=by)
            self._rules[rule_id] = rule
        return rule

    async def note_rule_use(
        self, rule_id: str, digest: str, *, run_id: str | None = None, agent: str | None = None
    ) -> ApprovalRule:
        rule = self._known(rule_id)
        if not rule.active:
            raise JournalError(f"rule {rule_id} was revoked", JournalErrorCode.RULE_REVOKED)
        self.uses.append((rule_id, digest, run_id, agent, time.time()))
        rule = replace(rule, uses=rule.uses + 1)
        self._rules[rule_id] = rule
        return rule

    def _known(self, rule_id: str) -> ApprovalRule:
        try:
            return self._rules[rule_id]
        except KeyError:
            raise JournalError(f"no rule {rule_id}", JournalErrorCode.RULE_UNKNOWN) from None


async def deciding_rule(
    book: RuleBook,
    tool: str,
    arguments: Mapping[str, Any],
    digest: str,
    *,
    run_id: str | None,
    daemon_id: str | None,
    agent: str | None,
) -> ApprovalRule | None:
    """The rule in force that decides this call (its use recorded), or None: ask."""
    covering = [
        rule
        for rule in await book.rules()
        if rule.applies(run_id, daemon_id) and rule.matches(tool, arguments)
    ]
    covering.sort(key=lambda rule: (rule.allow, rule.created_at))  # reject rules first
    for rule in covering:
        try:
            return await book.note_rule_use(rule.id, digest, run_id=run_id, agent=agent)
        except JournalError as error:
            if error.code not in (JournalErrorCode.RULE_REVOKED, JournalErrorCode.RULE_UNKNOWN):
                raise
    return None
