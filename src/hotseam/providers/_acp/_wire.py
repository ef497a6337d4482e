"""What hotseam needs from an agent-side ACP connection that the SDK 0.12.1 lacks.

The only module that touches the SDK's private attributes (checked at attach, with a clear
error on another SDK version):

1. ``create_elicitation`` serializes with ``exclude_defaults``, dropping ``"type":
   "object"`` from ``requestedSchema``: :meth:`AcpWire.request` sends params as given.
2. Nothing sends ``$/cancel_request``: the wire sends it when the task awaiting
   :meth:`AcpWire.request` is cancelled (the id read from ``_next_request_id`` just before
   sending). A late answer, which the SDK drops silently, is logged: a mandated
   acknowledgement at debug, a human's answer offered to :attr:`AcpWire.on_late_answer`
   (a reload's re-ask) first, else as a warning.
3. An incoming ``$/cancel_request`` is "method not found" to the SDK's router: the wire
   routes it, cancelling a ``session/prompt`` as ``session/cancel`` would.
4. ``session/close`` is routed only with the SDK's unstable flag: the wire routes it.
5. The stdio transport crashes on a line that is JSON but no object, ends the session on
   ``null``, drops invalid JSON unanswered, buffers a line whole however long, serves
   non-JSON-RPC and crashes on deep nesting: :class:`GuardedLines` reads the lines on the
   kit's bounded reader instead and answers each bad one with the spec's error.
6. The stdio sender's task dies on a closed stdout (an error traceback, later sends wait
   for ever): :func:`guard_sender` replaces it.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from importlib import metadata
from typing import TYPE_CHECKING, Any, Final

import anyio
from acp._transport import NdjsonTransport
from acp.agent.connection import AgentSideConnection
from acp.connection import Connection, StreamDirection, StreamEvent
from acp.exceptions import RequestError
from acp.router import MessageRouter, Route

from ..._core import get_logger
from .._kit import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_LINE_BYTES,
    INVALID_REQUEST,
    PARSE_ERROR,
    Envelope,
    JsonLines,
    Refusal,
    RequestId,
    StreamReaderStream,
    envelope_of,
    is_request_id,
    type_name,
)

if TYPE_CHECKING:
    from acp._transport import Transport

CANCEL_REQUEST = "$/cancel_request"
SESSION_CLOSE = "session/close"
REQUEST_CANCELLED = -32800
"""The JSON-RPC error code of a request answered after ``$/cancel_request``."""
_PROMPT = "session/prompt"
_ACTIONS = frozenset({"accept", "decline", "cancel"})
_WITHDRAWN_KEPT = 256
_CANCEL_SEND_TIMEOUT = 2.0

_log = get_logger("hotseam.providers.acp")


class AcpWire:
    """Raw requests that can be withdrawn, and ``$/cancel_request`` in both directions.

    It observes every message of ``connection`` and routes ``$/cancel_request`` and
    ``session/close``: a prompt cancelled by id goes to ``on_prompt_cancel(session_id)``,
    a close to ``on_session_close(session_id)`` (unknown: -32002), and a late response
    that is no mere acknowledgement to ``on_late_answer(key, response)``, which returns
    whether it took it.
    """

    def __init__(self, connection: AgentSideConnection) -> None:
        rpc, router = _internals(connection)
        self.connection = connection
        self.on_prompt_cancel: Callable[[str], Awaitable[None]] | None = None
        self.on_session_close: Callable[[str], Awaitable[None]] | None = None
        self.on_late_answer: Callable[[object, dict[str, Any]], bool] | None = None
        self._rpc = rpc
        self._sent: dict[RequestId, str] = {}
        self._withdrawn: OrderedDict[RequestId, tuple[str, object]] = OrderedDict()
        # Responses seen for requests still waiting, so one that lands with a cancellation counts.
        self._arrived: dict[RequestId, dict[str, Any]] = {}
        self._waiting: dict[int, RequestId] = {}  # id(key) -> the request made with that key
        self._incoming: dict[RequestId, tuple[str, str | None]] = {}
        router.add_route(
            Route(method=CANCEL_REQUEST, func=self._on_cancel_request, kind="notification")
        )
        router.add_route(Route(method=SESSION_CLOSE, func=self._on_session_close, kind="request"))
        rpc.add_observer(self._observe)

    async def request(self, method: str, params: Mapping[str, Any], *, key: object = None) -> Any:
        """Send a request with these exact params and return the raw result.

        A cancelled wait sends ``$/cancel_request`` (shielded, bounded), unless the answer
        arrived in the same event-loop turn: that answer stands, and is returned.

        Raises:
            acp.RequestError: the client answered with a JSON-RPC error.
            ConnectionError: the connection is closed (or closed while waiting).
        """
        request_id = self._rpc._next_request_id
        if key is not None:
            self._waiting[id(key)] = request_id
        try:
            return await self._rpc.send_request(method, dict(params))
        except anyio.get_cancelled_exc_class():
            arrived = self._arrived.pop(request_id, None)
            if arrived is not None and "result" in arrived:
                _log.info("acp.answer_kept", request_id=request_id, method=method)
                return arrived["result"]
            await self._withdraw(request_id, method, key)
            raise
        finally:
            self._arrived.pop(request_id, None)
            if key is not None:
                self._waiting.pop(id(key), None)

    def answered(self, key: object) -> bool:
        """Whether the response to ``key``'s request was seen (maybe not yet by its task)."""
        request_id = self._waiting.get(id(key))
        return request_id is not None and request_id in self._arrived

    async def _withdraw(self, request_id: RequestId, method: str, key: object) -> None:
        self._sent.pop(request_id, None)
        self._withdrawn[request_id] = (method, key)
        while len(self._withdrawn) > _WITHDRAWN_KEPT:
            self._withdrawn.popitem(last=False)
        _log.info("acp.request_withdrawn", request_id=request_id, method=method)
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_SEND_TIMEOUT):
            try:
                await self._rpc.send_notification(CANCEL_REQUEST, {"requestId": request_id})
            except Exception as error:  # the client is gone: there is nothing left to cancel
                _log.info(
                    "acp.cancel_request_not_sent",
                    request_id=request_id,
                    method=method,
                    error=f"{type(error).__name__}: {error}",
                )

    def _observe(self, event: StreamEvent) -> None:
        message = event.message
        method = message.get("method")
        request_id = message.get("id")
        if not is_request_id(request_id):
            return  # a notification (or an id no request of ours could have)
        if event.direction is StreamDirection.OUTGOING:
            if method is not None:
                self._sent[request_id] = str(method)
            else:
                self._incoming.pop(request_id, None)  # our answer to a client request
            return
        if method is not None:
            params = message.get("params")
            session = params.get("sessionId") if isinstance(params, Mapping) else None
            self._incoming[request_id] = (
                str(method),
                session if isinstance(session, str) else None,
            )
            return
        if request_id in self._withdrawn:
            # An acknowledgement (-32800, the method's "cancelled"), or the human's answer
            # too late for its request: it counts if the provider has the ask open again.
            withdrawn, key = self._withdrawn.pop(request_id)
            if _is_cancel_ack(message):
                _log.debug(
                    "acp.cancel_acknowledged",
                    request_id=request_id,
                    method=withdrawn,
                    response=_summary(message),
                )
            elif not (
                key is not None
                and self.on_late_answer is not None
                and self.on_late_answer(key, message)
            ):
                _log.warning(
                    "acp.late_response_ignored",
                    request_id=request_id,
                    method=withdrawn,
                    response=_summary(message),
                    reason="the request was cancelled ($/cancel_request sent) before this answer",
                )
        elif self._sent.pop(request_id, None) is not None:
            self._arrived[request_id] = message  # kept until request() returns
        else:
            _log.warning(
                "acp.unknown_response_ignored",
                request_id=request_id,
                response=_summary(message),
                reason="no request with this id is waiting for an answer",
            )

    async def _on_cancel_request(self, params: Any) -> None:
        request_id = params.get("requestId") if isinstance(params, Mapping) else None
        if not is_request_id(request_id):
            _log.warning(
                "acp.cancel_request_invalid",
                params=repr(params)[:200],
                reason="params.requestId must be a number or a string",
            )
            return
        entry = self._incoming.get(request_id)
        if entry is None:
            _log.info(
                "acp.cancel_request_ignored",
                request_id=request_id,
                reason="no request with this id is in progress (already answered, or unknown)",
            )
            return
        method, session_id = entry
        if method != _PROMPT or session_id is None or self.on_prompt_cancel is None:
            _log.info(
                "acp.cancel_request_ignored",
                request_id=request_id,
                method=method,
                reason=f"{method} is short and is answered normally",
            )
            return
        _log.info(
            "acp.cancel_request_received",
            request_id=request_id,
            method=method,
            session_id=session_id,
        )
        await self.on_prompt_cancel(session_id)

    async def _on_session_close(self, params: Any) -> dict[str, Any]:
        session_id = params.get("sessionId") if isinstance(params, Mapping) else None
        if not isinstance(session_id, str):
            raise RequestError.invalid_params(
                {"details": "session/close needs params.sessionId, a string"}
            )
        if self.on_session_close is None:
            raise RequestError.method_not_found(SESSION_CLOSE)
        await self.on_session_close(session_id)
        return {}


async def close_connection(connection: AgentSideConnection) -> None:
    """Close the SDK's connection; a client that hung up first is the session's end.

    A client exits once its last request is answered; a send at that moment breaks the
    pipe and ``close()`` re-raises it, which made ``hotseam acp`` exit 1 at a normal end.
    What was unsent has no reader: it is logged, not raised."""
    try:
        await connection.close()
    except (ConnectionResetError, BrokenPipeError) as error:
        _log.debug("acp.client_hung_up", error=f"{type(error).__name__}: {error}")


# -- the lines from the client --

ANSWER_REFUSED: Final = "hotseam.answerRefused"
"""Set in the ``data`` of the error that stands for a client's response refused here (the
request it answered fails with it; never sent on the wire)."""


class GuardedLines:
    """The SDK's stdio transport, answering bad lines instead of dying (item 5 above).

    Not JSON: -32700; no JSON-RPC 2.0 object, too deep or too long: -32600, with the
    message's id when it can be told. A bad *response* fails the agent's request it answers
    (as the TypeScript SDK does). Logged as ``acp.invalid_message``, never with the line.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        inner: Transport,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        self._lines = JsonLines(StreamReaderStream(reader), max_line_bytes=max_line_bytes)
        self._inner = inner
        self.max_line_bytes = max_line_bytes

    async def send(self, message: dict[str, Any]) -> None:
        await self._inner.send(message)

    async def close(self) -> None:
        await self._inner.close()

    async def receive(self) -> dict[str, Any] | None:
        """The next message that is a JSON object; ``None`` at the end of the stream."""
        while True:
            line = await self._lines.receive()
            if line is None:
                return None
            if isinstance(line, Refusal):
                message = await self._refuse(
                    line.envelope, line.code, self._detail(line), size=line.size
                )
            else:
                message = await self._check(line.value, line.size)
            if message is not None:
                return message

    def _detail(self, refused: Refusal) -> str:
        """What is wrong with a line the reader refused, in ACP's words."""
        if refused.kind == "too_long":
            return (
                f"the message line is {refused.size} bytes long, more than the limit of "
                f"{self.max_line_bytes} bytes; it was discarded"
            )
        if refused.kind == "not_json":
            return _NOT_JSON
        if refused.code == PARSE_ERROR:
            return "the message is nested too deeply to parse"
        return f"the message is nested more than {DEFAULT_MAX_DEPTH} levels deep"

    async def _check(self, message: object, size: int) -> dict[str, Any] | None:
        """The message decoded, or what stands for it once refused (see :meth:`_refuse`)."""
        if not isinstance(message, dict):
            if isinstance(message, list):
                why = "a batch (a JSON array); batches are not supported, send one object per line"
            else:
                why = f"a JSON {type_name(message)}; a message must be a JSON object"
            why = f"the message is {why}"
            return await self._refuse(Envelope(), INVALID_REQUEST, why, size=size)
        request_id = message.get("id")
        if request_id is not None and not is_request_id(request_id):
            return await self._refuse(
                Envelope(),
                INVALID_REQUEST,
                f"id must be a number, a string or null, got {type_name(request_id)}",
            )
        envelope = envelope_of(message)
        version = message.get("jsonrpc", _MISSING)
        if version != "2.0":
            why = f'jsonrpc must be "2.0" (JSON-RPC 2.0), {_described(version)}'
            return await self._refuse(envelope, INVALID_REQUEST, why)
        method = message.get("method")
        if method is None and "id" not in message:
            return await self._refuse(
                envelope, INVALID_REQUEST, "the message has neither a method nor an id"
            )
        if method is not None and not isinstance(method, str):
            if "id" not in message:
                why = f"a notification's method must be a string, got {type_name(method)}"
            else:
                why = f"method must be a string, got {type_name(method)}"
            return await self._refuse(envelope, INVALID_REQUEST, why)
        if method is None and "error" in message and not isinstance(message["error"], dict):
            _log.warning(
                "acp.invalid_message",
                request_id=request_id,
                reason=f"a response's error must be an object, got {type_name(message['error'])}",
            )
            message = {
                **message,
                "error": {"code": -32603, "message": "malformed error response from the client"},
            }
        return message

    async def _refuse(
        self,
        envelope: Envelope,
        code: int,
        details: str,
        *,
        size: int | None = None,
    ) -> dict[str, Any] | None:
        """Refuse a message, logged without its content: a request (or what cannot be
        told) is answered with an error; for a response, the error returned stands for it."""
        fields: dict[str, Any] = {} if size is None else {"size": size}
        if envelope.request_id is not None:
            fields["request_id"] = envelope.request_id
        error = {"code": code, "message": _MESSAGES[code], "data": {"details": details}}
        if envelope.is_response:
            _log.warning(
                "acp.invalid_message",
                code=code,
                reason=details,
                outcome="the agent's request it answers fails with this error",
                **fields,
            )
            refused = {**error, "data": {"details": details, ANSWER_REFUSED: True}}
            return {"jsonrpc": "2.0", "id": envelope.request_id, "error": refused}
        _log.warning("acp.invalid_message", code=code, reason=details, **fields)
        response = {"jsonrpc": "2.0", "id": envelope.request_id, "error": error}
        try:
            await self._inner.send(response)
        except Exception as failure:  # the client stopped reading; its next read ends us
            _log.info("acp.error_not_sent", code=code, error=f"{type(failure).__name__}: {failure}")
        return None


_MESSAGES: Final = {PARSE_ERROR: "Parse error", INVALID_REQUEST: "Invalid Request"}
_NOT_JSON: Final = (
    "the message line is not JSON (JSON-RPC 2.0 over stdio: one JSON object per line, UTF-8)"
)
_MISSING: Final = object()


def _described(version: object) -> str:
    """What the ``jsonrpc`` member is, quoting it only when it is short and printable."""
    if version is _MISSING:
        return "and it is missing"
    if isinstance(version, str) and len(version) <= 16 and version.isprintable():
        return f"got {json.dumps(version)}"
    return f"got a {type_name(version)}"


def guard_lines(
    connection: AgentSideConnection, reader: asyncio.StreamReader, *, max_line_bytes: int
) -> GuardedLines:
    """Put :class:`GuardedLines` in front of ``connection``'s stdio transport (before it
    listens: the guard reads ``reader`` from then on)."""
    rpc, _ = _internals(connection)
    inner = getattr(rpc, "_transport", None)
    if isinstance(inner, NdjsonTransport):
        guarded = GuardedLines(reader, inner, max_line_bytes=max_line_bytes)
        rpc._transport = guarded
        return guarded
    raise _unsupported("Connection._transport (an NdjsonTransport)")


def guard_sender(connection: AgentSideConnection) -> None:
    """Replace ``connection``'s stdio sender with a :class:`_HostSender` (before it
    listens; either side of :func:`guard_lines`)."""
    rpc, _ = _internals(connection)
    transport = getattr(rpc, "_transport", None)
    inner = getattr(transport, "_inner", transport)  # under GuardedLines, or bare
    sender = getattr(inner, "_sender", None)
    writer = getattr(sender, "_writer", None)
    task = getattr(sender, "_task", None)
    if (
        isinstance(inner, NdjsonTransport)
        and isinstance(writer, asyncio.StreamWriter)
        and isinstance(task, asyncio.Task)
    ):
        task.cancel()  # waiting for its first message: nothing was sent through it
        inner._sender = _HostSender(writer)  # type: ignore[assignment]
        return
    raise _unsupported("NdjsonTransport._sender (a MessageSender with _writer and _task)")


class _HostSender:
    """Writes each message whole, in the sending task, under a lock (the SDK's sender's
    order and framing without its task). A closed stdout (a host gone, not broken) fails
    that send and every later one, logged once; a reply is dropped instead, since the
    SDK's task sending it would log an error. ``write`` takes the whole line before
    anything can be cancelled, so a cancelled send never tears a line.
    """

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._lock = asyncio.Lock()
        self._gone: ConnectionError | None = None

    async def send(self, payload: dict[str, Any]) -> None:
        data = (json.dumps(payload, separators=(",", ":")) + "\n").encode("utf-8")
        async with self._lock:
            try:
                if self._gone is not None:
                    raise ConnectionResetError(str(self._gone)) from self._gone
                try:
                    self._writer.write(data)
                    await self._writer.drain()
                except ConnectionError as error:
                    self._gone = error
                    _log.info(
                        "acp.host_gone",
                        error=f"{type(error).__name__}: {error}",
                        summary="the ACP client closed its end of stdout: what is left to "
                        "send has no reader, and the session ends",
                    )
                    raise
            except ConnectionError as error:
                if "method" in payload:
                    raise  # a request or a notification: its sender says it was not sent
                _log.debug(
                    "acp.reply_not_sent",
                    request_id=payload.get("id"),
                    error=f"{type(error).__name__}: {error}",
                )

    async def close(self) -> None:
        """Nothing to stop: the writer is the caller's (``stdio_pipes`` closes it)."""


def _internals(connection: AgentSideConnection) -> tuple[Connection, MessageRouter]:
    """The SDK objects the workarounds hook into, or a clear error on another SDK version."""
    rpc = getattr(connection, "_conn", None)
    router = getattr(rpc, "_handler", None)
    if (
        isinstance(rpc, Connection)
        and isinstance(router, MessageRouter)
        and isinstance(getattr(rpc, "_next_request_id", None), int)
    ):
        return rpc, router
    raise RuntimeError(
        "hotseam's ACP provider wraps internals of agent-client-protocol 0.12 "
        "(AgentSideConnection._conn, Connection._handler, Connection._next_request_id) "
        f"that version {_sdk_version()} does not have; install "
        "'agent-client-protocol>=0.12.1,<0.13'"
    )


def _is_cancel_ack(message: Mapping[str, Any]) -> bool:
    """-32800, ``{"outcome": {"outcome": "cancelled"}}`` or ``{"action": "cancel"}``."""
    error = message.get("error")
    if isinstance(error, Mapping):
        return error.get("code") == REQUEST_CANCELLED
    result = message.get("result")
    if not isinstance(result, Mapping):
        return False
    outcome = result.get("outcome")
    return result.get("action") == "cancel" or (
        isinstance(outcome, Mapping) and outcome.get("outcome") == "cancelled"
    )


def _summary(message: Mapping[str, Any]) -> dict[str, Any]:
    """What a log line may say about an answer: its action or error, never its content."""
    if "error" in message:
        error = message["error"]
        if isinstance(error, Mapping):
            return {"error": {"code": error.get("code"), "message": error.get("message")}}
        return {"error": repr(error)[:100]}
    result = message.get("result")
    if isinstance(result, Mapping):
        if "action" in result:
            action = result["action"]
            if action in _ACTIONS:
                return {"action": action}
            # any other value could hold what the human typed
            return {"action": f"<unknown {type(action).__name__}>"}
        return {"result_keys": sorted(str(key) for key in result)}
    return {"result": type(result).__name__}


def _unsupported(what: str) -> RuntimeError:
    return RuntimeError(
        f"hotseam's ACP provider wraps {what} of agent-client-protocol 0.12, which version "
        f"{_sdk_version()} does not have; install 'agent-client-protocol>=0.12.1,<0.13'"
    )


def _sdk_version() -> str:
    try:
        return metadata.version("agent-client-protocol")
    except metadata.PackageNotFoundError:  # pragma: no cover - the provider imports acp
        return "unknown"
