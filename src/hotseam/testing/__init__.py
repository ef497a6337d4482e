"""Disposal-lifecycle testing: leak tracking, escapes, zombie generations, growth over
reloads, strict mode and assertion helpers.

The pytest plugin (:mod:`hotseam.pytest_plugin`, loaded automatically) wires these into
fixtures and options; they work without pytest too.
"""

from __future__ import annotations

from .._core import mark_long_lived, present_as
from ._asserts import DisposalRecorder, assert_no_provider
from ._driver import ReloadDriver, assert_generation_active
from ._growth import GrowthError, GrowthReport, assert_reload_stable
from ._leaks import Leak, LeakError, LeakTracker, format_leaks, track_leaks
from ._strict import StrictModeError, strict_setup
from ._zombies import Zombie

__all__ = [
    "DisposalRecorder",
    "GrowthError",
    "GrowthReport",
    "Leak",
    "LeakError",
    "LeakTracker",
    "ReloadDriver",
    "StrictModeError",
    "Zombie",
    "assert_generation_active",
    "assert_no_provider",
    "assert_reload_stable",
    "format_leaks",
    "mark_long_lived",
    "strict_setup",
    "track_leaks",
]

present_as(__name__, globals(), __all__)
