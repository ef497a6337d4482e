"""A property-based state machine over the core and the user-interaction seam.

Hypothesis drives random programs against one event loop (a blocking portal, on asyncio and
on trio): open and close root and child scopes on a context and on its child context, provide
and dispose providers (the user-interaction seam and a plain one) and tools, defer disposers
that return, raise, overrun their scope's time bound, are async, or wait for a gate the
machine opens later; start asks that are answered, declined, answered wrongly, aborted by
their signal (with any reason value), cancelled by the caller, or answered in the same turn
as a revocation (a close, a dispose, an abort, a cancel or a swap); run swaps that install a
replacement, end empty, or fail.

Every step is followed by a settle (every task blocked) and these invariants:

* at most one provider per seam per context, and a second ``provide`` is a conflict;
* no registration of a closing or closed scope tree is handed to anyone: lookups, ``get``,
  ``wait_for``, ``lease``, tools, and every new ask attempt (also checked from inside disposers
  while a close runs, and asks in flight on a closing scope are revoked at once);
* every disposer runs at most once, and exactly once once its scope closed: children before
  their parent's own effects, last in first out, failures and overruns reported together;
* every ask is answered exactly once (an answer a provider returned is never thrown away,
  even when a revocation, an abort or a swap came in the same turn), failed with a
  documented code that fits what happened, or still legitimately pending (on a live provider,
  or waiting for a swap in progress).

Each kind of broken invariant fails with its own AssertionError subclass (ServingViolation,
DisposalViolation, AskViolation, AbortViolation), so Hypothesis shrinks and reports each one;
the notes of a failing example say what every step did.

The same machine runs with an ask journal (tests/_journal_machine.py: invariant 10, agents'
runs, restarts, another process answering) and with asks of several questions
(tests/_multi_question_machine.py: exactly once per ask and per question).

``HOTSEAM_STATEFUL_EXAMPLES`` sets the number of examples per backend (default 200); the
journal's variants run a fifth of them per backend and engine, the several-questions
variant a third per backend (``make stress`` runs 2,000).
"""

from __future__ import annotations

import contextvars
import itertools
import os
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, event, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from pydantic import BaseModel

from _journal_machine import JournalRules
from _journal_model import ENGINES
from _multi_question_machine import MultiQuestionRules
from hotseam import (
    AbortController,
    AbortError,
    AbortSignal,
    CloseReason,
    Context,
    DisposalError,
    DisposerTimeoutError,
    ProviderConflictError,
    RegistrationState,
    Scope,
    ScopeClosedError,
    ScopeState,
    Seam,
    Tool,
    ToolError,
)
from hotseam.interaction import (
    ASK_ABORTED,
    ASK_CANCELLED,
    ASK_DECLINED,
    ASK_TIMEOUT,
    INVALID_ANSWER,
    INVALID_REQUEST,
    NO_PROVIDER,
    PROVIDER_FAILED,
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    UserInteractionError,
    ask,
)

EXAMPLES = int(os.environ.get("HOTSEAM_STATEFUL_EXAMPLES", "200"))
JOURNAL_EXAMPLES = max(EXAMPLES // 5, 10)  # per backend and engine
MULTI_EXAMPLES = max(EXAMPLES // 3, 10)  # per backend
STEPS = 50
FAST_TIMEOUT = 0.05  # dispose_timeout of "fast" scope trees, the only ones with overruns
SLOW_TIMEOUT = 30.0  # never reached: gates are opened by a rule or by the teardown
SWAP_WAIT = 30.0

DOCUMENTED_CODES = frozenset(
    {
        NO_PROVIDER,
        ASK_ABORTED,
        ASK_CANCELLED,
        ASK_DECLINED,
        ASK_TIMEOUT,
        INVALID_REQUEST,
        INVALID_ANSWER,
        PROVIDER_FAILED,
    }
)
OTHER: Seam[Any] = Seam("other")
SEAMS = {"ui": USER_INTERACTION, "other": OTHER}
TOOL_NAMES = ("probe_a", "probe_b")
DISPOSER_KINDS = ("sync", "raise", "async", "async_raise", "gated", "overrun")
REPLIES = ("answer", "invalid", ASK_DECLINED, ASK_CANCELLED, "crash")
ASK_MODES = ("none", "controller") * 4 + ("pre-aborted", "invalid")
REASON_KEYS = ("tab", "zero", "false", "none", "empty", "value_error", "abort_error")

# The close (or early dispose) that is running a disposer: set by the task that calls
# aclose()/dispose(), read by the disposer, which runs inline in that task.
RUNNING: contextvars.ContextVar[Any] = contextvars.ContextVar("invariants_running", default=None)


def _reason(key: str) -> object:
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

    def __init__(self, machine: InvariantMachine, name: str) -> None:
        self.machine = machine
        self.name = name
        self.reg: MReg | None = None

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        return await self.machine._provider_ask(self, request)


class Thing:
    """A provider of the plain seam."""

    def __init__(self, name: str) -> None:
        self.name = name


def _leaves(error: BaseException) -> Iterator[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for member in error.exceptions:
            yield from _leaves(member)
    else:
        yield error


def _provider_timeout(error: BaseException) -> bool:
    if not isinstance(error, DisposerTimeoutError):
        return False
    return str(error.details.get("effect", "")).startswith("provider")


def _open(ms: MScope) -> bool:
    return all(scope.scope.state is ScopeState.OPEN for scope in ms.chain())


def _reg_live(reg: MReg) -> bool:
    """Servable: active, and its owner scope and every ancestor still open."""
    if reg.handle.state is not RegistrationState.ACTIVE:
        return False
    return reg.owner is None or _open(reg.owner)


def _reg_closing(reg: MReg) -> bool:
    """Its scope tree began closing but its own undo has not run yet."""
    state = reg.handle.state
    return state not in (RegistrationState.REMOVED, RegistrationState.STAGED) and not _reg_live(reg)


def _tool_live(mt: MTool) -> bool:
    return bool(mt.handle.active) and _open(mt.owner)


def _tool_closing(mt: MTool) -> bool:
    """Its scope tree began closing but its own undo has not run yet."""
    return not mt.handle.disposed and not _open(mt.owner)


def _name(item: Any) -> str:
    return "nothing" if item is None else str(item.name)


# -- the machine -----------------------------------------------------------------------------


class InvariantMachine(RuleBasedStateMachine):
    backend = "asyncio"
    max_free_asks = 10  # asks made outside any agent run, per example

    def __init__(self) -> None:
        super().__init__()
        self.ids = itertools.count(1)
        self.scopes: list[MScope] = []
        self.regs: list[MReg] = []
        self.reg_by_handle: dict[Any, MReg] = {}
        self.tools: list[MTool] = []
        self.tool_by_obj: dict[Any, MTool] = {}
        self.disposers: list[MDisposer] = []
        self.calls: list[CloseCall] = []
        self.asks: list[AskRec] = []
        self.ask_by_question: dict[str, AskRec] = {}
        self.swaps: list[MSwap] = []
        self.current_swap: MSwap | None = None
        self.early_results: list[tuple[Any, BaseException | None, bool]] = []
        self.violations: list[tuple[type[AssertionError], str]] = []
        self.reported = False
        self.notes: list[str] = []
        self.events: set[str] = set()
        self.overruns = 0
        self.overrun_idle: anyio.Event | None = None
        self.early_call = CloseCall("early dispose", None, CloseReason.EXIT, early=True)
        self.portal_cm = anyio.from_thread.start_blocking_portal(self.backend)
        self.portal = self.portal_cm.__enter__()
        try:
            self.host, _ = self.portal.start_task(self._host)
            self.portal.call(self._boot)
        except BaseException:
            self.portal_cm.__exit__(None, None, None)
            raise

    # -- plumbing ---------------------------------------------------------------------------

    async def _host(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as tg:
            self.tg = tg
            self.stop = anyio.Event()
            task_status.started()
            await self.stop.wait()
            tg.cancel_scope.cancel()

    async def _boot(self) -> None:
        self.C = Context("C")
        self.D = self.C.child("D")

    def _ctx(self, key: str) -> Context:
        return self.C if key == "C" else self.D

    def do(self, action: Callable[[], Awaitable[None] | None]) -> None:
        """Run one step on the loop, let every task run until all are blocked, then check.

        The checks run here, in the same trip to the loop, rather than in the invariant (which
        only reports what they found): a trip to a trio loop from a thread is not cheap.
        """

        async def step() -> None:
            outcome = action()
            if outcome is not None:
                await outcome
            await self._settle()
            await self.check_all()

        try:
            self.portal.call(step)
        finally:
            notes, self.notes = self.notes, []
            for line in notes:
                note(line)
            events, self.events = self.events, set()
            for name in sorted(events):
                event(name)

    def spawn(self, func: Callable[..., Awaitable[None]], *args: Any) -> None:
        async def guarded() -> None:
            try:
                await func(*args)
            except Exception as error:
                self.fail_internal(f"internal error in {func.__name__}: {error!r}")

        self.tg.start_soon(guarded)

    # Each kind of violation fails with its own exception type, so that Hypothesis reports
    # (and shrinks) each broken invariant as a distinct failure.

    def fail_serving(self, message: str) -> None:
        self.violations.append((ServingViolation, message))

    def fail_disposal(self, message: str) -> None:
        self.violations.append((DisposalViolation, message))

    def fail_asks(self, message: str) -> None:
        self.violations.append((AskViolation, message))

    def fail_abort(self, message: str) -> None:
        self.violations.append((AbortViolation, message))

    def fail_internal(self, message: str) -> None:
        self.violations.append((AssertionError, message))

    def raise_violations(self) -> None:
        kind = self.violations[0][0]
        messages = dict.fromkeys(f"[{k.__name__}] {m}" for k, m in self.violations)
        raise kind("\n".join(messages))

    def log(self, line: str) -> None:
        """Describe a step in the failing example's report (flushed by :meth:`do`)."""
        self.notes.append(line)

    async def _all_blocked(self) -> None:
        if self.backend == "trio":
            import trio.testing

            await trio.testing.wait_all_tasks_blocked()
            return
        import asyncio

        me = asyncio.current_task()
        loop = asyncio.get_running_loop()
        for _ in range(100_000):
            await asyncio.sleep(0)
            if loop._ready:  # type: ignore[attr-defined]
                # A callback is due: a task whose future just completed (a child task that
                # ended, a cancellation being delivered) looks blocked until it runs.
                continue
            for task in asyncio.all_tasks():
                if task is me or task.done():
                    continue
                waiter = task._fut_waiter  # type: ignore[attr-defined]
                if waiter is None or waiter.done():
                    break
            else:
                return
        raise AssertionError("the event loop never settled")

    async def _settle(self) -> None:
        while True:
            await self._all_blocked()
            if self.overruns == 0:
                return
            if self.overrun_idle is None or self.overrun_idle.is_set():
                self.overrun_idle = anyio.Event()
            with anyio.fail_after(10):
                await self.overrun_idle.wait()

    # -- model queries ----------------------------------------------------------------------

    def acceptable(self, ctx: Context, seam: Seam[Any]) -> list[MReg | None]:
        """What ``ctx`` may hand out for ``seam`` right now (``None``: no provider)."""
        own = [r for r in self.regs if r.ctx is ctx and r.seam is seam and _reg_live(r)]
        if len(own) > 1:
            self.fail_serving(
                f"two live providers of {seam.name!r} in context {ctx.name}: "
                f"{', '.join(r.name for r in own)}"
            )
        if own:
            return [own[-1]]
        if ctx.parent is None:
            return [None]
        inherited = self.acceptable(ctx.parent, seam)
        if any(r.ctx is ctx and r.seam is seam and _reg_closing(r) for r in self.regs):
            # A closing registration of the child context: the child may fall through to the
            # parent's provider or serve nothing; it must not serve the closing one.
            return [*inherited, None]
        return inherited

    def acceptable_tools(self, ctx: Context, name: str) -> list[MTool | None]:
        own = [t for t in self.tools if t.ctx is ctx and t.tool_name == name and _tool_live(t)]
        if len(own) > 1:
            self.fail_serving(f"two live tools {name!r} in context {ctx.name}")
        if own:
            return [own[-1]]
        if ctx.parent is None:
            return [None]
        inherited = self.acceptable_tools(ctx.parent, name)
        closing = [
            t for t in self.tools if t.ctx is ctx and t.tool_name == name and _tool_closing(t)
        ]
        return [*inherited, None] if closing else inherited

    def check_served(self, where: str) -> None:
        """Nothing of a closing or closed scope tree is handed to a new caller."""
        if any(ms.scope.state is ScopeState.CLOSING for ms in self.scopes):
            self.events.add("served-check while a scope is closing")
        for ctx in (self.C, self.D):
            for seam in SEAMS.values():
                allowed = self.acceptable(ctx, seam)
                real = ctx.registration(seam)
                found = None if real is None else self.reg_by_handle.get(real)
                if real is not None and found is None:
                    self.fail_serving(
                        f"{where}: {ctx.name} serves an unknown registration {real!r}"
                    )
                    continue
                if found not in allowed:
                    self.fail_serving(
                        f"{where}: {ctx.name}.registration({seam.name!r}) is {_name(found)}"
                        f" (closing/closed: {found is not None and not _reg_live(found)}); "
                        f"expected {' or '.join(_name(r) for r in allowed)}"
                    )
                expected = None if found is None else found.provider
                if ctx.lookup(seam) is not expected:
                    self.fail_serving(f"{where}: {ctx.name}.lookup({seam.name!r}) disagrees")
                try:
                    got = ctx.get(seam)
                except Exception as error:
                    if expected is not None or getattr(error, "code", None) != NO_PROVIDER:
                        self.fail_serving(
                            f"{where}: {ctx.name}.get({seam.name!r}) raised {error!r}"
                        )
                else:
                    if got is not expected:
                        self.fail_serving(f"{where}: {ctx.name}.get({seam.name!r}) disagrees")
            for name in TOOL_NAMES:
                allowed_tools = self.acceptable_tools(ctx, name)
                tool = ctx.tools.get(name)
                found_tool = None if tool is None else self.tool_by_obj.get(tool)
                if found_tool not in allowed_tools:
                    self.fail_serving(
                        f"{where}: {ctx.name}.tools.get({name!r}) is {_name(found_tool)}; "
                        f"expected {' or '.join(_name(t) for t in allowed_tools)}"
                    )

    # -- entities ---------------------------------------------------------------------------

    def new_scope(self, ctx: Context, fast: bool, parent: MScope | None = None) -> MScope | None:
        name = f"s{next(self.ids)}"
        if parent is None:
            timeout = FAST_TIMEOUT if fast else SLOW_TIMEOUT
            scope = Scope(name, context=ctx, dispose_timeout=timeout)
        else:
            is_open = parent.scope.state is ScopeState.OPEN
            try:
                scope = parent.scope.child(name)
            except ScopeClosedError:
                if is_open:
                    self.fail_disposal(f"{parent.name}.child() refused although the scope is open")
                return None
            if not is_open:
                self.fail_disposal(
                    f"{parent.name} is {parent.scope.state.value} but child() worked"
                )
        ms = MScope(name, scope, ctx, parent, fast)
        self.scopes.append(ms)
        if parent is not None:
            parent.children.append(ms)
        return ms

    def add_provider(self, ctx: Context, seam: Seam[Any], owner: MScope | None) -> MReg | None:
        name = f"r{next(self.ids)}"
        provider: Any = self.make_human(name) if seam is USER_INTERACTION else Thing(name)
        same = [r for r in self.regs if r.ctx is ctx and r.seam is seam]
        live = [r for r in same if _reg_live(r)]
        closing = [r for r in same if _reg_closing(r)]
        is_open = owner is None or owner.scope.state is ScopeState.OPEN
        where = f"provide {name} ({seam.name}) in {owner.name if owner else ctx.name}"
        try:
            if owner is None:
                handle = ctx.provide(seam, provider)
            else:
                handle = owner.scope.provide(seam, provider)
        except ScopeClosedError:
            if is_open:
                self.fail_serving(f"{where}: ScopeClosedError although the scope is open")
            return None
        except ProviderConflictError:
            if not is_open:
                self.fail_serving(f"{where}: a conflict instead of ScopeClosedError")
            if not live and not closing:
                self.fail_serving(f"{where}: refused as a conflict with no provider active")
            return None
        reg = MReg(name, ctx, seam, provider, handle, owner)
        self.regs.append(reg)
        self.reg_by_handle[handle] = reg
        if isinstance(provider, Human):
            provider.reg = reg
        if owner is not None:
            owner.effects.append(reg)
        if not is_open:
            self.fail_serving(f"{where}: accepted by a {owner.scope.state.value} scope")  # type: ignore[union-attr]
        if live:
            self.fail_serving(
                f"{where}: a second live provider was accepted ({live[0].name} is live)"
            )
        return reg

    def make_human(self, name: str) -> Human:
        """The provider of the user-interaction seam registered as ``name``."""
        return Human(self, name)

    def add_tool(self, owner: MScope, tool_name: str) -> None:
        name = f"t{next(self.ids)}"
        mt: MTool

        async def handler(_input: ProbeInput, call: Any) -> dict[str, str]:
            if mt not in self.acceptable_tools(call.context, tool_name):
                self.fail_serving(f"tool {name} of {owner.name} ran although it is not servable")
            return {"tool": name}

        tool = Tool(tool_name, "a probe", ProbeInput, handler)
        same = [t for t in self.tools if t.ctx is owner.ctx and t.tool_name == tool_name]
        live = [t for t in same if _tool_live(t)]
        closing = [t for t in same if _tool_closing(t)]
        is_open = owner.scope.state is ScopeState.OPEN
        try:
            handle = owner.scope.register_tool(tool)
        except ScopeClosedError:
            if is_open:
                self.fail_serving(f"register_tool {name}: ScopeClosedError on an open scope")
            return
        except ToolError as error:
            if error.code != "DUPLICATE_TOOL" or (not live and not closing):
                self.fail_serving(f"register_tool {name}: {error!r}")
            return
        mt = MTool(name, tool_name, owner.ctx, tool, handle, owner)
        self.tools.append(mt)
        self.tool_by_obj[tool] = mt
        owner.effects.append(mt)
        if not is_open:
            self.fail_serving(f"register_tool {name}: accepted by a closed scope")
        if live:
            self.fail_serving(f"register_tool {name}: second live tool {tool_name!r} accepted")

    def add_disposer(self, owner: MScope, kind: str, with_exit: bool) -> MDisposer | None:
        if owner.fast:
            kind = {"async": "sync", "async_raise": "raise", "gated": "sync"}.get(kind, kind)
        elif kind == "overrun":
            kind = "async"
        d = MDisposer(f"d{next(self.ids)}", owner, kind, with_exit)
        if kind in ("raise", "async_raise"):
            d.error = DisposerBoom(f"{d.name} failed")
        if kind == "gated":
            d.gate = anyio.Event()
        callback = self._disposer(d)
        is_open = owner.scope.state is ScopeState.OPEN
        try:
            d.handle = (
                owner.scope.defer_exit(callback) if with_exit else owner.scope.defer(callback)
            )
        except ScopeClosedError:
            if is_open:
                self.fail_disposal(f"defer on open {owner.name}: ScopeClosedError")
            return None
        if not is_open:
            self.fail_disposal(f"defer on {owner.scope.state.value} {owner.name} was accepted")
        owner.effects.append(d)
        self.disposers.append(d)
        return d

    def _disposer(self, d: MDisposer) -> Callable[..., Any]:
        kind = d.kind

        def sync(*exit_: Any) -> None:
            self._entered(d, exit_)
            if d.error is not None:
                raise d.error

        async def async_(*exit_: Any) -> None:
            self._entered(d, exit_)
            if kind == "overrun":
                self.overruns += 1
                try:
                    await anyio.sleep_forever()
                finally:
                    self.overruns -= 1
                    if self.overruns == 0 and self.overrun_idle is not None:
                        self.overrun_idle.set()
            if kind == "gated":
                assert d.gate is not None
                await d.gate.wait()
            else:
                await anyio.lowlevel.checkpoint()
            self.check_served(f"{d.name} ({kind} disposer of {d.owner.name}) after its await")
            if d.error is not None:
                raise d.error

        return sync if kind in ("sync", "raise") else async_

    def _entered(self, d: MDisposer, exit_: tuple[Any, ...]) -> None:
        call = RUNNING.get()
        d.entered += 1
        d.run_by = call
        if d.entered > 1:
            self.fail_disposal(f"disposer {d.name} ran {d.entered} times")
        if call is None:
            self.fail_disposal(f"disposer {d.name} ran outside any close or dispose")
        elif exit_ and exit_[0].reason is not call.reason:
            self.fail_disposal(
                f"{d.name} saw close reason {exit_[0].reason}, expected {call.reason}"
            )
        if call is not None and not call.early:
            self._check_order(d, call)
        self.check_served(f"while {d.name} ({d.kind} disposer of {d.owner.name}) runs")

    def _check_order(self, d: MDisposer, call: CloseCall) -> None:
        """When ``d`` runs as part of a close: children done, later effects undone (LIFO)."""
        s = d.owner
        if s.scope.state is ScopeState.OPEN:
            self.fail_disposal(f"{d.name} ran by a close while {s.name} is still open")
        for q in s.tree():
            if q is s:
                continue
            if q.scope.state is not ScopeState.CLOSED:
                self.fail_disposal(f"{d.name} of {s.name} ran before child scope {q.name} closed")
            for e in q.effects:
                if isinstance(e, MDisposer) and not e.entered:
                    self.fail_disposal(
                        f"{d.name} of {s.name} ran before {e.name} of child {q.name}"
                    )
        index = s.effects.index(d)
        for e in s.effects[index + 1 :]:
            if isinstance(e, MDisposer) and not e.entered:
                self.fail_disposal(f"{d.name} ran before {e.name}, added after it (not LIFO)")
            if isinstance(e, MReg) and e.handle.state is not RegistrationState.REMOVED:
                self.fail_disposal(f"{d.name} ran before {e.name} (added after it) was removed")
            if isinstance(e, MTool) and e.handle.active:
                self.fail_disposal(
                    f"{d.name} ran before tool {e.name} (added after it) was removed"
                )
        for e in s.effects[:index]:
            if isinstance(e, MDisposer) and e.run_by is not None and not e.run_by.early:
                self.fail_disposal(f"{e.name} ran before {d.name}, added after it (not LIFO)")
        if call.root is not s and s.parent is not None:
            siblings = s.parent.children
            for later in siblings[siblings.index(s) + 1 :]:
                if later.scope.state is not ScopeState.CLOSED:
                    self.fail_disposal(f"{s.name} closed before its later sibling {later.name}")

    # -- closing and disposing --------------------------------------------------------------

    def mark_revocations(self, regs: list[MReg]) -> None:
        """Asks in flight on these registrations are revoked now (at close start)."""
        targets = [r for r in regs if r.handle.state is not RegistrationState.REMOVED]
        for rec in self.asks:
            for attempt in rec.attempts:
                if (
                    attempt.status == "waiting"
                    and attempt.revoke_kind is None
                    and attempt.reg in targets
                ):
                    swap = self.current_swap
                    attempt.revoke_kind = "replaced" if swap is not None else "aborted"
                    attempt.revoke_swap = swap

    async def close_scope(self, ms: MScope, reason: CloseReason) -> None:
        call = CloseCall(f"close of {ms.name}", ms, reason)
        self.calls.append(call)
        tree = set(ms.tree())
        self.mark_revocations([r for r in self.regs if r.owner in tree])
        token = RUNNING.set(call)
        try:
            await ms.scope.aclose(reason)
        except Exception as error:
            call.error = error
        finally:
            RUNNING.reset(token)
            call.done = True
        if ms.scope.state is not ScopeState.CLOSED:
            self.fail_disposal(f"{ms.name} is {ms.scope.state.value} after aclose() returned")

    def check_call(self, call: CloseCall) -> None:
        """The close raised exactly the failures and overruns of the disposers it ran."""
        if call.error is not None:
            self.events.add(f"close raised {type(call.error).__name__}")
        ran = [d for d in self.disposers if d.run_by is call]
        raised = [d.error for d in ran if d.kind in ("raise", "async_raise")]
        overran = sum(1 for d in ran if d.kind == "overrun")
        leaves = [] if call.error is None else list(_leaves(call.error))
        # A provider whose asks take longer than a fast scope's bound to unwind is reported
        # too (only a loaded machine gets there); it is tolerated, not required.
        leaves = [leaf for leaf in leaves if not _provider_timeout(leaf)]
        if not raised and not overran:
            if leaves:
                self.fail_disposal(f"{call.name} raised {call.error!r} with no failing disposer")
            return
        if not isinstance(call.error, DisposalError):
            self.fail_disposal(f"{call.name} raised {call.error!r}, expected a DisposalError")
            return
        for error in raised:
            if not any(leaf is error for leaf in leaves):
                self.fail_disposal(f"{call.name}: DisposalError lacks {error!r}")
        timeouts = [leaf for leaf in leaves if isinstance(leaf, DisposerTimeoutError)]
        if len(timeouts) != overran:
            self.fail_disposal(f"{call.name}: {len(timeouts)} timeouts reported, {overran} overran")
        for leaf in leaves:
            if not isinstance(leaf, DisposerTimeoutError) and not any(leaf is e for e in raised):
                self.fail_disposal(f"{call.name}: unexpected member {leaf!r}")

    async def dispose_early(self, item: Any) -> None:
        if isinstance(item, MReg):
            self.mark_revocations([item])
        token = RUNNING.set(self.early_call)
        error: BaseException | None = None
        entered = getattr(item, "entered", 0)
        try:
            await item.handle.dispose()
        except Exception as failure:
            error = failure
        finally:
            RUNNING.reset(token)
        ran_now = getattr(item, "entered", 0) > entered
        self.early_results.append((item, error, ran_now))

    def check_early(self, item: Any, error: BaseException | None, ran_now: bool) -> None:
        if isinstance(item, MDisposer) and ran_now:
            if item.kind in ("raise", "async_raise"):
                if error is not item.error:
                    self.fail_disposal(f"dispose() of {item.name} raised {error!r}, not its error")
                return
            if item.kind == "overrun":
                if not isinstance(error, DisposerTimeoutError):
                    self.fail_disposal(f"dispose() of overrunning {item.name} raised {error!r}")
                return
        if error is not None and not isinstance(error, DisposerTimeoutError):
            self.fail_disposal(f"dispose() of {item.name} raised {error!r}")

    # -- asks -------------------------------------------------------------------------------

    async def _provider_ask(self, human: Human, request: AskUserQuestionRequest) -> Any:
        rec = self.ask_by_question[request.question]
        assert human.reg is not None
        attempt = self.new_attempt(rec, human.reg)
        where = f"{rec.name} asked on {human.reg.name} ({attempt.name})"
        for previous in rec.attempts[:-1]:
            if previous.status != "cancelled":
                self.fail_asks(f"{where}: asked again after {previous.name} {previous.status}")
            elif previous.revoke_kind != "replaced":
                self.fail_asks(
                    f"{where}: asked again after {previous.name} was revoked with no swap"
                    if previous.revoke_kind == "aborted"
                    else f"{where}: asked again after {previous.name} was cancelled"
                )
        try:
            await attempt.event.wait()
        except anyio.get_cancelled_exc_class():
            attempt.status = "cancelled"
            raise
        reply = attempt.reply
        if reply == "answer":
            attempt.status, attempt.result = "returned", ("answer", attempt.text)
            return AskUserQuestionAnswer(attempt.text)
        if reply == "invalid":
            attempt.status, attempt.result = "returned", ("error", INVALID_ANSWER)
            return AskUserQuestionAnswer("maybe" if rec.strict else "   ")
        if reply == "crash":
            attempt.status, attempt.result = "raised", ("error", PROVIDER_FAILED)
            raise RuntimeError("the provider crashed")
        assert reply in (ASK_DECLINED, ASK_CANCELLED)
        attempt.status, attempt.result = "raised", ("error", reply)
        raise UserInteractionError("the human said no", reply)

    def new_attempt(self, rec: AskRec, reg: MReg) -> Attempt:
        """A provider was asked ``rec``'s question: it may be, now, on this provider."""
        attempt = Attempt(f"a{next(self.ids)}", rec, reg, anyio.Event())
        where = f"{rec.name} asked on {reg.name} ({attempt.name})"
        if rec.outcome is not None:
            self.fail_asks(f"{where} after the ask ended")
        if rec.abort_fired or rec.caller_cancelled:
            self.fail_asks(f"{where} after its signal fired or its caller cancelled")
        allowed = self.acceptable(rec.ctx, USER_INTERACTION)
        if reg not in allowed:
            self.fail_serving(
                f"{where}: {reg.name} is not servable (closing/closed: {not _reg_live(reg)}); "
                f"expected {' or '.join(_name(r) for r in allowed)}"
            )
        if rec.strict:
            attempt.text = "yes" if next(self.ids) % 2 else "no"
        else:
            attempt.text = f"answer from {attempt.name}"
        rec.attempts.append(attempt)
        return attempt

    async def run_ask(self, rec: AskRec) -> None:
        rec.started = True
        rec.swap_at_start = self.current_swap
        rec.acceptable_at_start = self.acceptable(rec.ctx, USER_INTERACTION)
        with rec.cancel_scope:
            try:
                answer = await ask(rec.request, context=rec.ctx, swap_timeout=SWAP_WAIT)
            except UserInteractionError as error:
                rec.outcome, rec.error = ("error", error.code), error
            except Exception as error:
                rec.outcome = ("unexpected", repr(error))
            else:
                rec.outcome, rec.answer = ("answer", answer.answer), answer
        if rec.outcome is None:
            rec.outcome = ("cancelled",)

    def give(self, attempt: Attempt, reply: str) -> None:
        attempt.reply = reply
        attempt.event.set()

    def fire(self, rec: AskRec, reason: object) -> None:
        """Abort the ask's signal with ``reason`` and check what the signal reports."""
        assert rec.controller is not None
        signal = rec.controller.signal
        first = not signal.aborted
        rec.controller.abort(reason)
        if first:
            rec.abort_fired = True
            rec.abort_reason = reason
        self.check_signal(signal, rec.abort_reason, f"{rec.name}'s signal")

    def check_signal(self, signal: AbortSignal, reason: object, where: str) -> None:
        if not signal.aborted:
            self.fail_abort(f"{where} is not aborted after abort({reason!r})")
            return
        got = signal.reason
        if reason is None:
            if not isinstance(got, AbortError):
                self.fail_abort(f"{where}: abort(None) gave reason {got!r}, not an AbortError")
        elif got is not reason:
            self.fail_abort(f"{where}: reason is {got!r}, expected {reason!r}")
        try:
            signal.raise_if_aborted()
        except BaseException as error:
            if isinstance(reason, BaseException):
                if error is not reason:
                    self.fail_abort(f"{where}: raise_if_aborted raised {error!r}, not the reason")
            elif not isinstance(error, AbortError):
                self.fail_abort(f"{where}: raise_if_aborted raised {error!r}, not an AbortError")
        else:
            self.fail_abort(f"{where}: raise_if_aborted() did not raise")

    def check_ask_done(self, rec: AskRec) -> None:
        outcome = rec.outcome
        assert outcome is not None
        where = f"{rec.name} ({rec.ctx.name}) ended with {outcome}"
        if outcome[0] == "unexpected":
            self.fail_asks(f"{where}: not a UserInteractionError")
            return
        if outcome[0] == "error" and outcome[1] not in DOCUMENTED_CODES:
            self.fail_asks(f"{where}: undocumented code")
        attempts = rec.attempts
        result = outcome[1] if outcome[0] == "error" else outcome[0]
        self.events.add(f"ask ended: {result}" + (" (re-asked)" if len(attempts) > 1 else ""))
        if rec.race:
            self.events.add(f"answer racing {rec.race}: {result}")
        if rec.swap_at_start is not None:
            self.events.add(f"ask arrived during a swap: {result}")
        for attempt in attempts:
            if attempt.status == "waiting":
                self.fail_asks(f"{where} while {attempt.name} is still open")
        last = attempts[-1] if attempts else None
        allowed: set[tuple[Any, ...]] = set()
        if rec.mode == "invalid":
            allowed.add(("error", INVALID_REQUEST))
        elif rec.mode == "pre-aborted":
            allowed.add(("error", ASK_ABORTED))
        elif last is not None and last.status in ("returned", "raised"):
            assert last.result is not None
            allowed.add(last.result)  # the provider's result stands, whatever else happened
            if rec.caller_cancelled:
                allowed.add(("cancelled",))
        else:
            if rec.abort_fired:
                allowed.add(("error", ASK_ABORTED))
            if rec.caller_cancelled:
                allowed.add(("cancelled",))
            if not allowed and last is not None:
                swap = last.revoke_swap
                if last.revoke_kind == "aborted" or (
                    last.revoke_kind == "replaced"
                    and swap is not None
                    and swap.finished
                    and None in swap.visible_end.get(rec.ctx, [None])
                ):
                    allowed.add(("error", ASK_ABORTED))
            elif not allowed:
                swap = rec.swap_at_start
                if swap is None:
                    if None in rec.acceptable_at_start:
                        allowed.add(("error", NO_PROVIDER))
                elif swap.finished and None in swap.visible_end.get(rec.ctx, [None]):
                    allowed.add(("error", NO_PROVIDER))
        if outcome not in allowed:
            history = ", ".join(
                f"{a.name} on {a.reg.name}: {a.status}"
                + (f" (reply {a.reply})" if a.reply else "")
                + (f" (revoked: {a.revoke_kind})" if a.revoke_kind else "")
                for a in attempts
            )
            self.fail_asks(
                f"{where}; allowed {sorted(allowed) or 'nothing (it should still be pending)'}"
                f"; attempts: {history or 'none'}; aborted={rec.abort_fired}"
                f" cancelled={rec.caller_cancelled}"
            )

    def check_ask_pending(self, rec: AskRec) -> None:
        where = f"{rec.name} ({rec.ctx.name}) is still pending"
        if not rec.started:
            self.fail_asks(f"{where}: its task never started")
            return
        if rec.abort_fired:
            self.fail_asks(f"{where} after its signal fired")
        if rec.caller_cancelled:
            self.fail_asks(f"{where} after its caller cancelled it")
        waiting = [a for a in rec.attempts if a.status == "waiting"]
        if len(waiting) > 1:
            self.fail_asks(f"{where} on {len(waiting)} providers at once")
        if waiting:
            attempt = waiting[0]
            if attempt.reply is not None:
                self.fail_asks(f"{where} although {attempt.name} was given a reply")
            if not _reg_live(attempt.reg):
                self.fail_serving(
                    f"{where} on {attempt.reg.name}, whose scope is "
                    f"{attempt.reg.owner.scope.state.value if attempt.reg.owner else '?'}"
                    " (asks in flight must be revoked when the close starts)"
                )
            return
        if self.current_swap is None:
            last = rec.attempts[-1] if rec.attempts else None
            self.fail_asks(
                f"{where} with no open attempt and no swap in progress"
                + (f" (last: {last.name} {last.status})" if last else "")
            )
        elif rec.attempts and rec.attempts[-1].revoke_kind != "replaced":
            self.fail_asks(f"{where} waiting for a swap after a revocation that was not a swap")

    # -- checking everything ----------------------------------------------------------------

    async def check_all(self, final: bool = False) -> None:
        where = "at teardown" if final else "after the step"
        self.check_served(where)
        for ms in self.scopes:
            if ms.scope.state is not ScopeState.CLOSED:
                continue
            for e in ms.effects:
                if isinstance(e, MDisposer) and e.entered != 1:
                    self.fail_disposal(
                        f"{e.name} ran {e.entered} times; its scope {ms.name} closed"
                    )
                if isinstance(e, MReg) and e.handle.state is not RegistrationState.REMOVED:
                    self.fail_disposal(f"{e.name} is {e.handle.state.value}; {ms.name} closed")
                if isinstance(e, MTool) and e.handle.active:
                    self.fail_disposal(f"tool {e.name} still active; {ms.name} closed")
        for call in self.calls:
            if call.done and not call.checked:
                call.checked = True
                self.check_call(call)
        results, self.early_results = self.early_results, []
        for item, error, ran_now in results:
            self.check_early(item, error, ran_now)
        for rec in self.asks:
            if rec.outcome is None:
                self.check_ask_pending(rec)
            elif not rec.checked:
                rec.checked = True
                self.check_ask_done(rec)
        if self.current_swap is None and all(w.finished for w in self.swaps):
            await self.check_waiters()

    async def check_waiters(self) -> None:
        """``wait_for`` and ``lease`` hand out exactly what may be served (no swap running)."""
        for ctx in (self.C, self.D):
            for seam in SEAMS.values():
                allowed = self.acceptable(ctx, seam)
                with anyio.move_on_after(5) as hung:
                    try:
                        provider = await ctx.wait_for(seam, timeout=1)
                    except Exception as error:
                        if None not in allowed or getattr(error, "code", None) != NO_PROVIDER:
                            self.fail_serving(f"{ctx.name}.wait_for({seam.name!r}): {error!r}")
                    else:
                        if not any(r is not None and r.provider is provider for r in allowed):
                            self.fail_serving(
                                f"{ctx.name}.wait_for({seam.name!r}) gave {provider!r}"
                            )
                    try:
                        async with ctx.lease(seam, timeout=1) as lease:
                            got = self.reg_by_handle.get(lease.registration)
                    except Exception as error:
                        if None not in allowed or getattr(error, "code", None) != NO_PROVIDER:
                            self.fail_serving(f"{ctx.name}.lease({seam.name!r}): {error!r}")
                    else:
                        if got is None or got not in allowed:
                            self.fail_serving(f"{ctx.name}.lease({seam.name!r}) lent {_name(got)}")
                if hung.cancelled_caught:
                    self.fail_serving(f"{ctx.name}.wait_for/lease({seam.name!r}) hung")

    # -- candidates -------------------------------------------------------------------------

    def waiting_attempts(self) -> list[Attempt]:
        return [
            a
            for rec in self.asks
            for a in rec.attempts
            if a.status == "waiting" and a.reply is None and rec.outcome is None
        ]

    def pending_asks(self) -> list[AskRec]:
        return [rec for rec in self.asks if rec.outcome is None]

    def free_asks(self) -> int:
        """How many asks were made outside any agent run."""
        return sum(1 for rec in self.asks if rec.journal is None)

    def make_ask_record(
        self,
        name: str,
        ctx: Context,
        request: AskUserQuestionRequest,
        strict: bool,
        mode: str,
        controller: AbortController | None,
    ) -> AskRec:
        """A new ask of the model, checked after every step from now on."""
        rec = AskRec(name, ctx, request, strict, mode, controller, anyio.CancelScope())
        self.asks.append(rec)
        return rec

    def swap_idle(self) -> bool:
        return all(w.finished for w in self.swaps)

    @staticmethod
    def pick(items: list[Any], index: int) -> Any:
        return items[index % len(items)]

    def target(self, index: int, closed: bool) -> MScope:
        """An open scope, or (``closed``) one that began closing, when there is one."""
        shut = [ms for ms in self.scopes if ms.scope.state is not ScopeState.OPEN]
        live = [ms for ms in self.scopes if ms.scope.state is ScopeState.OPEN]
        return self.pick((shut if closed else live) or self.scopes, index)

    # -- rules: scopes and effects ----------------------------------------------------------

    @initialize()
    def first_generation(self) -> None:
        def action() -> None:
            ms = self.new_scope(self.C, fast=False)
            assert ms is not None
            reg = self.add_provider(self.C, USER_INTERACTION, ms)
            self.log(f"{ms.name} = root scope on C; {ms.name}.provide(ui) -> {_name(reg)}")

        self.do(action)

    @precondition(lambda self: len(self.scopes) < 12)
    @rule(ctx=st.sampled_from(["C", "D"]), fast=st.integers(0, 2).map(lambda i: i == 2))
    def open_root(self, ctx: str, fast: bool) -> None:
        def action() -> None:
            ms = self.new_scope(self._ctx(ctx), fast)
            assert ms is not None
            self.log(f"{ms.name} = root scope on {ctx}{' (fast)' if fast else ''}")

        self.do(action)

    @precondition(lambda self: self.scopes and len(self.scopes) < 12)
    @rule(pick=st.integers(0, 63), closed=st.integers(0, 7).map(lambda i: i == 7))
    def open_child(self, pick: int, closed: bool) -> None:
        def action() -> None:
            parent = self.target(pick, closed)
            ms = self.new_scope(parent.ctx, parent.fast, parent)
            self.log(f"{ms.name if ms else '(refused)'} = child scope of {parent.name}")

        self.do(action)

    @precondition(lambda self: self.scopes)
    @rule(
        pick=st.integers(0, 63),
        kind=st.sampled_from(DISPOSER_KINDS),
        with_exit=st.booleans(),
        closed=st.integers(0, 7).map(lambda i: i == 7),
    )
    def defer(self, pick: int, kind: str, with_exit: bool, closed: bool) -> None:
        def action() -> None:
            ms = self.target(pick, closed)
            added = self.add_disposer(ms, kind, with_exit)
            what = added.kind if added is not None else kind
            self.log(f"{ms.name}.defer({what} disposer) -> {_name(added) if added else 'refused'}")

        self.do(action)

    @precondition(lambda self: self.scopes)
    @rule(
        pick=st.integers(0, 63),
        seam=st.sampled_from(["ui", "other"]),
        closed=st.integers(0, 7).map(lambda i: i == 7),
        owner=st.sampled_from(["scope", "scope", "scope", "C", "D"]),
    )
    def provide(self, pick: int, seam: str, closed: bool, owner: str) -> None:
        def action() -> None:
            if owner != "scope":
                reg = self.add_provider(self._ctx(owner), SEAMS[seam], None)
                self.log(f"{owner}.provide({seam}) -> {_name(reg)} (owned by no scope)")
                return
            ms = self.target(pick, closed)
            reg = self.add_provider(ms.ctx, SEAMS[seam], ms)
            self.log(f"{ms.name}.provide({seam}) -> {_name(reg)}")

        self.do(action)

    @precondition(lambda self: self.scopes)
    @rule(
        pick=st.integers(0, 63),
        name=st.sampled_from(TOOL_NAMES),
        closed=st.integers(0, 7).map(lambda i: i == 7),
    )
    def register_tool(self, pick: int, name: str, closed: bool) -> None:
        def action() -> None:
            ms = self.target(pick, closed)
            self.add_tool(ms, name)
            self.log(f"{ms.name}.register_tool({name})")

        self.do(action)

    @rule(ctx=st.sampled_from(["C", "D"]), name=st.sampled_from(TOOL_NAMES))
    def execute_tool(self, ctx: str, name: str) -> None:
        async def action() -> None:
            context = self._ctx(ctx)
            allowed = self.acceptable_tools(context, name)
            result = await context.tools.execute(name, {})
            if result.ok:
                names = [t.name for t in allowed if t is not None]
                if result.output.get("tool") not in names:
                    self.fail_serving(
                        f"{ctx} executed {name} from {result.output}; allowed {names}"
                    )
            elif None not in allowed or (result.error or {}).get("code") != "TOOL_NOT_FOUND":
                self.fail_serving(f"{ctx}.tools.execute({name!r}) failed: {result.error}")
            self.log(f"{ctx}.tools.execute({name}) -> {result.to_dict()}")

        self.do(action)

    @precondition(lambda self: self.scopes)
    @rule(pick=st.integers(0, 63), closed=st.integers(0, 7).map(lambda i: i == 7))
    def close(self, pick: int, closed: bool) -> None:
        def action() -> None:
            ms = self.target(pick, closed)
            self.log(f"start closing {ms.name} (it is {ms.scope.state.value})")
            self.spawn(self.close_scope, ms, CloseReason.EXIT)

        self.do(action)

    @precondition(lambda self: self.regs or self.disposers or self.tools)
    @rule(pick=st.integers(0, 63))
    def dispose_effect(self, pick: int) -> None:
        def action() -> None:
            items = [*self.regs, *self.disposers, *self.tools]
            item = self.pick(items, pick)
            self.log(f"start {item.name}.dispose()")
            self.spawn(self.dispose_early, item)

        self.do(action)

    @precondition(
        lambda self: any(d.gate is not None and not d.gate.is_set() for d in self.disposers)
    )
    @rule(pick=st.integers(0, 63))
    def release_gate(self, pick: int) -> None:
        def action() -> None:
            gated = [d for d in self.disposers if d.gate is not None and not d.gate.is_set()]
            d = self.pick(gated, pick)
            assert d.gate is not None
            self.log(f"open the gate of {d.name} ({'running' if d.entered else 'not yet run'})")
            d.gate.set()

        self.do(action)

    # -- rules: asks ------------------------------------------------------------------------

    @precondition(lambda self: self.free_asks() < self.max_free_asks)
    @rule(
        ctx=st.sampled_from(["C", "D"]),
        mode=st.sampled_from(ASK_MODES),
        strict=st.booleans(),
        reason=st.sampled_from(REASON_KEYS),
    )
    def start_ask(self, ctx: str, mode: str, strict: bool, reason: str) -> None:
        self.do(lambda: self.new_ask(ctx, mode, strict, reason))

    @precondition(lambda self: self.free_asks() < self.max_free_asks)
    @rule(ctx=st.sampled_from(["C", "D"]), strict=st.booleans())
    def start_plain_ask(self, ctx: str, strict: bool) -> None:
        """The common case again, so that questions are often open when other rules run."""
        self.do(lambda: self.new_ask(ctx, "controller", strict, "tab"))

    def new_ask(self, ctx: str, mode: str, strict: bool, reason: str) -> None:
        name = f"q{next(self.ids)}"
        controller = AbortController() if mode == "controller" else None
        signal = controller.signal if controller is not None else None
        if mode == "pre-aborted":
            value = _reason(reason)
            signal = AbortSignal.abort(value)
            self.check_signal(signal, value, f"AbortSignal.abort({value!r})")
        request = AskUserQuestionRequest(
            "   " if mode == "invalid" else name,
            options=(AskUserQuestionOption("yes"), AskUserQuestionOption("no")),
            allow_custom=not strict,
            signal=signal,
        )
        rec = self.make_ask_record(name, self._ctx(ctx), request, strict, mode, controller)
        self.ask_by_question[name] = rec
        self.log(f"{name} = ask on {ctx} ({mode}{', strict' if strict else ''})")
        self.spawn(self.run_ask, rec)

    @precondition(lambda self: self.waiting_attempts())
    @rule(pick=st.integers(0, 63), reply=st.sampled_from(REPLIES))
    def answer(self, pick: int, reply: str) -> None:
        def action() -> None:
            attempt = self.pick(self.waiting_attempts(), pick)
            self.log(f"{attempt.name} ({attempt.ask.name} on {attempt.reg.name}) replies {reply}")
            self.give(attempt, reply)

        self.do(action)

    @precondition(lambda self: any(r.controller is not None for r in self.pending_asks()))
    @rule(pick=st.integers(0, 63), reason=st.sampled_from(REASON_KEYS))
    def abort(self, pick: int, reason: str) -> None:
        def action() -> None:
            rec = self.pick([r for r in self.pending_asks() if r.controller is not None], pick)
            value = _reason(reason)
            self.log(f"abort {rec.name}'s signal with {value!r}")
            self.fire(rec, value)

        self.do(action)

    @precondition(lambda self: self.pending_asks())
    @rule(pick=st.integers(0, 63))
    def cancel(self, pick: int) -> None:
        def action() -> None:
            rec = self.pick(self.pending_asks(), pick)
            self.log(f"the caller of {rec.name} cancels it")
            rec.caller_cancelled = True
            rec.cancel_scope.cancel()

        self.do(action)

    @precondition(lambda self: self.waiting_attempts())
    @rule(
        pick=st.integers(0, 63),
        how=st.sampled_from(["close", "dispose", "abort", "cancel", "swap"]),
        depth=st.integers(0, 2),
    )
    def answer_racing(self, pick: int, how: str, depth: int) -> None:
        """Answer, and in the same turn revoke, abort or cancel: the answer must win."""

        def action() -> None:
            attempt = self.pick(self.waiting_attempts(), pick)
            rec, reg = attempt.ask, attempt.reg
            mode = how
            if mode == "abort" and (rec.controller is None or rec.abort_fired):
                mode = "cancel"
            if mode in ("close", "swap") and (reg.owner is None or not _reg_live(reg)):
                mode = "dispose"
            if mode == "swap" and not self.swap_idle():
                mode = "close"
            target: MScope | None = None
            if reg.owner is not None:
                chain = list(reg.owner.chain())
                target = chain[min(depth, len(chain) - 1)]
            rec.race = mode
            self.log(
                f"{attempt.name} ({rec.name} on {reg.name}) answers, and in the same turn: "
                f"{mode} {target.name if mode in ('close', 'swap') and target else ''}"
            )
            if mode == "abort":
                self.give(attempt, "answer")
                self.fire(rec, "user closed the tab")
            elif mode == "cancel":
                self.give(attempt, "answer")
                rec.caller_cancelled = True
                rec.cancel_scope.cancel()
            elif mode == "dispose":

                async def answer_then_dispose() -> None:
                    self.give(attempt, "answer")
                    await self.dispose_early(reg)

                self.spawn(answer_then_dispose)
            elif mode == "close":
                assert target is not None

                async def answer_then_close() -> None:
                    self.give(attempt, "answer")
                    await self.close_scope(target, CloseReason.EXIT)

                self.spawn(answer_then_close)
            else:
                swap = MSwap(f"w{next(self.ids)}", target, "install")
                self.swaps.append(swap)
                self.spawn(self.run_swap, swap, attempt)

        self.do(action)

    @precondition(lambda self: self.swap_idle())
    @rule(
        pick=st.integers(0, 63),
        mode=st.sampled_from(["install", "empty", "fail"]),
        old=st.sampled_from(["provider", "any", "none"]),
        hold=st.booleans(),
    )
    def swap(self, pick: int, mode: str, old: str, hold: bool) -> None:
        def action() -> None:
            live = [ms for ms in self.scopes if ms.scope.state is ScopeState.OPEN]
            serving = [
                r.owner
                for r in self.regs
                if r.seam is USER_INTERACTION and r.owner is not None and _reg_live(r)
            ]
            candidates = {"provider": serving or live, "any": live, "none": []}[old]
            replaced = self.pick(candidates, pick) if candidates else None
            if hold and replaced is not None and not replaced.fast:
                # A slow disposer of the old generation keeps the swap open for a while.
                held = self.add_disposer(replaced, "gated", False)
                self.log(f"{replaced.name}.defer(gated disposer) -> {_name(held)}")
            swap = MSwap(f"w{next(self.ids)}", replaced, mode)
            self.swaps.append(swap)
            self.log(f"{swap.name} = swap on C: close {_name(replaced)}, then {mode}")
            self.spawn(self.run_swap, swap, None)

        self.do(action)

    async def run_swap(self, swap: MSwap, racing: Attempt | None) -> None:
        try:
            async with self.C.swap(USER_INTERACTION):
                self.current_swap = swap
                try:
                    if racing is not None:
                        self.give(racing, "answer")
                    if swap.old is not None:
                        await self.close_scope(swap.old, CloseReason.RELOAD)
                    if swap.mode == "install":
                        ms = self.new_scope(self.C, fast=False)
                        assert ms is not None
                        reg = self.add_provider(self.C, USER_INTERACTION, ms)
                        self.log(f"{swap.name} installed {_name(reg)} in new scope {ms.name}")
                    elif swap.mode == "fail":
                        raise SwapFailed(swap.name)
                finally:
                    swap.visible_end = {
                        ctx: self.acceptable(ctx, USER_INTERACTION) for ctx in (self.C, self.D)
                    }
                    self.current_swap = None
        except SwapFailed:
            pass
        finally:
            swap.finished = True

    # -- invariants and teardown ------------------------------------------------------------

    @invariant()
    def everything_holds(self) -> None:
        """Every invariant held after the last step (checked by :meth:`do`)."""
        if self.violations:
            self.reported = True
            self.raise_violations()

    async def cleanup(self) -> None:
        # First open every gate, as a step of its own: blocked closes and swaps finish, and
        # the asks waiting on them react, before the teardown closes anything else.
        for d in self.disposers:
            if d.gate is not None:
                d.gate.set()
        await self._settle()
        try:
            await self.check_all()
        finally:
            await self.close_everything()
        await self.check_all(final=True)
        for rec in self.asks:
            if rec.outcome is None:
                rec.cancel_scope.cancel()
        await self._settle()

    async def close_everything(self) -> None:
        for _ in range(20):
            roots = [ms for ms in self.scopes if ms.parent is None]
            for ms in roots:
                if ms.scope.state is not ScopeState.CLOSED:
                    await self.close_scope(ms, CloseReason.SHUTDOWN)
            for reg in self.regs:
                if reg.owner is None and reg.handle.state is not RegistrationState.REMOVED:
                    await self.dispose_early(reg)
            await self._settle()
            if self.swap_idle() and all(ms.scope.state is ScopeState.CLOSED for ms in self.scopes):
                break

    def teardown(self) -> None:
        try:
            self.portal.call(self.cleanup)
        finally:
            try:
                self.portal.call(self.stop.set)
                self.host.result(timeout=30)
            finally:
                self.portal_cm.__exit__(None, None, None)
        if self.violations and not self.reported:
            self.raise_violations()


SETTINGS = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.timeout(120 + EXAMPLES // 2)
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_core_and_seam_invariants(backend: str) -> None:
    machine = type(f"InvariantMachine_{backend}", (InvariantMachine,), {"backend": backend})
    run_state_machine_as_test(machine, settings=SETTINGS)


class MultiQuestionMachine(MultiQuestionRules, InvariantMachine):
    """The same machine with asks of several questions (tests/_multi_question_machine.py):
    exactly once per ask and per question, across swaps, on providers that show them
    together or one at a time."""


@pytest.mark.timeout(120 + MULTI_EXAMPLES)
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_invariants_with_multi_question_asks(backend: str) -> None:
    machine = type(f"MultiQuestionMachine_{backend}", (MultiQuestionMachine,), {"backend": backend})
    run_state_machine_as_test(machine, settings=settings(SETTINGS, max_examples=MULTI_EXAMPLES))


class JournalInvariantMachine(JournalRules, MultiQuestionRules, InvariantMachine):
    """The same machine with an ask journal (tests/_journal_machine.py): agents ask inside
    runs — one question or several in one ask — the daemon stops and resumes, another
    process answers."""

    max_multi_asks = 2  # outside runs: the agents ask several questions too


@pytest.mark.timeout(120 + JOURNAL_EXAMPLES)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_invariants_with_a_journal(backend: str, engine: str) -> None:
    machine = type(
        f"JournalInvariantMachine_{backend}_{engine}",
        (JournalInvariantMachine,),
        {"backend": backend, "engine": engine},
    )
    run_state_machine_as_test(machine, settings=settings(SETTINGS, max_examples=JOURNAL_EXAMPLES))
