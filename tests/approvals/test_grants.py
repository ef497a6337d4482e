"""A decision to run is a grant for one call: that digest, that run and agent, until its
expiry, once. Hypothesis draws the misuse: a grant redeemed twice, for changed arguments,
after its expiry, from another run or agent — refused every time, and never spent by a
refusal (the rightful call can still use it)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hotseam.interaction.approvals import (
    Approval,
    ApprovalDecision,
    Decision,
    GrantRefusedError,
    Grants,
    call_digest,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
arguments = st.dictionaries(st.text(min_size=1, max_size=6), json_values, max_size=4)
runs = st.sampled_from(["run-1", "run-2", None])
agents = st.sampled_from(["alpha", "beta", None])


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@given(
    args=arguments,
    other=arguments,
    run=runs,
    agent=agents,
    other_run=runs,
    other_agent=agents,
    expires_in=st.none() | st.floats(min_value=0.001, max_value=100),
    later=st.floats(min_value=0, max_value=200),
)
def test_a_grant_serves_its_own_call_once_and_nothing_else_ever(
    args: dict[str, object],
    other: dict[str, object],
    run: str | None,
    agent: str | None,
    other_run: str | None,
    other_agent: str | None,
    expires_in: float | None,
    later: float,
) -> None:
    clock = Clock()
    grants = Grants(clock)
    approval = Approval.of("deploy", args)
    decision = ApprovalDecision(Decision.APPROVE, approval.digest, approval.arguments)
    expires_at = None if expires_in is None else clock.now + expires_in
    grant = grants.issue(decision, run_id=run, agent=agent, expires_at=expires_at)
    changed = call_digest("deploy", other)
    # misuse first: every one refused, and none spends the grant
    if changed != approval.digest:
        with pytest.raises(GrantRefusedError) as refused:
            grants.redeem(grant.id, changed, run_id=run, agent=agent)
        assert refused.value.code == "APPROVAL_MISMATCH"
    if (other_run, other_agent) != (run, agent):
        with pytest.raises(GrantRefusedError) as refused:
            grants.redeem(grant.id, approval.digest, run_id=other_run, agent=other_agent)
        assert refused.value.code == "APPROVAL_ELSEWHERE"
    clock.now += later
    if expires_at is not None and clock.now >= expires_at:
        with pytest.raises(GrantRefusedError) as refused:
            grants.redeem(grant.id, approval.digest, run_id=run, agent=agent)
        assert refused.value.code == "APPROVAL_EXPIRED"
        return
    assert grants.redeem(grant.id, approval.digest, run_id=run, agent=agent) == grant
    with pytest.raises(GrantRefusedError) as refused:  # twice
        grants.redeem(grant.id, approval.digest, run_id=run, agent=agent)
    assert refused.value.code == "APPROVAL_USED"


@given(args=arguments)
def test_the_digest_is_the_canonical_call(args: dict[str, object]) -> None:
    """Key order does not change the digest; a changed value or tool does."""
    reordered = dict(reversed(list(args.items())))
    assert call_digest("deploy", args) == call_digest("deploy", reordered)
    assert call_digest("deploy", args) != call_digest("deploy2", args)
    assert call_digest("deploy", args) != call_digest("deploy", {**args, "\x00extra": 1})


def test_a_decision_that_runs_nothing_grants_nothing() -> None:
    grants = Grants()
    with pytest.raises(ValueError, match="lets nothing run"):
        grants.issue(ApprovalDecision(Decision.REJECT, "d", message="no"), run_id=None, agent=None)
    with pytest.raises(GrantRefusedError) as refused:
        grants.redeem("g404", "d", run_id=None, agent=None)
    assert refused.value.code == "APPROVAL_UNKNOWN"
