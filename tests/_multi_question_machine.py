"""Asks of several questions in the property-based state machine of tests/test_invariants.py.

:class:`MultiQuestionRules` is mixed into that machine, which keeps driving scopes,
providers, swaps, revocations, aborts and cancellations and checking invariants 1-6 after
every step. With it, some asks hold two or three questions — one choice (with or without
custom text), several choices between ``min_selections`` and ``max_selections``, free text
that may be skipped — and every other user-interaction provider shows several questions at
once (``multiple_questions``); the others are asked one question after the other by
``ask()``. A provider's "answer" answers each question it was asked within its bounds (a
skippable question is sometimes skipped); "invalid" answers one of them outside its bounds
(or, on a provider that shows them all, leaves one out).

After every step, besides invariants 1-6 (each broken rule fails with
:class:`QuestionViolation`):

* exactly once per question: a provider is asked only the questions nobody answered yet —
  a provider that shows several at once all of them, any other the next one in order — so a
  question answered on one provider is never asked again on another (a swap in the middle
  re-asks only the rest);
* exactly once per ask: an ask that ends with an answer holds every question's answer, each
  the very one a provider returned for it (kept whole when a swap, a close, an abort or a
  cancellation came in the same turn); it never ends half-answered, and while questions
  remain it is still asked (or waits for a swap);
* answers are validated: a provider answering outside a question's bounds ends the ask
  with ``INVALID_ANSWER`` naming that question (``questions[1] (...)``) and never quoting
  what was typed; a request whose bounds are impossible is ``INVALID_REQUEST``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from _invariant_model import reg_live
from hotseam import AbortController
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ErrorCode,
    Question,
    QuestionAnswer,
    UserInteractionError,
)

KINDS = ("one", "one_strict", "many", "many_strict", "free_skip", "one_skip")
LETTERS = tuple(AskUserQuestionOption(letter) for letter in "abcd")
YES_NO = (AskUserQuestionOption("yes"), AskUserQuestionOption("no"))
THEN = ("answer",) * 6 + ("invalid", "invalid", ErrorCode.ASK_DECLINED, "crash")


class QuestionViolation(AssertionError):
    """An ask of several questions was answered twice, half, or not as its providers said."""


@dataclass(eq=False)
class MultiAsk:
    """The questions of an ask of several, and what each attempt was asked and returned."""

    items: list[Question]
    asked: dict[Any, list[str]] = field(default_factory=dict)  # attempt -> question ids
    given: dict[Any, dict[str, QuestionAnswer]] = field(default_factory=dict)  # valid only
    invalid: dict[Any, int] = field(default_factory=dict)  # attempt -> question index

    def answered(self) -> dict[str, tuple[Any, QuestionAnswer]]:
        """Each question answered so far: the attempt that answered it, and its answer."""
        found: dict[str, tuple[Any, QuestionAnswer]] = {}
        for attempt, entries in self.given.items():
            for question_id, entry in entries.items():
                found.setdefault(question_id, (attempt, entry))
        return found

    def remaining(self) -> list[Question]:
        answered = self.answered()
        return [item for item in self.items if item.id not in answered]

    def index(self, question_id: str) -> int:
        return next(i for i, item in enumerate(self.items) if item.id == question_id)


def build_question(kind: str, name: str, number: int) -> Question:
    """Question ``number`` of ask ``name``, of ``kind``; its text names the ask (the
    machine finds the ask by the question a provider is asked)."""
    text, qid = f"{name}/k{number}", f"k{number}"
    if kind in ("one", "one_strict", "one_skip"):
        return Question(
            text,
            options=YES_NO,
            allow_custom=kind != "one_strict",
            id=qid,
            allow_skip=kind == "one_skip",
        )
    if kind in ("many", "many_strict"):
        # Bounds a provider can break both ways: at least 1, at most 2 of 4 (3 with text).
        return Question(
            text,
            options=LETTERS,
            allow_custom=kind == "many",
            id=qid,
            multi_select=True,
            min_selections=1,
            max_selections=2 if kind == "many_strict" else 3,
        )
    return Question(text, id=qid, allow_skip=True)


def entry_key(entry: QuestionAnswer) -> tuple[object, ...]:
    """What an answer to one question says (compared field by field)."""
    labels = tuple(option.model_value for option in entry.options)
    return (entry.id, entry.answer, labels, entry.custom, entry.skipped)


class MultiQuestionRules:
    """The rules and checks of asks of several questions, for a machine of
    tests/test_invariants.py."""

    max_multi_asks = 6

    def make_human(self, name: str) -> Any:
        """Every other provider shows several questions at once."""
        human = super().make_human(name)  # type: ignore[misc]
        if int(name[1:]) % 2:
            human.multiple_questions = True
        return human

    def fail_questions(self, message: str) -> None:
        self.violations.append((QuestionViolation, message))

    # -- rules --------------------------------------------------------------------------------

    @precondition(lambda self: self.multi_asks() < self.max_multi_asks)
    @rule(
        ctx=st.sampled_from(["C", "D"]),
        kinds=st.lists(st.sampled_from(KINDS), min_size=2, max_size=3),
        mode=st.sampled_from(["none", "controller", "controller", "none", "controller", "invalid"]),
        replies=st.lists(st.sampled_from(THEN), max_size=3),
    )
    def start_multi_ask(self, ctx: str, kinds: list[str], mode: str, replies: list[str]) -> None:
        """An ask of two or three questions (``invalid``: one with impossible bounds), and
        the human's ``replies`` to the questions it is asked, one after the other."""

        async def action() -> None:
            name = f"q{next(self.ids)}"
            items = [build_question(kind, name, i + 1) for i, kind in enumerate(kinds)]
            if mode == "invalid":
                items[-1] = Question(
                    items[-1].question,
                    options=LETTERS,
                    id=items[-1].id,
                    multi_select=True,
                    min_selections=3,
                    max_selections=2,
                )
            controller = AbortController() if mode == "controller" else None
            request = AskUserQuestionRequest.of(
                items, signal=controller.signal if controller is not None else None
            )
            rec = self.make_ask_record(name, self._ctx(ctx), request, False, mode, controller)
            rec.multi = MultiAsk(items)
            for item in items:
                self.ask_by_question[item.question] = rec
            shape = f"{', '.join(kinds)}; {mode}"
            self.log(f"{name} = ask of {len(items)} questions on {ctx} ({shape})")
            self.spawn(self.run_ask, rec)
            for reply in replies:
                await self._settle()
                waiting = [a for a in rec.attempts if a.status == "waiting" and a.reply is None]
                if not waiting or rec.outcome is not None:
                    break
                self.log(f"{waiting[-1].name} ({name} on {waiting[-1].reg.name}) replies {reply}")
                self.give(waiting[-1], reply)

        self.do(action)

    @precondition(lambda self: self.several_attempts())
    @rule(pick=st.integers(0, 63), reply=st.sampled_from(THEN))
    def human_answers_several(self, pick: int, reply: str) -> None:
        """The human replies to a question of an ask of several (mostly an answer)."""

        def action() -> None:
            attempt = self.pick(self.several_attempts(), pick)
            self.log(f"{attempt.name} ({attempt.ask.name} on {attempt.reg.name}) replies {reply}")
            self.give(attempt, reply)

        self.do(action)

    @precondition(
        lambda self: not any(r is not None for r in self.acceptable(self.C, USER_INTERACTION))
    )
    @rule()
    def provide_ui_again(self) -> None:
        """A new generation provides the user-interaction seam on C (none is live there):
        asks reach a provider more often than the generic rules alone allow."""

        def action() -> None:
            ms = self.new_scope(self.C, fast=False)
            assert ms is not None
            reg = self.add_provider(self.C, USER_INTERACTION, ms)
            self.log(f"{ms.name} = root scope on C; {ms.name}.provide(ui) -> {reg.name}")

        self.do(action)

    def continues_on(self, rec: Any, reg: Any) -> bool:
        """The next question of an ask put one at a time goes to the provider that answered
        the previous one, while it is live and was not revoked: the ask holds one lease,
        and a provider that appeared nearer meanwhile (the child context providing its own)
        takes over only the asks that start after it, as it does for an ask of one question
        (found by seed 2 of test_invariants_with_multi_question_asks[trio]: the model took
        the second question for a new hand-out of the context's seam)."""
        if rec.multi is None or not rec.attempts or not reg_live(reg):
            return False
        previous = rec.attempts[-1]
        return bool(
            previous.reg is reg
            and previous.status == "returned"
            and previous.result == ("partial", None)
            and previous.revoke_kind is None
        )

    def several_attempts(self) -> list[Any]:
        return [attempt for attempt in self.waiting_attempts() if attempt.ask.multi is not None]

    def multi_asks(self) -> int:
        return sum(1 for rec in self.asks if rec.multi is not None)

    # -- the provider's side ------------------------------------------------------------------

    async def _provider_ask(self, human: Any, request: AskUserQuestionRequest) -> Any:
        rec = self.ask_by_question[request.question]
        if rec.multi is None:
            return await super()._provider_ask(human, request)  # type: ignore[misc]
        multi: MultiAsk = rec.multi
        reg = human.reg
        attempt = self.new_attempt(rec, reg)  # the checks every attempt gets
        asked = [str(item.id) for item in request.questions]
        multi.asked[attempt] = asked
        where = f"{rec.name} asked {asked} on {reg.name} ({attempt.name})"
        remaining = [str(item.id) for item in multi.remaining()]
        together = getattr(human, "multiple_questions", False)
        due = remaining if together else remaining[:1]
        answered = multi.answered()
        again = [qid for qid in asked if qid in answered]
        if again:
            self.fail_questions(
                f"{where}: {again} already answered by "
                f"{', '.join(answered[qid][0].name for qid in again)} (asked twice)"
            )
        elif asked != due:
            self.fail_questions(
                f"{where}; due: {due} ({'all at once' if together else 'one at a time'})"
            )
        for previous in rec.attempts[:-1]:
            if previous.status == "returned" and previous in multi.given:
                if previous.revoke_kind == "aborted":
                    self.fail_asks(
                        f"{where}: asked on after {previous.name}'s provider was revoked "
                        "with no swap"
                    )
            elif previous.status != "cancelled":
                self.fail_asks(f"{where}: asked again after {previous.name} {previous.status}")
            elif previous.revoke_kind != "replaced":
                self.fail_asks(
                    f"{where}: asked again after {previous.name} was "
                    + ("revoked with no swap" if previous.revoke_kind == "aborted" else "cancelled")
                )
        try:
            await attempt.event.wait()
        except anyio.get_cancelled_exc_class():
            attempt.status = "cancelled"
            raise
        return self.reply_to(rec, attempt, request)

    def reply_to(self, rec: Any, attempt: Any, request: AskUserQuestionRequest) -> Any:
        multi: MultiAsk = rec.multi
        reply = attempt.reply
        items = list(request.questions)
        if reply == "answer":
            entries = {str(item.id): self.valid_entry(item, attempt) for item in items}
            multi.given[attempt] = entries
            attempt.status = "returned"
            complete = not multi.remaining()
            attempt.result = ("answer", None) if complete else ("partial", None)
            return AskUserQuestionAnswer.of(entries.values(), request)
        if reply == "invalid":
            entries, broken = self.invalid_entries(items, attempt, together=len(items) > 1)
            multi.invalid[attempt] = multi.index(broken)
            attempt.status, attempt.result = "returned", ("error", ErrorCode.INVALID_ANSWER)
            return AskUserQuestionAnswer.of(entries, request)
        if reply == "crash":
            attempt.status, attempt.result = "raised", ("error", ErrorCode.PROVIDER_FAILED)
            raise RuntimeError("the provider crashed")
        assert reply in (ErrorCode.ASK_DECLINED, ErrorCode.ASK_CANCELLED)
        attempt.status, attempt.result = "raised", ("error", reply)
        raise UserInteractionError("the human said no", reply)

    def valid_entry(self, item: Question, attempt: Any) -> QuestionAnswer:
        """An answer within ``item``'s bounds; its custom text (when it allows one) says who
        gave it."""
        roll = next(self.ids)
        text = f"{attempt.name}:{item.id}"
        if item.allow_skip and roll % 3 == 0:
            return QuestionAnswer.skip(item, "skipped" if roll % 2 else "dismissed")
        if item.is_free_form:
            return QuestionAnswer.chosen(item, custom=text)
        if not item.is_multi_select:
            if item.allow_custom and roll % 2:
                return QuestionAnswer.chosen(item, custom=text)
            return QuestionAnswer.chosen(item, [item.choices[roll % len(item.choices)]])
        least, most = item.selection_range
        custom = text if item.allow_custom and roll % 2 else None
        count = least + roll % (most - least + 1) - (1 if custom else 0)
        count = max(count, 0 if custom else least)
        picked = [item.choices[(roll + i) % len(item.choices)] for i in range(count)]
        return QuestionAnswer.chosen(item, picked, custom)

    def invalid_entries(
        self, items: list[Question], attempt: Any, *, together: bool
    ) -> tuple[list[QuestionAnswer], str]:
        """Answers to ``items`` of which one is outside its question's bounds (or, for a
        provider that shows them together, missing); the id of that question."""
        roll = next(self.ids)
        broken = items[roll % len(items)]
        entries = [self.valid_entry(item, attempt) for item in items if item is not broken]
        if together and roll % 4 == 0:
            return entries, str(broken.id)  # left out: the ask is never half-answered
        assert broken.id is not None
        text = f"{attempt.name}:{broken.id}"
        if broken.is_free_form:  # skipped and answered at once
            bad = QuestionAnswer(broken.id, text, (), text, "skipped")
        elif not broken.is_multi_select:
            if broken.allow_custom:  # two values where one is taken
                bad = QuestionAnswer(broken.id, text, (broken.choices[0],), text)
            else:  # a value not offered
                bad = QuestionAnswer(broken.id, text, (), text)
        else:
            most = broken.selection_range[1]
            if roll % 2 and most < len(broken.choices):  # too many
                bad = QuestionAnswer(broken.id, "", broken.choices[: most + 1])
            else:  # too few
                bad = QuestionAnswer(broken.id, "", ())
        entries.insert(items.index(broken), bad)
        return entries, str(broken.id)

    # -- checks -------------------------------------------------------------------------------

    def check_ask_done(self, rec: Any) -> None:
        if rec.multi is None:
            super().check_ask_done(rec)  # type: ignore[misc]
            return
        multi: MultiAsk = rec.multi
        outcome = rec.outcome
        where = f"{rec.name} (of {len(multi.items)} questions, {rec.ctx.name}) ended with {outcome}"
        if outcome[0] == "unexpected":
            self.fail_asks(f"{where}: not a UserInteractionError")
            return
        result = outcome[1] if outcome[0] == "error" else outcome[0]
        self.events.add(
            f"ask of several questions ended: {result}"
            + (f" (on {len(rec.attempts)} attempts)" if len(rec.attempts) > 1 else "")
        )
        if rec.race:
            self.events.add(f"several questions, answer racing {rec.race}: {result}")
        for attempt in rec.attempts:
            if attempt.status == "waiting":
                self.fail_asks(f"{where} while {attempt.name} is still open")
        answered = multi.answered()
        self.check_once(rec, where)
        allowed = self.allowed_outcomes(rec, answered)
        if outcome[0] not in [kind for kind, *_ in allowed]:
            self.fail_questions(
                f"{where}; allowed {sorted(a[0] if a[0] != 'error' else a for a in allowed)}"
                f"; attempts: {self.history(rec)}; aborted={rec.abort_fired} "
                f"cancelled={rec.caller_cancelled}"
            )
            return
        if outcome[0] == "error" and outcome not in allowed:
            self.fail_questions(f"{where}; allowed {sorted(allowed)}: {self.history(rec)}")
        elif outcome[0] == "answer":
            self.check_whole(rec, answered, where)
        if outcome == ("error", ErrorCode.INVALID_ANSWER):
            self.check_named(rec, where)
        if outcome == ("error", ErrorCode.INVALID_REQUEST):
            field_name = f"questions[{len(multi.items) - 1}].min_selections"
            if field_name not in str(rec.error):
                self.fail_questions(f"{where}: {str(rec.error)!r} does not name {field_name}")

    def allowed_outcomes(self, rec: Any, answered: dict[str, Any]) -> set[tuple[Any, ...]]:
        """What the ask may have ended with, given what its providers did."""
        multi: MultiAsk = rec.multi
        if rec.mode == "invalid":
            return {("error", ErrorCode.INVALID_REQUEST)}
        allowed: set[tuple[Any, ...]] = set()
        last = rec.attempts[-1] if rec.attempts else None
        complete = len(answered) == len(multi.items)
        if last is not None and last.status == "raised":
            allowed.add(last.result)
        elif last is not None and last.status == "returned" and last in multi.invalid:
            allowed.add(("error", ErrorCode.INVALID_ANSWER))
        elif complete:
            allowed.add(("answer",))  # the providers' answers stand, whatever else happened
        if allowed:
            if rec.caller_cancelled:
                allowed.add(("cancelled",))
            return allowed
        if rec.abort_fired:
            allowed.add(("error", ErrorCode.ASK_ABORTED))
        if rec.caller_cancelled:
            allowed.add(("cancelled",))
        if allowed:
            return allowed
        if last is not None and last.status == "cancelled":
            swap = last.revoke_swap
            if last.revoke_kind == "aborted" or (
                last.revoke_kind == "replaced"
                and swap is not None
                and swap.finished
                and None in swap.visible_end.get(rec.ctx, [None])
            ):
                allowed.add(("error", ErrorCode.ASK_ABORTED))
        elif last is None:
            swap = rec.swap_at_start
            if swap is None:
                if None in rec.acceptable_at_start:
                    allowed.add(("error", ErrorCode.NO_PROVIDER))
            elif swap.finished and None in swap.visible_end.get(rec.ctx, [None]):
                allowed.add(("error", ErrorCode.NO_PROVIDER))
        elif last.revoke_kind is not None:
            # Answered in the turn its provider was revoked, with questions left: the rest
            # goes to a replacement, or the ask ends as withdrawn when there is none.
            swap = last.revoke_swap
            if last.revoke_kind == "aborted" or (
                swap is not None and swap.finished and None in swap.visible_end.get(rec.ctx, [None])
            ):
                allowed.add(("error", ErrorCode.ASK_ABORTED))
        return allowed

    def check_once(self, rec: Any, where: str) -> None:
        """No question was answered by two attempts."""
        multi: MultiAsk = rec.multi
        by: dict[str, str] = {}
        for attempt, entries in multi.given.items():
            for question_id in entries:
                if question_id in by:
                    self.fail_questions(
                        f"{where}: {question_id} answered twice, by {by[question_id]} and "
                        f"{attempt.name}"
                    )
                by[question_id] = attempt.name

    def check_whole(self, rec: Any, answered: dict[str, Any], where: str) -> None:
        """The answer holds every question's answer, each as the provider returned it."""
        multi: MultiAsk = rec.multi
        answer: AskUserQuestionAnswer = rec.answer
        got = [entry_key(entry) for entry in answer.answers]
        expected = [
            entry_key(answered[str(item.id)][1]) if item.id in answered else (item.id, "missing")
            for item in multi.items
        ]
        if got != expected:
            self.fail_questions(
                f"{where}: its answers are {got}; the providers returned {expected} "
                f"({self.history(rec)})"
            )
            return
        summary = AskUserQuestionAnswer.of(
            [answered[str(item.id)][1] for item in multi.items], rec.request
        )
        if answer.answer != summary.answer or answer.option is not None:
            self.fail_questions(f"{where}: the summary {answer.answer!r} is not {summary.answer!r}")
        if len({attempt for attempt, _ in answered.values()}) > 1:
            self.events.add("several questions answered on several attempts")

    def check_named(self, rec: Any, where: str) -> None:
        """INVALID_ANSWER names the question that broke its bounds, and quotes nothing."""
        multi: MultiAsk = rec.multi
        last = rec.attempts[-1] if rec.attempts else None
        index = multi.invalid.get(last)
        if index is None:
            return
        item = multi.items[index]
        message = str(rec.error)
        named = f"questions[{index}] ({item.question})"
        if named not in message:
            self.fail_questions(f"{where}: {message!r} does not name {named}")
        if f"{last.name}:" in message:
            self.fail_questions(f"{where}: {message!r} quotes what the provider was given")
        self.events.add("an answer outside its question's bounds: INVALID_ANSWER named it")

    def check_ask_pending(self, rec: Any) -> None:
        super().check_ask_pending(rec)  # type: ignore[misc]
        if rec.multi is not None and rec.started:
            self.check_once(rec, f"{rec.name} (of {len(rec.multi.items)} questions) pending")

    def history(self, rec: Any) -> str:
        multi: MultiAsk = rec.multi
        return (
            ", ".join(
                f"{a.name} on {a.reg.name} asked {multi.asked.get(a)}: {a.status}"
                + (f" (reply {a.reply})" if a.reply else "")
                + (f" (revoked: {a.revoke_kind})" if a.revoke_kind else "")
                for a in rec.attempts
            )
            or "none"
        )
