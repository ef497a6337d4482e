"""The daemon torture's files: the ordinary edits, edits of what the provider carries, and the
whole watched folder replaced, moved away and back, checked out and stashed with git.

The watched folder is ``<project>/providers``; ``<project>`` is a git repository in which
``providers/`` is untracked (as a working copy's new folder is), so ``git stash -u`` takes
the whole folder away and ``git stash pop`` brings it back as a new folder. Folder
operations that must not block the event loop for long (git) run as child processes.
"""

from __future__ import annotations

import os
import random
import shutil
from dataclasses import replace
from pathlib import Path

import anyio
from _torture_carry import PROVIDER_SOURCE, CarryPlan
from _torture_files import Files, Good
from _torture_ledger import UI, WORDS, Ledger

__all__ = ["CARRY_EDITS", "DaemonFiles"]

CARRY_EDITS: dict[str, int] = {
    "carry: counter version changed": 4,
    "carry: counter refused by accept": 4,
    "carry: listener version changed": 3,
    "carry: listener dropped or carried again": 3,
}
GIT = ("git", "-c", "user.name=torture", "-c", "user.email=torture@localhost")


class DaemonFiles(Files):
    """The watched folder ``<project>/providers`` and every edit the daemon torture makes."""

    def __init__(self, folder: Path, rng: random.Random, ledger: Ledger) -> None:
        self.plan = CarryPlan()
        super().__init__(folder, rng, ledger)
        self.project = folder.parent

    def provider_source(
        self, version: int, *, disposer: str = "normal", module_line: str = "", setup_line: str = ""
    ) -> str:
        return PROVIDER_SOURCE.format(
            version=version,
            carry=self.plan.as_tuple(),
            disposer=disposer,
            module_line=module_line,
            setup_line=setup_line,
        )

    def edit(self, kind: str) -> str:
        target, _, what = kind.partition(": ")
        if target != "carry":
            return super().edit(kind)
        self.number += 1
        plan = self.plan
        if what == "counter version changed":
            self.plan = replace(plan, counter_version=plan.counter_version + 1)
        elif what == "counter refused by accept":
            self.plan = replace(plan, epoch=plan.epoch + 1)
        elif what == "listener version changed":
            self.plan = replace(plan, listener_version=(plan.listener_version or 0) + 1)
        elif what == "listener dropped or carried again":
            carried = plan.listener_version is not None
            self.plan = replace(plan, listener_version=None if carried else self.number)
            what = "listener dropped" if carried else "listener carried again"
        else:
            raise ValueError(f"unknown carry edit {what!r}")
        self._save_ui(self.provider_source(self.number), good=True)
        return f"carry: {what}"

    # -- the whole folder -------------------------------------------------------------------------

    def new_version(self) -> str:
        """A new good version of the provider (not written): its source."""
        self.number += 1
        source = self.provider_source(self.number)
        self.good_ui = Good(self.number, source)
        return source

    def settled(self) -> None:
        """After a folder operation: the modules are under their own names."""
        self.ui_at = f"{UI}.py"
        self.words_at = f"{WORDS}.py"

    def content(self, *, new_version: bool) -> dict[str, bytes]:
        """What the folder holds now (the provider's next version in place, if asked)."""
        files = {path.name: path.read_bytes() for path in self.folder.iterdir() if path.is_file()}
        if new_version:
            files[f"{UI}.py"] = self.new_version().encode()
        return files

    def remake(self, *, new_version: bool) -> None:
        """``rm -rf providers`` and make it again (as a checkout does)."""
        files = self.content(new_version=new_version)
        shutil.rmtree(self.folder)
        self._fill(self.folder, files)

    def deploy(self, *, new_version: bool) -> None:
        """An atomic deploy: ``mv providers providers.old && mv providers.new providers``."""
        staging, old = self.sibling("new"), self.sibling("old")
        self._fill(staging, self.content(new_version=new_version))
        os.rename(self.folder, old)
        os.rename(staging, self.folder)
        shutil.rmtree(old)

    def sibling(self, suffix: str) -> Path:
        path = self.folder.with_name(f"{self.folder.name}.{suffix}")
        if path.exists():
            shutil.rmtree(path)
        return path

    def move_away(self) -> Path:
        away = self.sibling("away")
        os.rename(self.folder, away)
        return away

    def move_back(self, away: Path, *, new_version: bool) -> None:
        """Bring the folder back (its provider saved while away, if asked)."""
        if new_version:
            (away / f"{UI}.py").write_text(self.new_version(), encoding="utf-8")
        os.rename(away, self.folder)

    def rename_module(self, to: str) -> None:
        """``git mv providers/torture_ui.py providers/<to>.py`` (or back)."""
        here = self.ui_at or f"{UI}.py"
        os.replace(self.path(here), self.path(f"{to}.py"))
        self.ui_at = f"{to}.py"

    @staticmethod
    def _fill(folder: Path, files: dict[str, bytes]) -> None:
        folder.mkdir()
        for name, data in files.items():
            (folder / name).write_bytes(data)

    # -- git --------------------------------------------------------------------------------------

    async def git(self, *args: str) -> None:
        await anyio.run_process([*GIT, *args], cwd=self.project)

    async def git_init(self) -> None:
        """A repository around the folder, the folder itself untracked."""
        ignore = "__pycache__/\n/providers.*/\n"
        (self.project / ".gitignore").write_text(ignore, encoding="utf-8")
        await self.git("init", "--quiet")
        await self.git("add", ".gitignore")
        await self.git("commit", "--quiet", "-m", "the torture's project")

    async def checkout(self) -> None:
        """``rm -rf providers && git checkout providers`` (committed first, untracked after)."""
        await self.git("add", "--force", self.folder.name)
        await self.git("commit", "--quiet", "-m", "providers")
        shutil.rmtree(self.folder)
        await self.git("checkout", "--", self.folder.name)
        await self.git("rm", "-r", "--cached", "--quiet", self.folder.name)
        await self.git("commit", "--quiet", "-m", "providers untracked again")

    async def stash(self) -> None:
        """``git stash -u``: the untracked folder goes away."""
        await self.git("stash", "push", "--include-untracked", "--quiet", "--", self.folder.name)
        if self.folder.exists():
            raise RuntimeError(f"git stash -u left {self.folder}")

    async def pop(self) -> None:
        await self.git("stash", "pop", "--quiet")
