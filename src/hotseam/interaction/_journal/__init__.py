"""The ask journal: questions and answers that outlive the process (design invariant 10).

A journal records each daemon, each run of an agent, and each ask of a run with its state,
answer and times. A recorded answer is delivered to exactly one ask (of the same unfinished
run and the same question); a finished run is never answered again; across processes the
first answer wins in one transaction. ``ask()``, agent runs and resume, the CLI and the
fleet inbox are built on :class:`Journal` (``open_journal(url)``), whose operations are
written once (:mod:`._store`) for its engines, ``sqlite`` (:mod:`._sqlite`, also for
``memory:``) and ``postgresql`` (:mod:`._postgres`); a contract test suite runs every
behaviour on each.

Why not DBOS (durable workflows on the same two databases, which was considered): its
workflows and steps are functions registered by decorators at import time and run on
asyncio, while hotseam hot-reloads the modules that hold agents (a registered function goes
stale) and supports trio too. What hotseam needs is narrower — record a question, let the
first answer win, wake the waiter, replay answers of an unfinished run — and is a handful
of statements on plain tables (``UPDATE ... WHERE id = ? AND state = 'pending' RETURNING
...`` is first-answer-wins in one statement), which both engines run the same way.
"""

from __future__ import annotations

from ._errors import JournalError, JournalErrorCode
from ._open import DEFAULT_LIVENESS_TIMEOUT, DEFAULT_POLL_INTERVAL, open_journal
from ._records import (
    SETTLED_STATES,
    AskRecord,
    AskState,
    DaemonRecord,
    InboxEntry,
    JournalEvent,
    PurgeReport,
    RunOverview,
    RunRecord,
    RunState,
    Settlement,
    question_digest,
)
from ._rules import SCOPES as RULE_SCOPES
from ._rules import ApprovalRule, RuleScope, check_rule
from ._schema import SCHEMA_VERSION
from ._store import Journal
from ._url import JournalLocation, default_journal_path, parse_journal_url

__all__ = [
    "DEFAULT_LIVENESS_TIMEOUT",
    "DEFAULT_POLL_INTERVAL",
    "SCHEMA_VERSION",
    "RULE_SCOPES",
    "SETTLED_STATES",
    "ApprovalRule",
    "AskRecord",
    "AskState",
    "DaemonRecord",
    "InboxEntry",
    "Journal",
    "JournalError",
    "JournalErrorCode",
    "JournalEvent",
    "JournalLocation",
    "PurgeReport",
    "RunOverview",
    "RunRecord",
    "RuleScope",
    "RunState",
    "Settlement",
    "default_journal_path",
    "open_journal",
    "parse_journal_url",
    "check_rule",
    "question_digest",
]
