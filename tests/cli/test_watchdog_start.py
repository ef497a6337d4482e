"""The watchdog never reports hotseam's own start-up: opening a PostgreSQL journal imports
psycopg (a second or more; five on a busy machine), and that import must not run on the
event loop the watchdog watches.

A real ``hotseam run --journal postgresql://...`` whose import of psycopg is made slow on
purpose: a ``sitecustomize`` on ``PYTHONPATH`` puts a finder in front of the others that
sleeps when psycopg is imported (and notes in which thread). The daemon must ask its
question without a ``loop.blocked`` line.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from _timing import scaled
from cli._support import hotseam_env, write
from journal.conftest import postgres_server, postgres_url  # noqa: F401 (fixtures)

SLOW_IMPORT = 5.0
"""Seconds the import of psycopg takes: well over the default stall warning (2 s)."""

SLOW_PSYCOPG = """
import os
import sys
import threading
import time


def importing():
    \"\"\"True inside an import statement (not importlib.util.find_spec's mere look).\"\"\"
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == "_find_and_load":
            return True
        frame = frame.f_back
    return False


class SlowPsycopg:
    \"\"\"Sleeps when psycopg is imported, then lets the real finders find it.\"\"\"

    def find_spec(self, name, path=None, target=None):
        if name == "psycopg" and importing():
            with open(os.environ["SLOW_MARK"], "a") as mark:
                mark.write(threading.current_thread().name + "\\n")
            time.sleep(float(os.environ["SLOW_IMPORT"]))
        return None


sys.meta_path.insert(0, SlowPsycopg())
"""

AGENT = """
async def main(context):
    await context.tools.execute("ask_user_question", {"question": "Deploy now?"})
"""


def test_a_slow_psycopg_import_at_start_is_not_reported_as_a_blocked_loop(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
) -> None:
    write(tmp_path / "slow" / "sitecustomize.py", SLOW_PSYCOPG)
    write(tmp_path / "agent.py", AGENT)
    (tmp_path / "providers").mkdir()
    (tmp_path / "never.json").write_text(json.dumps([{"never": True}]))
    mark = tmp_path / "psycopg-imported-in"
    env = {
        **hotseam_env(tmp_path / "rt"),
        "PYTHONPATH": os.pathsep.join(
            [str(tmp_path / "slow"), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
        "SLOW_MARK": str(mark),
        "SLOW_IMPORT": str(SLOW_IMPORT),
    }
    daemon = subprocess.Popen(
        [sys.executable, "-m", "hotseam", "run", "providers", "--agent", "agent.py",
         "--answers", str(tmp_path / "never.json"), "--journal", postgres_url],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: queue.Queue[str | None] = queue.Queue()
    seen: list[str] = []

    def pump() -> None:
        assert daemon.stderr is not None
        for line in daemon.stderr:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + scaled(20) + SLOW_IMPORT
        while not any('"ask.started"' in line for line in seen):
            try:
                line = lines.get(timeout=max(deadline - time.monotonic(), 0.001))
            except queue.Empty:
                pytest.fail(f"the daemon did not ask in time: {seen}")
            if line is None:
                pytest.fail(f"the daemon ended before asking: {seen}")
            seen.append(line)
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(timeout=scaled(30))
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        reader.join(timeout=scaled(10))
        assert daemon.stderr is not None
        daemon.stderr.close()
    while (line := lines.get_nowait() if not lines.empty() else None) is not None:
        seen.append(line)
    shown = "\n".join(seen)
    assert code == 0, shown
    threads = mark.read_text().splitlines()
    assert threads, "the slow finder never saw psycopg imported"
    events = [json.loads(line)["event"] for line in seen if line[:1] == "{"]
    assert "loop.blocked" not in events, shown
    assert "MainThread" not in threads, threads  # imported off the event loop's thread
