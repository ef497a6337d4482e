"""Tool calls on the 2026-07-28 revision: a question travels in the call's result.

That revision has no server-to-client requests: a tool that asks runs in a task of its
own (a :class:`Continuation`), and its ``tools/call`` returns ``{"resultType":
"input_required", "inputRequests": {KEY: elicitation/create}, "requestState": TOKEN}``;
the client's retry with ``inputResponses`` and the echoed token answers it, and returns
what the tool does next.

The token is a random key into this process's table (nothing of the question travels in
it, so none can be forged), and a question keeps its key for the call's life: that holds
exactly-once across a reload, since a question withdrawn and asked again is shown under
the same key, and an answer to it (before or after the re-ask) is its answer. A
continuation whose client never comes back ends after ``ttl`` seconds (``ASK_CANCELLED``).
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp.shared.exceptions import MCPError

from ..._core import get_logger
from ...interaction import AskUserQuestionRequest, ErrorCode, UserInteractionError

DEFAULT_INPUT_TTL = 600.0
"""Seconds a question waits for the client's retry, and a result for its collection."""
_log = get_logger("hotseam.providers.mcp")


@dataclass(eq=False, slots=True)
class _Shown:
    """A question shown to the client under ``key``; ``open`` while a tool waits on it."""

    key: str
    request: AskUserQuestionRequest
    params: dict[str, Any]
    open: bool = False
    answer: dict[str, Any] | None = None
    answered: anyio.Event = field(default_factory=anyio.Event)


class Continuation:
    """One tool call of the 2026-07-28 revision, from its first ``tools/call`` to its
    result: the questions it shows and the answers the retries bring."""

    def __init__(self, token: str, tool: str, ttl: float) -> None:
        self.token = token
        self.tool = tool
        self.ttl = ttl
        self.result: types.CallToolResult | None = None
        self.error: MCPError | None = None  # an unknown tool: raised by the waiting round
        self._shown: dict[str, _Shown] = {}
        self._keys = itertools.count(1)
        self._changed = anyio.Event()
        self._cancel = anyio.CancelScope()
        self.collected = anyio.Event()

    def __repr__(self) -> str:
        open_keys = [key for key, shown in self._shown.items() if shown.open]
        return f"<Continuation {self.tool!r} open={open_keys} done={self.result is not None}>"

    # -- the tool's side -----------------------------------------------------------------------

    async def ask(self, request: AskUserQuestionRequest, params: dict[str, Any]) -> dict[str, Any]:
        """Show the question (``elicitation/create`` params) and wait for its ``ElicitResult``
        (asked again after a reload: under its key, or the answer it got meanwhile)."""
        shown = self._same_question(request)
        if shown is not None and shown.answer is not None:
            del self._shown[shown.key]
            _log.info(
                "mcp.answer_kept",
                tool=self.tool,
                key=shown.key,
                reason="answered with the retry while the question was withdrawn: it is this "
                "question's",
            )
            return shown.answer
        if shown is None:
            shown = _Shown(f"q{next(self._keys)}", request, params)
            self._shown[shown.key] = shown
        shown.params = params
        shown.open = True
        self._notify()
        try:
            with anyio.move_on_after(self.ttl):
                await shown.answered.wait()
        except anyio.get_cancelled_exc_class():
            if shown.answer is None:
                raise
            # withdrawn in the event-loop turn its answer came: the answer stands
        finally:
            shown.open = False
        del self._shown[shown.key]
        if shown.answer is None:  # the client did not come back in time
            raise UserInteractionError(
                f"the MCP client did not come back with an answer within {self.ttl:g} s "
                "(the tool call was left waiting); the question is taken as dismissed",
                ErrorCode.ASK_CANCELLED,
            )
        return shown.answer

    def finish(self, result: types.CallToolResult) -> None:
        """The tool ended: its result waits for the next retry."""
        self.result = result
        self._notify()

    # -- the client's side ---------------------------------------------------------------------

    def deliver(self, responses: dict[str, Any]) -> None:
        """Give each response of a retry to the question shown under its key (one withdrawn
        keeps it for its re-ask; an unknown key is logged)."""
        for key, response in responses.items():
            shown = self._shown.get(key)
            if shown is None or shown.answer is not None:
                _log.info(
                    "mcp.answer_dropped",
                    tool=self.tool,
                    key=key,
                    reason="no question of this call is shown under that key (any more)",
                )
                continue
            shown.answer = response if isinstance(response, dict) else {"action": None}
            shown.answered.set()

    async def next_step(self) -> types.CallToolResult | types.InputRequiredResult:
        """Wait for the tool's result or its open questions (what this round returns)."""
        while True:
            if self.error is not None:
                self.collected.set()
                raise self.error
            if self.result is not None:
                self.collected.set()
                return self.result
            requests: dict[str, types.InputRequest] = {
                key: types.ElicitRequest(params=types.ElicitRequestFormParams(**shown.params))
                for key, shown in self._shown.items()
                if shown.open and shown.answer is None
            }
            if requests:
                return types.InputRequiredResult(input_requests=requests, request_state=self.token)
            changed = self._changed
            await changed.wait()

    def cancel(self) -> None:
        """Stop the tool (its client abandoned the call)."""
        self._cancel.cancel()

    # -- running -------------------------------------------------------------------------------

    async def run(self, work: Callable[[], Awaitable[types.CallToolResult]]) -> None:
        """Run the tool's ``work``, then keep its result until collected (or ``ttl``)."""
        with self._cancel:
            try:
                self.finish(await work())
            except MCPError as error:
                self.error = error
                self._notify()
        if self.result is None and self.error is None:  # cancelled: tell a waiting retry
            self.finish(_abandoned(self.tool))
        with anyio.move_on_after(self.ttl):
            await self.collected.wait()

    def _same_question(self, request: AskUserQuestionRequest) -> _Shown | None:
        for shown in self._shown.values():
            if not shown.open and (shown.request is request or shown.request == request):
                return shown
        return None

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()


class Continuations:
    """The open continuations of a server, by ``requestState`` token."""

    def __init__(self, ttl: float = DEFAULT_INPUT_TTL) -> None:
        self.ttl = ttl
        self._table: dict[str, Continuation] = {}

    def __len__(self) -> int:
        return len(self._table)

    def get(self, token: str | None) -> Continuation | None:
        """The continuation of ``token``, or ``None`` (unknown, ended or expired)."""
        return self._table.get(token) if token else None

    def start(
        self,
        group: anyio.abc.TaskGroup,
        tool: str,
        work: Callable[[Continuation], Awaitable[types.CallToolResult]],
    ) -> Continuation:
        """Run ``work`` as a new continuation in ``group``."""
        continuation = Continuation(secrets.token_urlsafe(24), tool, self.ttl)
        self._table[continuation.token] = continuation

        async def run() -> None:
            try:
                await continuation.run(lambda: work(continuation))
            finally:
                self._table.pop(continuation.token, None)

        group.start_soon(run, name=f"hotseam mcp tool {tool}")
        return continuation


def _abandoned(tool: str) -> types.CallToolResult:
    error = {
        "name": "UserInteractionError",
        "code": "ASK_ABORTED",
        "message": f"the call of tool {tool!r} was abandoned before it finished",
    }
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"ASK_ABORTED: {error['message']}")],
        structured_content=error,
        is_error=True,
    )
