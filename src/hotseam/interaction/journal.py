"""The ask journal: questions and answers that outlive the process.

With a :data:`JOURNALING` (a :class:`JournalDaemon` over :func:`open_journal`), asks made
inside an agent run (:meth:`JournalDaemon.run`, :func:`current_run`) are recorded, replayed
when the run resumes after a restart, and answerable from any process's inbox. The records
(:class:`AskRecord`, :class:`RunRecord`, ...) and the codes of :class:`JournalError` are
here, apart from ``hotseam.interaction``: a provider author and an agent author need
none of them, an operator's tool or a fleet inbox does.
"""

from __future__ import annotations

from .._core import present_as
from ._journal import DEFAULT_LIVENESS_TIMEOUT as DEFAULT_LIVENESS_TIMEOUT
from ._journal import SETTLED_STATES as SETTLED_STATES
from ._journal import (
    AskRecord,
    AskState,
    DaemonRecord,
    InboxEntry,
    Journal,
    JournalError,
    JournalErrorCode,
    JournalEvent,
    RunRecord,
    RunState,
    Settlement,
    open_journal,
)
from ._journal import RunOverview as RunOverview
from ._journal import default_journal_path as default_journal_path
from ._journal import parse_journal_url as parse_journal_url
from ._runs import JOURNALING, AgentRun, JournalDaemon, current_run
from ._runs import journal_waits as journal_waits
from ._runs import pid_alive as pid_alive

# Imported above for hotseam's own layers (the CLI, the web inbox), not public and so left out
# of __all__: DEFAULT_LIVENESS_TIMEOUT, SETTLED_STATES, RunOverview, default_journal_path,
# parse_journal_url, journal_waits, pid_alive.
__all__ = [
    "AgentRun",
    "AskRecord",
    "AskState",
    "DaemonRecord",
    "InboxEntry",
    "JOURNALING",
    "Journal",
    "JournalDaemon",
    "JournalError",
    "JournalErrorCode",
    "JournalEvent",
    "RunRecord",
    "RunState",
    "Settlement",
    "current_run",
    "open_journal",
]

present_as(__name__, globals(), __all__)
