"""Run a user's test file in a pytest subprocess, as a user's suite runs with the plugin."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run_users_tests(folder: Path, source: str, *options: str) -> str:
    """Write ``source`` as ``test_users.py`` in ``folder``, run pytest on it with
    ``options``, and return its output (whatever the outcome)."""
    (folder / "test_users.py").write_text(source, encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "test_users.py",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-p",
            "no:xdist",
            "-rN",
            *options,
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.stdout + done.stderr
