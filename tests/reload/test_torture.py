"""The reload torture (bench/torture.py), short: real files, the real watcher, asks throughout.

About 80 random edits of a provider module and the helper it imports — valid versions,
atomic saves, syntax errors, exceptions at import and in setup, raising and overrunning
disposers, deletions, renames — while four tasks ask continuously, 15 % of the asks are
cancelled and 30 % hold three questions. Every guarantee counter (per question too) must stay
0 and the state after the last save must equal loading the last good content once. ``make
stress`` runs the long version (1,000 edits).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from tests._timing import scaled

from _bench import load_bench

pytestmark = pytest.mark.anyio


torture = load_bench("torture")


@pytest.mark.stress  # 80 random edits: `make test-stress` (and CI); the sabotages below stay
@pytest.mark.timeout(60)
async def test_every_reload_guarantee_holds_through_random_edits(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Broken saves and failing disposers are made on purpose: their error logs are noise.
    caplog.set_level(logging.CRITICAL, logger="hotseam")
    settings = torture.Settings(
        edits=80, seed=20261129, hang_after=scaled(10.0), settle_timeout=scaled(15.0)
    )
    report = await torture.run_torture(tmp_path, settings)
    print(report.render())  # shown with -rP, or -s
    assert sum(report.edits.values()) >= 80
    assert report.asks["answered"] > 0
    assert report.asks["asks of several questions answered"] > 0
    assert report.ok, report.render()


journal_torture = load_bench("_torture_journal")

CAUGHT_BY = {
    "no-withdraw": "journal: records left pending when their ask ended",
    "forget-answer": "journal: records left pending when their ask ended",
    "replay-position": "journal: replays not as recorded",
    "answer-twice": "journal: answers recorded twice",
    "touch-ended": "journal: records of ended runs changed afterwards",
}


@pytest.mark.stress
@pytest.mark.timeout(60)
@pytest.mark.parametrize("engine", ["sqlite", "memory"])
async def test_every_reload_and_journal_guarantee_holds_through_restarts(
    engine: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The same with the asks in agent runs of a journal (``--journal``), and the daemon
    restarted every 8 edits: each record settled as its asker got, resumed runs replay
    what was settled and re-attach to what was pending, ended runs never change.

    Asks of one question only: a restart loses the answers to the questions of an ask of
    several answered before it (the open finding of tests/interaction/test_asks_at_their_edges.py,
    which the long version counts as *questions of several answered before their ask was
    cut, asked again*)."""
    caplog.set_level(logging.CRITICAL, logger="hotseam")
    folder = tmp_path / "watched"  # the SQLite journal goes beside it
    folder.mkdir()
    settings = torture.Settings(
        edits=40,
        seed=20261201,
        several_ratio=0.0,
        hang_after=scaled(10.0),
        settle_timeout=scaled(15.0),
    )
    report = await journal_torture.run_journal_torture(folder, settings, engine, restart_every=8)
    print(report.render())
    journal = report.sections["journal"]
    assert journal["restarts"] == 5
    assert journal["runs resumed"] > 0
    assert journal["replayed: answered"] > 0
    assert journal["runs finished"] > 0
    assert report.asks["answered"] > 0
    assert report.ok, report.render()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("sabotage", list(CAUGHT_BY))
async def test_the_journal_torture_catches_each_guarantee_broken_on_purpose(
    sabotage: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``--sabotage`` breaks one guarantee (a withdrawal or an answer not recorded, the
    replay of the wrong position, an answer written over, a record of an ended run
    changed): its counter must catch it (one backend: the checker is what is tested).

    A short run only breaks a guarantee when its timing brings the sabotaged step about (a
    busy machine asks fewer questions per edit): up to three seeds, the first catching it."""
    caplog.set_level(logging.CRITICAL, logger="hotseam")
    for seed in (1, 2, 3):
        folder = tmp_path / f"watched-{seed}"
        folder.mkdir()
        settings = torture.Settings(
            edits=12, seed=seed, several_ratio=0.0, settle_timeout=scaled(15.0)
        )
        report = await journal_torture.run_journal_torture(
            folder, settings, "sqlite", restart_every=4, sabotage=sabotage
        )
        if report.zero[CAUGHT_BY[sabotage]] > 0:
            break
    assert report.zero[CAUGHT_BY[sabotage]] > 0, report.render()
    assert not report.ok


approval_torture = load_bench("_torture_approvals")


@pytest.mark.stress
@pytest.mark.timeout(90)
async def test_every_approval_guarantee_holds_through_reloads_and_restarts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The journal torture with tool calls needing approval: decided by the provider
    modules through reloads, replayed through restarts — never applied to another call,
    never used twice, never asked again once recorded, run exactly as decided."""
    caplog.set_level(logging.CRITICAL, logger="hotseam")
    folder = tmp_path / "watched"
    folder.mkdir()
    settings = torture.Settings(
        edits=40,
        seed=20261203,
        several_ratio=0.0,
        hang_after=scaled(10.0),
        settle_timeout=scaled(15.0),
    )
    report = await approval_torture.run_approval_torture(
        folder, settings, "sqlite", approvals=0.5, restart_every=8
    )
    print(report.render())
    assert report.sections["journal"]["restarts"] == 5
    assert report.ok, report.render()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_approval_torture_catches_a_decision_applied_to_another_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``--sabotage approve-other`` (a gate running an approved call with the previous
    call's arguments) must be caught by the approvals' counters."""
    caplog.set_level(logging.CRITICAL, logger="hotseam")
    for seed in (1, 2, 3):
        folder = tmp_path / f"watched-{seed}"
        folder.mkdir()
        settings = torture.Settings(
            edits=12, seed=seed, several_ratio=0.0, settle_timeout=scaled(15.0)
        )
        report = await approval_torture.run_approval_torture(
            folder, settings, "sqlite", approvals=0.5, restart_every=4, sabotage="approve-other"
        )
        if report.zero[approval_torture.APPLIED_ELSEWHERE] > 0:
            break
    assert report.zero[approval_torture.APPLIED_ELSEWHERE] > 0, report.render()
    assert not report.ok
