"""What an unloaded generation leaves behind: modules that failed because of it, and values
a renamed module may take over.

A module can fail because of a generation that is still alive: its ``setup`` binds a port
the other one listens on, takes a lock file it holds, opens a device it has open. The
typical case is a rename (``git mv providers/web.py providers/inbox.py``): the new module
loads while the old one is still serving — within the deletion grace, or before it in the
same reload — and fails with "address already in use". Nothing about its own file changes
afterwards, so nothing would load it again.

Two rules fix that, neither specific to ports:

* **retry after an unload** — once a reload unloaded a generation, every module whose last
  failure (in ``exec``, ``setup`` or ``activate``) happened while that generation was
  alive is loaded again, at once, in a reload of its own (:func:`due_after_unload`). A
  module that fails again for its own reasons fails once more and stays failed; the next
  retry needs another unload of a generation it lived with;
* **a renamed module takes over carried values** — when a reload unloads exactly one
  generation that carries values (``scope.carry``) and sets up exactly one provider that
  has no serving generation, that provider is that generation's successor for carried
  values: a key it carries too (same ``version``, ``accept`` willing) is handed to it at
  the commit instead of being disposed, so a carried listening socket keeps its port and
  the connections waiting in its backlog. Values are matched by key; with two unloaded
  carriers, or two new providers, nothing is taken over (which module would succeed
  which is a guess), and the retry above still loads them once the old generations are
  gone. A provider that failed while the carrier was alive (a rename under the deletion
  grace) is tried again in the reload that unloads it, so it can take over there.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from .._core import CarriedEffect, Scope
from ._loader import ModuleRecord
from ._status import ModuleState

__all__ = ["RETRY_PHASES", "carrier_of", "carries", "due_after_unload", "heir_of", "waiting_heirs"]

RETRY_PHASES = frozenset({"exec", "setup", "activate"})
"""Failures that may come from something another generation held (not a syntax error,
an unreadable or refused file, a conflict — conflicts have their own retry)."""


def carries(scope: Scope | None) -> bool:
    """True when ``scope``'s generation carries at least one value."""
    if scope is None:
        return False
    return any(
        isinstance(effect, CarriedEffect) for node in scope.walk() for effect in node.effects()
    )


def carrier_of(unloading: Iterable[str], records: Mapping[str, ModuleRecord]) -> str | None:
    """The one module of ``unloading`` whose serving generation carries values, if exactly
    one does."""
    found = [name for name in unloading if carries(records[name].scope)]
    return found[0] if len(found) == 1 else None


def waiting_heirs(carrier: ModuleRecord, records: Mapping[str, ModuleRecord]) -> list[str]:
    """Providers without a serving generation whose setup failed while ``carrier``'s
    generation was alive: they may take over what it carries in the reload unloading it."""
    return sorted(
        name
        for name, record in records.items()
        if record.state is ModuleState.FAILED
        and record.scope is None
        and record.error is not None
        and record.error.phase == "setup"
        and record.failed_at > carrier.since
    )


def heir_of(candidates: Collection[str], records: Mapping[str, ModuleRecord]) -> str | None:
    """The one provider of ``candidates`` (set up in a reload that unloads a carrier) with no
    serving generation, if exactly one."""
    fresh = [name for name in candidates if records[name].scope is None]
    return fresh[0] if len(fresh) == 1 else None


def due_after_unload(
    unloaded: Mapping[str, int], records: Mapping[str, ModuleRecord]
) -> dict[str, list[str]]:
    """Modules to load again now that the provider generations of ``unloaded`` (module →
    the batch that committed the generation just unloaded) are gone → those that were
    alive when the module last failed.

    Only a provider's generation holds what a scope disposes; a module that failed to
    import one of them is left to the rule that loads importers when it comes back."""
    unloaded = {name: since for name, since in unloaded.items() if records[name].kind == "provider"}
    if not unloaded:
        return {}
    oldest = min(unloaded.values())
    due: dict[str, list[str]] = {}
    for name, record in records.items():
        if (
            record.state is ModuleState.FAILED
            and record.error is not None
            and record.error.phase in RETRY_PHASES
            and record.failed_at > oldest
            and not any(missing in unloaded for missing in record.missing)
        ):
            due[name] = sorted(gone for gone, since in unloaded.items() if record.failed_at > since)
    return due
