"""What a running session tells ``hotseam status`` and does for ``hotseam reload``.

The status is JSON-ready data (what ``hotseam status`` prints); a web inbox's address
includes its token (the control socket is its owner's alone), an open question never its
answer.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from .._core import BaseContext, HarnessError
from ..interaction import pending_asks
from ..interaction.journal import journal_waits

if TYPE_CHECKING:
    from ..interaction.approvals import ApprovalRule
from ..reload import ModuleState, Reloader, display_path
from ._agent import shown_location


@dataclass(slots=True)
class SessionFacts:
    """The facts of a session that the reloader does not know."""

    command: str
    reloader: Reloader
    name: str | None = None
    socket: str | None = None
    agent: str = "the demo agent"
    agent_state: str = "starting"
    agent_runs: int = 0
    journal: str | None = None
    """Where the agent's questions are recorded (``None``: in this process only)."""
    run: str | None = None
    """The agent's run in the journal, and what it replayed (``run 3f2a… (2 replayed)``)."""
    rules: Callable[[], Awaitable[list[ApprovalRule]]] | None = None
    """The approval rules in force (the journal's, else the tool gate's own)."""
    started: float = field(default_factory=time.monotonic)
    started_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())


def status(facts: SessionFacts) -> dict[str, Any]:
    """The session's status as JSON-ready data."""
    reloader = facts.reloader
    modules = [
        {
            "path": display_path(item.path),
            "module": item.module,
            "kind": item.kind,
            # A record exists from the start of its first load: failed with no error yet
            # means the load is still running.
            "state": (
                "loading"
                if item.state is ModuleState.FAILED and item.error is None
                else item.state.value
            ),
            "generation": item.generation,
            "load_ms": None if item.load_ms is None else round(item.load_ms, 1),
            "error": None if item.error is None else str(item.error),
        }
        for item in reloader.status()
    ]
    providers: list[dict[str, Any]] = []
    inboxes: dict[int, dict[str, Any]] = {}
    context: BaseContext | None = reloader.context
    while context is not None:
        for seam, registration in sorted(
            context.providers().items(), key=lambda item: item[0].name
        ):
            provider = registration.provider
            inbox = _web_inbox(provider)
            if inbox is not None:
                inboxes.setdefault(id(provider), {**inbox, "context": context.name})
            providers.append(
                {
                    "seam": seam.name,
                    "context": context.name,
                    "provider": f"{type(provider).__module__}.{type(provider).__qualname__}",
                    "registered_at": shown_location(registration.location),
                }
            )
        context = context.parent
    asks = [
        {
            "question_id": ask.question_id,
            "agent": ask.agent,
            "header": ask.header,
            "context": ask.context,
            "seconds": round(ask.seconds, 1),
            "provider": ask.provider,
            "attempts": ask.attempts,
            "waiting_for_provider": ask.waiting_for_provider,
        }
        for ask in pending_asks()
    ]
    return {
        "ok": True,
        "pid": os.getpid(),
        "name": facts.name,
        "command": facts.command,
        "socket": facts.socket,
        "cwd": str(Path.cwd()),
        "watching": [display_path(path) for path in reloader.paths],
        "started_at": facts.started_at,
        "uptime_s": round(time.monotonic() - facts.started, 1),
        "agent": {"name": facts.agent, "state": facts.agent_state, "runs": facts.agent_runs},
        "journal": (
            {"url": facts.journal, "run": facts.run, "unreachable": journal_waits()}
            if facts.journal
            else None
        ),
        "modules": modules,
        "providers": providers,
        "web": list(inboxes.values()),
        "asks": asks,
    }


def _web_inbox(provider: object) -> dict[str, Any] | None:
    """A web inbox's address and load, or ``None`` for another provider (the web module
    is looked up, not imported: without it loaded there is no web inbox)."""
    module = sys.modules.get("hotseam.providers._web._provider")
    if module is None or not isinstance(provider, module.WebProvider):
        return None
    return {"url": provider.url, "pending": provider.pending}


async def reload(facts: SessionFacts, paths: list[str]) -> dict[str, Any]:
    """Reload ``paths`` (every module when empty), even unchanged ones; report each."""
    reloader = facts.reloader
    results = (
        [await reloader.reload(force=True)]
        if not paths
        else [await reloader.reload(path, force=True) for path in paths]
    )
    return {
        "ok": all(result.ok for result in results),
        "committed": [
            {"path": display_path(event.path), "generation": event.generation}
            for result in results
            for event in result.committed
        ],
        "failed": [
            {"path": display_path(event.path), "error": str(event.error)}
            for result in results
            for event in result.aborted
        ],
        "unloaded": [display_path(event.path) for result in results for event in result.unloaded],
    }


RULES_WAIT = 1.0
"""Seconds ``status`` waits for the approval rules (a journal out of reach: shown as not
known, never holding the reply)."""


async def handle(facts: SessionFacts, message: dict[str, Any]) -> dict[str, Any]:
    """Answer one control request, as :func:`~._control.parse_request` checked it."""
    if message["op"] == "reload":
        return await reload(facts, message["paths"])
    reply = status(facts)
    reply["approval_rules"] = await _rules(facts)
    return reply


async def _rules(facts: SessionFacts) -> list[dict[str, Any]] | None:
    """The approval rules in force, as status shows them (None: not known now)."""
    if facts.rules is None:
        return []
    with anyio.move_on_after(RULES_WAIT):
        try:
            rules = await facts.rules()
        except HarnessError:
            return None
        return [rule.to_dict() for rule in rules]
    return None
