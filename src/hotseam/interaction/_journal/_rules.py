"""Approval rules in the journal: "always allow" or "always reject" a tool, narrowed by
argument patterns, scoped to a run, a daemon or the whole journal; and each rule's use.

A rule is a row of ``hotseam_rules``, revoked by setting ``revoked_at`` (never deleted: a
use refers to it, and the audit must say what it was). A use is a row of
``hotseam_rule_uses``: which rule decided which call (its digest), in which run, when.
"""

from __future__ import annotations

import fnmatch
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ._errors import JournalError, JournalErrorCode
from ._sql import Db, Row

RuleScope = Literal["run", "daemon", "journal"]
SCOPES: tuple[RuleScope, ...] = ("run", "daemon", "journal")


@dataclass(frozen=True, slots=True)
class ApprovalRule:
    """``allow`` (True) or reject every call of ``tool`` whose arguments match ``where``.

    Attributes:
        where: Argument name -> a shell-style pattern (``fnmatch``) its value must match;
            a string is matched as it is, any other value as its canonical JSON text
            (``3``, ``true``, ``["a"]``). Empty: every call of the tool.
        scope: ``run`` and ``daemon`` rules apply in that run or daemon (``scope_id``);
            ``journal`` rules everywhere the journal is used.
        uses: How many calls the rule decided (at the read).
    """

    id: str
    tool: str
    allow: bool
    where: Mapping[str, str]
    scope: RuleScope
    scope_id: str | None
    reason: str | None
    created_by: str | None
    created_at: float
    revoked_at: float | None = None
    revoked_by: str | None = None
    uses: int = 0

    @property
    def active(self) -> bool:
        """True until revoked."""
        return self.revoked_at is None

    def applies(self, run_id: str | None, daemon_id: str | None) -> bool:
        """True when the rule covers a call in that run of that daemon."""
        if self.scope == "run":
            return run_id is not None and run_id == self.scope_id
        if self.scope == "daemon":
            return daemon_id is not None and daemon_id == self.scope_id
        return True

    def matches(self, tool: str, arguments: Mapping[str, Any]) -> bool:
        """True when the call of ``tool`` with ``arguments`` is one this rule decides."""
        if tool != self.tool:
            return False
        for name, pattern in self.where.items():
            if name not in arguments:
                return False
            value = arguments[name]
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            if not fnmatch.fnmatchcase(text, pattern):
                return False
        return True

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every field, with ``active`` and ``describe()`` as ``text`` (what
        ``hotseam approvals --json``, ``hotseam status`` and the web inbox give)."""
        return {
            "id": self.id,
            "text": self.describe(),
            "tool": self.tool,
            "allow": self.allow,
            "where": dict(self.where),
            "scope": self.scope,
            "scope_id": self.scope_id,
            "reason": self.reason,
            "created_by": self.created_by,
            "created_at": self.created_at,
            "revoked_at": self.revoked_at,
            "revoked_by": self.revoked_by,
            "uses": self.uses,
            "active": self.active,
        }

    def describe(self) -> str:
        """One line: ``always allow deploy where service=api* (journal)``."""
        verb = "always allow" if self.allow else "always reject"
        where = " and ".join(f"{name}={pattern}" for name, pattern in sorted(self.where.items()))
        scope = self.scope if self.scope_id is None else f"{self.scope} {self.scope_id[:12]}"
        return f"{verb} {self.tool}" + (f" where {where}" if where else "") + f" ({scope})"


_COLUMNS = (
    "id, tool, allow, arguments, scope, scope_id, reason, created_by, created_at,"
    " revoked_at, revoked_by,"
    " (SELECT COUNT(*) FROM hotseam_rule_uses u WHERE u.rule_id = hotseam_rules.id)"
)


def rule_from_row(row: Row) -> ApprovalRule:
    where = json.loads(row[3]) if row[3] else {}
    return ApprovalRule(
        row[0],
        row[1],
        bool(row[2]),
        where,
        row[4],
        row[5],
        row[6],
        row[7],
        float(row[8]),
        None if row[9] is None else float(row[9]),
        row[10],
        int(row[11]),
    )


def check_rule(tool: str, where: Mapping[str, str], scope: str, scope_id: str | None) -> None:
    """Refuse a rule that could not mean what it says (``INVALID_RULE``)."""
    if not isinstance(tool, str) or not tool.strip():
        raise JournalError("a rule needs a tool name", JournalErrorCode.INVALID_RULE)
    if scope not in SCOPES:
        raise JournalError(
            f"a rule's scope is one of {', '.join(SCOPES)}, got {scope!r}",
            JournalErrorCode.INVALID_RULE,
        )
    if (scope == "journal") != (scope_id is None):
        raise JournalError(
            f"a {scope} rule needs the id of its {scope}"
            if scope_id is None
            else "a journal rule has no scope id",
            JournalErrorCode.INVALID_RULE,
        )
    for name, pattern in where.items():
        if not isinstance(name, str) or not name or not isinstance(pattern, str):
            raise JournalError(
                f"a rule's argument pattern is NAME=GLOB, got {name!r}={pattern!r}",
                JournalErrorCode.INVALID_RULE,
            )


def add_rule(
    db: Db,
    tool: str,
    allow: bool,
    where: Mapping[str, str],
    scope: RuleScope,
    scope_id: str | None,
    reason: str | None,
    created_by: str | None,
) -> ApprovalRule:
    rule_id = uuid.uuid4().hex[:12]
    db.count(
        "INSERT INTO hotseam_rules (id, tool, allow, arguments, scope, scope_id, reason,"
        " created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, {now})",
        (
            rule_id,
            tool,
            1 if allow else 0,
            json.dumps(dict(where), sort_keys=True),
            scope,
            scope_id,
            reason,
            created_by,
        ),
    )
    return known_rule(db, rule_id)


def known_rule(db: Db, rule_id: str) -> ApprovalRule:
    row = db.one(f"SELECT {_COLUMNS} FROM hotseam_rules WHERE id = ?", (rule_id,))
    if row is None:
        raise JournalError(f"no rule {rule_id} in the journal", JournalErrorCode.RULE_UNKNOWN)
    return rule_from_row(row)


def list_rules(db: Db, *, revoked: bool) -> list[ApprovalRule]:
    where = "" if revoked else " WHERE revoked_at IS NULL"
    return [
        rule_from_row(row)
        for row in db.all(f"SELECT {_COLUMNS} FROM hotseam_rules{where} ORDER BY created_at")
    ]


def revoke_rule(db: Db, rule_id: str, by: str | None) -> ApprovalRule:
    db.count(
        "UPDATE hotseam_rules SET revoked_at = {now}, revoked_by = ? WHERE id = ?"
        " AND revoked_at IS NULL",
        (by, rule_id),
    )
    return known_rule(db, rule_id)


def note_use(
    db: Db, rule_id: str, digest: str, run_id: str | None, agent: str | None
) -> ApprovalRule:
    rule = known_rule(db, rule_id)
    if not rule.active:
        raise JournalError(f"rule {rule_id} was revoked", JournalErrorCode.RULE_REVOKED)
    db.count(
        "INSERT INTO hotseam_rule_uses (id, rule_id, digest, run_id, agent, at)"
        " VALUES (?, ?, ?, ?, ?, {now})",
        (uuid.uuid4().hex, rule_id, digest, run_id, agent),
    )
    return known_rule(db, rule_id)
