"""What the escape check found in hotseam itself, run over hotseam's own suite."""

from __future__ import annotations

import os

from hotseam.cli._log_sink import StderrSink
from hotseam.testing._escapes import EscapeWatch


def test_a_stderr_sink_can_be_stopped_with_its_writer_thread() -> None:
    """A sink closed after its lines are written leaves no thread behind (its writer
    thread used to wait forever: one per CLI process, one per test of the sink)."""
    read_end, write_end = os.pipe()
    watch = EscapeWatch()
    watch.start()
    try:
        sink = StderrSink(write_end)
        sink.write("a line\n")
        assert sink.close(timeout=5.0)
        sink.write("after the close\n")  # discarded: no writer thread starts again
    finally:
        watch.stop()
        os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        assert reader.read() == b"a line\n"
    assert [escape.what for escape in watch.escapes()] == []
