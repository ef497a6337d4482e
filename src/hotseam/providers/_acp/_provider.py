"""AcpProvider: the user-interaction provider that asks through the ACP client.

An ask becomes an ``elicitation/create`` form request to the client, scoped to the session
(and tool call) of :func:`~._scope.current_ask_scope`, when the client advertised
``clientCapabilities.elicitation.form`` (present and not null) at initialize. Otherwise a
question with options and no custom answers goes as ``session/request_permission``, and
any other question fails with ``NO_PROVIDER``.

Cancellation, three ways:

* the ask's task is cancelled (its signal fired, or a reload withdrew it): the wire sends
  ``$/cancel_request`` for the pending request, and ignores a late answer;
* :meth:`AcpProvider.cancel_session` (the client sent ``session/cancel``): the session's
  pending questions end with ``ASK_CANCELLED`` (their requests are withdrawn the same way);
* the connection closes: ``PROVIDER_FAILED``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from acp.agent.connection import AgentSideConnection
from acp.exceptions import RequestError
from acp.schema import ClientCapabilities

from ..._log import get_logger
from ...interaction import (
    ASK_CANCELLED,
    NO_PROVIDER,
    PROVIDER_FAILED,
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    UserInteractionError,
)
from ._form import ELICITATION_CREATE, build_form
from ._permission import REQUEST_PERMISSION, build_permission_form, fits_permission
from ._scope import current_ask_scope
from ._wire import AcpWire

__all__ = ["AcpProvider"]

_log = get_logger("hotseam.providers.acp")
_UNWIND_WAIT = 5.0


@dataclass(eq=False, slots=True)
class _Pending:
    """One question waiting for the client; ``session/cancel`` cancels ``cancel_scope``."""

    session_id: str
    cancel_scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)


class AcpProvider:
    """Asks the human through the ACP client of an agent-side connection.

    Attach it to a connection with :meth:`attach` (``hotseam.providers.acp.serve`` does),
    tell it what the client advertised with :meth:`set_client_capabilities`, and call
    :meth:`cancel_session` on ``session/cancel``. Asks must run inside an ACP session
    (:func:`~hotseam.providers.acp.ask_scope`; the ACP agent sets it for each prompt turn).

    Args:
        permission_fallback: Carry questions with options and no custom answers as
            ``session/request_permission`` when the client has no form elicitation
            (default true).
        name: Shown in logs.
    """

    def __init__(self, *, permission_fallback: bool = True, name: str = "acp") -> None:
        self.name = name
        self.permission_fallback = permission_fallback
        self._wire: AcpWire | None = None
        self._capabilities: ClientCapabilities | None = None
        self._pending: dict[str, set[_Pending]] = {}

    def __repr__(self) -> str:
        pending = sum(len(asks) for asks in self._pending.values())
        return f"<AcpProvider {self.name!r} form={self.supports_form} pending={pending}>"

    # -- wiring ---------------------------------------------------------------------------------

    def attach(self, connection: AgentSideConnection | AcpWire) -> AcpWire:
        """Ask through this connection from now on; return its wire (created if needed)."""
        wire = connection if isinstance(connection, AcpWire) else AcpWire(connection)
        self._wire = wire
        self._capabilities = None
        return wire

    def set_client_capabilities(self, capabilities: ClientCapabilities | None) -> None:
        """Record what the client advertised at ``initialize``."""
        self._capabilities = capabilities

    @property
    def supports_form(self) -> bool:
        """True when the client advertised ``elicitation.form`` (present and not null)."""
        capabilities = self._capabilities
        return (
            capabilities is not None
            and capabilities.elicitation is not None
            and capabilities.elicitation.form is not None
        )

    def pending(self, session_id: str | None = None) -> int:
        """How many questions are waiting for the client (in one session, or in all)."""
        if session_id is not None:
            return len(self._pending.get(session_id, ()))
        return sum(len(asks) for asks in self._pending.values())

    async def cancel_session(self, session_id: str, *, wait: float = _UNWIND_WAIT) -> int:
        """End the session's pending questions with ``ASK_CANCELLED``; return how many.

        Each pending request is withdrawn with ``$/cancel_request``. Returns once the asks
        have unwound (at most ``wait`` seconds), so a caller can then end the prompt turn
        knowing that they ended as cancelled questions, not as a cancelled task.
        """
        asks = list(self._pending.get(session_id, ()))
        for pending in asks:
            pending.cancel_scope.cancel()
        if asks:
            _log.info("acp.session_questions_cancelled", session_id=session_id, count=len(asks))
            with anyio.move_on_after(wait):
                for pending in asks:
                    await pending.done.wait()
        return len(asks)

    # -- the provider ---------------------------------------------------------------------------

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        """Put the question to the ACP client and wait for the human's answer."""
        scope = current_ask_scope()
        if scope is None:
            raise UserInteractionError(
                "the ACP provider can only ask inside an ACP session: ask from a prompt turn "
                "(or wrap the call in hotseam.providers.acp.ask_scope(session_id))",
                NO_PROVIDER,
            )
        wire = self._wire
        if wire is None:
            raise UserInteractionError(
                "the ACP provider is not attached to a client connection", NO_PROVIDER
            )
        if scope.cancelled is not None and scope.cancelled.aborted:
            raise _cancelled_by_client(scope.session_id)
        method, params, read = self._plan(request, scope.session_id, scope.tool_call_id)
        pending = _Pending(scope.session_id)
        self._pending.setdefault(scope.session_id, set()).add(pending)
        _log.info(
            "acp.question_sent",
            method=method,
            session_id=scope.session_id,
            tool_call_id=scope.tool_call_id,
        )
        result: list[Any] = []
        try:
            with pending.cancel_scope:
                result.append(await wire.request(method, params))
        except RequestError as error:
            raise UserInteractionError(
                f"the ACP client answered {method} with JSON-RPC error {error.code}: {error}",
                PROVIDER_FAILED,
                details={"rpc_code": error.code, "rpc_message": str(error), "rpc_data": error.data},
                cause=error,
            ) from error
        except ConnectionError as error:
            raise UserInteractionError(
                f"the ACP connection closed while {method} was waiting for the client",
                PROVIDER_FAILED,
                cause=error,
            ) from error
        finally:
            asks = self._pending.get(scope.session_id)
            if asks is not None:
                asks.discard(pending)
                if not asks:
                    del self._pending[scope.session_id]
            pending.done.set()
        if not result:  # only cancel_session() cancels this scope
            raise _cancelled_by_client(scope.session_id)
        return read(result[0])

    def _plan(
        self, request: AskUserQuestionRequest, session_id: str, tool_call_id: str | None
    ) -> tuple[str, dict[str, Any], Callable[[object], AskUserQuestionAnswer]]:
        """Choose how to carry the question: form elicitation, the fallback, or nothing."""
        if self.supports_form:
            form = build_form(request)
            return ELICITATION_CREATE, form.params(session_id, tool_call_id), form.read
        if self.permission_fallback and fits_permission(request):
            permission = build_permission_form(request)
            return REQUEST_PERMISSION, permission.params(session_id, tool_call_id), permission.read
        reason = (
            "it did not advertise clientCapabilities.elicitation.form at initialize"
            if self._capabilities is not None
            else "it has not sent initialize yet"
        )
        fallback = (
            "; only questions with options and no custom answers can go as "
            "session/request_permission"
            if self.permission_fallback
            else ""
        )
        raise UserInteractionError(
            f"the ACP client does not support form elicitation ({reason}){fallback}",
            NO_PROVIDER,
        )


def _cancelled_by_client(session_id: str) -> UserInteractionError:
    return UserInteractionError(
        f"the ACP client cancelled the prompt turn of session {session_id!r} (session/cancel)",
        ASK_CANCELLED,
    )
