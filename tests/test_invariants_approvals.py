"""A property-based state machine over approvals (tests/_approval_machine.py).

Hypothesis drives agents making gated tool calls (arguments from a small set, so identical
calls recur), the human deciding each (approve, edit with other arguments, reject, respond,
always allow, always reject), possibly steps later; the user-interaction provider swapped
while approvals are open; rules added and revoked between calls; and, in the journal
variant, the daemon stopping mid-approval and a new one resuming the agents' runs (a call
changed now and then). After every step (settled):

* the tool ran only for a call whose decision, or a rule in force when it was read, let it
  run, with exactly the arguments decided (the edited ones for an edit), at most once per
  call in one daemon life;
* a rejected or responded call never ran, and its result carries the decision
  (``APPROVAL_REJECTED`` with the reason, or the response as its output);
* a call a rule decides is not asked (a reject rule wins), and each rule counts one use per
  call it decided; every Always allow / Always reject adds one rule;
* an open approval is asked once on the current provider: a swap re-asks it there, and one
  answer is taken per call;
* a resumed run replays the decision recorded for the same call at the same point without
  asking (and asks a changed call).

``HOTSEAM_STATEFUL_EXAMPLES`` sets the examples as in tests/test_invariants.py: a fifth of
them per backend (and per engine for the journal's variant), at least 10.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test

from _approval_machine import ApprovalMachine
from _journal_model import ENGINES
from test_invariants import EXAMPLES, SETTINGS

APPROVAL_EXAMPLES = max(EXAMPLES // 5, 10)
SIZED = settings(SETTINGS, max_examples=APPROVAL_EXAMPLES, stateful_step_count=30)


@pytest.mark.examples
@pytest.mark.timeout(120 + APPROVAL_EXAMPLES)
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_approval_invariants(backend: str) -> None:
    machine = type(f"ApprovalMachine_{backend}", (ApprovalMachine,), {"backend": backend})
    run_state_machine_as_test(machine, settings=SIZED)


@pytest.mark.examples
@pytest.mark.timeout(120 + APPROVAL_EXAMPLES)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_approval_invariants_with_a_journal(backend: str, engine: str) -> None:
    machine = type(
        f"JournalApprovalMachine_{backend}_{engine}",
        (ApprovalMachine,),
        {"backend": backend, "engine": engine, "journaled": True},
    )
    run_state_machine_as_test(machine, settings=SIZED)


class _RulesStayRevoked(ApprovalMachine):
    journaled = True
    replay_adds_rules = False


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_revoked_rule_stays_revoked_after_a_resume(backend: str) -> None:
    """What the journal variant found: an agent's call is decided Always allow (a rule for
    the run), the rule is revoked, the daemon restarts; the resumed run replays the recorded
    decision — and must not add the rule again (it did: the run's later calls ran unasked)."""
    machine_class = type(f"RulesStayRevoked_{backend}", (_RulesStayRevoked,), {"backend": backend})

    @settings(max_examples=1, database=None, deadline=None)
    @given(st.none())
    def run(_: None) -> None:
        machine = machine_class()
        try:
            machine.agent_calls_in_run(pick=0, args={"target": "a", "n": 1})
            machine.human_decides(pick=0, decision="always", edit={}, swap_after=False)
            machine.revoke_rule(pick=0)
            machine.daemon_restarts(change=None)
            machine.everything_holds()
        finally:
            machine.teardown()

    run()
