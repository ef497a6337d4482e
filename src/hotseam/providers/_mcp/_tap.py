"""Seeing the answer to a form the moment it is read, before the SDK hands it on.

An answer that arrives in the event-loop turn its question is withdrawn (a reload, the
caller's signal) is the answer, but the SDK drops it: its waiter is cancelled with the
question. So each connection's streams are tapped (stdio's by
:meth:`~._server.McpServer.serve`, each Streamable HTTP session's by :mod:`._http`): a
form request carries a marker in its ``_meta`` (``dev.hotseam/ask``), the write side
learns its request id, and the read side files the response before the SDK's dispatcher
sees it, for the withdrawn provider to return.

A host may also ignore ``notifications/cancelled`` and let the human answer later: if the
same question of the same call is open again by then (a reload's re-ask), that answer is
its answer and the new form is withdrawn (as in ACP); otherwise it is dropped, logged.
Handlers find their connection's tap in :data:`current_tap`.
"""

from __future__ import annotations

import secrets
from contextvars import Context, ContextVar, copy_context
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import anyio
import mcp_types as types
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage

from ..._core import get_logger

_log = get_logger("hotseam.providers.mcp")
_KEEP_WITHDRAWN = 64
"""Withdrawn requests whose late answer is still looked for, per connection."""

MARK = "dev.hotseam/ask"
"""The ``_meta`` key that names a form request of hotseam's."""


current_tap: ContextVar[ResponseTap | None] = ContextVar("hotseam_mcp_tap", default=None)
"""The tap of the connection the current handler serves (set by its tapped read stream)."""


@dataclass(eq=False, slots=True)
class Filed:
    """One form request and its response: ``result`` once it was read.

    ``late`` is cancelled when an earlier, withdrawn request for the same question is
    answered while this one waits: ``result`` is then that answer.
    """

    token: str
    question: object
    call: object  # the request id of the tools/call the question belongs to
    result: dict[str, Any] | None = None
    withdrawn: bool = False
    late: anyio.CancelScope = field(default_factory=anyio.CancelScope)


class ResponseTap:
    """The form requests of one connection and their responses, by marker."""

    def __init__(self) -> None:
        self._by_token: dict[str, Filed] = {}
        self._by_id: dict[str, Filed] = {}

    @property
    def pending(self) -> bool:
        """Whether a form of this connection waits for its answer (keeps an HTTP session)."""
        return bool(self._by_token)

    def open(self, question: object, call: object) -> Filed:
        """A new marker, for one request asking ``question`` for the tool call ``call``."""
        filed = Filed(secrets.token_hex(8), question, call)
        self._by_token[filed.token] = filed
        return filed

    def withdraw(self, filed: Filed) -> None:
        """The request was withdrawn unanswered: a late answer to it may still come."""
        filed.withdrawn = True
        self._by_token.pop(filed.token, None)
        withdrawn = [key for key, value in self._by_id.items() if value.withdrawn]
        for key in withdrawn[: max(0, len(withdrawn) - _KEEP_WITHDRAWN)]:
            del self._by_id[key]

    def close(self, filed: Filed) -> None:
        """Forget the request (answered, failed, or its connection gone)."""
        self._by_token.pop(filed.token, None)
        for key in [key for key, value in self._by_id.items() if value is filed]:
            del self._by_id[key]

    def wrap(
        self,
        read_stream: ReadStream[SessionMessage | Exception],
        write_stream: WriteStream[SessionMessage],
    ) -> tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]:
        """The same streams, seen by this tap."""
        return _TappedRead(read_stream, self), _TappedWrite(write_stream, self)

    def _sent(self, item: SessionMessage) -> None:
        message = item.message
        if isinstance(message, types.JSONRPCRequest) and isinstance(message.params, dict):
            meta = message.params.get("_meta")
            token = meta.get(MARK) if isinstance(meta, dict) else None
            filed = self._by_token.get(token) if isinstance(token, str) else None
            if filed is not None:
                self._by_id[str(message.id)] = filed

    def _read(self, item: SessionMessage | Exception) -> None:
        if not (
            isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCResponse)
        ):
            return
        filed = self._by_id.get(str(item.message.id))
        if filed is None:
            return
        result = dict(item.message.result)
        if not filed.withdrawn:
            filed.result = result
            return
        self.close(filed)  # a late answer is given once
        again = next(
            (
                other
                for other in self._by_token.values()
                if other.result is None
                and other.call == filed.call
                and (other.question is filed.question or other.question == filed.question)
            ),
            None,
        )
        if again is None:
            _log.info(
                "mcp.answer_dropped",
                request_id=item.message.id,
                reason="an answer to a withdrawn form, whose question is not open again",
            )
            return
        again.result = result
        again.late.cancel()
        _log.info(
            "mcp.late_answer_delivered",
            request_id=item.message.id,
            reason="answered on the form a reload withdrew while the same question was open "
            "again: it is that question's answer, and the new form is withdrawn",
        )


class _Tapped:
    """A stream seen by ``tap``: what the read and write sides share."""

    def __init__(self, inner: Any, tap: ResponseTap) -> None:
        self._inner = inner
        self.tap = tap

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class _TappedRead(_Tapped):
    """A read stream that files responses as they are read.

    Its ``last_context`` is where the SDK's dispatcher runs the handler of the message just
    read: a copy of the sender's context when the inner stream carries one (Streamable
    HTTP: the POST's), else of the reading task's, with :data:`current_tap` set.
    """

    def __init__(self, inner: ReadStream[SessionMessage | Exception], tap: ResponseTap) -> None:
        super().__init__(inner, tap)
        self._inner: ReadStream[SessionMessage | Exception] = inner
        self.last_context: Context | None = None

    async def receive(self) -> SessionMessage | Exception:
        return self._seen(await self._inner.receive())

    def _seen(self, item: SessionMessage | Exception) -> SessionMessage | Exception:
        sender: Context | None = getattr(self._inner, "last_context", None)
        context = sender.copy() if sender is not None else copy_context()
        context.run(current_tap.set, self.tap)
        self.last_context = context
        self.tap._read(item)
        return item

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        return self._seen(await self._inner.__anext__())


class _TappedWrite(_Tapped):
    async def send(self, item: SessionMessage, /) -> None:
        self.tap._sent(item)
        await self._inner.send(item)
