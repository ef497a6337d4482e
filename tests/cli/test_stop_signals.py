"""A stop signal that the kernel gives to a thread other than the main one.

Python runs signal handlers in the main thread only, and the kernel may deliver a process's
SIGTERM to any thread that does not block it (the log writer, a worker). The event loop
asleep in ``epoll_wait`` must still wake and act on it: before this was handled, ``hotseam
mcp`` now and then ignored the third SIGTERM of a stop held by a disposer (its loop slept for
the disposer's hour). A real process on each backend's own ``run`` (pytest's anyio runner
drives trio in guest mode, which would not show it); ``signal.pthread_kill`` gives the
signal to one chosen thread, once the main thread sleeps in ``epoll_wait``.
"""

from __future__ import annotations

import json
import platform
import signal
import subprocess
import sys

import anyio
import pytest
from tests._timing import scaled

from hotseam.cli._stdio_cmd import StopSignals

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.machine() != "x86_64",
    reason="reads the main thread's system call number from /proc (x86_64 Linux)",
)

CHILD = r"""
import json, signal, sys, threading, time
from pathlib import Path

import anyio

from hotseam.cli._stdio_cmd import StopSignals

BACKEND, PATIENCE = sys.argv[1], float(sys.argv[2])
EPOLL_WAITS = {"232", "281", "441"}  # x86_64: epoll_wait, epoll_pwait, epoll_pwait2


def main_thread_sleeps_in_epoll():
    main = threading.main_thread().native_id
    syscall = Path(f"/proc/self/task/{main}/syscall").read_text().split()
    return bool(syscall) and syscall[0] in EPOLL_WAITS


def send_from_another_thread():
    # Nothing can be awaited for "the loop is asleep": read the main thread's system call.
    deadline = time.monotonic() + PATIENCE
    while not main_thread_sleeps_in_epoll() and time.monotonic() < deadline:
        time.sleep(0.001)
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)


async def main():
    before = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(before)
    stop = anyio.CancelScope()
    with anyio.move_on_after(PATIENCE) as deadline:
        with signals.cancelling(stop), stop:
            threading.Thread(target=send_from_another_thread).start()
            await anyio.sleep_forever()
    after = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(after)
    print(json.dumps({
        "cancelled": stop.cancel_called,
        "deadline": deadline.cancel_called,
        "received": signals.received,
        "wakeup_fd_restored": after == before,
    }))


signals = StopSignals("test", report=lambda name, count: None)
signals.install()
anyio.run(main, backend=BACKEND)
"""


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_signal_taken_by_another_thread_wakes_the_loop(backend: str) -> None:
    """The loop has nothing to do until its deadline; the signal, delivered to another
    thread, cancels the bound scope at once, not at the loop's next wake-up; afterwards the
    process's wakeup descriptor is what it was before."""
    patience = scaled(20)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, backend, str(patience)],
        capture_output=True,
        text=True,
        timeout=patience * 3,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome == {
        "cancelled": True,
        "deadline": False,
        "received": [15],
        "wakeup_fd_restored": True,
    }


class _NestingList(list[int]):
    """``received`` of a handler that a second signal interrupts right after it counted its
    own: SIGTERM's handler runs inside SIGINT's, as when a host sends both at once."""

    def __init__(self, signals: StopSignals) -> None:
        super().__init__()
        self.signals = signals

    def append(self, signum: int) -> None:
        super().append(signum)
        if len(self) == 1:
            self.signals._handle(signal.SIGTERM, None)


@pytest.mark.anyio
async def test_a_second_signal_whose_handler_runs_inside_the_firsts_still_starts_the_stop() -> None:
    """Both handlers then see two signals; the loop, not the handlers, says which was
    first, so the scope is cancelled and the first signal is reported as the first."""
    reports: list[tuple[str, int]] = []
    signals = StopSignals("test", report=lambda name, count: reports.append((name, count)))
    signals.received = _NestingList(signals)
    stop = anyio.CancelScope()
    with anyio.move_on_after(scaled(10)) as deadline:
        with signals.cancelling(stop), stop:
            signals._handle(signal.SIGINT, None)
            await anyio.sleep_forever()
    assert not deadline.cancel_called, reports
    assert stop.cancel_called
    assert [count for _, count in reports] == [1, 2]
    assert sorted(name for name, _ in reports) == ["SIGINT", "SIGTERM"]
    assert signals.received == [signal.SIGINT, signal.SIGTERM]
