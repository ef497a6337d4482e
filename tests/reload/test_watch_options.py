"""WatchOptions: the reloader's watch tuning is one frozen value, checked when it is made,
with an error that names the field; the reloader watches as it says."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest

from hotseam import Context
from hotseam.reload import NativeWatcher, PollingWatcher, Reloader, WatchOptions


def test_the_defaults_are_the_reloaders() -> None:
    options = WatchOptions()
    assert (options.debounce_ms, options.step_ms, options.root_check) == (50, 8, 1.0)
    assert (options.polling, options.poll_interval, options.coalesce) == (False, 0.3, 0.1)
    assert (options.watcher, options.deletion_grace) == (None, 0.0)


def test_the_options_are_frozen_and_keyword_only() -> None:
    options = WatchOptions(coalesce=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.coalesce = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        WatchOptions(None, True)  # type: ignore[misc]
    assert dataclasses.replace(options, polling=True).polling is True


@pytest.mark.parametrize(
    ("field", "value", "error", "message"),
    [
        ("debounce_ms", -1, ValueError, r"debounce_ms must be >= step_ms \(8\), got -1"),
        ("debounce_ms", 2.5, TypeError, "debounce_ms must be a whole number of milliseconds"),
        ("step_ms", 0, ValueError, "step_ms must be > 0, got 0"),
        ("step_ms", True, TypeError, "step_ms must be a whole number of milliseconds"),
        ("poll_interval", 0, ValueError, "poll_interval must be a finite number of seconds > 0"),
        ("poll_interval", "1", TypeError, "poll_interval must be a number of seconds > 0"),
        ("root_check", math.inf, ValueError, "root_check must be a finite number of seconds > 0"),
        ("coalesce", -0.1, ValueError, "coalesce must be a finite number of seconds >= 0"),
        ("coalesce", math.nan, ValueError, "coalesce must be a finite number of seconds >= 0"),
        ("deletion_grace", -1, ValueError, "deletion_grace must be a finite number of seconds"),
        ("polling", 1, TypeError, "polling must be True or False, got 1"),
        ("watcher", "inotify", TypeError, "watcher must be a Watcher"),
    ],
)
def test_a_field_out_of_range_is_refused_by_name(
    field: str, value: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        WatchOptions(**{field: value})


def test_zero_turns_coalescing_and_the_grace_off() -> None:
    options = WatchOptions(coalesce=0, deletion_grace=0)
    assert (options.coalesce, options.deletion_grace) == (0, 0)


def test_the_reloader_watches_as_the_options_say(tmp_path: Path) -> None:
    context = Context("watch-options")
    native = Reloader(context, [tmp_path], watch=WatchOptions(debounce_ms=20, step_ms=4))
    assert isinstance(native.watcher, NativeWatcher)
    assert (native.watcher.debounce_ms, native.watcher.step_ms) == (20, 4)
    polled = Reloader(context, [tmp_path], watch=WatchOptions(polling=True))
    assert isinstance(polled.watcher, PollingWatcher)
    custom = PollingWatcher(interval=0.05)
    chosen = WatchOptions(watcher=custom, polling=False, deletion_grace=0.5)
    reloader = Reloader(context, [tmp_path], watch=chosen)
    assert reloader.watcher is custom
    assert (reloader.watch_options, reloader.deletion_grace) == (chosen, 0.5)
    assert Reloader(context, [tmp_path], watch=False).watcher is None
    assert Reloader(context, [tmp_path]).watch_options == WatchOptions()
