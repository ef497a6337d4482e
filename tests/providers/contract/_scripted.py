"""The scripted provider's surface: its script is a human who answers each question shown.

The script is a callable (what ``ScriptedProvider`` takes for a script computed per
question): it shows the question to the test's human and waits for the reply, so a
question is answered when, and with what, the test says; a withdrawn one is cancelled
there (and lands in the provider's ``cancelled``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
from tests._feed import Feed

from hotseam import Context, Scope
from hotseam.interaction import USER_INTERACTION, AskUserQuestionAnswer, AskUserQuestionRequest, ask
from hotseam.providers.scripted import Reply as Scripted
from hotseam.providers.scripted import ScriptedProvider

from ._surface import Choose, Reply, Shown, Surface, settled


@dataclass(eq=False)
class _Question:
    request: AskUserQuestionRequest
    provider: ScriptedProvider
    replied: anyio.Event = field(default_factory=anyio.Event)
    reply: Scripted | None = None


def _scripted(reply: Reply) -> Scripted:
    if isinstance(reply, Choose):
        return Scripted.choose(reply.index + 1)
    return Scripted.exactly(reply.text)


class ScriptedSurface:
    """See the module."""

    def __init__(self) -> None:
        self.context = Context("contract.scripted")
        self.generation = 0
        self.providers: list[ScriptedProvider] = []
        self._shown = Feed()

    def install(self, scope: Scope) -> None:
        self.generation += 1
        generation = self.generation
        made: list[ScriptedProvider] = []

        async def human(request: AskUserQuestionRequest) -> Scripted:
            question = _Question(request, made[0])
            shown = Shown(question, generation)
            self._shown.put(shown)
            try:
                await question.replied.wait()
            except anyio.get_cancelled_exc_class():
                shown.withdrawn.set()
                raise
            assert question.reply is not None
            return question.reply

        provider = ScriptedProvider(human, name=f"scripted {generation}")
        made.append(provider)
        self.providers.append(provider)
        scope.provide(USER_INTERACTION, provider)

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        return await ask(request, context=self.context)

    async def next_shown(self) -> Shown:
        shown: Shown = await self._shown.get()
        return shown

    async def answer(self, shown: Shown, replies: Sequence[Reply]) -> None:
        question: _Question = shown.ref
        parts = [_scripted(reply) for reply in replies]
        question.reply = parts[0] if len(parts) == 1 else Scripted.each(*parts)
        question.replied.set()

    async def withdrawn(self, shown: Shown) -> None:
        await settled(shown.withdrawn)
        question: _Question = shown.ref
        assert question.request in question.provider.cancelled

    async def answer_late(self, shown: Shown, replies: Sequence[Reply]) -> None:
        await self.answer(shown, replies)  # nobody waits for it any more


@asynccontextmanager
async def scripted() -> AsyncIterator[Surface]:
    """A scripted surface."""
    yield ScriptedSurface()
