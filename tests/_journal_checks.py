"""The checks of invariant 10 (DESIGN.md) that tests/_journal_machine.py runs after every
step: the journal, read whole as another process reads it, against what the machine saw
(the list is in _journal_machine.py's docstring)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from _journal_model import (
    FLEET,
    Incarnation,
    outcome_of,
    run_ended,
    settlement_of,
    state_of,
)
from _multi_question_machine import entry_key
from hotseam.interaction import AskUserQuestionAnswer, ErrorCode
from hotseam.interaction._journal import (
    AskRecord,
    AskState,
    JournalError,
    RunState,
)


class JournalChecks:
    """The journal's checks, mixed into :class:`~_journal_machine.JournalRules`."""

    async def check_all(self, final: bool = False) -> None:
        await self.read_journal()
        self.check_starts()
        self.check_placements()
        await super().check_all(final)  # type: ignore[misc]
        self.check_records()
        self.check_writes()
        self.check_deliveries()

    async def read_journal(self) -> None:
        """The whole journal, as another process reads it."""
        self.j_prev_asks, self.j_prev_runs = self.j_asks, self.j_runs
        try:
            asks = await self.j_journal.list_asks()
            runs = await self.j_journal.runs()
        except JournalError as error:
            self.fail_internal(f"the journal cannot be read: {error}")
            return
        for record in reversed(asks):  # oldest first
            self.j_order.setdefault(record.id, len(self.j_order))
        ordered = sorted(asks, key=lambda record: self.j_order[record.id])
        self.j_asks = {record.id: record for record in ordered}
        self.j_runs = {overview.run.id: overview.run for overview in runs}

    def check_starts(self) -> None:
        """A started agent resumed its unfinished run (or, fresh, abandoned it) with the
        records the journal holds; an ended one left its run finished, failed or running."""
        for inc in self.j_incs:
            if inc.run is not None and not inc.start_checked:
                inc.start_checked = True
                self._check_start(inc)
            if inc.ended is not None and not inc.end_checked:
                inc.end_checked = True
                self._check_end(inc)

    def _check_start(self, inc: Incarnation) -> None:
        assert inc.run is not None
        run_id = inc.run.id
        run = self.j_runs.get(run_id)
        where = f"{inc.name} started in run {run_id}"
        if run is None or run.state is not RunState.RUNNING:
            self.fail_journal(f"{where}, which is {run.state.value if run else 'unknown'}")
        if inc.expected_run is not None and not inc.fresh:
            if run_id != inc.expected_run:
                self.fail_journal(f"{where}, not its unfinished run {inc.expected_run}")
            self.events.add("an agent resumed its unfinished run")
        elif run_id in self.j_prev_runs:
            self.fail_journal(f"{where}, an existing run: a new one was due")
        if inc.fresh and inc.expected_run is not None:
            old = self.j_runs.get(inc.expected_run)
            if old is None or old.state is not RunState.ABANDONED:
                self.fail_journal(f"{where} fresh, but {inc.expected_run} is not abandoned")
            self.events.add("a fresh start abandoned an unfinished run")
        # What the run held when it started: the journal as it was before this step.
        at_start = [
            a
            for a in self.j_prev_asks.values()
            if a.run_id == run_id and a.state is not AskState.ABANDONED
        ]
        held = sorted(a.id for a in at_start)
        if inc.recorded is None:
            inc.recorded = sorted(at_start, key=lambda a: a.seq)
        for what, ids in (("resumed", inc.resumed_with), ("read", inc.read_with)):
            if ids is not None and ids != held:
                self.fail_journal(f"{where} {what} with records {ids}; the journal held {held}")

    def _check_end(self, inc: Incarnation) -> None:
        where = f"{inc.name} ended ({inc.ended})"
        if inc.run is None or inc.ended not in ("finished", "failed", "cancelled"):
            self.fail_journal(f"{where}: an agent run must start and end cleanly")
            return
        if inc.ended != (inc.ending or "cancelled"):
            self.fail_journal(f"{where}, but it was told to end {inc.ending or 'never'}")
        state = {"finished": RunState.FINISHED, "failed": RunState.FAILED}.get(inc.ended)
        expected = state or RunState.RUNNING
        if state is None and self.abandoned_by_a_fresh_start(inc):
            # Cancelled, left to resume, and abandoned since (in this very step: a restart
            # --fresh stops the process and starts its agents anew).
            expected = RunState.ABANDONED
        run = self.j_runs.get(inc.run.id)
        if run is None or run.state is not expected:
            self.fail_journal(
                f"{where}: its run is {run.state.value if run else 'unknown'}, expected "
                f"{expected.value}"
            )
        if state is not None:
            self.events.add(f"a run {inc.ended}")

    def abandoned_by_a_fresh_start(self, inc: Incarnation) -> bool:
        """A later start of ``inc``'s agent was fresh and found ``inc``'s run unfinished."""
        assert inc.run is not None
        later = self.j_incs[self.j_incs.index(inc) + 1 :]
        return any(i.fresh and i.expected_run == inc.run.id for i in later)

    def check_placements(self) -> None:
        """Each ask made since the last step replayed, re-attached, diverged or was recorded
        anew, as the records held when its run started say; no record appears that no ask
        made."""
        claimed = {rec.journal.record_id for rec in self.asks if rec.journal is not None}
        for rec in self.asks:
            j = rec.journal
            if j is None or j.placed or not rec.started:
                continue
            j.placed = True
            assert j.inc.run is not None
            where = f"{rec.name} ({j.expect} at {j.key or j.position} in {j.inc.name})"
            self.events.add(f"journaled ask: {j.expect}")
            if j.expect in ("replay", "reattach"):
                assert j.matched is not None
                j.record_id = j.matched.id
                if j.expect == "replay" and (rec.outcome is None or rec.attempts):
                    self.fail_journal(
                        f"{where}: a settled record must replay at once without asking; "
                        f"outcome {rec.outcome}, {len(rec.attempts)} provider attempt(s)"
                    )
                continue
            if j.expect == "diverge":
                assert j.matched is not None
                for record_id in j.before:
                    record = self.j_asks[record_id]
                    if record.seq >= j.matched.seq and record.state is not AskState.ABANDONED:
                        self.fail_journal(
                            f"{where}: record {record_id} at {record.seq} superseded by the "
                            f"change at {j.matched.seq} is {record.state.value}, not abandoned"
                        )
            mine = [
                a
                for a in self.j_asks.values()
                if a.run_id == j.inc.run.id
                and a.id not in j.before
                and a.id not in claimed
                and (a.key, a.seq) == (j.key, j.position)
            ]
            if len(mine) != 1:
                self.fail_journal(f"{where}: {len(mine)} new record(s) there, one was due")
                continue
            record = mine[0]
            j.record_id = record.id
            claimed.add(record.id)
            if record.digest != j.digest:
                self.fail_journal(
                    f"{where} was recorded with digest {record.digest[:8]}, not {j.digest[:8]}"
                )
        for record in self.j_asks.values():
            if record.id not in claimed:
                self.fail_journal(
                    f"record {record.id} (key {record.key!r}, position {record.seq}) was "
                    "made by no ask: a duplicate or a stray"
                )
                claimed.add(record.id)

    def check_ask_pending(self, rec: Any) -> None:
        if rec.journal is not None and not rec.started:
            return  # queued behind its agent's ask in flight
        super().check_ask_pending(rec)  # type: ignore[misc]

    def check_ask_done(self, rec: Any) -> None:
        j = rec.journal
        if j is None:
            super().check_ask_done(rec)  # type: ignore[misc]
            return
        outcome = rec.outcome
        where = f"{rec.name} ({j.expect} in {j.inc.name}) ended with {outcome}"
        if outcome[0] == "unexpected":
            self.fail_journal(f"{where}: not a UserInteractionError")
            return
        record = self.j_asks.get(j.record_id) if j.record_id else None
        if record is None:
            self.fail_journal(f"{where}, and it has no record")
            return
        self.check_kept(rec, record)
        if outcome[0] == "answer":
            self.check_recorded_whole(rec, j.matched if j.expect == "replay" else record, where)
        if j.expect == "replay":
            assert j.matched is not None
            if outcome != outcome_of(j.matched):
                self.fail_journal(f"{where}; its record {record.id} says {outcome_of(j.matched)}")
            self.events.add(f"replayed: {outcome[1] if outcome[0] == 'error' else outcome[0]}")
            return
        if outcome == ("cancelled",):
            super().check_ask_done(rec)  # type: ignore[misc]
            return
        recorded = outcome_of(record)
        if outcome != recorded:
            self.fail_journal(f"{where}, but its record {record.id} says {recorded}")
            return
        if record.settled_by == FLEET:
            kind = "an answer" if record.state is AskState.ANSWERED else "a dismissal"
            self.events.add(f"{kind} from another process delivered ({j.expect})")
        elif record.settled_by == j.inc.daemon.label:
            super().check_ask_done(rec)  # type: ignore[misc]
        else:
            self.fail_journal(f"{where}, settled by {record.settled_by!r}, neither here nor fleet")

    def check_recorded_whole(self, rec: Any, record: AskRecord | None, where: str) -> None:
        """An answer delivered (live or replayed) is its record's, question by question."""
        assert record is not None and rec.answer is not None
        got = [entry_key(entry) for entry in rec.answer.answers]
        recorded = [] if record.answer is None else [entry_key(e) for e in record.answer.answers]
        if got != recorded:
            self.fail_journal(f"{where}: it got {got}, and its record {record.id} says {recorded}")
        elif rec.multi is not None:
            self.events.add(f"several questions delivered whole ({rec.journal.expect})")

    def check_kept(self, rec: Any, record: AskRecord) -> None:
        """An answer a provider returned is recorded, unless another settlement won first;
        for an ask of several questions, once every question has its answer."""
        if rec.multi is not None and record.settled_by != FLEET:
            expected = self.given_whole(rec)
            recorded = None if record.answer is None else record.answer.answers
            if expected is not None and [entry_key(e) for e in recorded or ()] != [
                entry_key(e) for e in expected.answers
            ]:
                self.fail_journal(
                    f"{rec.name}'s questions were all answered ({expected.answer!r}), but its "
                    f"record {record.id} is {record.state.value} with {recorded}"
                    + (f" ({rec.race} in the same turn)" if rec.race else "")
                )
        for attempt in rec.attempts:
            if attempt.status != "returned" or attempt.result != ("answer", attempt.text):
                continue
            kept = record.answer is not None and record.answer.answer == attempt.text
            if not kept and record.settled_by != FLEET:
                self.fail_journal(
                    f"{attempt.name} answered {rec.name} ({attempt.text!r}), but its record "
                    f"{record.id} is {record.state.value}"
                    + (f" ({rec.race} in the same turn)" if rec.race else "")
                    + ": the answer was thrown away"
                )

    def given_whole(self, rec: Any) -> AskUserQuestionAnswer | None:
        """The answer ``rec``'s providers gave, once they answered all of its several
        questions (None before, or for one question)."""
        if rec.multi is None:
            return None
        answered = rec.multi.answered()
        if len(answered) < len(rec.multi.items):
            return None
        return AskUserQuestionAnswer.of(
            [answered[str(item.id)][1] for item in rec.multi.items], rec.request
        )

    def check_records(self) -> None:
        """The journal on its own, and against its previous state."""
        asks, runs = self.j_asks, self.j_runs
        live: dict[tuple[object, ...], str] = {}
        for a in asks.values():
            run = runs.get(a.run_id)
            if run is None:
                self.fail_journal(f"record {a.id} belongs to an unknown run {a.run_id}")
            elif a.pending and run.state is not RunState.RUNNING:
                self.fail_journal(f"record {a.id} is pending in a {run.state.value} run {run.id}")
            if a.state is AskState.ABANDONED:
                continue
            slot = (a.run_id, "key", a.key) if a.key is not None else (a.run_id, "seq", a.seq)
            if slot in live:
                self.fail_journal(f"records {live[slot]} and {a.id} both hold {slot[1:]}")
            live[slot] = a.id
        running = [run.agent for run in runs.values() if run.state is RunState.RUNNING]
        if len(running) != len(set(running)):
            self.fail_journal(f"two unfinished runs of one agent: {sorted(running)}")
        for run_id, before in self.j_prev_runs.items():
            now = runs.get(run_id)
            if before.state is not RunState.RUNNING and (now is None or now.state != before.state):
                self.fail_journal(f"run {run_id} ended {before.state.value}, now {state_of(now)}")
        for ask_id, before in self.j_prev_asks.items():
            self._check_transition(before, asks.get(ask_id))
        for a in asks.values():
            run_before = self.j_prev_runs.get(a.run_id)
            if a.id not in self.j_prev_asks and run_ended(run_before):
                self.fail_journal(f"record {a.id} was added to the ended run {a.run_id}")
        self._check_origins()

    def _check_transition(self, before: AskRecord, now: AskRecord | None) -> None:
        where = f"record {before.id} ({before.state.value})"
        if now is None:
            self.fail_journal(f"{where} vanished")
            return
        if (now.run_id, now.seq, now.key, now.digest) != (
            before.run_id,
            before.seq,
            before.key,
            before.digest,
        ):
            self.fail_journal(f"{where} changed its identity")
        was, now_is = settlement_of(before), settlement_of(now)
        if run_ended(self.j_prev_runs.get(before.run_id)) and now_is != was:
            self.fail_journal(f"{where} of an ended run changed: {was} -> {now_is}")
        if before.pending or now.state == before.state:
            if not before.pending and settlement_of(now) != settlement_of(before):
                self.fail_journal(f"{where} settled again: {settlement_of(now)}")
            return
        if now.state is not AskState.ABANDONED:
            self.fail_journal(f"{where} settled again, as {now.state.value}")
        elif settlement_of(now)[1:] != settlement_of(before)[1:]:
            self.fail_journal(f"{where} lost its settlement when abandoned: {settlement_of(now)}")

    def _check_origins(self) -> None:
        """Every recorded answer was given, to that very question, by whoever signed it.

        A text may have been given more than once: an ask of several questions answered by
        its options alone (no custom text) holds the same text as an earlier ask of the
        same question in another run answered with the same options."""
        given: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
        for rec in self.asks:
            if rec.journal is None:
                continue
            for attempt in rec.attempts:
                if attempt.status == "returned" and attempt.result == ("answer", attempt.text):
                    given[attempt.text].append(
                        (rec.journal.inc.daemon.label, rec.journal.record_id)
                    )
            whole = self.given_whole(rec)
            if whole is not None:
                given[whole.answer].append((rec.journal.inc.daemon.label, rec.journal.record_id))
        for write in self.j_writes:
            if write.text is not None:
                given[write.text].append((FLEET, write.ask_id))
        for a in self.j_asks.values():
            if a.answer is None:
                continue
            origins = given.get(a.answer.answer, [])
            signers = {by for by, record_id in origins if record_id == a.id}
            if not origins:
                self.fail_journal(f"record {a.id} holds {a.answer.answer!r}, which nobody gave")
            elif not signers:
                others = sorted({str(record_id) for _, record_id in origins})
                self.fail_journal(
                    f"record {a.id} holds {a.answer.answer!r}, given to record(s) {others}"
                )
            elif a.settled_by not in signers:
                self.fail_journal(
                    f"record {a.id} holds {a.answer.answer!r} given by {sorted(signers)}, "
                    f"signed {a.settled_by}"
                )

    def check_writes(self) -> None:
        """First answer wins: a winner is what the record says; a loser changed nothing; a
        pending record nobody races goes to the writer."""
        for write in self.j_writes:
            if not write.done or write.checked:
                continue
            write.checked = True
            record = self.j_asks[write.ask_id]
            where = f"{write.name} on {write.ask_id} (pending before: {write.was_pending})"
            if write.error is not None:
                self.fail_journal(f"{where} was refused: {write.error}")
                continue
            mine = record.settled_by == FLEET and (
                record.code == ErrorCode.ASK_CANCELLED
                if write.text is None
                else record.answer is not None and record.answer.answer == write.text
            )
            if write.won and (not mine or not write.was_pending):
                self.fail_journal(f"{where} won, and the record says {settlement_of(record)}")
            if not write.won and write.text is not None and mine:
                self.fail_journal(f"{where} lost, but the record holds its answer")
            if not write.won and write.was_pending and write.racing is None:
                self.fail_journal(f"{where} lost with nobody racing: {settlement_of(record)}")
            if write.racing is not None:
                self.events.add(f"race with another process: {'it' if write.won else 'we'} won")
            elif write.won:
                daemon_up = self.j_daemon is not None
                self.events.add(f"answered elsewhere (daemon {'up' if daemon_up else 'down'})")
            else:
                self.events.add(f"a stale write refused ({record.state.value})")

    def check_deliveries(self) -> None:
        """A recorded answer goes to at most one ask per incarnation, live to one only, of
        its own run and question.

        An answer is the record that holds it, not its text: an ask of several questions
        answered by its options alone (no custom text) reads the same as an earlier ask of
        the same question in another run answered with the same options, and both are
        delivered live, each from its own record. Whether an ask got the answer of the
        record it was placed on is checked here too (the text it got is its record's)."""
        delivered: dict[str, list[Any]] = defaultdict(list)
        for rec in self.asks:
            j = rec.journal
            answered = rec.outcome is not None and rec.outcome[0] == "answer"
            # (an answered ask with no record is reported by check_ask_done)
            if j is not None and j.record_id is not None and answered:
                delivered[j.record_id].append(rec)
        for record_id, recs in delivered.items():
            names = ", ".join(
                f"{r.name} ({r.journal.expect}, {r.journal.inc.name}: {r.outcome[1]!r})"
                for r in recs
            )
            incs = [r.journal.inc for r in recs]
            if len(set(map(id, incs))) != len(incs):
                self.fail_journal(f"record {record_id} was delivered twice in one run: {names}")
            if sum(1 for r in recs if r.journal.expect != "replay") > 1:
                self.fail_journal(f"record {record_id} was delivered live to several asks: {names}")
            record = self.j_asks.get(record_id)
            texts = {r.outcome[1] for r in recs}
            if record is None or record.answer is None or texts != {record.answer.answer}:
                self.fail_journal(
                    f"{names} were delivered, but record {record_id} does not hold it"
                )
                continue
            text = record.answer.answer
            for r in recs:
                j = r.journal
                if record.run_id != j.inc.run.id:
                    self.fail_journal(
                        f"{text!r} of run {record.run_id} went to {r.name} of another"
                    )
                if (record.key, record.digest) != (j.key, j.digest) or (
                    j.key is None and record.seq != j.position
                ):
                    self.fail_journal(
                        f"{text!r} (record {record.id}: key {record.key!r}, position "
                        f"{record.seq}) went to {r.name}, asking another question"
                    )
