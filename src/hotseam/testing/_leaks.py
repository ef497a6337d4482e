"""LeakTracker: which scopes and registrations outlived a test, and where they were made.

Modelled on VS Code's ``DisposableTracker``: every scope and registration created while the
tracker is installed is recorded with its parent; disposal removes the record. What is left
at the end is a leak. Only *roots* are reported (a leak whose parent scope is itself leaking
is covered by its parent), leaks that share a creation stack are grouped, and objects marked
with :func:`hotseam.mark_long_lived` are skipped.

Creation stacks are captured only for objects that could be reported as roots (no tracked
parent), so tracking a scope with 100,000 effects stays cheap.
"""

from __future__ import annotations

import collections
import gc
import itertools
import sys
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .._core import HarnessError, is_long_lived, set_tracker
from ._sites import StackFrame

_HOTSEAM_DIR = str(Path(__file__).resolve().parents[1])
_NOISE = (
    "/_pytest/",
    "/pytest/",
    "/pluggy/",
    "/anyio/",
    "/trio/",
    "/asyncio/",
    "/contextlib.py",
    "<frozen ",
    "/bin/pytest",
)
_MAX_FRAMES = 40


class LeakError(HarnessError, AssertionError):
    """Scopes or registrations were left open; the message lists each root leak."""

    default_code = "LEAKED"


@dataclass(slots=True)
class _Record:
    ref: weakref.ref[object]
    label: str
    parent: int | None
    parent_label: str | None
    order: int
    stack: tuple[StackFrame, ...] | None
    is_scope: bool
    collected: bool = False

    @property
    def observable(self) -> bool:
        """A collected registration lived in a context that is gone too (a context holds its
        active registrations): nothing sees it. A scope collected while open is still a leak."""
        return self.is_scope or not self.collected


@dataclass(frozen=True, slots=True)
class Leak:
    """One root leak: what it is, where it was created, and its parent scope (if any)."""

    label: str
    created_at: str
    stack: tuple[StackFrame, ...]
    parent: str | None
    collected: bool
    covered: int = field(default=0)
    """How many leaking descendants this root covers (not reported separately)."""


class LeakTracker:
    """Records the life of scopes and registrations; install it with :func:`track_leaks`."""

    def __init__(self) -> None:
        self._records: dict[int, _Record] = {}
        self._collected: list[_Record] = []
        self._order = itertools.count()

    # -- the Tracker protocol ------------------------------------------------------------------

    def track(self, obj: object, parent: object | None) -> None:
        """Record ``obj`` (owned by ``parent``); capture a stack if it may become a root."""
        key = id(obj)
        parent_key = None if parent is None else id(parent)
        tracked_parent = parent_key is not None and parent_key in self._records
        records = self._records

        def on_collect(_ref: weakref.ref[object], key: int = key) -> None:
            record = records.get(key)
            if record is not None:
                record.collected = True

        try:
            ref = weakref.ref(obj, on_collect)
        except TypeError:  # not weak-referenceable: cannot be tracked safely
            return
        stale = self._records.get(key)
        if stale is not None and stale.collected:
            self._collected.append(stale)  # a collected leak whose id was reused
        self._records[key] = _Record(
            ref=ref,
            label=_label(obj),
            parent=parent_key,
            parent_label=None if parent is None else _label(parent),
            order=next(self._order),
            stack=None if tracked_parent else _capture_stack(),
            is_scope=type(obj).__name__ == "Scope",
        )

    def disposed(self, obj: object) -> None:
        """Forget ``obj``: it was disposed."""
        record = self._records.get(id(obj))
        if record is not None and record.ref() is obj:
            del self._records[id(obj)]

    def describe(self, obj: object) -> str | None:
        """Where ``obj`` was created, with its creation stack (or its nearest tracked ancestor's);
        ``None`` if it is not tracked. A scope's ``__del__`` calls it, its weak reference maybe
        cleared already: the record is matched by id and label."""
        record = self._records.get(id(obj))
        if record is None or record.label != _label(obj):
            return None
        via = ""
        seen = 0
        while record.stack is None and record.parent is not None and seen < 1000:
            parent = self._records.get(record.parent)
            if parent is None:
                break
            via = f" inside {parent.label}"
            record, seen = parent, seen + 1
        stack = record.stack or ()
        if not stack:
            return None
        lines = [f"created{via} at {_created_at(stack)}", "creation stack (most recent call last):"]
        lines.extend(f'  File "{file}", line {line}, in {func}' for file, line, func in stack)
        return "\n".join(lines)

    def live(self) -> int:
        """How many tracked scopes and registrations are alive and not disposed."""
        return sum(1 for record in self._records.values() if not record.collected)

    # -- reporting -----------------------------------------------------------------------------

    def leaks(self) -> list[Leak]:
        """The root leaks, oldest first (long-lived objects and their covered children skipped),
        after a collection when anything is left: a registration whose context was dropped cannot
        be observed any more."""
        # What a test dropped is young: collecting the young generations is usually enough
        # (milliseconds); the full collection (tens of milliseconds on a big heap) runs only
        # when something is still there after it.
        for generation in (1, 2):
            if not any(record.observable for record in self._records.values()):
                break
            gc.collect(generation)
        live = {
            key: record
            for key, record in self._records.items()
            if record.observable and not _is_long_lived(record)
        }
        covered: collections.Counter[int] = collections.Counter()
        for key in live:
            root = key
            while (parent := live[root].parent) is not None and parent in live:
                root = parent
            if root != key:
                covered[root] += 1
        roots = [
            (record, covered[key]) for key, record in live.items() if record.parent not in live
        ]
        roots.extend((record, 0) for record in self._collected if record.observable)
        roots.sort(key=lambda item: item[0].order)
        return [
            Leak(
                label=record.label,
                created_at=_created_at(record.stack or ()),
                stack=record.stack or (),
                parent=record.parent_label,
                collected=record.collected,
                covered=count,
            )
            for record, count in roots
        ]

    def check(self) -> None:
        """Raise :class:`LeakError` listing every root leak; do nothing when there is none."""
        __tracebackhide__ = True
        leaks = self.leaks()
        if leaks:
            raise LeakError(format_leaks(leaks), details={"leaks": len(leaks)})


def format_leaks(leaks: list[Leak], *, max_reported: int = 10) -> str:
    """Render leaks like VS Code's tracker: numbered, with stacks, grouped when shared."""
    groups: dict[tuple[StackFrame, ...], list[Leak]] = {}
    for leak in leaks:
        groups.setdefault(leak.stack, []).append(leak)
    lines = [
        f"{len(leaks)} hotseam scope(s) or registration(s) were left open by this test "
        "(only roots are listed; mark deliberate ones with hotseam.mark_long_lived):"
    ]
    for index, (stack, members) in enumerate(groups.items(), 1):
        if index > max_reported:
            rest = sum(len(m) for m in list(groups.values())[max_reported:])
            lines.append(f"... and {rest} more leaking object(s)")
            break
        first = members[0]
        shared = f" (x{len(members)}, sharing one creation stack)" if len(members) > 1 else ""
        lines.append("")
        lines.append(f"==== leak {index}/{len(groups)}: {first.label}{shared} ====")
        for leak in members:
            lines.append(f"  {leak.label}")
            lines.append(f"    created at: {leak.created_at}")
            lines.append(f"    parent scope: {leak.parent or 'none (a root)'}")
            if leak.covered:
                lines.append(f"    still holds {leak.covered} open child object(s)")
            if leak.collected:
                lines.append("    it was garbage-collected without being disposed")
        lines.append("  creation stack (most recent call last):")
        lines.extend(f'    File "{file}", line {line}, in {func}' for file, line, func in stack)
    return "\n".join(lines)


@contextmanager
def track_leaks() -> Iterator[LeakTracker]:
    """Install a fresh tracker for the block (restoring the previous one after it)."""
    tracker = LeakTracker()
    previous = set_tracker(tracker)
    try:
        yield tracker
    finally:
        set_tracker(previous)


def _is_long_lived(record: _Record) -> bool:
    obj = record.ref()
    return obj is not None and is_long_lived(obj)


def _label(obj: object) -> str:
    name = getattr(obj, "name", None)
    if isinstance(name, str) and type(obj).__name__ == "Scope":
        return f"Scope {name!r}"
    label = getattr(obj, "label", None)
    if isinstance(label, str):
        return f"{type(obj).__name__} ({label})"
    return type(obj).__name__


def _capture_stack() -> tuple[StackFrame, ...]:
    frames: list[StackFrame] = []
    frame = sys._getframe(1)
    while frame is not None and len(frames) < _MAX_FRAMES:
        filename = frame.f_code.co_filename
        if not filename.startswith(_HOTSEAM_DIR) and not any(n in filename for n in _NOISE):
            frames.append((filename, frame.f_lineno, frame.f_code.co_name))
        frame = frame.f_back  # type: ignore[assignment]
    frames.reverse()
    return tuple(frames)


def _created_at(stack: tuple[StackFrame, ...]) -> str:
    if not stack:
        return "<unknown>"
    file, line, func = stack[-1]
    return f"{file}:{line} (in {func})"
