"""JournalError and its stable codes."""

from __future__ import annotations

import enum

from ..._core import HarnessError


class JournalErrorCode(enum.StrEnum):
    """What went wrong with the journal; the value is the error's ``code``."""

    JOURNAL_INVALID_URL = "JOURNAL_INVALID_URL"
    """The journal's URL names no engine hotseam knows, or is malformed."""
    JOURNAL_UNAVAILABLE = "JOURNAL_UNAVAILABLE"
    """The journal cannot be opened or reached (a folder, a file, a server, a driver)."""
    JOURNAL_NEWER = "JOURNAL_NEWER"
    """The journal was written by a newer hotseam (a higher schema version): refused."""
    JOURNAL_CORRUPT = "JOURNAL_CORRUPT"
    """A record cannot be read back (not a hotseam journal, or edited by hand)."""
    DAEMON_UNKNOWN = "DAEMON_UNKNOWN"
    """No daemon of that id was registered (or it was purged)."""
    DAEMON_STOPPED = "DAEMON_STOPPED"
    """The daemon was marked stopped (by itself or by a process that found it dead)."""
    RUN_UNKNOWN = "RUN_UNKNOWN"
    """No run of that id is in the journal."""
    RUN_EXISTS = "RUN_EXISTS"
    """The agent already has an unfinished run: resume it (claim) or abandon it first."""
    RUN_FINISHED = "RUN_FINISHED"
    """The run finished, failed or was abandoned: it takes no asks and no answers."""
    RUN_CLAIMED = "RUN_CLAIMED"
    """The run belongs to another daemon, which is alive (or took it over)."""
    ASK_UNKNOWN = "ASK_UNKNOWN"
    """No ask of that id is in the journal."""
    ASK_CONFLICT = "ASK_CONFLICT"
    """Another live ask already holds that position of the run."""
    ALREADY_ANSWERED = "ALREADY_ANSWERED"
    """Another answer was recorded first (first answer wins)."""
    ASK_NOT_PENDING = "ASK_NOT_PENDING"
    """The ask was settled otherwise (failed, withdrawn, abandoned) before this answer."""
    ASK_NOT_ABANDONED = "ASK_NOT_ABANDONED"
    """Only an abandoned ask is cleared: a pending one is answered or dismissed, a settled
    one stays until purged."""
    INVALID_RULE = "INVALID_RULE"
    """An approval rule that cannot mean what it says (no tool, a bad scope or pattern)."""
    RULE_UNKNOWN = "RULE_UNKNOWN"
    """No approval rule of that id is in the journal."""
    RULE_REVOKED = "RULE_REVOKED"
    """The approval rule was revoked: it decides nothing more."""


class JournalError(HarnessError):
    """A journal operation that could not be done; ``code`` says why (a ``JournalErrorCode``).

    Messages name the journal (its URL without password) or the record concerned; they
    never contain an answer's text.
    """

    default_code = JournalErrorCode.JOURNAL_UNAVAILABLE.value
