"""The checks of the state machine of tests/test_invariants.py (invariants 1-6), run after
every step: what may be served, the order and outcome of disposers and closes, abort
signals, and how every ask ended or why it is still pending."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
from tests._timing import scaled

from _invariant_model import (
    DOCUMENTED_CODES,
    SEAMS,
    TOOL_NAMES,
    AskRec,
    CloseCall,
    MDisposer,
    MReg,
    MTool,
    leaves_of,
    name_of,
    provider_timeout,
    reg_closing,
    reg_live,
    tool_closing,
    tool_live,
)
from hotseam import (
    AbortError,
    AbortSignal,
    Context,
    DisposalError,
    DisposerTimeoutError,
    RegistrationState,
    ScopeState,
    Seam,
)
from hotseam.interaction import ErrorCode


class InvariantChecks:
    """Invariants 1-6, checked after every step (mixed into the machine)."""

    def acceptable(self, ctx: Context, seam: Seam[Any]) -> list[MReg | None]:
        """What ``ctx`` may hand out for ``seam`` right now (``None``: no provider)."""
        own = [r for r in self.regs if r.ctx is ctx and r.seam is seam and reg_live(r)]
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
        if any(r.ctx is ctx and r.seam is seam and reg_closing(r) for r in self.regs):
            # A closing registration of the child context: the child may fall through to the
            # parent's provider or serve nothing; it must not serve the closing one.
            return [*inherited, None]
        return inherited

    def acceptable_tools(self, ctx: Context, name: str) -> list[MTool | None]:
        own = [t for t in self.tools if t.ctx is ctx and t.tool_name == name and tool_live(t)]
        if len(own) > 1:
            self.fail_serving(f"two live tools {name!r} in context {ctx.name}")
        if own:
            return [own[-1]]
        if ctx.parent is None:
            return [None]
        inherited = self.acceptable_tools(ctx.parent, name)
        closing = [
            t for t in self.tools if t.ctx is ctx and t.tool_name == name and tool_closing(t)
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
                        f"{where}: {ctx.name}.registration({seam.name!r}) is {name_of(found)}"
                        f" (closing/closed: {found is not None and not reg_live(found)}); "
                        f"expected {' or '.join(name_of(r) for r in allowed)}"
                    )
                expected = None if found is None else found.provider
                if ctx.lookup(seam) is not expected:
                    self.fail_serving(f"{where}: {ctx.name}.lookup({seam.name!r}) disagrees")
                try:
                    got = ctx.get(seam)
                except Exception as error:
                    if (
                        expected is not None
                        or getattr(error, "code", None) != ErrorCode.NO_PROVIDER
                    ):
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
                        f"{where}: {ctx.name}.tools.get({name!r}) is {name_of(found_tool)}; "
                        f"expected {' or '.join(name_of(t) for t in allowed_tools)}"
                    )

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

    def check_call(self, call: CloseCall) -> None:
        """The close raised exactly the failures and overruns of the disposers it ran."""
        if call.error is not None:
            self.events.add(f"close raised {type(call.error).__name__}")
        ran = [d for d in self.disposers if d.run_by is call]
        raised = [d.error for d in ran if d.kind in ("raise", "async_raise")]
        overran = sum(1 for d in ran if d.kind == "overrun")
        leaves = [] if call.error is None else list(leaves_of(call.error))
        # A provider whose asks take longer than a fast scope's bound to unwind is reported
        # too (only a loaded machine gets there); it is tolerated, not required.
        leaves = [leaf for leaf in leaves if not provider_timeout(leaf)]
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
            allowed.add(("error", ErrorCode.INVALID_REQUEST))
        elif rec.mode == "pre-aborted":
            allowed.add(("error", ErrorCode.ASK_ABORTED))
        elif last is not None and last.status in ("returned", "raised"):
            assert last.result is not None
            allowed.add(last.result)  # the provider's result stands, whatever else happened
            if rec.caller_cancelled:
                allowed.add(("cancelled",))
        else:
            if rec.abort_fired:
                allowed.add(("error", ErrorCode.ASK_ABORTED))
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
                    allowed.add(("error", ErrorCode.ASK_ABORTED))
            elif not allowed:
                swap = rec.swap_at_start
                if swap is None:
                    if None in rec.acceptable_at_start:
                        allowed.add(("error", ErrorCode.NO_PROVIDER))
                elif swap.finished and None in swap.visible_end.get(rec.ctx, [None]):
                    allowed.add(("error", ErrorCode.NO_PROVIDER))
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
            if not reg_live(attempt.reg):
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
                with anyio.move_on_after(scaled(5)) as hung:
                    try:
                        provider = await ctx.wait_for(seam, timeout=1)
                    except Exception as error:
                        if (
                            None not in allowed
                            or getattr(error, "code", None) != ErrorCode.NO_PROVIDER
                        ):
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
                        if (
                            None not in allowed
                            or getattr(error, "code", None) != ErrorCode.NO_PROVIDER
                        ):
                            self.fail_serving(f"{ctx.name}.lease({seam.name!r}): {error!r}")
                    else:
                        if got is None or got not in allowed:
                            self.fail_serving(
                                f"{ctx.name}.lease({seam.name!r}) lent {name_of(got)}"
                            )
                if hung.cancelled_caught:
                    self.fail_serving(f"{ctx.name}.wait_for/lease({seam.name!r}) hung")
