"""Logs never block the program: stderr piped to a client that does not read it.

Toad and the ACP SDK's ``spawn_agent_process`` read the agent's stderr only at exit. Once
the pipe's 64 KiB are full, log lines are dropped and counted instead of stalling the
process, and the count is reported when the pipe is read again.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog
from tests._timing import scaled

from hotseam.cli._log_sink import EXIT_WAIT, StderrSink

START_BOUND = 20.0
"""``initialize`` is answered within this (starting Python and importing takes seconds)."""

TURN_BOUND = 5.0
"""Each prompt turn must be answered within this (one takes ~2 ms when nothing blocks)."""

DROPPED = "lines dropped: stderr was not being read"

NOISY_AGENT = Path(__file__).parents[1] / "providers" / "acp" / "acp_test_agents.py"


class _Agent:
    """``hotseam acp`` spoken to in raw JSON-RPC lines; its stderr is a pipe nobody reads."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "hotseam", "acp", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._buffer = b""
        self._next_id = 0

    def request(
        self, method: str, params: dict[str, Any], bound: float = TURN_BOUND
    ) -> dict[str, Any]:
        """Send a request; return its response (notifications on the way are skipped).
        ``bound``: seconds on an idle machine, scaled here."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self._next_id += 1
        message = {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params}
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        self.process.stdin.flush()
        deadline = time.monotonic() + scaled(bound)
        while True:
            while b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                received = json.loads(line)
                if "method" in received and "id" in received:
                    self._dismiss(received)
                elif received.get("id") == self._next_id:
                    return received  # type: ignore[no-any-return]
            ready, _, _ = select.select(
                [self.process.stdout], [], [], max(deadline - time.monotonic(), 0)
            )
            assert ready, f"{method} #{self._next_id} not answered within {bound} s"
            chunk = os.read(self.process.stdout.fileno(), 65536)
            assert chunk, f"stdout closed before {method} #{self._next_id} was answered"
            self._buffer += chunk

    def _dismiss(self, request: dict[str, Any]) -> None:
        """Answer a question the agent asks (a permission request, on a client without
        form elicitation) the way a human dismissing it would: cancelled."""
        assert self.process.stdin is not None
        result = (
            {"outcome": {"outcome": "cancelled"}}
            if request["method"] == "session/request_permission"
            else {"action": "cancel"}
        )
        reply = {"jsonrpc": "2.0", "id": request["id"], "result": result}
        self.process.stdin.write((json.dumps(reply) + "\n").encode())
        self.process.stdin.flush()


@pytest.fixture
def agent() -> Iterator[_Agent]:
    started = _Agent("--log-level", "debug")
    try:
        yield started
    finally:
        if started.process.poll() is None:
            started.process.kill()
        started.process.communicate()


def test_a_thousand_turns_with_stderr_never_read(agent: _Agent) -> None:
    """1,000 prompt turns at debug level (~1.3 MB of logs, 20 times the pipe) each answered
    in time; at the end stderr holds the dropped-lines report, every line is JSON, the
    newest lines (the shutdown) are kept, and the exit code is 0."""
    agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}}, START_BOUND)
    session = agent.request("session/new", {"cwd": "/tmp", "mcpServers": []})
    session_id = session["result"]["sessionId"]
    prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}
    for _ in range(1000):
        assert agent.request("session/prompt", prompt)["result"]["stopReason"] == "end_turn"

    _, stderr = agent.process.communicate(timeout=scaled(10))  # closes stdin: the client is done
    assert agent.process.returncode == 0
    logs = [json.loads(line) for line in stderr.decode().splitlines()]
    (report,) = [line for line in logs if line["event"] == "log.dropped"]
    assert report["dropped"] > 1000
    assert report["message"] == f"hotseam: {report['dropped']} {DROPPED}"
    assert report["level"] == "warning"
    assert logs[-1]["event"] == "acp.stopped"


def test_prints_at_every_turn_with_stderr_never_read() -> None:
    """An agent that prints (2 KiB to stdout, a line to stderr) and writes to file
    descriptors 1 and 2 at every turn, and whose first turn waits for a child process that
    writes 256 KiB to the stderr it inherits: 300 turns, each answered in time (a blocking
    write froze the session at turn 17), stdout holding protocol messages only. At the end
    stderr keeps the newest lines whole, the dropped ones counted, and the exit code is 0."""
    agent = _Agent("--agent", f"{NOISY_AGENT}:noisy_agent")
    try:
        agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}}, START_BOUND)
        session = agent.request("session/new", {"cwd": "/tmp", "mcpServers": []})
        session_id = session["result"]["sessionId"]
        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}
        for _ in range(300):
            assert agent.request("session/prompt", prompt)["result"]["stopReason"] == "end_turn"
        _, stderr = agent.process.communicate(
            timeout=scaled(10)
        )  # closes stdin: the client is done
    finally:
        if agent.process.poll() is None:
            agent.process.kill()
            agent.process.communicate()
    assert agent.process.returncode == 0
    lines = stderr.decode().splitlines()
    logs = [json.loads(line) for line in lines if line.startswith("{")]
    reports = [line for line in logs if line["event"] == "log.dropped"]
    assert sum(report["dropped"] for report in reports) > 300
    assert logs[-1]["event"] == "acp.stopped"
    output = [line for line in lines if not line.startswith("{")]
    assert output, "the newest output is kept"
    for line in output:  # each line whole: never cut by a log line, never two in one
        kind, turn, rest = line.split(" ", 2)
        assert 1 <= int(turn) <= 300
        expected = {
            "print": "o" * 2048,
            "print-stderr": "e" * 100,
            "fd1": "1" * 2048,
            "fd2": "2",
            "child": "c" * 1023,
        }
        assert rest == expected[kind], line[:80]
    assert f"print 300 {'o' * 2048}" in output  # the last turn's output made it out


CAPTURED = """
import os, subprocess, sys
from hotseam.cli._log_sink import OutputCapture, StderrSink
sink = StderrSink(2)
stdout, stderr = sys.stdout, sys.stderr
with OutputCapture(sink):
    print("one", "line")
    print("unfinished", end="", file=sys.stderr)
    sys.stderr.flush()
    print(" ended")
    os.write(2, b"fd, unfinished")
    sys.__stdin__.readline()  # the test saw it: written once the pipe was quiet, as it is
    os.write(1, b" and ended\\n")
    subprocess.run([sys.executable, "-c", "print('child')"], stdout=sys.stdout, check=True)
    assert (sys.stdout.fileno(), sys.stderr.fileno()) == (1, 2)
assert (sys.stdout, sys.stderr) == (stdout, stderr)
print("restored")
sink.drain(5.0)
"""


def test_output_capture_in_lines() -> None:
    """What ``OutputCapture`` passes on: whole lines; an unfinished one when flushed or
    when the descriptor is quiet; a child's output; and everything put back at the end."""
    child = subprocess.Popen(
        [sys.executable, "-c", CAPTURED],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdin is not None and child.stderr is not None
    try:
        seen = b""
        while not seen.endswith(b"fd, unfinished"):
            ready, _, _ = select.select([child.stderr], [], [], scaled(START_BOUND))
            assert ready, f"the unfinished line was not written: {seen!r}"
            seen += os.read(child.stderr.fileno(), 65536)
        stdout, stderr = child.communicate(b"\n", timeout=scaled(START_BOUND))
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 0, stderr
    assert stdout == b"restored\n"  # stdout got nothing while captured
    assert (seen + stderr).decode().splitlines() == [
        "one line",
        "unfinished ended",
        "fd, unfinished and ended",
        "child",
    ]


LOG_10_000 = """
import time, structlog
from hotseam.cli._logging import configure_logging
configure_logging("console")
log = structlog.get_logger("child")
started = time.monotonic()
for index in range(10_000):
    log.info("line", index=index)
print(time.monotonic() - started, flush=True)
"""


def test_ten_thousand_log_calls_with_stderr_never_read() -> None:
    """As the CLI configures logging: the calls return while nobody reads stderr; reading
    it at the end shows the dropped-lines report, and the process exits 0."""
    child = subprocess.Popen(
        [sys.executable, "-c", LOG_10_000],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], scaled(START_BOUND))
        assert ready, "10,000 log calls did not return"
        assert float(child.stdout.readline()) < 5.0  # ~0.2 s; blocking never returns
        _, stderr = child.communicate(timeout=scaled(10))
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 0
    reports = [line for line in stderr.splitlines() if DROPPED in line]
    assert reports
    assert reports[0].startswith("hotseam: ")


EXIT_JOINS = """
import atexit, threading, structlog
def left() -> None:  # registered first, so it runs after the sink's own exit handler
    print(sorted(t.name for t in threading.enumerate() if t is not threading.main_thread()))
atexit.register(left)
from hotseam.cli._logging import configure_logging
configure_logging("json")
structlog.get_logger("child").info("one.line")
"""


def test_the_exit_writes_the_lines_and_joins_the_writer() -> None:
    """As the CLI ends: its last line is written and the writer thread is gone (nothing
    left running once the exit handlers are done)."""
    child = subprocess.run(
        [sys.executable, "-c", EXIT_JOINS],
        capture_output=True,
        text=True,
        timeout=scaled(START_BOUND),
    )
    assert child.returncode == 0, child.stderr
    assert json.loads(child.stderr)["event"] == "one.line"
    assert child.stdout == "[]\n"


EXIT_UNREAD = """
import structlog
from hotseam.cli._logging import configure_logging
configure_logging("json")
log = structlog.get_logger("child")
for index in range(3_000):  # ~400 KB: the pipe and the queue full
    log.info("line", index=index, padding="x" * 100)
print("logged", flush=True)
"""


def test_the_exit_is_prompt_with_stderr_never_read() -> None:
    """Nobody ever reads stderr and the writer is blocked in a write: the process still
    exits, and exits 0, about ``EXIT_WAIT`` after its last line."""
    child = subprocess.Popen(
        [sys.executable, "-c", EXIT_UNREAD], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], scaled(START_BOUND))
        assert ready, "3,000 log calls did not return"
        assert child.stdout.readline() == b"logged\n"
        logged = time.monotonic()
        assert child.wait(timeout=scaled(START_BOUND)) == 0  # a writer joined forever never returns
        assert time.monotonic() - logged < EXIT_WAIT + scaled(2.0)  # + the interpreter's own exit
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()


def _reader(fd: int, into: bytearray) -> threading.Thread:
    def read() -> None:
        while chunk := os.read(fd, 65536):
            into.extend(chunk)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    yield read_end, write_end
    for fd in (read_end, write_end):
        with contextlib.suppress(OSError):
            os.close(fd)


def test_ten_thousand_log_calls_into_a_full_pipe(pipe: tuple[int, int]) -> None:
    """The calls return at once; when the pipe is read, the lines come out in order, and
    each run of dropped lines is replaced by a line that counts it."""
    read_end, write_end = pipe
    sink = StderrSink(write_end, limit=32 * 1024)
    log = structlog.WriteLogger(sink)  # type: ignore[arg-type]
    started = time.monotonic()
    for index in range(10_000):
        log.info(f"line {index:05} " + "x" * 90)
    assert time.monotonic() - started < scaled(2.0)  # ~1 MB; blocking would hang at 64 KiB

    received = bytearray()
    reader = _reader(read_end, received)
    assert sink.close(timeout=5.0)  # everything written, the writer thread stopped
    os.close(write_end)
    reader.join(timeout=scaled(5.0))
    expected = 0
    reported = 0
    for line in received.decode().splitlines():
        if DROPPED in line:
            count = int(line.split()[1])
            assert line == f"hotseam: {count} {DROPPED}"
            expected += count
            reported += count
        else:
            assert line.startswith(f"line {expected:05} ")
            expected += 1
    assert expected == 10_000
    assert reported == sink.dropped > 8_000


def _fill(fd: int) -> None:
    """Fill the pipe behind ``fd``, as a client that never reads it would."""
    os.set_blocking(fd, False)
    with contextlib.suppress(BlockingIOError):
        while True:
            os.write(fd, b"x" * 4096)
    os.set_blocking(fd, True)


def test_exit_waits_a_bounded_time_on_a_dead_pipe(pipe: tuple[int, int]) -> None:
    """Nobody reads: closing gives up at its timeout instead of hanging the exit (the
    writer, blocked in its write, ends when the pipe does: the fixture closes it)."""
    _, write_end = pipe
    _fill(write_end)
    sink = StderrSink(write_end, limit=1024)
    for index in range(100):
        sink.write(f"line {index} " + "x" * 90 + "\n")
    started = time.monotonic()
    assert not sink.close(timeout=0.2)
    assert time.monotonic() - started < scaled(1.0)
    # Kept: at most one queue's worth (10 lines of ~100 bytes in 1,024) plus the batch the
    # writer took before the full pipe blocked it (another 10 at most).
    assert sink.dropped >= 80


def test_a_closed_reader_costs_nothing(pipe: tuple[int, int]) -> None:
    """EPIPE: the writer stops, further lines are discarded, draining returns at once."""
    read_end, write_end = pipe
    sink = StderrSink(write_end, limit=1024)
    os.close(read_end)
    sink.write("first\n")
    started = time.monotonic()
    assert not sink.drain(timeout=5.0)
    assert time.monotonic() - started < scaled(1.0)
    assert sink.write("second\n") == len("second\n")


def test_a_replaced_stderr_is_written_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    """A stream put in place of stderr (a prompt's patch, a test's capture) sees each line
    as it is logged, not through the writer thread."""
    from hotseam.cli._logging import configure_logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        configure_logging("json")
        structlog.get_logger("test").info("seen.at.once")
        assert json.loads(capsys.readouterr().err)["event"] == "seen.at.once"
    finally:
        # configure_logging is the CLI's, made for a whole process: undo it for the others.
        root.handlers[:] = handlers
        root.setLevel(level)


OFF_PATH = r"""
import json, pathlib, sys, threading, time, structlog
from hotseam.cli import _logging
from hotseam.cli._logging import configure_logging

configure_logging("json")
rendered_by = []  # the thread of each line rendered later
render_later = _logging._RenderLater._render_bytes


def noting(self, *args):
    rendered_by.append(threading.current_thread().name)
    return render_later(self, *args)


_logging._RenderLater._render_bytes = noting
log = structlog.get_logger("child")
shared = ["a"]
expected = []
for index in range(200):
    before = time.time_ns()
    kind = index % 4
    if kind == 0:
        fields = {"index": index, "ratio": index / 3, "even": index % 2 == 0, "none": None,
                  "text": "é ✓ \"quoted\""}
        log.info("plain", **fields)
        fields.update(event="plain", level="info")
    elif kind == 1:
        fields = {"index": index, "items": shared, "mapping": {"k": shared, "n": index},
                  "pair": (1, "x")}
        log.info("container", **fields)
        fields = json.loads(json.dumps({**fields, "event": "container", "level": "info"}))
        shared.append(str(index))  # after the call: its line shows the list as it was
    elif kind == 2:
        path = pathlib.Path("/x") / str(index)
        log.warning("object", index=index, path=path)
        fields = {"index": index, "path": repr(path), "event": "object", "level": "warning"}
    else:
        try:
            raise ValueError(index)
        except ValueError:
            log.error("failed", index=index, exc_info=True)
        fields = {"index": index, "event": "failed", "level": "error"}
    expected.append({"fields": fields, "before": before, "after": time.time_ns()})
assert _logging._stderr_sink().drain(30)
print(json.dumps({"expected": expected, "rendered_by": rendered_by}))
"""


def test_lines_rendered_off_the_path_keep_their_order_and_content() -> None:
    """As ``hotseam run`` logs to a pipe: a line of plain fields is rendered by the writer
    thread, one with an object or a traceback where it is logged; every line comes out in
    the order of the calls, with the same keys in the same order and the same values as
    structlog's chain renders (a list changed after the call shows what it held at the
    call), its timestamp the instant of the call."""
    child = subprocess.run(
        [sys.executable, "-c", OFF_PATH],
        capture_output=True,
        text=True,
        timeout=scaled(START_BOUND),
    )
    assert child.returncode == 0, child.stderr
    report = json.loads(child.stdout)
    lines = [json.loads(line) for line in child.stderr.splitlines()]
    assert [line["index"] for line in lines] == list(range(200))
    for line, wanted in zip(lines, report["expected"], strict=True):
        keys = [*wanted["fields"], "timestamp"]
        if wanted["fields"]["event"] == "failed":
            keys.append("exception")
            assert line["exception"].startswith("Traceback (most recent call last):")
            assert line["exception"].endswith(f"ValueError: {line['index']}")
        assert list(line) == keys
        assert {key: line[key] for key in wanted["fields"]} == wanted["fields"]
        stamp = datetime.fromisoformat(line["timestamp"].replace("Z", "+00:00"))
        micros = (stamp - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
        assert wanted["before"] // 1000 <= micros <= wanted["after"] // 1000
    assert report["rendered_by"] == ["hotseam-log-writer"] * 100  # the plain and the lists


def test_lines_rendered_later_keep_their_place_and_a_failed_one_says_so(
    pipe: tuple[int, int],
) -> None:
    read_end, write_end = pipe
    sink = StderrSink(write_end)

    def broken() -> bytes:
        raise RuntimeError("cannot render")

    try:
        sink.write("one\n")
        sink.write_later(lambda: b"two\n")
        sink.write_later(broken)
        sink.write_bytes(b"four\n")
        assert sink.drain(scaled(10))
    finally:
        sink.close()
    os.close(write_end)
    written = os.read(read_end, 65536).decode()
    assert written == (
        "one\ntwo\nhotseam: a log line could not be rendered: RuntimeError: cannot render\nfour\n"
    )


def test_a_burst_of_lines_is_written_in_one_wake_up_of_the_writer(
    pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer takes the lines queued while it settles in one go (one write), and a
    drain does not wait for the settling to end."""
    from hotseam.cli import _log_sink

    monkeypatch.setattr(_log_sink, "SETTLE", 3600.0)  # only the drain ends the settling
    read_end, write_end = pipe
    sink = StderrSink(write_end)
    writes: list[bytes] = []
    write_all = StderrSink._write_all

    def counted(fd: int, data: bytes) -> None:
        writes.append(data)
        write_all(fd, data)

    monkeypatch.setattr(StderrSink, "_write_all", staticmethod(counted))
    try:
        for index in range(6):
            sink.write_later(functools.partial(f"line {index}\n".encode))
        assert sink.drain(scaled(10))
    finally:
        sink.close()
    assert writes == [b"".join(f"line {index}\n".encode() for index in range(6))]
    assert os.read(read_end, 65536) == writes[0]


def _read_lines(read_end: int, count: int, bound: float) -> bytes:
    """What the pipe holds once ``count`` lines came (blocking this thread, on purpose)."""
    data = b""
    deadline = time.monotonic() + bound
    while data.count(b"\n") < count:
        ready, _, _ = select.select([read_end], [], [], max(deadline - time.monotonic(), 0))
        if not ready:
            break
        data += os.read(read_end, 65536)
    return data


@pytest.mark.anyio
async def test_a_burst_logged_on_the_loop_wakes_the_writer_by_the_loops_timer(
    pipe: tuple[int, int], anyio_backend_name: str
) -> None:
    """On asyncio the writer stays asleep through the burst (the loop's timer wakes it
    after SETTLE); on trio it is woken at once, as on any other thread. Either way every
    line is written, in order."""
    read_end, write_end = pipe
    sink = StderrSink(write_end)
    try:
        sink.write("first\n")  # starts the writer
        assert sink.drain(scaled(10))
        assert _read_lines(read_end, 1, scaled(10)) == b"first\n"
        for index in range(5):
            sink.write(f"line {index}\n")
        kicked = sink._kick_pending
        assert kicked is (anyio_backend_name == "asyncio")
        with anyio.fail_after(scaled(10)):  # the loop runs (its timer) while it waits
            await anyio.wait_readable(read_end)
        expected = b"".join(f"line {index}\n".encode() for index in range(5))
        assert _read_lines(read_end, 5, scaled(10)) == expected
    finally:
        sink.close()


@pytest.mark.anyio
async def test_a_line_from_another_thread_is_written_while_the_loop_is_blocked(
    pipe: tuple[int, int],
) -> None:
    """A burst on the loop, then the loop blocks (its timer cannot fire): a line logged by
    another thread — the loop watchdog's, say — wakes the writer, and both are written
    while the loop is still blocked."""
    read_end, write_end = pipe
    sink = StderrSink(write_end)
    try:
        sink.write("warm\n")
        assert sink.drain(scaled(10))
        assert _read_lines(read_end, 1, scaled(10)) == b"warm\n"
        sink.write("on the loop\n")
        other = threading.Thread(target=sink.write, args=("from a thread\n",))
        other.start()
        other.join()
        # This thread (the loop's) blocks here: only the other thread's wake-up writes.
        assert _read_lines(read_end, 2, scaled(10)) == b"on the loop\nfrom a thread\n"
    finally:
        sink.close()


class _LoopTimers:
    """The sink's view of an event loop, by hand: a clock the test moves, and the timers
    the sink asks the loop for, fired when the test says (nothing here depends on how soon
    a busy machine runs anything)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from hotseam.cli import _log_sink

        self.now = 1000.0
        self.timers: list[tuple[float, Any]] = []
        monkeypatch.setattr(_log_sink, "time", self)  # the sink reads time.monotonic()
        monkeypatch.setattr(_log_sink, "_running_loop", lambda: self)

        def call_later(loop: object, delay: float, callback: Any) -> bool:
            self.timers.append((self.now + delay, callback))
            return True

        monkeypatch.setattr(_log_sink, "_call_later", call_later)

    def monotonic(self) -> float:
        return self.now

    def fire_due(self) -> None:
        """Run the timers due by now, as the loop would."""
        due = [timer for timer in self.timers if timer[0] <= self.now]
        self.timers = [timer for timer in self.timers if timer[0] > self.now]
        for _, callback in due:
            callback()


def _started_sink(write_end: int, read_end: int, **options: Any) -> StderrSink:
    """A sink whose writer has written a first line and sleeps, waiting for the next."""
    sink = StderrSink(write_end, **options)
    sink.write("first\n")
    assert sink.drain(scaled(10))
    assert _read_lines(read_end, 1, scaled(10)) == b"first\n"
    return sink


def _timer_pending(sink: StderrSink) -> bool:
    """Whether the loop's timer is to wake the writer (the writer sleeps until then)."""
    return sink._kick_pending


def _nothing_written(read_end: int) -> bool:
    return not select.select([read_end], [], [], 0)[0]


def test_a_burst_on_the_loop_longer_than_settle_is_written_after_its_last_line(
    pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a busy machine a save takes longer than SETTLE: the loop's timer, due SETTLE
    after the burst's first line, finds a line newer than SETTLE and looks again SETTLE
    after that one; the writer wakes only once the log is quiet, and writes it all."""
    from hotseam.cli._log_sink import SETTLE

    read_end, write_end = pipe
    sink = _started_sink(write_end, read_end)
    loop = _LoopTimers(monkeypatch)
    try:
        sink.write("one\n")
        loop.now += SETTLE * 0.75
        sink.write("two\n")
        loop.now += SETTLE * 0.25
        loop.fire_due()  # SETTLE after the first line: the second is too recent
        assert _timer_pending(sink) and sink._idle
        assert _nothing_written(read_end)
        loop.now += SETTLE * 0.5
        sink.write("three\n")
        loop.now += SETTLE * 0.5
        loop.fire_due()  # SETTLE after the second: the third is too recent
        assert _nothing_written(read_end)
        loop.now += SETTLE * 0.5
        loop.fire_due()  # SETTLE after the last line: quiet
        assert not _timer_pending(sink)
        assert _read_lines(read_end, 3, scaled(10)) == b"one\ntwo\nthree\n"
    finally:
        sink.close()


def test_lines_logged_without_pause_wait_at_most_burst_wait(
    pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program that never stops logging still has its lines written: the first line of
    a burst waits BURST_WAIT at the most."""
    from hotseam.cli._log_sink import BURST_WAIT, SETTLE

    read_end, write_end = pipe
    sink = _started_sink(write_end, read_end)
    loop = _LoopTimers(monkeypatch)
    try:
        began = loop.now
        written = 0
        while _timer_pending(sink) or not written:
            sink.write(f"line {written}\n")
            written += 1
            loop.now += SETTLE / 2
            loop.fire_due()
            assert loop.now - began <= BURST_WAIT + SETTLE, "the writer was never woken"
        assert loop.now - began >= BURST_WAIT
        expected = b"".join(f"line {index}\n".encode() for index in range(written))
        assert _read_lines(read_end, written, scaled(10)) == expected
    finally:
        sink.close()


def test_a_flood_on_the_loop_is_written_before_the_queue_drops_it(
    pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines that fill half the queue before the loop's timer is due wake the writer at
    once: waiting for the log to be quiet must not cost the lines the queue would drop."""
    read_end, write_end = pipe
    sink = _started_sink(write_end, read_end, limit=1000)
    _LoopTimers(monkeypatch)  # no timer is ever fired
    try:
        lines = [f"line {index} ".encode() + b"x" * 90 + b"\n" for index in range(6)]
        for line in lines:  # 600 bytes: over half the limit
            sink.write_bytes(line)
        assert _read_lines(read_end, 6, scaled(10)) == b"".join(lines)
        assert sink.dropped == 0
    finally:
        sink.close()
