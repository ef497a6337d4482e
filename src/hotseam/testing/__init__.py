"""Disposal-lifecycle testing: leak tracking, escapes, zombie generations, growth over
reloads, strict mode and assertion helpers.

The pytest plugin (:mod:`hotseam.pytest_plugin`, loaded automatically) wires these into
fixtures and options; they work without pytest too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._core import lazy_exports, mark_long_lived, present_as
from ._asserts import DisposalRecorder, assert_no_provider
from ._leaks import Leak, LeakError, LeakTracker, format_leaks, track_leaks
from ._strict import StrictModeError, strict_setup
from ._strict import forget_told as forget_told
from ._strict import told_carried as told_carried
from ._zombies import Zombie
from ._zombies import format_zombies as format_zombies

if TYPE_CHECKING:  # imported when first used: the driver and the growth mode (they import
    # hotseam.reload), and what only the pytest plugin needs (not public)
    from ._driver import ReloadDriver, assert_generation_active
    from ._escapes import ALLOWABLE as ALLOWABLE
    from ._escapes import THREAD_GRACE as THREAD_GRACE
    from ._escapes import EscapeWatch as EscapeWatch
    from ._escapes import active_watch as active_watch
    from ._escapes import format_escapes as format_escapes
    from ._growth import GrowthError, GrowthReport, assert_reload_stable
    from ._sites import forget_origins as forget_origins
    from ._sites import name_originals as name_originals

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

_LAZY = {
    "ReloadDriver": "._driver",
    "assert_generation_active": "._driver",
    "GrowthError": "._growth",
    "GrowthReport": "._growth",
    "assert_reload_stable": "._growth",
}
present_as(__name__, globals(), [name for name in __all__ if name not in _LAZY])

if not TYPE_CHECKING:  # type checkers read the imports above
    # The pytest plugin imports this package in every pytest run of a project that installs
    # hotseam; the reload driver (and hotseam.reload under it) only when a test uses it.
    __getattr__ = lazy_exports(
        globals(),
        {
            **_LAZY,
            "ALLOWABLE": "._escapes",
            "THREAD_GRACE": "._escapes",
            "EscapeWatch": "._escapes",
            "active_watch": "._escapes",
            "format_escapes": "._escapes",
            "forget_origins": "._sites",
            "name_originals": "._sites",
        },
        present=_LAZY,
    )
