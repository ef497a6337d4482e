"""Approvals: a tool call put to the human before it runs, bound to the exact call.

Register a tool with ``needs_approval=True`` (or a function deciding per call) and provide
:class:`HumanGate` as :data:`hotseam.TOOL_GATE`: ``ctx.tools.execute()`` then asks the human
to approve, edit, reject or answer each call, through whichever user-interaction provider is
active. See ``docs/approvals.md``.
"""

from __future__ import annotations

from .._core import present_as
from ._approval import (
    ALL_DECISIONS,
    Approval,
    ApprovalDecision,
    Decision,
    call_digest,
    canonical_json,
)
from ._approval_questions import (
    DECISION_ID,
    TEXT_ID,
    ApprovalAnswerError,
    approval_request,
    read_decision,
)
from ._gate_rules import ProcessRules, RuleBook
from ._human_gate import Grant, GrantRefusedError, Grants, HumanGate, ask_approval
from ._journal import ApprovalRule

__all__ = [
    "ALL_DECISIONS",
    "DECISION_ID",
    "TEXT_ID",
    "Approval",
    "ApprovalAnswerError",
    "ApprovalDecision",
    "ApprovalRule",
    "Decision",
    "Grant",
    "GrantRefusedError",
    "Grants",
    "HumanGate",
    "ProcessRules",
    "RuleBook",
    "approval_request",
    "ask_approval",
    "call_digest",
    "canonical_json",
    "read_decision",
]

present_as(__name__, globals(), __all__)
