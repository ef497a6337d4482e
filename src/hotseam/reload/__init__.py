"""Hot reload of provider modules: watch → plan → prepare → commit.

A provider module is a Python file with a ``setup(scope)`` function (sync or async); all it
registers goes through the scope it is given. A module without ``setup`` is a helper: it is
watched and tracked as a dependency, never set up on its own. Modules import their sibling
helpers by plain name (``import helpers``) and a watched package's modules by the package's
name, as if the watched folder were on the import path::

    async with Reloader(ctx, ["providers/"]) as reloader:
        ...  # providers/*.py are loaded and set up; saving one reloads it

On each change the reloader executes the new code in a fresh module object and runs
``setup`` against a staged scope. Only if that worked does it dispose the old generation
(inside ``ctx.swap``, so an ask in flight is withdrawn from the old UI and re-asked on the new
one, and asks arriving meanwhile wait) and activate the new one. A failure leaves the running
generation untouched and is reported (status, events, a ``reload.aborted`` log event).

**Driving reloads by hand** (tests, and the pytest plugin's reload driver)::

    async with Reloader(ctx, [tmp_path], watch=False) as reloader:
        (tmp_path / "my_ui.py").write_text(new_source)
        result = await reloader.reload(tmp_path / "my_ui.py")
        result.raise_for_errors()          # or inspect result.committed / result.aborted
        reloader.status_of(tmp_path / "my_ui.py").generation

With ``watch=False`` nothing runs in the background: ``reload(path)`` plans, executes, sets
up and commits before it returns, so the new provider serves the very next ask. ``reload()``
with no argument rescans every watched path (new, changed and deleted files); ``force=True``
reloads even files whose content hash did not change. The one exception: a file that could
not be read for a passing reason (out of file descriptors...) is listed in the result's
``deferred`` and read again in the background until it can be (``reload.deferred``).

**Events** — :meth:`Reloader.events` is an async iterator (create it before causing the
change); ``on_event=`` is a callback; every event is also a structlog event
(``reload.committed``...) carrying a one-line ``summary``.
"""

from __future__ import annotations

from .._core import present_as
from ._errors import (
    LoadError,
    LoadPhase,
    ModuleNameClashError,
    ReloaderClosedError,
    ReloadError,
    ReloadPathError,
)
from ._events import SLOW_NOTICE as SLOW_NOTICE
from ._events import (
    DisposeFailed,
    EventStream,
    ModuleKind,
    ModuleState,
    ModuleStatus,
    ModuleUnloaded,
    ReloadAborted,
    ReloadCommitted,
    ReloadEvent,
    ReloadPlanned,
    ReloadResult,
    TaskFailed,
)
from ._events import display_path as display_path
from ._events import report_slow as report_slow
from ._guard import _library
from ._guard import is_fatal as is_fatal
from ._loader import Worker as Worker
from ._loader import current_run as current_run
from ._reloader import Reloader
from ._watcher import (
    ChangeKind,
    FileChange,
    NativeWatcher,
    PollingWatcher,
    Watcher,
    WatchfilesWatcher,
    WatchOptions,
    WatchRoot,
)

# Imported above for hotseam's CLI, not public and so left out of __all__: SLOW_NOTICE,
# display_path, report_slow, Worker, current_run, is_fatal (and is_library_file below).
__all__ = [
    "ChangeKind",
    "DisposeFailed",
    "EventStream",
    "FileChange",
    "LoadError",
    "LoadPhase",
    "ModuleKind",
    "ModuleNameClashError",
    "ModuleState",
    "ModuleStatus",
    "ModuleUnloaded",
    "NativeWatcher",
    "PollingWatcher",
    "ReloadAborted",
    "ReloadCommitted",
    "ReloadError",
    "ReloadEvent",
    "ReloadPathError",
    "ReloadPlanned",
    "ReloadResult",
    "Reloader",
    "ReloaderClosedError",
    "TaskFailed",
    "WatchOptions",
    "WatchRoot",
    "Watcher",
    "WatchfilesWatcher",
]

present_as(__name__, globals(), __all__)


def is_library_file(filename: str) -> bool:
    """Whether ``filename`` is code of anyio, sniffio or hotseam (or of trio or asyncio),
    never where a stall is located."""
    return _library(filename)
