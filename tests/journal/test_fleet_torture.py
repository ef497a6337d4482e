"""The fleet torture (bench/fleet_torture.py), short: real ``hotseam run`` daemons and two
``hotseam inbox`` processes on PostgreSQL and on SQLite, killed at random while the agents
ask and the inboxes race to answer.

Three agents, two runs of four questions each; the two inboxes answer half the questions at
the same instant; daemons are killed with SIGKILL at random (some frozen first, answered,
then killed: the answer committed, never received) and restarted, and an inbox is killed
and restarted. Each agent's first start and first restart after a kill start three daemons
at once for it (racing claims): one asks, the others exit 2 with one line. Every
must-be-0 counter stays 0: no answer lost, none delivered twice or to another question,
every replay consistent with the record, every question answered once, no racing loser
without its one line, never two askers in one run.
The same fleet on a PostgreSQL server of its own is stopped twice for 1-3 s meanwhile (the
torture's ``--outages``): the same counters stay 0.
``make stress`` runs the long version (1,200 questions, 100+ daemon and 20+ inbox kills).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from tests._timing import scaled

from _bench import load_bench
from _postgres import PostgresServer, PostgresUnavailableError, postgres_unavailable

torture = load_bench("fleet_torture", "_fleet_world", "_fleet_ledger")

# About a minute of daemons killed at random: `make test-stress` runs it (and CI), not `make test`.
pytestmark = pytest.mark.stress


@pytest.fixture(params=["postgresql", "sqlite"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """The engine and the URL of a new journal on it."""
    if request.param == "sqlite":
        return "sqlite", str(tmp_path / "journal.sqlite3")
    url: str = request.getfixturevalue("postgres_url")
    return "postgresql", url


@pytest.mark.timeout(180)
def test_a_fleet_killed_at_random_loses_no_answer_and_delivers_each_once(
    engine: tuple[str, str], tmp_path: Path
) -> None:
    name, url = engine
    settings = torture.FleetSettings(
        engine=name,
        daemons=3,
        agents=1,
        questions=24,
        per_run=4,
        daemon_kills=6,
        inbox_kills=1,
        kill_interval=0.2,
        window_share=0.5,
        answer_delay=0.05,
        restart_delay=0.2,
        seed=20261201,
        timeout=scaled(120.0),
    )
    report = anyio.run(torture.run_torture, settings, tmp_path / "fleet", url)
    print(report.render())  # shown with -rP, or -s
    counts = report.counts
    # 24 questions, and the questions of each run a slow racer started of its own (a racer
    # that got going after the winner had ended the agent's run: a new run, counted apart).
    slow_racers = counts["runs of slow racers (started after the winner's run ended; told)"]
    expected = 24 + slow_racers * settings.per_run
    assert counts["questions expected"] == expected, report.render()
    assert counts["answered"] == counts["questions asked (records)"] == expected, report.render()
    assert counts["daemon kills (SIGKILL)"] >= 6
    assert counts["of which the answer was committed while it was frozen"] >= 1
    assert counts["inbox kills (SIGKILL)"] >= 1
    assert counts["inbox answers posted"] > 24  # half of them raced in both inboxes
    assert counts["races (daemons started at once for one agent)"] >= 3  # first starts
    assert report.ok, report.render()


@pytest.mark.timeout(240)
def test_a_fleet_whose_postgres_server_stops_twice_loses_and_repeats_nothing(
    tmp_path: Path,
) -> None:
    """The same fleet on a PostgreSQL server of its own, stopped twice for 1-3 s while it
    asks and answers: questions wait for it, no run's end is lost (no finished run
    replays), racers cut by an outage still refuse with exit 2 and one line."""
    try:
        import psycopg  # noqa: F401
    except ImportError as error:
        postgres_unavailable(f"psycopg is not installed ({error})")
    try:
        server = PostgresServer.start()
    except PostgresUnavailableError as error:
        postgres_unavailable(str(error))
    try:
        settings = torture.FleetSettings(
            engine="postgresql",
            daemons=3,
            agents=1,
            questions=24,
            per_run=4,
            daemon_kills=4,
            inbox_kills=1,
            kill_interval=0.3,
            answer_delay=0.05,
            restart_delay=0.2,
            outages=2,
            outage_interval=2.0,
            seed=20261202,
            timeout=scaled(150.0),
        )
        report = anyio.run(
            torture.run_torture, settings, tmp_path / "fleet", server.new_schema(), server
        )
    finally:
        server.stop()
    print(report.render())
    assert report.counts["journal outages (the server stopped 1-3 s)"] == 2, report.render()
    assert report.counts["answered"] == report.counts["questions expected"], report.render()
    assert report.ok, report.render()
