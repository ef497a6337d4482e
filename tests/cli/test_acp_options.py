"""``dev``, ``run`` and ``acp`` take the reloader's options from one function, and make
their reloader from them in one way: they cannot drift apart again (``acp`` lacked
``--max-module-size``, ``--deletion-grace`` and ``--polling``)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import pytest

from hotseam import Context
from hotseam.cli import build_parser
from hotseam.cli._options import ReloadOptions, add_reload_options, resolve
from hotseam.reload import PollingWatcher, WatchfilesWatcher

from ._support import write

RELOAD_FLAGS = {
    "--setup-timeout",
    "--dispose-timeout",
    "--import-timeout",
    "--deletion-grace",
    "--max-module-size",
    "--polling",
}


def _described(parser: argparse.ArgumentParser, flags: set[str]) -> dict[str, tuple[Any, ...]]:
    """Each of ``flags`` the parser takes → all that defines it (kind, type, default, help)."""
    return {
        flag: (type(action), action.dest, action.type, action.default, action.metavar, action.help)
        for action in parser._actions
        for flag in action.option_strings
        if flag in flags
    }


def _command(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return commands.choices[name]  # type: ignore[no-any-return]


def test_dev_run_and_acp_take_the_reload_options_of_one_function() -> None:
    """The reloader's options of each command are exactly those add_reload_options adds:
    the same flags, types, defaults and help (so --help says the same for all three)."""
    reference = argparse.ArgumentParser()
    add_reload_options(reference)
    flags = {flag for action in reference._actions for flag in action.option_strings} - {
        "-h",
        "--help",
    }
    assert flags == RELOAD_FLAGS
    expected = _described(reference, flags)
    for command in ("dev", "run", "acp"):
        assert _described(_command(command), flags) == expected, command


def test_acp_resolves_the_reload_options_as_dev_and_run_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same flags and [tool.hotseam] keys give acp the same reloader options as dev
    and run (a flag wins over the file, the file over the default)."""
    write(tmp_path / "pyproject.toml", "[tool.hotseam]\ndeletion-grace = 0.5\npolling = true\n")
    monkeypatch.chdir(tmp_path)
    flags = ["--max-module-size", "2KiB", "--import-timeout", "3"]
    acp = resolve(
        build_parser().parse_args(["acp", *flags]), log_format="json", provider_wait=math.inf
    )
    for command in ("dev", "run"):
        parsed = build_parser().parse_args([command, "providers", *flags])
        assert resolve(parsed, log_format="json", provider_wait=60).reload == acp.reload
    assert acp.reload == ReloadOptions(
        setup_timeout=30.0,
        dispose_timeout=5.0,
        import_timeout=3.0,
        deletion_grace=0.5,
        max_module_size=2048,
        polling=True,
    )


@pytest.mark.parametrize("polling", [False, True], ids=["native", "polling"])
def test_the_reloader_is_made_from_the_options(tmp_path: Path, polling: bool) -> None:
    """The one way a command makes its reloader: its watcher (native or polling) under the
    deletion grace, and the size limit."""
    options = ReloadOptions(1.0, 2.0, 3.0, 0.5, 2048, polling)
    reloader = options.reloader(Context("options"), [tmp_path])
    assert isinstance(reloader.watcher, PollingWatcher if polling else WatchfilesWatcher)
    assert reloader.deletion_grace == 0.5
    assert reloader._index.max_size == 2048
