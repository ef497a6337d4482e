"""AcpProvider: the user-interaction provider that asks through the ACP client.

So that no client leaves the human unasked, a question travels as the client can show it:
an ``elicitation/create`` form when it advertised ``clientCapabilities.elicitation.form``
(present and not null), scoped to :func:`current_ask_scope`; else, with options, as
``session/request_permission`` (a custom-answer choice dropped, and the prompt says so);
else in the conversation (:mod:`._conversation`: the turn ends, the next prompt answers).
Several questions are one form; without forms ``ask()`` (or, after a refusal mid-ask, the
provider) puts them one after the other. An approval (``request.approval``) is ACP's own
permission request on every client (:mod:`._approval`), its plain questions only for a client
that refused those. A method answered with -32601 (the Python SDK without its unstable flag)
is not used again for that client, with one warning.

Cancellation: the ask's task cancelled (signal, reload) sends ``$/cancel_request``; a
client may ignore it (Toad does) and answer later, and if a reload re-asked the same ask
(the same ``question_id``) that late answer is its answer (:meth:`AcpProvider._late_answer`).
``session/cancel`` (:meth:`AcpProvider.cancel_session`) ends the session's questions with
``ASK_CANCELLED``; a closed connection with ``ASK_ABORTED``, as a disposed provider's.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
from acp.agent.connection import AgentSideConnection
from acp.exceptions import RequestError
from acp.helpers import update_agent_message_text
from acp.schema import ClientCapabilities

from ..._core import AbortSignal, get_logger
from ...interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    ErrorCode,
    UserInteractionError,
    current_ask,
)
from .._kit import (
    EmptyAnswerError,
    Form,
    IncompleteAnswerError,
    ask_one_at_a_time,
    ask_until_answered,
    build_form,
)
from ._approval import ApprovalPermission, Decided, approval_permission
from ._conversation import Conversations, NotAnOptionError, question_text, read_reply
from ._permission import REQUEST_PERMISSION, build_permission_form, fits_permission
from ._wire import ANSWER_REFUSED, AcpWire

_log = get_logger("hotseam.providers.acp")
ELICITATION_CREATE = "elicitation/create"
_UNWIND_WAIT = 5.0
_SEND_WAIT = 2.0
_METHOD_NOT_FOUND = -32601
_AGAIN = {"empty": "empty_answer", "incomplete": "incomplete_answer", "unfit": "not_an_option"}
_REFUSED = {
    ELICITATION_CREATE: (
        "acp.form_elicitation_refused",
        "the client advertised elicitation.form but answered elicitation/create with 'method "
        "not found'; its questions use the fallbacks from now on",
    ),
    REQUEST_PERMISSION: (
        "acp.permission_request_refused",
        "the client answered session/request_permission with 'method not found'; its "
        "questions with options are asked in the conversation from now on",
    ),
}
CONVERSATION = "conversation"
"""The carrier of a free-form question on a client without form elicitation (no method)."""


@dataclass(frozen=True, slots=True)
class AskScope:
    """Where a question is asked: an ACP session and, optionally, a tool call in it.

    An ``elicitation/create`` must name them, but the seam's request knows nothing of ACP:
    the ACP agent sets this context variable around each prompt turn and tool call (code
    driving :class:`AcpProvider` from its own ``acp.Agent`` wraps its prompts in
    :func:`ask_scope`). ``cancelled`` fires on ``session/cancel`` (a later ask fails with
    ``ASK_CANCELLED`` at once); ``end_turn`` ends the prompt turn while the ask waits
    (conversation mode), without which a free-form question cannot reach a client
    without form elicitation.
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


@dataclass(frozen=True, slots=True)
class _Carrier:
    """How one attempt at a question travels, and how its result is read back."""

    method: str
    params: dict[str, Any]
    read: Callable[[Any], AskUserQuestionAnswer]
    text: str = ""  # the agent message of conversation mode


@dataclass(eq=False, slots=True)
class _Pending:
    """One attempt at a question, waiting for the client.

    ``session/cancel`` cancels ``cancel_scope``. The answer given to an earlier, withdrawn
    attempt at the same ask (``question_id``: the same for its re-ask after a reload) goes
    in ``delivered``, and ``delivery`` is cancelled so that this attempt stops waiting.
    """

    session_id: str
    request: AskUserQuestionRequest
    carrier: _Carrier
    order: int
    question_id: str | None
    cancel_scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    delivery: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    delivered: list[AskUserQuestionAnswer | UserInteractionError] = field(default_factory=list)
    done: anyio.Event = field(default_factory=anyio.Event)

    def asks_again(self, earlier: _Pending) -> bool:
        """Whether this attempt is the same question as ``earlier``, asked after it."""
        return (
            self.order > earlier.order
            and self.session_id == earlier.session_id
            and self.carrier.method != CONVERSATION
            and not self.delivered
            and self.question_id is not None
            and self.question_id == earlier.question_id
            and (self.request is earlier.request or self.request == earlier.request)
        )


class _RefusedError(Exception):
    """The client answered a carrier's method with -32601: plan the question again."""


class _OneByOneError(Exception):
    """Several questions, and no form to carry them together: ask them one by one."""


class AcpProvider:
    """Asks the human through the ACP client of an agent-side connection.

    Attach it to a connection with :meth:`attach` (``hotseam.providers.acp.serve`` does),
    tell it what the client advertised with :meth:`set_client_capabilities`, and call
    :meth:`cancel_session` on ``session/cancel``. Asks must run inside an ACP session
    (:func:`~hotseam.providers.acp.ask_scope`; the ACP agent sets it for each prompt turn).

    Args:
        permission_fallback: Carry questions with options as ``session/request_permission``
            when the client has no form elicitation (default true).
        conversation_fallback: Ask free-form questions in the conversation when the client
            has no form elicitation (default true; needs an agent that can end the turn
            while the ask waits, as :class:`~hotseam.providers.acp.AcpAgent` does).
        name: Shown in logs.
    """

    def __init__(
        self,
        *,
        permission_fallback: bool = True,
        conversation_fallback: bool = True,
        name: str = "acp",
    ) -> None:
        self.name = name
        self.permission_fallback = permission_fallback
        self.conversation_fallback = conversation_fallback
        self.conversations = Conversations()
        """The free-form questions waiting for the next prompt of their session."""
        self._wire: AcpWire | None = None
        self._capabilities: ClientCapabilities | None = None
        self._refused: set[str] = set()  # the methods answered with -32601
        self._pending: dict[str, set[_Pending]] = {}
        self._attempts = itertools.count()
        self._decided = Decided()  # approvals asked one question at a time

    def __repr__(self) -> str:
        return f"<AcpProvider {self.name!r} form={self.supports_form} pending={self.pending()}>"

    # -- wiring ---------------------------------------------------------------------------------

    def attach(self, connection: AgentSideConnection | AcpWire) -> AcpWire:
        """Ask through this connection from now on; return its wire (created if needed)."""
        wire = connection if isinstance(connection, AcpWire) else AcpWire(connection)
        wire.on_late_answer = self._late_answer
        self._wire = wire
        self.set_client_capabilities(None)
        return wire

    def set_client_capabilities(self, capabilities: ClientCapabilities | None) -> None:
        """Record what the client advertised at ``initialize``."""
        self._capabilities = capabilities
        self._refused.clear()

    @property
    def advertises_form(self) -> bool:
        """True when the client advertised ``elicitation.form`` (present and not null)."""
        capabilities = self._capabilities
        return (
            capabilities is not None
            and capabilities.elicitation is not None
            and capabilities.elicitation.form is not None
        )

    @property
    def supports_form(self) -> bool:
        """True when questions go as form elicitations: advertised, and not refused."""
        return self.advertises_form and ELICITATION_CREATE not in self._refused

    @property
    def multiple_questions(self) -> bool:
        """An ask of several questions comes whole (one form) while the client takes forms."""
        return self.supports_form

    def pending(self, session_id: str | None = None) -> int:
        """How many questions are waiting for the client (in one session, or in all)."""
        if session_id is not None:
            return len(self._pending.get(session_id, ()))
        return sum(len(asks) for asks in self._pending.values())

    async def cancel_session(self, session_id: str, *, wait: float = _UNWIND_WAIT) -> int:
        """End the session's pending questions with ``ASK_CANCELLED``; return how many.

        Returns once the asks have unwound (at most ``wait`` seconds), so that the caller
        ends the prompt turn after they ended as cancelled questions, not as a cancelled task.
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
                ErrorCode.NO_PROVIDER,
            )
        wire = self._wire
        if wire is None:
            raise UserInteractionError(
                "the ACP provider is not attached to a client connection", ErrorCode.NO_PROVIDER
            )
        asked = current_ask()
        question_id = None if asked is None else asked.question_id
        if question_id is not None:
            decided = self._decided.answer(question_id, request)
            if decided is not None:  # the text part of an approval decided here
                return decided
        if REQUEST_PERMISSION not in self._refused:
            native = approval_permission(request, forms=self.supports_form)
            if native is not None:
                answer = await self._ask_approval(wire, native, scope)
                if (
                    question_id is not None
                    and native.is_part
                    and REQUEST_PERMISSION not in self._refused
                ):
                    self._decided.keep(question_id, native, answer)
                return answer
        return await self._ask_plain(wire, request, scope)

    async def _ask_plain(
        self, wire: AcpWire, request: AskUserQuestionRequest, scope: AskScope
    ) -> AskUserQuestionAnswer:
        """The ask's questions, as the client can take them: whole, or one by one."""
        try:
            return await self._ask(wire, request, scope)
        except _OneByOneError:  # the client refused forms once ask() gave it the whole ask
            return await ask_one_at_a_time(request, lambda part: self._ask(wire, part, scope))

    async def _ask_approval(
        self, wire: AcpWire, native: ApprovalPermission, scope: AskScope
    ) -> AskUserQuestionAnswer:
        """An approval as a permission request, then the text Edit or Respond needs as a
        form; declining that form goes back to the permission request. A client refusing
        permission requests gets the approval's plain questions."""
        while True:
            if scope.cancelled is not None and scope.cancelled.aborted:
                raise _cancelled_by_client(scope.session_id)
            params = native.params(scope.session_id)
            carrier = _Carrier(REQUEST_PERMISSION, params, native.read)
            try:
                answer = await self._carry(wire, carrier, scope, native.request)
            except _RefusedError:
                return await self._ask_plain(wire, native.request, scope)
            follow_up = native.follow_up(answer)
            if follow_up is None:
                return answer
            try:
                text = await self._ask(wire, follow_up, scope, prefill=native.prefill(follow_up))
            except UserInteractionError as declined:
                if declined.code != ErrorCode.ASK_DECLINED:
                    raise
                _log.info("acp.approval_text_declined", session_id=scope.session_id)
                continue
            return native.completed(answer, text)

    async def _ask(
        self,
        wire: AcpWire,
        request: AskUserQuestionRequest,
        scope: AskScope,
        *,
        prefill: dict[str, Any] | None = None,
    ) -> AskUserQuestionAnswer:
        """Carry the question until answered: asked again after an answer that does not do,
        planned again after a refused method. A form starts with ``prefill`` (and, asked
        again, with what fitted)."""
        sent: list[str] = []

        async def attempt(note: str | None, given: dict[str, Any] | None) -> AskUserQuestionAnswer:
            while True:
                if scope.cancelled is not None and scope.cancelled.aborted:
                    raise _cancelled_by_client(scope.session_id)
                carrier = self._plan(request, scope, note, prefill if given is None else given)
                sent.append(carrier.method)
                try:
                    return await self._carry(wire, carrier, scope, request)
                except _RefusedError:
                    continue  # planned again: the next fallback now

        def asked_again(why: str, attempt: int) -> None:
            event = f"acp.{_AGAIN[why]}_asked_again"
            _log.info(event, session_id=scope.session_id, method=sent[-1], attempt=attempt)

        return await ask_until_answered(
            attempt, peer="ACP client", unfit=(NotAnOptionError,), asked_again=asked_again
        )

    async def _carry(
        self, wire: AcpWire, carrier: _Carrier, scope: AskScope, request: AskUserQuestionRequest
    ) -> AskUserQuestionAnswer:
        """Send one attempt and read its result; ``session/cancel`` ends it as cancelled."""
        session_id = scope.session_id
        asked = current_ask()
        pending = _Pending(
            session_id,
            request,
            carrier,
            next(self._attempts),
            None if asked is None else asked.question_id,
        )
        self._pending.setdefault(session_id, set()).add(pending)
        _log.info(
            "acp.question_sent",
            method=carrier.method,
            session_id=session_id,
            tool_call_id=scope.tool_call_id,
        )
        result: list[Any] = []
        try:
            with pending.cancel_scope, pending.delivery:
                if carrier.method == CONVERSATION:
                    assert scope.end_turn is not None
                    result.append(
                        await self._converse(wire, carrier, session_id, scope.end_turn, pending)
                    )
                else:
                    result.append(await wire.request(carrier.method, carrier.params, key=pending))
        except anyio.get_cancelled_exc_class():
            if not pending.delivered:
                raise
            # withdrawn in the event-loop turn its answer was delivered: the answer stands
        except RequestError as error:
            if error.code == _METHOD_NOT_FOUND and carrier.method in _REFUSED:
                self._refuse(carrier.method, error)
                raise _RefusedError() from error
            if isinstance(error.data, dict) and error.data.get(ANSWER_REFUSED):
                what = (
                    f"the ACP client's answer to {carrier.method} could not be read "
                    f"(JSON-RPC error {error.code}, {error}: {error.data.get('details')})"
                )
            else:
                what = (
                    f"the ACP client answered {carrier.method} with JSON-RPC error "
                    f"{error.code}: {error}"
                )
            raise UserInteractionError(
                what,
                ErrorCode.PROVIDER_FAILED,
                details={"rpc_code": error.code, "rpc_message": str(error), "rpc_data": error.data},
                cause=error,
            ) from error
        except ConnectionError as error:  # nothing failed: nobody is left to answer
            raise UserInteractionError(
                f"the ACP client went away while {carrier.method} was waiting for it "
                "(the connection closed): the question is withdrawn",
                ErrorCode.ASK_ABORTED,
                cause=error,
            ) from error
        finally:
            asks = self._pending.get(session_id)
            if asks is not None:
                asks.discard(pending)
                if not asks:
                    del self._pending[session_id]
            pending.done.set()
        if pending.delivered:  # answered on the prompt of an earlier attempt, which won
            if result:
                _log.info(
                    "acp.answer_dropped",
                    session_id=session_id,
                    method=carrier.method,
                    reason="the question was answered first on the prompt a reload had "
                    "withdrawn; this answer came second",
                )
            outcome = pending.delivered[0]
            if isinstance(outcome, UserInteractionError):
                raise outcome
            return outcome
        if not result:  # only cancel_session() cancels this scope
            raise _cancelled_by_client(session_id)
        return carrier.read(result[0])

    def _late_answer(self, key: object, message: dict[str, Any]) -> bool:
        """The client answered a withdrawn request: give the answer, once, to the same ask
        if a reload asked it anew; return whether it was dealt with here.

        Called by the wire as the response arrives, before the event loop runs anything
        else: of two answers (to the withdrawn request, to the new one) the first wins.
        """
        if not isinstance(key, _Pending):
            return False
        wire = self._wire
        fields = {"session_id": key.session_id, "request_id": message.get("id")}
        if key.delivered:  # this attempt was withdrawn because an earlier one was answered
            _log.info(
                "acp.answer_dropped",
                method=key.carrier.method,
                reason="the question was already answered on an earlier prompt",
                **fields,
            )
            return True
        if key.cancel_scope.cancel_called:  # session/cancel: that question ended, not re-asked
            return False
        again = next((p for p in self._pending.get(key.session_id, ()) if p.asks_again(key)), None)
        if again is None:
            return False
        if wire is not None and wire.answered(again):
            _log.info(
                "acp.answer_dropped",
                method=key.carrier.method,
                reason="the question asked again after a reload was answered first",
                **fields,
            )
            return True
        outcome = _read_late(key.carrier, message)
        if outcome is None:
            return False
        again.delivered.append(outcome)
        again.delivery.cancel()
        _log.info(
            "acp.late_answer_delivered",
            method=key.carrier.method,
            reason="answered on the prompt a reload withdrew while the same question was "
            "open again: it is that question's answer, and the new prompt is withdrawn",
            **fields,
        )
        return True

    async def _converse(
        self,
        wire: AcpWire,
        carrier: _Carrier,
        session_id: str,
        end_turn: Callable[[], None],
        pending: _Pending,
    ) -> str:
        """Ask in the conversation; say so in the chat if the question is withdrawn."""

        async def send() -> None:
            await _say(wire, session_id, carrier.text)

        try:
            return await self.conversations.ask(session_id, send, end_turn)
        except anyio.get_cancelled_exc_class():
            if not pending.cancel_scope.cancel_called:  # withdrawn by the agent, not the client
                _log.info("acp.conversation_question_withdrawn", session_id=session_id)
                with (
                    anyio.CancelScope(shield=True),
                    anyio.move_on_after(_SEND_WAIT),
                    suppress(Exception),  # the client is gone: nobody to tell
                ):
                    await _say(wire, session_id, _WITHDRAWN)
            raise

    def _refuse(self, method: str, error: RequestError) -> None:
        """Stop using ``method`` for this client, with one warning."""
        if method not in self._refused:
            self._refused.add(method)
            event, reason = _REFUSED[method]
            _log.warning(event, rpc_code=error.code, reason=reason)

    def _plan(
        self,
        request: AskUserQuestionRequest,
        scope: AskScope,
        note: str | None,
        given: dict[str, Any] | None = None,
    ) -> _Carrier:
        """Form, permission, conversation, or ``NO_PROVIDER``; :class:`_OneByOneError` for
        several questions and no form."""
        session_id, tool_call_id = scope.session_id, scope.tool_call_id
        if self.supports_form:
            form = build_form(request, given)
            params = form_params(form, session_id, tool_call_id, note=note)
            return _Carrier(ELICITATION_CREATE, params, form.read)
        if len(request.questions) > 1:
            raise _OneByOneError()
        permission_refused = REQUEST_PERMISSION in self._refused
        if self.permission_fallback and fits_permission(request) and not permission_refused:
            permission = build_permission_form(request)
            return _Carrier(
                REQUEST_PERMISSION, permission.params(session_id, tool_call_id), permission.read
            )
        in_chat = request.is_free_form or (
            self.permission_fallback and (permission_refused or not fits_permission(request))
        )
        if self.conversation_fallback and in_chat and scope.end_turn is not None:
            text = question_text(request, note)
            return _Carrier(CONVERSATION, {}, partial(read_reply, request), text)
        if ELICITATION_CREATE in self._refused:
            reason = "it answered elicitation/create with 'method not found'"
        elif self._capabilities is not None:
            reason = "it did not advertise clientCapabilities.elicitation.form at initialize"
        else:
            reason = "it has not sent initialize yet"
        raise UserInteractionError(
            f"the ACP client does not support form elicitation ({reason}), and "
            f"{_no_fallback(self, request)}",
            ErrorCode.NO_PROVIDER,
        )


def form_params(
    form: Form, session_id: str, tool_call_id: str | None = None, *, note: str | None = None
) -> dict[str, Any]:
    """The ``elicitation/create`` params of the kit's ``form``, scoped to a session (and
    tool call); ``note`` goes before the question asked again."""
    params: dict[str, Any] = {"sessionId": session_id}
    if tool_call_id is not None:
        params["toolCallId"] = tool_call_id
    params.update(message=form.message(note), mode="form", requestedSchema=form.schema())
    return params


_WITHDRAWN = "\n_(The question above was withdrawn: no answer is needed.)_\n"


async def _say(wire: AcpWire, session_id: str, text: str) -> None:
    await wire.connection.session_update(
        session_id=session_id, update=update_agent_message_text(text)
    )


def _read_late(
    carrier: _Carrier, message: dict[str, Any]
) -> AskUserQuestionAnswer | UserInteractionError | None:
    """A late response's answer, or the human declining; ``None`` when it is not usable."""
    if "result" not in message:
        return None
    try:
        return carrier.read(message["result"])
    except UserInteractionError as error:
        return error if error.code == ErrorCode.ASK_DECLINED else None
    except (EmptyAnswerError, IncompleteAnswerError, NotAnOptionError):
        return None


def _no_fallback(provider: AcpProvider, request: AskUserQuestionRequest) -> str:
    if not request.is_free_form and not provider.permission_fallback:
        return "the session/request_permission fallback is turned off"
    if request.is_free_form:
        refused = ""
    elif not fits_permission(request):
        least = request.questions[0].selection_range[0]
        refused = (
            f"a permission request takes one choice, but the question takes at least {least}, so "
        )
    else:
        refused = "it answered session/request_permission with 'method not found', so "
    if not provider.conversation_fallback:
        return f"{refused}the conversation fallback is turned off"
    return (
        f"{refused}the question can go in the conversation only from an agent that can end "
        "the prompt turn while it waits (hotseam.providers.acp.AcpAgent; ask_scope(..., "
        "end_turn=...))"
    )


def _cancelled_by_client(session_id: str) -> UserInteractionError:
    return UserInteractionError(
        f"the ACP client cancelled the prompt turn of session {session_id!r} (session/cancel)",
        ErrorCode.ASK_CANCELLED,
    )
