"""The state machine of tests/test_invariants.py: one event loop behind a blocking portal,
every step settled (every task blocked) and checked; its entities, the user-interaction
provider's side of an ask, and the teardown. Its checks are in _invariant_checks.py, its
rules in _invariant_rules.py, its model in _invariant_model.py."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
from hypothesis import event, note
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
)
from tests._timing import scaled

from _invariant_checks import InvariantChecks
from _invariant_model import (
    FAST_TIMEOUT,
    RUNNING,
    SLOW_TIMEOUT,
    SWAP_WAIT,
    AbortViolation,
    AskRec,
    AskViolation,
    Attempt,
    CloseCall,
    DisposalViolation,
    DisposerBoom,
    Human,
    MDisposer,
    MReg,
    MScope,
    MSwap,
    MTool,
    ProbeInput,
    ServingViolation,
    Thing,
    name_of,
    reg_closing,
    reg_live,
    tool_closing,
    tool_live,
)
from _invariant_rules import InvariantRules
from hotseam import (
    AbortController,
    CloseReason,
    Context,
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
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    ErrorCode,
    UserInteractionError,
    ask,
)


class InvariantMachine(InvariantRules, InvariantChecks, RuleBasedStateMachine):
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
            with anyio.fail_after(scaled(10)):
                await self.overrun_idle.wait()

    def new_scope(self, ctx: Context, fast: bool, parent: MScope | None = None) -> MScope | None:
        name = f"s{next(self.ids)}"
        if parent is None:
            timeout = FAST_TIMEOUT if fast else scaled(SLOW_TIMEOUT)
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
        live = [r for r in same if reg_live(r)]
        closing = [r for r in same if reg_closing(r)]
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
        live = [t for t in same if tool_live(t)]
        closing = [t for t in same if tool_closing(t)]
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
            attempt.status, attempt.result = "returned", ("error", ErrorCode.INVALID_ANSWER)
            return AskUserQuestionAnswer("maybe" if rec.strict else "   ")
        if reply == "crash":
            attempt.status, attempt.result = "raised", ("error", ErrorCode.PROVIDER_FAILED)
            raise RuntimeError("the provider crashed")
        assert reply in (ErrorCode.ASK_DECLINED, ErrorCode.ASK_CANCELLED)
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
        if reg not in allowed and not self.continues_on(rec, reg):
            self.fail_serving(
                f"{where}: {reg.name} is not servable (closing/closed: {not reg_live(reg)}); "
                f"expected {' or '.join(name_of(r) for r in allowed)}"
            )
        if rec.strict:
            attempt.text = "yes" if next(self.ids) % 2 else "no"
        else:
            attempt.text = f"answer from {attempt.name}"
        rec.attempts.append(attempt)
        return attempt

    def continues_on(self, rec: AskRec, reg: MReg) -> bool:
        """Whether ``rec`` is asked on ``reg`` as the rest of an attempt in progress there,
        rather than handed ``reg`` anew (an ask of several questions: see
        _multi_question_machine.py)."""
        return False

    async def run_ask(self, rec: AskRec) -> None:
        rec.started = True
        rec.swap_at_start = self.current_swap
        rec.acceptable_at_start = self.acceptable(rec.ctx, USER_INTERACTION)
        with rec.cancel_scope:
            try:
                answer = await ask(rec.request, context=rec.ctx, swap_timeout=scaled(SWAP_WAIT))
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
                self.host.result(timeout=scaled(30))
            finally:
                self.portal_cm.__exit__(None, None, None)
        if self.violations and not self.reported:
            self.raise_violations()
