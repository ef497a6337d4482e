"""The rules of the state machine of tests/test_invariants.py: scopes, effects, providers,
tools, closes and disposes, gates, asks and the human's replies, aborts, cancellations,
answers racing a revocation, and swaps."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import (
    initialize,
    precondition,
    rule,
)

from _invariant_model import (
    ASK_MODES,
    DISPOSER_KINDS,
    REASON_KEYS,
    REPLIES,
    SEAMS,
    TOOL_NAMES,
    Attempt,
    MScope,
    MSwap,
    SwapFailed,
    name_of,
    reason_value,
    reg_live,
)
from hotseam import (
    AbortController,
    AbortSignal,
    CloseReason,
    ScopeState,
)
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionOption,
    AskUserQuestionRequest,
)


class InvariantRules:
    """What Hypothesis may do at each step (mixed into the machine)."""

    @initialize()
    def first_generation(self) -> None:
        def action() -> None:
            ms = self.new_scope(self.C, fast=False)
            assert ms is not None
            reg = self.add_provider(self.C, USER_INTERACTION, ms)
            self.log(f"{ms.name} = root scope on C; {ms.name}.provide(ui) -> {name_of(reg)}")

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
            self.log(
                f"{ms.name}.defer({what} disposer) -> {name_of(added) if added else 'refused'}"
            )

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
                self.log(f"{owner}.provide({seam}) -> {name_of(reg)} (owned by no scope)")
                return
            ms = self.target(pick, closed)
            reg = self.add_provider(ms.ctx, SEAMS[seam], ms)
            self.log(f"{ms.name}.provide({seam}) -> {name_of(reg)}")

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
            value = reason_value(reason)
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
            value = reason_value(reason)
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
            if mode in ("close", "swap") and (reg.owner is None or not reg_live(reg)):
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
                if r.seam is USER_INTERACTION and r.owner is not None and reg_live(r)
            ]
            candidates = {"provider": serving or live, "any": live, "none": []}[old]
            replaced = self.pick(candidates, pick) if candidates else None
            if hold and replaced is not None and not replaced.fast:
                # A slow disposer of the old generation keeps the swap open for a while.
                held = self.add_disposer(replaced, "gated", False)
                self.log(f"{replaced.name}.defer(gated disposer) -> {name_of(held)}")
            swap = MSwap(f"w{next(self.ids)}", replaced, mode)
            self.swaps.append(swap)
            self.log(f"{swap.name} = swap on C: close {name_of(replaced)}, then {mode}")
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
                        self.log(f"{swap.name} installed {name_of(reg)} in new scope {ms.name}")
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
