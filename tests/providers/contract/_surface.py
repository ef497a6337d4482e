"""What the contract cases see of a provider: a surface, a human, and the questions shown.

A driver (one module per provider) opens a :class:`Surface`: where the agent asks
(:attr:`Surface.context`, :meth:`Surface.ask`), how one generation of the provider is
installed in a scope (:meth:`Surface.install`: what a provider module's ``setup`` does),
and what the test's human does: wait for the next question shown
(:meth:`Surface.next_shown`), answer it (:meth:`Surface.answer`), see it withdrawn
(:meth:`Surface.withdrawn`) and answer it after that (:meth:`Surface.answer_late`).

A reply is one :class:`Choose` or :class:`Type` per question shown, in question order;
each driver turns it into what its human does (a typed line, a form's content, a
permission option, a JSON body...).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

import anyio
import anyio.abc
from tests._timing import scaled

from hotseam import Context, Scope
from hotseam.interaction import AskUserQuestionAnswer, AskUserQuestionRequest

WAIT = 5.0
"""The bound of every wait of the human (seconds on an idle machine, scaled where used)."""


@dataclass(frozen=True)
class Choose:
    """Pick the question's option at ``index`` (0-based, in the request's order)."""

    index: int


@dataclass(frozen=True)
class Type:
    """Type ``text`` as the human's own answer."""

    text: str


Reply: TypeAlias = Choose | Type


@dataclass(eq=False)
class Shown:
    """One question (or form of several) the surface shows the human: ``ref`` is the
    driver's handle on it; ``generation`` the generation showing it; ``count`` how many
    questions it shows (``None``: every question of the ask)."""

    ref: Any
    generation: int
    count: int | None = None
    withdrawn: anyio.Event = field(default_factory=anyio.Event)


class Surface(Protocol):
    """One provider's surface, opened for one test (see the module)."""

    context: Context
    generation: int
    """How many generations were installed so far."""

    def install(self, scope: Scope) -> None:
        """Provide a new generation of the provider in ``scope`` (of :attr:`context`)."""

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        """Ask as the agent does on this surface; its answer or its error."""

    async def next_shown(self) -> Shown:
        """The next question shown to the human (waits for it)."""

    async def answer(self, shown: Shown, replies: Sequence[Reply]) -> None:
        """The human answers ``shown`` (one reply per question it shows)."""

    async def withdrawn(self, shown: Shown) -> None:
        """Wait until the surface shows the human that ``shown`` was withdrawn (or its
        client was told)."""

    async def answer_late(self, shown: Shown, replies: Sequence[Reply]) -> None:
        """The human answers the withdrawn ``shown``; returns once the provider side has
        dealt with it (read it, refused it)."""


Opener: TypeAlias = Callable[[], AbstractAsyncContextManager[Surface]]
"""A driver: opens a new surface, with its connections, for one test."""


async def until(predicate: Callable[[], bool]) -> None:
    """Wait until ``predicate()`` holds, for states nothing can be awaited on (a text
    output growing): it yields between checks, within the human's bound."""
    with anyio.fail_after(scaled(WAIT)):
        while not predicate():  # noqa: ASYNC110 - there is nothing to wait on
            await anyio.sleep(0.001)


async def settled(event: anyio.Event) -> None:
    """Wait for ``event``, within the human's bound."""
    with anyio.fail_after(scaled(WAIT)):
        await event.wait()


class Asking:
    """An ask started in the background: its answer, or its error, once it has one."""

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.outcome: AskUserQuestionAnswer | BaseException | None = None

    async def result(self) -> AskUserQuestionAnswer | BaseException:
        """The answer or the exception (not raised), once the ask ended."""
        await settled(self.done)
        assert self.outcome is not None
        return self.outcome


def asking(surface: Surface, request: AskUserQuestionRequest, tasks: anyio.abc.TaskGroup) -> Asking:
    """Start ``surface.ask(request)`` in ``tasks``."""
    pending = Asking()

    async def run() -> None:
        try:
            pending.outcome = await surface.ask(request)
        except Exception as error:
            pending.outcome = error
        finally:
            pending.done.set()

    tasks.start_soon(run)
    return pending


async def shown_while(surface: Surface, pending: Asking) -> Shown:
    """The next question shown, while ``pending`` still waits (an ask that ended first
    fails the test with its outcome, instead of a wait that can only time out)."""
    found: list[Shown] = []
    async with anyio.create_task_group() as tasks:

        async def show() -> None:
            found.append(await surface.next_shown())
            tasks.cancel_scope.cancel()

        async def end() -> None:
            await settled(pending.done)
            raise AssertionError(f"the ask ended before a question was shown: {pending.outcome!r}")

        tasks.start_soon(show)
        tasks.start_soon(end)
    return found[0]
