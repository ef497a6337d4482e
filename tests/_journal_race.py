"""Racing claims in tests/_journal_machine.py: another daemon starts for an agent this
process runs (a supervisor's retry, a fleet started together, a deploy that starts the new
daemon before the old one is gone) and tries to take its run — resuming it, or ``fresh``,
abandoning it. The run's owner lives: the other daemon is refused (``RUN_CLAIMED``), and
the run stays this daemon's, unfinished, its records untouched (the machine's checks read
the journal whole after the step)."""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from _journal_model import POLL_INTERVAL, Incarnation
from hotseam.interaction._journal import JournalError, JournalErrorCode, RunState, open_journal
from hotseam.interaction.journal import JournalDaemon

REFUSED = frozenset({JournalErrorCode.RUN_CLAIMED, JournalErrorCode.RUN_EXISTS})


class RacingClaimRules:
    """The rule of a daemon racing this one for an agent's run, mixed into
    :class:`~_journal_machine.JournalRules`."""

    def claimable(self: Any) -> list[Incarnation]:
        """The incarnations of the live daemon whose run is open."""
        daemon = self.j_daemon
        return [
            agent.inc
            for agent in self.j_agents
            if daemon is not None
            and agent.inc is not None
            and agent.inc.daemon is daemon
            and agent.inc.run is not None
            and agent.inc.ended is None
        ]

    @precondition(lambda self: self.claimable())
    @rule(pick=st.integers(0, 63), fresh=st.booleans())
    def another_daemon_claims(self, pick: int, fresh: bool) -> None:
        """Another daemon starts the agent of a run this process runs: it is refused."""

        async def action() -> None:
            inc = self.pick(self.claimable(), pick)
            assert inc.run is not None and inc.daemon.journaling is not None
            run_id, owner = inc.run.id, inc.daemon.journaling.daemon.id
            self.log(
                f"another daemon starts {inc.agent.key}{' --fresh' if fresh else ''} while "
                f"{inc.name} runs it in {inc.daemon.name}"
            )
            async with contextlib.AsyncExitStack() as stack:
                journal = self.j_journal
                if self.engine == "sqlite":  # another process opens the file anew
                    journal = await stack.enter_async_context(
                        open_journal(self.j_url, poll_interval=POLL_INTERVAL)
                    )
                    self.j_sqlite.append(journal)
                    stack.callback(self.j_sqlite.remove, journal)
                racer = await stack.enter_async_context(
                    JournalDaemon.open(journal, name=f"racer-{next(self.ids)}")
                )
                try:
                    async with racer.run(inc.agent.key, fresh=fresh) as taken:
                        self.fail_journal(
                            f"another daemon took run {taken.id} of {inc.agent.key} from "
                            f"{inc.daemon.name}, which lives ({inc.name} runs it)"
                        )
                except JournalError as error:
                    if error.code not in REFUSED:
                        self.fail_journal(
                            f"another daemon starting {inc.agent.key} failed with {error.code} "
                            f"instead of being refused: {error}"
                        )
            run = await self.j_journal.get_run(run_id)
            if run.state is not RunState.RUNNING or run.daemon_id != owner:
                self.fail_journal(
                    f"run {run_id} of {inc.name} is {run.state.value}, owned by "
                    f"{run.daemon_id}, after another daemon tried to take it (owner {owner})"
                )

        self.do(action)
