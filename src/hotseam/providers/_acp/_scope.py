"""Which ACP session, and which tool call, an ask belongs to.

An ``elicitation/create`` must name the session of the prompt turn that asks (and the tool
call, when the question comes from one), but the seam's request knows nothing of ACP. The
ACP agent (:mod:`._agent`) therefore sets a context variable around each prompt turn and
each tool call it reports; ``ask()`` runs the provider in the caller's task, so the provider
reads it there. Code that drives :class:`~hotseam.providers.acp.AcpProvider` from its own
``acp.Agent`` wraps its prompt handling in :func:`ask_scope` itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from ..._core import AbortSignal

__all__ = ["AskScope", "ask_scope", "current_ask_scope"]


@dataclass(frozen=True, slots=True)
class AskScope:
    """Where a question is asked: an ACP session and, optionally, a tool call in it.

    ``cancelled`` fires when the client cancels the prompt turn (``session/cancel``); an
    ask that starts after it fails with ``ASK_CANCELLED`` at once. ``end_turn``, when the
    agent can do it, ends the current prompt turn with ``end_turn`` while the ask goes on
    waiting (conversation mode: the next prompt is the answer); without it, a free-form
    question has no way to reach a client without form elicitation.
    """

    session_id: str
    tool_call_id: str | None = None
    cancelled: AbortSignal | None = None
    end_turn: Callable[[], None] | None = None


_current: ContextVar[AskScope | None] = ContextVar("hotseam_acp_ask_scope", default=None)


@contextmanager
def ask_scope(
    session_id: str,
    *,
    tool_call_id: str | None = None,
    cancelled: AbortSignal | None = None,
    end_turn: Callable[[], None] | None = None,
) -> Iterator[AskScope]:
    """Scope the asks made in the block (and tasks started in it) to an ACP session."""
    scope = AskScope(session_id, tool_call_id, cancelled, end_turn)
    token = _current.set(scope)
    try:
        yield scope
    finally:
        _current.reset(token)


def current_ask_scope() -> AskScope | None:
    """The ACP session (and tool call) of the current ask, or ``None`` outside one."""
    return _current.get()
