"""What the escape check found in hotseam itself, run over hotseam's own suite."""

from __future__ import annotations

import os

import pytest

from hotseam.cli._log_sink import StderrSink
from hotseam.testing._escapes import EscapeWatch


@pytest.mark.hotseam_allow_leaks("threads")  # the leak this test shows
@pytest.mark.xfail(
    strict=True,
    reason="StderrSink has no way to stop its writer thread: each sink leaves a thread "
    "waiting forever (one per process in the CLI; one per test in tests/cli/test_log_pipe)",
)
def test_a_stderr_sink_can_be_stopped_with_its_writer_thread() -> None:
    read_end, write_end = os.pipe()
    watch = EscapeWatch()
    watch.start()
    try:
        sink = StderrSink(write_end)
        sink.write("a line\n")
        assert sink.drain(timeout=5.0)
        del sink
    finally:
        watch.stop()
        os.close(read_end)
        os.close(write_end)
    assert [escape.what for escape in watch.escapes()] == []
