"""``hotseam run``'s deletion grace (``--deletion-grace``), with the real process, its native
watcher, SIGHUP and its control socket: a module whose folder (or file) is away keeps
serving while reloads land, and is never unloaded when it is back within the grace.

The grace itself is the reloader's (``WatchOptions(deletion_grace=...)``, tested in
``tests/reload/test_deletion_grace.py``); here is what a daemon's operator meets.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from ._support import ASKING_AGENT, HELD_PROVIDER, Process, hotseam, write


def _status(project: Path, runtime: Path) -> dict[str, tuple[str, int | None]]:
    """``hotseam status --json``: each module's path → its state and generation."""
    reply = hotseam("status", "--json", cwd=project, runtime=runtime)
    assert reply.returncode == 0, reply.stderr
    modules = json.loads(reply.stdout)["modules"]
    return {module["path"]: (module["state"], module["generation"]) for module in modules}


def test_run_keeps_a_module_away_within_the_grace_while_sighup_and_reload_land(
    tmp_path: Path,
) -> None:
    """The watched folder moved away (``git stash -u``), then ``ui.py`` alone deleted: SIGHUP
    and ``hotseam reload`` land meanwhile. ``ui.py`` keeps serving (its question stays
    open), is never unloaded, and runs the reload asked for once it is back."""
    project = tmp_path / "project"
    runtime = tmp_path / "runtime"
    providers = project / "providers"
    ui = write(providers / "ui.py", HELD_PROVIDER)
    write(project / "agent.py", ASKING_AGENT)
    away = project / "providers.away"
    process = Process(
        "run",
        "providers",
        "--agent",
        "agent.py",
        "--deletion-grace",
        "30",  # never reached: each return comes first
        cwd=project,
        runtime=runtime,
    )
    try:
        process.expect(r'"ask.started"')
        os.rename(providers, away)
        process.popen.send_signal(signal.SIGHUP)
        process.expect(r'"SIGHUP: 0 module\(s\) reloaded, 0 failed"')
        everything = hotseam("reload", cwd=project, runtime=runtime)
        assert (everything.returncode, everything.stdout) == (0, "nothing to reload\n")
        assert _status(project, runtime) == {"providers/ui.py": ("active", 1)}
        os.rename(away, providers)
        process.expect(r'"reloaded providers/ui.py \(generation 2\)')  # the reloads asked for

        source = ui.read_text()
        ui.unlink()
        one = hotseam("reload", "providers/ui.py", cwd=project, runtime=runtime)
        assert (one.returncode, one.stdout) == (0, "nothing to reload\n")
        assert _status(project, runtime) == {"providers/ui.py": ("active", 2)}
        ui.write_text(source)
        process.expect(r'"reloaded providers/ui.py \(generation 3\)')
        write(providers / "extra.py", "X = 1\n")  # a barrier: what came before is applied
        process.expect(r'"loaded providers/extra.py \(generation 1\)')
    finally:
        code = process.finish(signal.SIGTERM)
    assert code == 0, process.lines["stderr"]
    stderr = process.lines["stderr"]
    assert not [line for line in stderr if '"reload.unloaded"' in line]
    assert not [line for line in stderr if "waiting for a provider" in line]
    held = [line for line in stderr if '"reload.held"' in line]
    assert len(held) == 2, held
    assert all(
        "providers/ui.py is gone: kept serving for the deletion grace" in line for line in held
    )
