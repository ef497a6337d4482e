"""The daemon torture (bench/torture_daemon.py), short: carry, the deletion grace, replaced
folders, and a real ``hotseam run`` steered through its control socket and signals.

In process, on asyncio and trio: about 40 random steps — the reload torture's edits, edits of
what the provider carries (a counter and a real listening socket, refused by ``version`` and
``accept`` and made again), and episodes (the provider deleted, renamed, renamed to another
module; the whole folder removed and made again, deployed by renames, moved away, checked
out and stashed with git; within the grace and past it) — each episode followed by
convergence to the files. Against ``hotseam run``: about 25 steps with SIGHUP and a client
hammering the control socket. Every must-be-0 counter must stay 0. ``make stress`` runs the
long versions (600 steps per backend, 200 against the CLI).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from types import ModuleType

import pytest
from tests._timing import scaled

from _bench import load_bench

GIT = shutil.which("git") is not None

# Hundreds of random steps and a real daemon hammered: `make test-stress` (and CI) runs them.
pytestmark = pytest.mark.stress


def _bench(name: str) -> ModuleType:
    """A bench script's module (torture_daemon imports the CLI torture lazily)."""
    return load_bench(name, "_torture_cli")


@pytest.mark.anyio
@pytest.mark.timeout(90)
async def test_carry_grace_and_replaced_folders_hold_through_random_steps(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Broken saves and failing disposers are made on purpose: their error logs are noise.
    caplog.set_level(logging.CRITICAL, logger="hotseam")
    daemon = _bench("torture_daemon")
    settings = daemon.DaemonSettings(
        edits=40,
        seed=20261130,
        hang_after=scaled(10.0),
        settle_timeout=scaled(15.0),
        grace=0.3,
        root_check=0.1,
        episodes=0.25,
        git=GIT,
    )
    report = await daemon.run_daemon_torture(tmp_path, settings)
    print(report.render())  # shown with -rP, or -s
    assert report.section("episodes")["episodes"] >= 4
    assert report.section("carry")["counter: handed over"] > 0
    assert report.asks["answered"] > 0
    assert report.ok, report.render()


@pytest.mark.timeout(120)
def test_a_real_hotseam_run_survives_edits_signals_and_its_control_socket_hammered(
    tmp_path: Path,
) -> None:
    cli = _bench("_torture_cli")
    settings = cli.CliSettings(edits=25, seed=20261130, grace=0.3, git=GIT)
    report = cli.CliTorture(tmp_path, settings).run()
    print(report.render())
    assert report.asks["answered"] > 0
    assert report.section("control socket")["hostile lines"] > 0
    assert report.ok, report.render()
