"""Another process in tests/_journal_machine.py: a fleet inbox (on SQLite, a second
``Journal`` on the same file) that answers or dismisses recorded questions — pending or
settled, the daemon up or down — and races this process's provider for the same question
(first answer wins)."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.abc
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule
from tests._timing import scaled

from _journal_model import (
    DELIVERY_WAIT,
    FLEET,
    MWrite,
    name_of,
    written_answer,
)
from hotseam.interaction import ErrorCode
from hotseam.interaction._journal import (
    AskRecord,
    AskState,
    JournalError,
)


class OtherProcessRules:
    """The rules of another process writing to the journal, mixed into
    :class:`~_journal_machine.JournalRules`."""

    @precondition(lambda self: self.j_asks)
    @rule(
        pick=st.integers(0, 63),
        dismiss=st.integers(0, 3).map(lambda i: i == 3),
        stale=st.integers(0, 4).map(lambda i: i == 4),
    )
    def inbox_answers(self, pick: int, dismiss: bool, stale: bool) -> None:
        """Another process answers (or dismisses) a recorded question; ``stale``: any one,
        settled or of an ended run, which must be refused."""

        async def action() -> None:
            pending = [a for a in self.j_asks.values() if a.pending]
            pool = pending if pending and not stale else list(self.j_asks.values())
            target = self.pick(pool, pick)
            write = self.new_write(target, dismiss=dismiss)
            live = self.live_ask_of(target.id)
            self.log(
                f"{write.name}: another process {'dismisses' if dismiss else 'answers'} "
                f"{target.id} ({target.state.value}, asked by {name_of(live)})"
            )
            await self._write(write)
            if live is not None and write.won:
                await self._await_delivery(live, write)

        self.do(action)

    @precondition(lambda self: self.racing_candidates())
    @rule(pick=st.integers(0, 63), other_first=st.booleans())
    def inbox_races_local(self, pick: int, other_first: bool) -> None:
        """This process's provider and another process answer the same question at once."""

        async def action() -> None:
            attempt = self.pick(self.racing_candidates(), pick)
            rec = attempt.ask
            write = self.new_write(self.j_asks[rec.journal.record_id], dismiss=False)
            write.racing = rec
            rec.race = "another process"
            self.log(
                f"{write.name}: another process answers {rec.name} in the same turn as "
                f"{attempt.name} ({'the other first' if other_first else 'the provider first'})"
            )
            if other_first:
                self.spawn(self._write, write)
                self.give(attempt, "answer")
            else:
                self.give(attempt, "answer")
                self.spawn(self._write, write)
            await self._await_delivery(rec, write)

        self.do(action)

    @precondition(lambda self: self.j_daemon is not None and self.racing_candidates())
    @rule(pick=st.integers(0, 63))
    def answer_as_the_process_stops(self, pick: int) -> None:
        """The provider answers in the turn the process stops: the answer must be kept."""

        async def action() -> None:
            attempt = self.pick(self.racing_candidates(), pick)
            attempt.ask.race = "the process stopping"
            self.log(
                f"{attempt.name} ({attempt.ask.name}) answers as {name_of(self.j_daemon)} stops"
            )
            await self._stop_daemon(racing=attempt)

        self.do(action)

    def new_write(self, target: AskRecord, *, dismiss: bool) -> MWrite:
        name = f"w{next(self.ids)}"
        answer = None if dismiss else written_answer(target.request, name)
        text = None if answer is None else answer.answer
        write = MWrite(name, target.id, text, target.pending, answer)
        self.j_writes.append(write)
        return write

    async def _write(self, write: MWrite) -> None:
        try:
            if write.text is None:
                settlement = await self.j_journal.settle_ask(
                    write.ask_id, AskState.FAILED, code=ErrorCode.ASK_CANCELLED, by=FLEET
                )
            else:
                assert write.answer is not None
                settlement = await self.j_journal.answer_ask(write.ask_id, write.answer, by=FLEET)
        except JournalError as error:
            write.error = f"{error.code}: {error}"
        else:
            write.won = settlement.won
        finally:
            write.done = True

    async def _await_delivery(self, rec: Any, write: MWrite) -> None:
        """An ask answered elsewhere while it waits receives it: it must end, soon."""
        wait = scaled(DELIVERY_WAIT)
        with anyio.move_on_after(wait) as late:
            await rec.journal.done.wait()
        if late.cancelled_caught:
            self.fail_journal(
                f"{rec.name} is still waiting {wait:g} s after {write.name} settled "
                f"its record {write.ask_id} (won: {write.won}): the ask hangs"
            )
