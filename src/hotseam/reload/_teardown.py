"""Closing a generation's scope within a time bound, and reporting what its disposers did.

The commit (replaced generations), a failed prepare (staged scopes) and the reloader's own
close all end generations the same way: in a detached task the reloader stops waiting for
past ``dispose_timeout``, so one stuck disposer can neither freeze a reload nor hide.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from .._core import (
    CloseReason,
    DisposalError,
    DisposerTimeoutError,
    Registration,
    Scope,
    ToolRegistration,
    get_logger,
)
from ._errors import LoadError
from ._events import DisposeFailed
from ._guard import Detached, interrupted, start_detached
from ._loader import Loader, ModuleRecord

__all__ = ["Closer", "as_exception", "dispose_failed"]

_log = get_logger("hotseam.reload")

_CLOSE_MARGIN = 0.5
"""Seconds the reloader waits for a generation's close beyond ``dispose_timeout``."""


class Closer:
    """Closes generations' scopes for one reloader; keeps the closes it had to abandon."""

    __slots__ = ("_abandoned", "_dispose_timeout", "_loader")

    def __init__(self, loader: Loader, dispose_timeout: float, abandoned: list[Detached]) -> None:
        self._loader = loader
        self._dispose_timeout = dispose_timeout
        self._abandoned = abandoned

    async def discard(self, scope: Scope) -> None:
        """Dispose a staged scope that will never be activated."""
        failures = await self.close(scope, CloseReason.ERROR)
        if failures:
            _log.warning(
                "reload.discard_failed",
                scope=scope.name,
                failures=[repr(error) for error in failures],
            )

    async def close(
        self, scope: Scope, reason: CloseReason, error: BaseException | None = None
    ) -> list[BaseException]:
        """Close a generation's scope; return its disposers' failures (never raised).

        The close runs in a task of its own, and the reloader waits for it at most
        ``dispose_timeout`` plus a margin: a disposer stuck where cancellation cannot reach
        it (a worker thread, a shielded scope) is abandoned and reported as a
        :class:`DisposerTimeoutError` naming the line it is stuck at. Its registrations
        were withdrawn when the close began, so what replaces it can be activated.

        A scope that holds nothing but its registrations (a provider module's usual
        generation) closes in place: their undo is hotseam's own and never waits, so
        nothing there could be stuck, and the task (a turn of the event loop) is spared.
        """
        if _only_registrations(scope):
            try:
                await scope.aclose(reason, error)
            except BaseException as failure:  # as the task's would be: reported, not raised
                return _failures(failure)
            return []

        async def close() -> None:
            await scope.aclose(reason, error)

        handle = start_detached(f"closing {scope.name}", close)
        limit = self._dispose_timeout + _CLOSE_MARGIN
        with anyio.CancelScope(shield=True, deadline=anyio.current_time() + limit):
            await handle.done.wait()
        if not handle.done.is_set():
            self._abandoned.append(handle)
            location = handle.location(self._loader.watched_files())
            where = f" (stuck at {location})" if location else ""
            timeout = DisposerTimeoutError(
                f"closing {scope.name} did not finish within {limit:g} s{where}; abandoned",
                details={"scope": scope.name, "location": location},
            )
            timeout.location = location  # type: ignore[attr-defined]
            return [timeout]
        return [] if handle.error is None else _failures(handle.error)


def _failures(failure: BaseException) -> list[BaseException]:
    """What a close raised, as the disposers' failures (an interruption is raised)."""
    if isinstance(failure, DisposalError):
        return list(failure.exceptions)
    if interrupted(failure):
        raise failure
    return [failure]


_NEVER_WAITING = (Registration, ToolRegistration)
"""The effects whose undo never awaits (exactly these classes: a subclass may differ)."""


def _only_registrations(scope: Scope) -> bool:
    """True for an open scope without children whose effects are all registrations."""
    return (
        not scope.closed
        and not scope.children()
        and all(type(effect) in _NEVER_WAITING for effect in scope.effects())
    )


def dispose_failed(
    batch: int | None, record: ModuleRecord, failures: Sequence[BaseException]
) -> DisposeFailed:
    """The event reporting ``failures`` of the disposers of ``record``'s generation."""
    where = str(record.path)
    errors: list[LoadError] = []
    for error in failures:
        location = getattr(error, "location", None)
        if isinstance(error, DisposerTimeoutError) and isinstance(location, str):
            errors.append(LoadError.at("dispose", type(error).__name__, str(error), location))
        else:
            errors.append(LoadError.from_exception("dispose", error, (where,), where))
    return DisposeFailed(
        batch, record.path, record.name, record.generation or record.last_generation, tuple(errors)
    )


def as_exception(error: BaseException) -> Exception:
    """``error`` as an ``Exception`` (a DisposalError holds only those)."""
    if isinstance(error, Exception):
        return error
    wrapped = RuntimeError(f"a disposer raised {type(error).__name__}: {error}")
    wrapped.__cause__ = error
    return wrapped
