"""McpProvider: the user-interaction provider that asks through the MCP client of the call.

The question reaches the human in the host's own UI, as a form elicitation of the client
that made the call: on 2025-06-18 and 2025-11-25 an ``elicitation/create`` tied to the
call's request id (withdrawn with ``notifications/cancelled``), on 2026-07-28 in the
call's input-required result, answered by the client's retry (:mod:`._input`). Several
questions are one form, asked again (the kit's loop) after an answer that does not do or
is no ``ElicitResult``. A client without elicitation, or that answers -32601, gets the
fallback (the web inbox), else a ``NO_PROVIDER`` error telling the model to ask in the
conversation — never a question nobody sees. The server sets :func:`in_call` around each
tool, as the ACP agent sets its ask scope, since the seam's request knows nothing of MCP.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import RequestId
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from ..._core import get_logger
from ...interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    ErrorCode,
    UserInteractionError,
    UserInteractionProvider,
    takes_several,
)
from .._kit import ask_until_answered, build_form, mcp_variant
from ._tap import MARK

if TYPE_CHECKING:
    from mcp.server.session import ServerSession

    from ._input import Continuation
    from ._tap import ResponseTap

_log = get_logger("hotseam.providers.mcp")
_METHOD_NOT_FOUND = -32601


@dataclass(frozen=True, slots=True)
class McpCall:
    """One ``tools/call``: the session that answers it, its request id, the revision
    spoken, and (on 2026-07-28) the continuation that carries its questions; ``tap`` files
    the responses to its forms as they are read (stdio and in-process streams)."""

    session: ServerSession
    request_id: RequestId | None
    protocol_version: str
    tool: str
    continuation: Continuation | None = None
    tap: ResponseTap | None = None

    @property
    def modern(self) -> bool:
        """Questions travel in results (2026-07-28), not as requests."""
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
        """The client's name, for messages."""
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


class _RefusedError(Exception):
    """The client answered ``elicitation/create`` with -32601."""


class _MalformedAnswerError(Exception):
    """The answer is no ``ElicitResult`` (``content`` not an object...): an ``Unfit``."""

    note = "The previous answer could not be read. Please answer again."

    def describe(self, times: int) -> str:
        return f"the MCP client's answer was malformed {times} times: {self}"


class McpProvider:
    """Asks the human through the MCP client whose tool call asks.

    Args:
        fallback: Serves the questions of a client without form elicitation (the web
            inbox of ``hotseam mcp --web``); without one, such a question fails with
            ``NO_PROVIDER`` and a message telling the model to ask in the conversation.
        name: Shown in logs.
    """

    def __init__(
        self, *, fallback: UserInteractionProvider | None = None, name: str = "mcp"
    ) -> None:
        self.name = name
        self.fallback = fallback
        self._refused: set[int] = set()

    def __repr__(self) -> str:
        return f"<McpProvider {self.name!r} fallback={self.fallback!r}>"

    @property
    def multiple_questions(self) -> bool:
        """An ask of several comes whole while the client takes forms; else as the fallback."""
        call = current_call()
        if call is not None and not self._takes_forms(call) and self.fallback is not None:
            return takes_several(self.fallback)
        return True

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        """Put the question to the calling client and wait for the human's answer."""
        call = current_call()
        if call is None:
            raise UserInteractionError(
                "the MCP provider can only ask from a tool that an MCP client called "
                "(hotseam mcp runs each tool call with its client at hand)",
                ErrorCode.NO_PROVIDER,
            )
        if self._takes_forms(call):
            try:
                return await self._ask_by_form(call, request)
            except _RefusedError:
                pass
        if self.fallback is not None:
            _log.info("mcp.question_to_fallback", tool=call.tool, client=call.client_name)
            return await self.fallback.ask(request)
        raise UserInteractionError(_ask_in_conversation(call, request), ErrorCode.NO_PROVIDER)

    def _takes_forms(self, call: McpCall) -> bool:
        return call.advertises_form and id(call.session.client_params) not in self._refused

    async def _ask_by_form(
        self, call: McpCall, request: AskUserQuestionRequest
    ) -> AskUserQuestionAnswer:
        variant = mcp_variant(call.protocol_version)  # the kit's form, as this revision takes it

        async def attempt(note: str | None, given: dict[str, Any] | None) -> AskUserQuestionAnswer:
            form = build_form(request, given)
            _log.info("mcp.question_sent", tool=call.tool, modern=call.modern)
            result = await self._elicit(call, request, form.message(note), form.schema(variant))
            return form.read(result, variant)

        def asked_again(why: str, attempt: int) -> None:
            _log.info("mcp.question_asked_again", tool=call.tool, attempt=attempt)

        return await ask_until_answered(
            attempt, peer="MCP client", unfit=(_MalformedAnswerError,), asked_again=asked_again
        )

    async def _elicit(
        self,
        call: McpCall,
        request: AskUserQuestionRequest,
        message: str,
        schema: dict[str, Any],
    ) -> dict[str, Any]:
        """One form, on the call's revision; its ``ElicitResult`` as a dict."""
        if call.modern:
            assert call.continuation is not None
            params = {"mode": "form", "message": message, "requested_schema": schema}
            return await call.continuation.ask(request, params)
        tap = call.tap
        filed = tap.open(request, call.request_id) if tap is not None else None
        wire: dict[str, Any] = {"mode": "form", "message": message, "requestedSchema": schema}
        if filed is not None:
            wire["_meta"] = {MARK: filed.token}
        form_params = types.ElicitRequestFormParams.model_validate(wire)
        late = filed.late if filed is not None else anyio.CancelScope()
        try:
            with late:
                result = await call.session.send_request(
                    types.ElicitRequest(params=form_params),
                    types.ElicitResult,
                    metadata=ServerMessageMetadata(related_request_id=call.request_id),
                )
            if filed is not None and late.cancelled_caught and filed.result is not None:
                return filed.result  # a late answer to an earlier form came first
            return result.model_dump(mode="json", by_alias=True, exclude_none=True)
        except anyio.get_cancelled_exc_class():
            if filed is None or filed.result is None:
                if filed is not None:
                    assert tap is not None
                    tap.withdraw(filed)  # its answer may still come, for a re-ask
                raise
            # Withdrawn in the event-loop turn its answer was read: the answer stands.
            _log.info(
                "mcp.answer_kept",
                tool=call.tool,
                reason="the answer arrived in the turn its question was withdrawn",
            )
            return filed.result
        except ValidationError as invalid:
            malformed = _described(invalid)
            _log.warning("mcp.answer_malformed", tool=call.tool, reason=malformed)
            raise _MalformedAnswerError(malformed) from None
        except MCPError as error:
            if error.code == types.CONNECTION_CLOSED:  # the host's input ended (stdio)
                raise UserInteractionError(
                    "the MCP connection closed while a question was waiting for the client",
                    ErrorCode.PROVIDER_FAILED,
                    cause=error,
                ) from error
            if error.code == _METHOD_NOT_FOUND:
                self._refused.add(id(call.session.client_params))
                _log.warning(
                    "mcp.elicitation_refused",
                    client=call.client_name,
                    reason="the client advertised elicitation but answered elicitation/create "
                    "with 'method not found'; its questions use the fallback from now on",
                )
                raise _RefusedError() from error
            raise UserInteractionError(
                f"the MCP client answered elicitation/create with error {error.code}: "
                f"{error.error.message}",
                ErrorCode.PROVIDER_FAILED,
                details={"rpc_code": error.code, "rpc_message": error.error.message},
                cause=error,
            ) from error
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as error:
            raise UserInteractionError(
                "the MCP connection closed while a question was waiting for the client",
                ErrorCode.PROVIDER_FAILED,
                cause=error,
            ) from error
        finally:
            if filed is not None and not filed.withdrawn:
                assert tap is not None
                tap.close(filed)


def _described(invalid: ValidationError) -> str:
    """Where an answer does not fit ``ElicitResult``, never quoting what was typed."""
    problems = [
        f"{'.'.join(str(part) for part in error['loc']) or 'result'}: {error['msg']}"
        for error in invalid.errors(include_url=False, include_input=False)[:3]
    ]
    return "; ".join(problems)


def load_forms() -> None:
    """Import the kit's form mapping (in a worker thread), so the first question waits less."""
    from .._kit import ask_until_answered, build_form  # noqa: F401


def _ask_in_conversation(call: McpCall, request: AskUserQuestionRequest) -> str:
    """The error a model reads when the client cannot show the question: ask in chat. Not
    "call the tool again with the answer": a tool takes no answer in its input."""
    lines = [
        f"{call.client_name} cannot show this tool's {_questions(request)} to the user (it "
        + (
            "refused elicitation/create"
            if call.advertises_form
            else "advertised no form elicitation capability"
        )
        + "). Ask the user in the conversation instead and carry on with their answer; do "
        "not call this tool again for it (it would fail the same way):"
    ]
    for question in request.questions:
        header = f"[{question.header}] " if question.header else ""
        lines.append(f"{header}{' '.join(question.question.split())}")
        if question.choices:
            labels = ", ".join(option.label for option in question.choices)
            several = " (several may be chosen)" if question.is_multi_select else ""
            lines.append(f"   options{several}: {labels}")
    return "\n".join(lines)


def _questions(request: AskUserQuestionRequest) -> str:

    return "question" if len(request.questions) == 1 else "questions"
