"""``hotseam inbox`` stopped by SIGTERM while it starts: a clean stop (exit 0), never death
by the signal's default action (-15).

The web inbox's modules take seconds to import on a busy machine, and a supervisor (or a
host) may stop the command at any moment of that. Its stop signals are handled from the
moment its parser is built, before those imports. A real ``python -m hotseam inbox`` and a
real SIGTERM at three early moments: as soon as the process handles SIGTERM at all (read
from ``/proc``), while the web modules are being imported (pydantic-core's library just
mapped), and after the first log line.

(A SIGTERM before the interpreter has run any of hotseam's code, in the first tens of
milliseconds, still gets the default action: no Python program can handle it earlier.)
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process
from tests._timing import scaled

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.parametrize("anyio_backend", ["asyncio"]),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID"),
]

_SIGTERM_BIT = 1 << (signal.SIGTERM - 1)


def _handles_sigterm(process: Process) -> bool:
    """Whether the process has a handler for SIGTERM (``SigCgt`` in ``/proc/PID/status``)."""
    try:
        status = Path(f"/proc/{process.pid}/status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & _SIGTERM_BIT)
    return False


def _importing_the_web_modules(process: Process) -> bool:
    """Whether pydantic-core's library is mapped: the web inbox's modules are importing
    (``hotseam.cli`` and the stop-signal handling import no pydantic)."""
    try:
        return "_pydantic_core" in Path(f"/proc/{process.pid}/maps").read_text()
    except OSError:
        return False


async def _polled(check: Callable[[Process], bool], process: Process) -> None:
    """Until ``check`` holds: a moment another process reaches, seen only from outside."""
    while not check(process):
        assert process.returncode is None, "the inbox exited before the moment"
        await anyio.sleep(0.001)


async def _first_log_line(process: Process) -> None:
    assert process.stderr is not None
    received = b""
    while b"\n" not in received:
        received += await process.stderr.receive()


MOMENTS: dict[str, Callable[[Process], Awaitable[None]]] = {
    "sigterm-handled": lambda process: _polled(_handles_sigterm, process),
    "importing-the-web-modules": lambda process: _polled(_importing_the_web_modules, process),
    "after-the-first-log-line": _first_log_line,
}


@pytest.mark.parametrize("moment", list(MOMENTS))
async def test_a_sigterm_while_the_inbox_starts_is_a_clean_stop(
    tmp_path: Path, moment: str
) -> None:
    process = await anyio.open_process(
        [
            sys.executable,
            "-m",
            "hotseam",
            "inbox",
            "--journal",
            str(tmp_path / "journal.sqlite3"),
            "--web-port",
            "0",
            "--log-format",
            "json",
        ],
        cwd=tmp_path,
    )
    try:
        with anyio.fail_after(scaled(60)):
            await MOMENTS[moment](process)
        process.send_signal(signal.SIGTERM)
        assert process.stderr is not None
        with anyio.fail_after(scaled(60)):
            stderr = b"".join([chunk async for chunk in process.stderr]).decode()
            code = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await process.aclose()
    assert code == 0, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    events = [json.loads(line)["event"] for line in stderr.splitlines() if line.startswith("{")]
    assert "SIGTERM: shutting down" in events, stderr[-3000:]
    assert events[-1] == "the inbox stopped; every open page was told", events
