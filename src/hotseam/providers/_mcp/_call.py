"""Which MCP tool call a question comes from, and what its client can show.

The seam's request knows nothing of MCP, but a question must reach the client that made
the call: on the older revisions as an ``elicitation/create`` request tied to the call's
request id, on 2026-07-28 in the call's own result. The server sets a context variable
around each tool it runs; ``ask()`` runs the provider in the tool's task, so the provider
reads it there (as the ACP provider reads its ask scope).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mcp_types import RequestId
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

if TYPE_CHECKING:
    from mcp.server.session import ServerSession

    from ._input import Continuation
    from ._tap import ResponseTap

__all__ = ["McpCall", "current_call", "in_call"]


@dataclass(frozen=True, slots=True)
class McpCall:
    """One ``tools/call``: the session that answers it, its request id, the revision
    spoken, and (on 2026-07-28) the continuation that carries its questions."""

    session: ServerSession
    request_id: RequestId | None
    protocol_version: str
    tool: str
    continuation: Continuation | None = None
    tap: ResponseTap | None = None
    """Files the responses to its forms as they are read (stdio and in-process streams)."""

    @property
    def modern(self) -> bool:
        """Whether questions travel in results (2026-07-28) rather than as requests."""
        return self.protocol_version in MODERN_PROTOCOL_VERSIONS

    @property
    def advertises_form(self) -> bool:
        """Whether the client advertised form elicitation: ``elicitation`` present, with
        ``form`` or with no mode at all (``{}`` means form only in MCP, unlike ACP)."""
        capabilities = self.session.client_capabilities
        elicitation = capabilities.elicitation if capabilities is not None else None
        if elicitation is None:
            return False
        return elicitation.form is not None or elicitation.url is None

    @property
    def client_name(self) -> str:
        """The client's name from ``initialize`` (or the request's envelope), for messages."""
        params = self.session.client_params
        return params.client_info.name if params is not None else "the MCP client"


_current: ContextVar[McpCall | None] = ContextVar("hotseam_mcp_call", default=None)


@contextmanager
def in_call(call: McpCall) -> Iterator[McpCall]:
    """Make ``call`` the current MCP tool call for the block (and tasks started in it)."""
    token = _current.set(call)
    try:
        yield call
    finally:
        _current.reset(token)


def current_call() -> McpCall | None:
    """The MCP tool call the current code runs for, or ``None`` outside one."""
    return _current.get()
