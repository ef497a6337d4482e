"""The reload tortures' files: the watched folder's provider module and helper, and every
ordinary edit made to them (plain, blocking file I/O).

:class:`Files` makes one random edit of a kind of ``EDITS`` at a time and remembers the last
content of each module that loads (``good_ui``, ``good_words``): after the last edit the
serving state must equal loading that content once. ``bench/torture_daemon.py`` extends it
(carried values, the deletion grace, the whole folder replaced).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

from _torture_ledger import ALT, BARRIER, UI, WORDS, Ledger

__all__ = ["EDITS", "HELPER_SOURCE", "PROVIDER_SOURCE", "Files", "Good", "provider_source"]

PROVIDER_SOURCE = """\
import torture_ledger
import torture_words as words
from hotseam.interaction import USER_INTERACTION

VERSION = {version}
{module_line}

class Provider:
    multiple_questions = VERSION % 2 == 1  # the other versions show one question at a time

    def __init__(self, scope):
        self.scope = scope
        self.generation = torture_ledger.set_up(__name__, VERSION, words.WORD)

    async def ask(self, request):
        return await torture_ledger.serve(self, request)


def setup(scope):
    provider = Provider(scope)
    scope.provide(USER_INTERACTION, provider)

    async def close():
        await torture_ledger.close(provider, {disposer!r})

    scope.defer(close)
{setup_line}
"""

HELPER_SOURCE = 'WORD = "w{number}"\n'


@dataclass
class Good:
    """The last content saved that loads."""

    number: int
    source: str


def provider_source(
    version: int, *, disposer: str = "normal", module_line: str = "", setup_line: str = ""
) -> str:
    return PROVIDER_SOURCE.format(
        version=version, disposer=disposer, module_line=module_line, setup_line=setup_line
    )


class Files:
    """The watched folder and every edit the torture makes to it (plain, blocking file I/O)."""

    def __init__(self, folder: Path, rng: random.Random, ledger: Ledger) -> None:
        self.folder = folder
        self.rng = rng
        self.ledger = ledger
        self.number = 0
        self.barrier_token = 0
        self.ui_at: str | None = f"{UI}.py"  # torture_ui.py, torture_ui_alt.py, .moved, None
        self.words_at: str | None = f"{WORDS}.py"
        self.good_ui = Good(0, self.provider_source(0))
        self.good_words = Good(0, HELPER_SOURCE.format(number=0))

    def provider_source(
        self, version: int, *, disposer: str = "normal", module_line: str = "", setup_line: str = ""
    ) -> str:
        """The provider module's source for save ``version`` (subclasses add to it)."""
        return provider_source(
            version, disposer=disposer, module_line=module_line, setup_line=setup_line
        )

    def path(self, name: str) -> Path:
        return self.folder / name

    def write(self, name: str, source: str, *, atomic: bool = False) -> None:
        if atomic:
            staging = self.path(f"{name}.tmp")  # an editor temporary: never a module
            staging.write_text(source, encoding="utf-8")
            os.replace(staging, self.path(name))
        else:
            self.path(name).write_text(source, encoding="utf-8")

    def create(self) -> Path:
        self.write(f"{WORDS}.py", self.good_words.source)
        self.write(f"{UI}.py", self.good_ui.source)
        return self.write_barrier()

    def write_barrier(self) -> Path:
        self.barrier_token += 1
        self.write(f"{BARRIER}.py", f"TOKEN = {self.barrier_token}\n")
        return self.path(f"{BARRIER}.py")

    def restore(self) -> None:
        """Only the two modules, under their own names, with their last good content."""
        for stray in (f"{ALT}.py", f"{UI}.py.moved", f"{WORDS}.py.moved"):
            self.path(stray).unlink(missing_ok=True)
        self.write(f"{WORDS}.py", self.good_words.source)
        self.write(f"{UI}.py", self.good_ui.source)
        self.ui_at = f"{UI}.py"
        self.words_at = f"{WORDS}.py"

    # -- one edit ---------------------------------------------------------------------------------

    def edit(self, kind: str) -> str:
        """Make one edit of ``kind`` (see ``EDITS``); return what was done."""
        self.number += 1
        target, _, what = kind.partition(": ")
        if target == "provider":
            return "provider: " + self._edit_provider(what)
        return "helper: " + self._edit_helper(what)

    def _ui_target(self) -> str:
        """Where a provider save goes: where the module is, else its own name."""
        if self.ui_at in (f"{UI}.py", f"{ALT}.py"):
            return self.ui_at
        self.path(f"{UI}.py.moved").unlink(missing_ok=True)
        self.ui_at = f"{UI}.py"
        return self.ui_at

    def _save_ui(self, source: str, *, good: bool, atomic: bool = False) -> None:
        self.write(self._ui_target(), source, atomic=atomic)
        if good:
            self.good_ui = Good(self.number, source)

    def _edit_provider(self, what: str) -> str:
        n = self.number
        if what == "valid version":
            self._save_ui(self.provider_source(n), good=True)
        elif what == "atomic save":
            self._save_ui(self.provider_source(n), good=True, atomic=True)
        elif what in ("raising disposer", "slow disposer"):
            mode = what.split()[0].replace("raising", "raise")
            self._save_ui(self.provider_source(n, disposer=mode), good=True)
        elif what == "syntax error":
            self._save_ui(self.provider_source(n) + "\ndef broken(:\n", good=False)
        elif what == "exception at import":
            line = f"raise RuntimeError('torture: importing version {n} fails')"
            self._save_ui(self.provider_source(n, module_line=line), good=False)
        elif what == "exception in setup":
            line = f"    raise RuntimeError('torture: setup of version {n} fails')"
            self._save_ui(self.provider_source(n, setup_line=line), good=False)
        elif what == "setup failing for now":
            # Good content whose setup fails until the harness lifts the failure: only a
            # later save of the same bytes (or of a helper it imports) can load it.
            self.ledger.transient["provider", n] = self.number
            line = f"    torture_ledger.check('provider', {n})"
            self._save_ui(self.provider_source(n, setup_line=line), good=True)
        elif what == "same bytes again":
            if self.ui_at not in (f"{UI}.py", f"{ALT}.py"):
                return self._edit_provider("delete / re-create")
            self.write(self.ui_at, self.path(self.ui_at).read_text(encoding="utf-8"))
        elif what == "delete / re-create":
            if self.ui_at in (f"{UI}.py", f"{ALT}.py"):
                self.path(self.ui_at).unlink()
                self.ui_at = None
                return "deleted"
            self._save_ui(self.provider_source(n), good=True)
            return "re-created"
        elif what == "rename":
            return self._rename_provider()
        else:
            raise ValueError(f"unknown provider edit {what!r}")
        return what

    def _rename_provider(self) -> str:
        ui = f"{UI}.py"
        if self.ui_at == ui:
            to = self.rng.choice([f"{UI}.py.moved", f"{ALT}.py"])
            os.replace(self.path(ui), self.path(to))
            self.ui_at = to
            return "renamed to another module" if to == f"{ALT}.py" else "renamed away"
        if self.ui_at is None:  # re-created by renaming a new file into place
            source = self.provider_source(self.number)
            self.write(f"{UI}.py.moved", source)
            self.good_ui = Good(self.number, source)
            os.replace(self.path(f"{UI}.py.moved"), self.path(ui))
            self.ui_at = ui
            return "re-created by a rename"
        os.replace(self.path(self.ui_at), self.path(ui))
        self.ui_at = ui
        return "renamed back"

    def _save_words(self, source: str, *, good: bool, atomic: bool = False) -> None:
        self.path(f"{WORDS}.py.moved").unlink(missing_ok=True)
        self.words_at = f"{WORDS}.py"
        self.write(self.words_at, source, atomic=atomic)
        if good:
            self.good_words = Good(self.number, source)

    def _edit_helper(self, what: str) -> str:
        n = self.number
        valid = HELPER_SOURCE.format(number=n)
        if what == "valid version":
            self._save_words(valid, good=True)
        elif what == "atomic save":
            self._save_words(valid, good=True, atomic=True)
        elif what == "syntax error":
            self._save_words(valid + "if True\n", good=False)
        elif what == "exception at import":
            self._save_words(
                valid + f"raise RuntimeError('torture: importing helper {n} fails')\n", good=False
            )
        elif what == "import failing for now":
            self.ledger.transient["helper", n] = self.number
            self._save_words(
                f"import torture_ledger\ntorture_ledger.check('helper', {n})\n{valid}", good=True
            )
        elif what == "same bytes again":
            if self.words_at != f"{WORDS}.py":
                return self._edit_helper("delete / re-create")
            self.write(self.words_at, self.path(self.words_at).read_text(encoding="utf-8"))
        elif what == "delete / re-create":
            if self.words_at == f"{WORDS}.py":
                self.path(self.words_at).unlink()
                self.words_at = None
                return "deleted"
            self._save_words(valid, good=True)
            return "re-created"
        elif what == "rename":
            if self.words_at == f"{WORDS}.py":
                os.replace(self.path(self.words_at), self.path(f"{WORDS}.py.moved"))
                self.words_at = f"{WORDS}.py.moved"
                return "renamed away"
            created = self.words_at is None
            if created:  # re-created by renaming a new file into place
                self.write(f"{WORDS}.py.moved", valid)
                self.good_words = Good(n, valid)
            os.replace(self.path(f"{WORDS}.py.moved"), self.path(f"{WORDS}.py"))
            self.words_at = f"{WORDS}.py"
            return "re-created by a rename" if created else "renamed back"
        else:
            raise ValueError(f"unknown helper edit {what!r}")
        return what


EDITS: dict[str, int] = {
    "provider: valid version": 14,
    "provider: atomic save": 10,
    "provider: raising disposer": 6,
    "provider: slow disposer": 6,
    "provider: syntax error": 7,
    "provider: exception at import": 6,
    "provider: exception in setup": 6,
    "provider: setup failing for now": 4,
    "provider: delete / re-create": 6,
    "provider: rename": 7,
    "provider: same bytes again": 3,
    "helper: valid version": 10,
    "helper: atomic save": 4,
    "helper: syntax error": 5,
    "helper: exception at import": 4,
    "helper: import failing for now": 2,
    "helper: delete / re-create": 4,
    "helper: rename": 3,
    "helper: same bytes again": 2,
}
