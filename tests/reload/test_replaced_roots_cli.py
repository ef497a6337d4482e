"""``hotseam run`` with its watched folder moved away past the grace and back, then replaced.

The real process, its real native watcher and deletion grace (issue 21, items 3 and 4): a
question asked while the folder is away is answered by the provider that comes back with
it, and the folder made again by ``rm -rf`` and a new copy is still watched.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

from cli._support import (  # the shared subprocess reader (tests/cli)
    ANSWERING_PROVIDER,
    ASKING_AGENT,
    HELD_PROVIDER,
    Process,
    write,
)


def test_run_loads_a_folder_back_after_the_grace_and_follows_its_replacement(
    tmp_path: Path,
) -> None:
    providers = tmp_path / "providers"
    write(providers / "ui.py", HELD_PROVIDER)
    write(tmp_path / "agent.py", ASKING_AGENT)
    away = tmp_path / "p.away"
    process = Process(
        "run", "providers", "--agent", "agent.py", "--deletion-grace", "0.3", cwd=tmp_path
    )
    try:
        process.expect(r'"ask.started"')
        os.rename(providers, away)
        process.expect(r'"event": "reload.root_gone"')
        process.expect(r'"unloaded providers/ui.py \(generation 1 disposed\)"')
        process.expect(r"waiting for a provider of 'user-interaction'")
        write(away / "ui.py", ANSWERING_PROVIDER)  # changed while away: not seen yet
        os.rename(away, providers)
        process.expect(r'"watched folder providers is back: watching it again"')
        process.expect(r'"reloaded providers/ui.py \(generation 2\)')
        process.expect(r"^answer: teal$", stream="stdout")
        # Replaced in place (rm -rf and a new copy, as a checkout does): still watched.
        # The two steps are not one: a watcher that looks between them sees the folder
        # gone and back, one that looks after sees it replaced; both must watch the new one.
        shutil.rmtree(providers)
        write(providers / "ui.py", ANSWERING_PROVIDER)
        process.expect(
            r'"watched folder providers (was replaced by another folder|is back: watching it)'
        )
        write(providers / "extra.py", "X = 1\n")
        process.expect(r'"loaded providers/extra.py \(generation 1\)')
    finally:
        code = process.finish(signal.SIGTERM)
    assert code == 0, process.lines["stderr"]
    gone = [line for line in process.lines["stderr"] if '"reload.root_gone"' in line]
    assert 1 <= len(gone) <= 2, gone
    assert all('"level": "warning"' in line for line in gone), gone
