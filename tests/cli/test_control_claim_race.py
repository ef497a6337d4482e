"""Daemons started at once for one name each find the name's stale link (left by a killed
daemon): the first removes it, and the others must not fail on finding it gone — it was a
traceback and exit 1 for a racer of the fleet torture."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hotseam.cli import _control


def test_a_stale_name_removed_by_a_racer_meanwhile_is_claimed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("HOTSEAM_RUNTIME_DIR", str(folder))
    link = folder / "racer.sock"
    link.symlink_to(folder / "999999999.sock")  # a killed daemon's name, its socket gone
    real_readlink = os.readlink
    reads: list[Path] = []

    def racer_removes_it_first(path: os.PathLike[str] | str) -> str:
        # The name is read once to see whether its owner lives, then to say whose it was
        # as it is replaced: the other daemon, started at the same instant, removes it in
        # between.
        reads.append(Path(path))
        if reads.count(link) == 2:
            link.unlink()
        return real_readlink(path)

    monkeypatch.setattr(_control.os, "readlink", racer_removes_it_first)
    claim = _control.claim("racer")
    assert claim.link == link
    assert reads.count(link) == 2
