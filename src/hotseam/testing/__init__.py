"""Disposal-lifecycle testing: leak tracking, strict mode and assertion helpers.

The pytest plugin (:mod:`hotseam.pytest_plugin`, loaded automatically) wires these into
fixtures and options; they work without pytest too.
"""

from __future__ import annotations

from .._core import mark_long_lived, present_as
from ._asserts import DisposalRecorder, assert_no_provider
from ._driver import ReloadDriver, assert_generation_active
from ._leaks import Leak, LeakError, LeakTracker, format_leaks, track_leaks
from ._strict import StrictModeError, strict_setup

__all__ = [
    "DisposalRecorder",
    "Leak",
    "LeakError",
    "LeakTracker",
    "ReloadDriver",
    "StrictModeError",
    "assert_generation_active",
    "assert_no_provider",
    "format_leaks",
    "mark_long_lived",
    "strict_setup",
    "track_leaks",
]

present_as(__name__, globals(), __all__)
