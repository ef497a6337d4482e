"""The ACP provider's surfaces: the SDK's own client over the SDK's in-process transport,
with form elicitation (``acp-form``) and without (``acp-permission``: questions with
options as ``session/request_permission``, one at a time).

As ``hotseam acp --watch`` runs it, the connection's :class:`AcpProvider` serves the base
context, and each generation of the provider module provides a relay to it in the agent's
context: a reload disposes the relay, which withdraws the question from the client
(``$/cancel_request``), and the next relay asks it again. The agent asks inside the
connection's session (``ask_scope``); the client is the tests' ``Client``, which records
``$/cancel_request`` and leaves the prompt open (as Toad does), so a late answer can be
given.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from acp.schema import ClientCapabilities

from hotseam import Context, Scope
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    ask,
)
from hotseam.providers.acp import AcpProvider, ask_scope

from ..acp._harness import FORM, ClientRequest, Connected, connected
from ._forms import form_content, questions_of
from ._surface import Choose, Reply, Shown, Surface, until

ELICITATION = "elicitation/create"
PERMISSION = "session/request_permission"


class Relay:
    """One generation's provider: it hands each question to the connection's provider
    (and says whether that one takes several questions at once)."""

    def __init__(self, acp: AcpProvider) -> None:
        self._acp = acp

    @property
    def multiple_questions(self) -> bool:
        return self._acp.multiple_questions

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        return await self._acp.ask(request)


@dataclass(eq=False)
class _Prompt:
    request: ClientRequest
    message: dict[str, Any]
    """The raw JSON-RPC request as the client received it."""


class AcpSurface:
    """See the module."""

    def __init__(self, acp: Connected, provider: AcpProvider, context: Context, form: bool):
        self.context = context
        self.generation = 0
        self.one_at_a_time = not form
        self._acp = acp
        self._provider = provider
        self._shown = 0

    def install(self, scope: Scope) -> None:
        self.generation += 1
        scope.provide(USER_INTERACTION, Relay(self._provider))

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        with ask_scope(self._acp.session_id):
            return await ask(request, context=self.context)

    async def next_shown(self) -> Shown:
        request: ClientRequest = await self._acp.client.requests.get()
        messages = [
            message
            for message in self._acp.client_wire.messages("incoming")
            if message.get("method") in (ELICITATION, PERMISSION)
        ]
        message = messages[self._shown]
        self._shown += 1
        assert message["method"] == request.method
        if request.method == PERMISSION:
            count: int | None = 1
        else:
            count = questions_of(message["params"]["requestedSchema"])
        return Shown(_Prompt(request, message), self.generation, count)

    async def answer(self, shown: Shown, replies: Sequence[Reply]) -> None:
        prompt: _Prompt = shown.ref
        params = prompt.message["params"]
        if prompt.request.method == PERMISSION:
            (reply,) = replies
            assert isinstance(reply, Choose), "a permission prompt takes no typed answer"
            option = params["options"][reply.index]["optionId"]
            prompt.request.answer({"outcome": {"outcome": "selected", "optionId": option}})
        else:
            content = form_content(params["requestedSchema"], replies)
            prompt.request.answer({"action": "accept", "content": content})

    async def withdrawn(self, shown: Shown) -> None:
        prompt: _Prompt = shown.ref
        await until(lambda: prompt.message["id"] in self._acp.client.cancelled)

    async def answer_late(self, shown: Shown, replies: Sequence[Reply]) -> None:
        prompt: _Prompt = shown.ref
        await self.answer(shown, replies)
        wire = self._acp.agent_wire
        assert wire is not None
        await wire.wait_for(
            "incoming",
            lambda message: "method" not in message and message.get("id") == prompt.message["id"],
        )


@asynccontextmanager
async def _surface(capabilities: ClientCapabilities | None) -> AsyncIterator[Surface]:
    provider = AcpProvider()
    served = Context("contract.acp")
    served.provide(USER_INTERACTION, provider)
    agent_context = served.child("contract.acp.agent")

    async def agent(context: Context) -> None:  # never prompted: the test's tasks ask
        raise AssertionError("the contract cases send no prompt")

    async with connected(
        agent, context=agent_context, provider=provider, capabilities=capabilities
    ) as acp:
        yield AcpSurface(acp, provider, agent_context, form=capabilities is not None)


@asynccontextmanager
async def acp_form() -> AsyncIterator[Surface]:
    """A client that advertised form elicitation."""
    async with _surface(FORM) as surface:
        yield surface


@asynccontextmanager
async def acp_permission() -> AsyncIterator[Surface]:
    """A client without form elicitation: permission prompts, one question each."""
    async with _surface(None) as surface:
        yield surface
