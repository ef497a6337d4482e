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

from _bench import load_bench

pytestmark = pytest.mark.anyio


torture = load_bench("torture")


@pytest.mark.timeout(60)
async def test_every_reload_guarantee_holds_through_random_edits(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Broken saves and failing disposers are made on purpose: their error logs are noise.
    caplog.set_level(logging.CRITICAL, logger="hotseam")
    settings = torture.Settings(edits=80, seed=20261129, hang_after=10.0, settle_timeout=15.0)
    report = await torture.run_torture(tmp_path, settings)
    print(report.render())  # shown with -rP, or -s
    assert sum(report.edits.values()) >= 80
    assert report.asks["answered"] > 0
    assert report.asks["asks of several questions answered"] > 0
    assert report.ok, report.render()
