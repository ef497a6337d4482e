"""The model of the state machine of tests/test_invariants.py: what it knows of scopes,
registrations, tools, disposers, asks and swaps, the doubles it provides (a human who
answers when a rule says so, a plain provider), the kinds of broken invariant, and the
predicates its rules and checks share."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
from pydantic import BaseModel

from hotseam import (
    AbortController,
    AbortError,
    CloseReason,
    Context,
    DisposerTimeoutError,
    RegistrationState,
    Scope,
    ScopeState,
    Seam,
    Tool,
)
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    ErrorCode,
    UserInteractionError,
)

FAST_TIMEOUT = 0.05  # dispose_timeout of "fast" scope trees, the only ones with overruns
SLOW_TIMEOUT = 30.0  # never reached: gates are opened by a rule or by the teardown
SWAP_WAIT = 30.0

DOCUMENTED_CODES = frozenset(
    {
        ErrorCode.NO_PROVIDER,
        ErrorCode.ASK_ABORTED,
        ErrorCode.ASK_CANCELLED,
        ErrorCode.ASK_DECLINED,
        ErrorCode.ASK_TIMEOUT,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_ANSWER,
        ErrorCode.PROVIDER_FAILED,
    }
)
OTHER: Seam[Any] = Seam("other")
SEAMS = {"ui": USER_INTERACTION, "other": OTHER}
TOOL_NAMES = ("probe_a", "probe_b")
DISPOSER_KINDS = ("sync", "raise", "async", "async_raise", "gated", "overrun")
REPLIES = ("answer", "invalid", ErrorCode.ASK_DECLINED, ErrorCode.ASK_CANCELLED, "crash")
ASK_MODES = ("none", "controller") * 4 + ("pre-aborted", "invalid")
REASON_KEYS = ("tab", "zero", "false", "none", "empty", "value_error", "abort_error")

# The close (or early dispose) that is running a disposer: set by the task that calls
# aclose()/dispose(), read by the disposer, which runs inline in that task.
RUNNING: contextvars.ContextVar[Any] = contextvars.ContextVar("invariants_running", default=None)


def reason_value(key: str) -> object:
    """An abort reason: any value, as on the web platform."""
    return {
        "tab": "user closed the tab",
        "zero": 0,
        "false": False,
        "none": None,
        "empty": "",
        "value_error": ValueError("the caller gave up"),
        "abort_error": AbortError("custom abort", "ABORTED"),
    }[key]


class ServingViolation(AssertionError):
    """Something of a closing or closed scope was handed out, or two providers were live."""


class DisposalViolation(AssertionError):
    """A disposer ran twice, never, out of order, or its failure was not reported."""


class AskViolation(AssertionError):
    """An ask ended in a way that does not fit what happened, or hangs."""


class AbortViolation(AssertionError):
    """An AbortSignal reports its reason wrongly."""


class DisposerBoom(Exception):
    """What a raising disposer raises."""


class SwapFailed(Exception):
    """What a failing swap's body raises."""


class ProbeInput(BaseModel):
    """The (empty) input of the probe tools."""


# -- the model -------------------------------------------------------------------------------


@dataclass(eq=False)
class CloseCall:
    """One aclose() call (or, with ``early``, every early ``effect.dispose()``)."""

    name: str
    root: MScope | None
    reason: CloseReason
    early: bool = False
    done: bool = False
    checked: bool = False
    error: BaseException | None = None


@dataclass(eq=False)
class MScope:
    name: str
    scope: Scope
    ctx: Context
    parent: MScope | None
    fast: bool
    children: list[MScope] = field(default_factory=list)
    effects: list[Any] = field(default_factory=list)  # MDisposer | MReg | MTool, oldest first

    def tree(self) -> Iterator[MScope]:
        yield self
        for child in self.children:
            yield from child.tree()

    def chain(self) -> Iterator[MScope]:
        scope: MScope | None = self
        while scope is not None:
            yield scope
            scope = scope.parent


@dataclass(eq=False)
class MReg:
    name: str
    ctx: Context
    seam: Seam[Any]
    provider: Any
    handle: Any
    owner: MScope | None


@dataclass(eq=False)
class MTool:
    name: str
    tool_name: str
    ctx: Context
    tool: Tool[Any]
    handle: Any
    owner: MScope


@dataclass(eq=False)
class MDisposer:
    name: str
    owner: MScope
    kind: str
    with_exit: bool
    handle: Any = None
    entered: int = 0
    run_by: CloseCall | None = None
    error: Exception | None = None
    gate: anyio.Event | None = None


@dataclass(eq=False)
class Attempt:
    name: str
    ask: AskRec
    reg: MReg
    event: anyio.Event
    reply: str | None = None
    status: str = "waiting"  # waiting | returned | raised | cancelled
    result: tuple[Any, ...] | None = None
    text: str = ""
    revoke_kind: str | None = None  # aborted | replaced: what revoking it must lead to
    revoke_swap: MSwap | None = None


@dataclass(eq=False)
class AskRec:
    name: str
    ctx: Context
    request: AskUserQuestionRequest
    strict: bool
    mode: str  # none | controller | pre-aborted | invalid
    controller: AbortController | None
    cancel_scope: anyio.CancelScope
    abort_reason: object = None
    abort_fired: bool = False
    caller_cancelled: bool = False
    attempts: list[Attempt] = field(default_factory=list)
    outcome: tuple[Any, ...] | None = None
    checked: bool = False
    started: bool = False
    swap_at_start: MSwap | None = None
    race: str = ""
    acceptable_at_start: list[MReg | None] = field(default_factory=list)
    answer: AskUserQuestionAnswer | None = None  # what ask() returned
    error: UserInteractionError | None = None  # or raised
    journal: Any = None  # an ask inside an agent run: its JournalAsk (tests/_journal_machine.py)
    multi: Any = None  # an ask of several questions: its MultiAsk (_multi_question_machine.py)


@dataclass(eq=False)
class MSwap:
    name: str
    old: MScope | None
    mode: str
    finished: bool = False
    visible_end: dict[Context, list[MReg | None]] = field(default_factory=dict)


class Human:
    """A user-interaction provider whose every attempt waits for the machine to reply."""

    def __init__(self, machine: Any, name: str) -> None:
        self.machine = machine
        self.name = name
        self.reg: MReg | None = None

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        return await self.machine._provider_ask(self, request)


class Thing:
    """A provider of the plain seam."""

    def __init__(self, name: str) -> None:
        self.name = name


def leaves_of(error: BaseException) -> Iterator[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for member in error.exceptions:
            yield from leaves_of(member)
    else:
        yield error


def provider_timeout(error: BaseException) -> bool:
    if not isinstance(error, DisposerTimeoutError):
        return False
    return str(error.details.get("effect", "")).startswith("provider")


def tree_open(ms: MScope) -> bool:
    return all(scope.scope.state is ScopeState.OPEN for scope in ms.chain())


def reg_live(reg: MReg) -> bool:
    """Servable: active, and its owner scope and every ancestor still open."""
    if reg.handle.state is not RegistrationState.ACTIVE:
        return False
    return reg.owner is None or tree_open(reg.owner)


def reg_closing(reg: MReg) -> bool:
    """Its scope tree began closing but its own undo has not run yet."""
    state = reg.handle.state
    return state not in (RegistrationState.REMOVED, RegistrationState.STAGED) and not reg_live(reg)


def tool_live(mt: MTool) -> bool:
    return bool(mt.handle.active) and tree_open(mt.owner)


def tool_closing(mt: MTool) -> bool:
    """Its scope tree began closing but its own undo has not run yet."""
    return not mt.handle.disposed and not tree_open(mt.owner)


def name_of(item: Any) -> str:
    return "nothing" if item is None else str(item.name)
