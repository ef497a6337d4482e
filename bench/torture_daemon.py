"""Daemon torture: the reload torture plus carried values, the deletion grace, and the whole
watched folder replaced, moved and restored — in process, or against a real ``hotseam run``.

    .venv/bin/python bench/torture_daemon.py [--edits 600] [--seed 1] [--backend asyncio|trio]
    .venv/bin/python bench/torture_daemon.py --cli [--edits 150] [--seed 1]

**In process** (the default): everything ``bench/torture.py`` does — a
:class:`hotseam.reload.Reloader` on the real native watcher, four askers, 15 % of the asks
cancelled, the same random ordinary edits, the same must-be-0 counters and final-state check
— with the watcher ``hotseam run`` uses: the native watcher (each watched folder's identity
checked every ``--root-check`` seconds) under the deletion grace (``--grace`` seconds: the
reloader's ``deletion_grace``, what ``--deletion-grace`` sets). The watched folder is
``<project>/providers``, in a real git repository (the folder untracked). On top of that:

* **carry** — every provider version carries a counter (``version=`` and an ``accept=``
  that wants an epoch) and, unless it drops it, a real listening socket (``version=``); edits
  change the counter's version or epoch, the listener's version, or drop the listener and
  carry it again, so values are handed over, refused and made again, and let go. Three asks
  in ten connect through the serving generation's carried socket (see ``_torture_carry.py``
  for what is counted);
* **episodes** — ``--episodes`` of the steps (8 %) are episodes instead of an ordinary edit,
  each starting from a converged state (the last good content put back, the serving state
  equal to it): the provider deleted, or renamed away, and back within the grace and past
  it (then its unload is waited for first), saved just before (the save and the deletion
  in one watcher batch), while the helper it imports is saved, and reloaded by hand
  (``reload(force=True)``, what SIGHUP does) while it is away; renamed to another module
  past the grace, and back (``git mv``: the renamed module must take over the carried
  values); the whole folder
  removed and made again (``rm -rf`` and a copy), deployed atomically (``mv providers
  providers.old && mv providers.new providers``), moved away and back within and past the
  grace (and just after a save, and reloaded by hand while it is away), removed and
  restored by ``git checkout``, taken away by
  ``git stash -u`` and brought back by ``git stash pop`` within and past the grace. Half of
  them bring a new provider version back. After each, the serving state must *converge*
  within ``converge_within`` seconds of the folder settling: the serving provider is the
  version on disk (its helper word and carry plan too), it is the only live generation,
  every carried value it does not carry is disposed, and an ask is then answered by it.

**Must be 0**, beyond ``bench/torture.py``'s six and the six of carry:

* *unloaded within the grace* — a module was unloaded during an episode whose file or folder
  was back within the grace (every folder replacement is back at once), measured from when
  the episode began to when its last operation returned: one this process was too slow to
  put back in time (a loaded machine) is counted as *meant within the grace, back past it*
  instead, and not held to the grace;
* *questions lost within the grace* — an ask overlapping such an episode failed;
* *not unloaded past the grace* — the module did not unload within the grace plus the
  folder check plus 3 s of its file or folder being gone;
* *renamed module did not take over* — after a rename past the grace, the renamed module's
  generation does not carry the values its predecessor under the old name carried;
* *did not converge to the files* — an episode (or the state before one) did not converge;
* *no answer once converged* — the ask made once converged was not answered by the
  serving generation.

**With --cli**: the same against a real ``hotseam run`` child; see ``_torture_cli.py``.

Exit status 1 if a must-be-0 counter is not 0 or a final check fails.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import anyio
from _torture_carry import CARRY_ZERO, Carried, CarryGeneration, CarryLedger, plan_of
from _torture_files import EDITS
from _torture_folder import CARRY_EDITS, DaemonFiles
from _torture_ledger import ALT, MUST_BE_ZERO, UI, WORDS, Ledger, Report, Settings
from torture import Torture

from hotseam.interaction import USER_INTERACTION
from hotseam.reload import (
    EventStream,
    ModuleState,
    ModuleUnloaded,
    ReloadCommitted,
    Reloader,
    ReloadEvent,
    WatchfilesWatcher,
    WatchOptions,
)

__all__ = ["DaemonSettings", "DaemonTorture", "run_daemon_torture"]

UNLOADED_WITHIN = "unloaded within the grace"
LOST_WITHIN = "questions lost within the grace"
NOT_UNLOADED = "not unloaded past the grace"
NO_TAKEOVER = "renamed module did not take over its carried values"
NOT_CONVERGED = "did not converge to the files"
NO_ANSWER = "no answer once converged"
DAEMON_ZERO = (UNLOADED_WITHIN, LOST_WITHIN, NOT_UNLOADED, NO_TAKEOVER, NOT_CONVERGED, NO_ANSWER)

EPISODES: dict[str, int] = {
    "grace: deleted, back within the grace": 3,
    "grace: deleted, back past the grace": 2,
    "grace: saved and deleted at once, back within the grace": 2,
    "grace: deleted while its helper is saved, back within the grace": 2,
    "grace: deleted and reloaded by hand, back within the grace": 2,
    "grace: renamed away, back within the grace": 3,
    "grace: renamed away, back past the grace": 2,
    "grace: renamed to another module and back, past the grace": 2,
    "folder: rm -rf and made again": 3,
    "folder: atomic deploy by renames": 3,
    "folder: moved away, back within the grace": 3,
    "folder: moved away, back past the grace": 2,
    "folder: saved and moved away at once, back within the grace": 2,
    "folder: moved away and reloaded by hand, back within the grace": 2,
    "folder: rm -rf, git checkout": 2,
    "folder: git stash -u, pop within the grace": 2,
    "folder: git stash -u, pop past the grace": 2,
}


@dataclass(frozen=True)
class DaemonSettings(Settings):
    """What one daemon torture run does (``edits`` counts the episodes too)."""

    edits: int = 600
    grace: float = 0.5
    root_check: float = 0.25
    episodes: float = 0.08
    converge_within: float = 6.0
    git: bool = True


@dataclass
class Window:
    """One episode: when it ran, and whether its file or folder was back within the grace."""

    kind: str
    started: float
    ended: float
    within: bool


class DaemonTorture(Torture):
    """The reload torture, with carried values, the deletion grace and replaced folders."""

    settings: DaemonSettings
    ledger: CarryLedger
    files: DaemonFiles

    def __init__(self, project: Path, settings: DaemonSettings) -> None:
        super().__init__(project / "providers", settings)
        self.windows: list[Window] = []
        self.unloads: list[tuple[float, str]] = []  # (when, module) of generations unloaded
        self.converged: dict[str, list[float]] = {}
        self.checks = 0

    def make_report(self) -> Report:
        report = super().make_report()
        return Report(
            report.settings,
            report.backend,
            title="Daemon torture",
            zero_names=(*MUST_BE_ZERO, *CARRY_ZERO, *DAEMON_ZERO),
        )

    def make_ledger(self, rng: random.Random) -> Ledger:
        return CarryLedger(rng, self.settings, self.report)

    def make_files(self, rng: random.Random) -> DaemonFiles:
        return DaemonFiles(self.folder, rng, self.ledger)

    def make_reloader(self) -> Reloader:
        settings = self.settings
        native = WatchfilesWatcher(root_check=settings.root_check)
        return Reloader(
            self.context,
            [self.folder],
            watch=WatchOptions(watcher=native, deletion_grace=settings.grace),
            dispose_timeout=settings.dispose_timeout,
            on_event=self.on_event,
        )

    def prepare_folder(self) -> None:
        self.folder.mkdir()
        super().prepare_folder()

    def on_event(self, event: ReloadEvent) -> None:
        super().on_event(event)
        if isinstance(event, ReloadCommitted):
            self.ledger.committed(event.module)
        elif isinstance(event, ModuleUnloaded):
            self.ledger.unloaded(event.module)
            if event.generation is not None:
                self.unloads.append((anyio.current_time(), event.module))

    # -- the steps --------------------------------------------------------------------------------

    async def edit_loop(self, reloader: Reloader) -> None:
        if self.settings.git:
            await self.files.git_init()
        await super().edit_loop(reloader)

    async def edit_step(self, reloader: Reloader) -> None:
        rng = self.rng
        if rng.random() < self.settings.episodes:
            episodes = {k: w for k, w in EPISODES.items() if self.settings.git or "git" not in k}
            kind = rng.choices(list(episodes), list(episodes.values()))[0]
            self.report.edits[kind] += 1
            await self.episode(reloader, kind)
            return
        edits = {**EDITS, **CARRY_EDITS}
        done = self.files.edit(rng.choices(list(edits), list(edits.values()))[0])
        self.report.edits[done] += 1
        await self.pause()

    async def episode(self, reloader: Reloader, kind: str) -> None:
        """Start quiet and converged, make the episode's edits, converge again; check what
        the grace says."""
        if not await self.quiesce(reloader, kind):
            return
        files, rng = self.files, self.rng
        new = rng.random() < 0.5
        meant_within = "past" not in kind  # a folder replaced is back at once
        within = meant_within
        away_for = rng.uniform(0, 0.4 * self.settings.grace)
        started = anyio.current_time()
        unloads = len(self.unloads)
        family = kind.partition(":")[0]
        async with reloader.events() as events:
            if kind.startswith(("grace: deleted", "grace: saved and deleted")):
                path = files.path(f"{UI}.py")
                source = path.read_text(encoding="utf-8")
                if "saved and deleted" in kind:  # the save and the deletion share a batch
                    path.write_text(source, encoding="utf-8")
                path.unlink()
                if "helper is saved" in kind:  # its plan re-executes the importer
                    self.report.edits[files.edit("helper: valid version")] += 1
                if "reloaded by hand" in kind:  # what SIGHUP and `hotseam reload` do
                    await reloader.reload(force=True)
                await self.away(events, within, away_for)
                files.write(f"{UI}.py", files.new_version() if new else source)
            elif kind.startswith("grace: renamed away"):
                moved = files.path(f"{UI}.py.moved")
                os.replace(files.path(f"{UI}.py"), moved)
                await self.away(events, within, away_for)
                if new:
                    moved.write_text(files.new_version(), encoding="utf-8")
                os.replace(moved, files.path(f"{UI}.py"))
            elif kind.startswith("grace: renamed to another module"):
                for old, to in ((UI, ALT), (ALT, UI)):
                    before = dict(self.serving_generation().carried)
                    files.rename_module(to)
                    await self.away(events, False, 0.0, module=old)
                    if not await self.converge(reloader, f"{kind}: {old} -> {to}", module=to):
                        break
                    self.took_over(before, to, kind)
            elif kind == "folder: rm -rf and made again":
                files.remake(new_version=new)
            elif kind == "folder: atomic deploy by renames":
                files.deploy(new_version=new)
            elif kind.startswith(("folder: moved away", "folder: saved and moved away")):
                if "saved" in kind:  # the save and the move share a watcher batch
                    files.write(f"{UI}.py", files.path(f"{UI}.py").read_text(encoding="utf-8"))
                away = files.move_away()
                if "reloaded by hand" in kind:
                    await reloader.reload(force=True)
                await self.away(events, within, away_for, folder=True)
                files.move_back(away, new_version=new)
            elif kind == "folder: rm -rf, git checkout":
                await files.checkout()
            elif kind.startswith("folder: git stash"):
                await files.stash()
                await self.away(events, within, away_for, folder=True)
                await files.pop()
            else:
                raise ValueError(f"unknown episode {kind!r}")
            if within and anyio.current_time() - started >= self.settings.grace:
                # Meant to be back within the grace, but this very process was slow to put
                # it back (a git child, a late wake-up): measured from when it happened, it
                # was away longer than the grace, so it may be unloaded.
                within = False
                self.report.section("episodes")["meant within the grace, back past it"] += 1
            files.settled()
            if await self.converge(reloader, kind, family=family) and meant_within:
                await self.outlast_the_grace(reloader, kind, started)
        ended = anyio.current_time()
        self.windows.append(Window(kind, started, ended, within))
        if within:
            for when, module in self.unloads[unloads:]:
                self.report.count(UNLOADED_WITHIN, f"{kind}: {module} at +{when - started:.3f} s")

    async def outlast_the_grace(self, reloader: Reloader, kind: str, started: float) -> None:
        """Keep the window open until every deletion the episode made is past its grace and
        the folders' check, and all it released is applied (a barrier committed): a module
        unloaded at the end of its grace falls inside the window, not after it."""
        settings = self.settings
        await anyio.sleep_until(started + settings.grace + settings.root_check + 0.2)
        async with reloader.events() as events:
            barrier = self.files.write_barrier()
            with anyio.move_on_after(settings.converge_within) as waited:
                await events.next(ReloadCommitted, path=barrier)
        if waited.cancelled_caught:
            self.report.count(NOT_CONVERGED, f"{kind}: no barrier commit after the grace")
        else:
            await self.converge(reloader, f"{kind}, once past the grace", family="after the grace")

    async def away(
        self,
        events: EventStream,
        within: bool,
        away_for: float,
        *,
        folder: bool = False,
        module: str = UI,
    ) -> None:
        """Within the grace: stay away ``away_for``. Past it: until ``module`` unloaded."""
        if within:
            await anyio.sleep(away_for)
            return
        settings = self.settings
        bound = settings.grace + (settings.root_check if folder else 0.0) + 3.0
        with anyio.move_on_after(bound) as waited:
            await events.next(ModuleUnloaded, module=module)
        if waited.cancelled_caught:
            self.report.count(NOT_UNLOADED, f"{module} still loaded {bound:g} s after it went")

    def took_over(self, before: dict[str, Carried], module: str, kind: str) -> None:
        """The renamed module's generation carries what its predecessor carried."""
        now = self.serving_generation().carried
        for key, value in before.items():
            if now.get(key) is not value:
                self.report.count(
                    NO_TAKEOVER, f"{kind}: {module} carries {now.get(key)!r}, not {value!r}"
                )
            else:
                self.report.section("episodes")[f"{key} taken over by the renamed module"] += 1

    def serving_generation(self) -> CarryGeneration:
        generation = getattr(self.context.lookup(USER_INTERACTION), "generation", None)
        assert isinstance(generation, CarryGeneration), "converged, so a generation serves"
        return generation

    # -- convergence ------------------------------------------------------------------------------

    def divergence(self, reloader: Reloader, module: str) -> str | None:
        """Why the serving state is not (yet) loading the files once; ``None`` once it is."""
        files = self.files
        good = files.good_ui
        want = (module, good.number, f"w{files.good_words.number}", plan_of(good.source))
        serving = self.context.lookup(USER_INTERACTION)
        generation = getattr(serving, "generation", None)
        if not isinstance(generation, CarryGeneration):
            return f"no torture generation serves ({serving!r})"
        have = (generation.module, generation.version, generation.word, generation.plan)
        if have != want:
            return f"serving {have}, the files give {want}"
        status = {s.module: s.state for s in reloader.status()}
        other = ALT if module == UI else UI
        if status.get(WORDS) is not ModuleState.ACTIVE or status.get(other) is ModuleState.ACTIVE:
            return f"modules {status}"
        left = [g for g in self.ledger.generations if g is not generation and not g.disposer_runs]
        if left:
            return f"generations not disposed: {left}"
        carried = generation.carried.values()
        leaked = [v for v in self.ledger.values if not v.disposals and v not in carried]
        if leaked:
            return f"carried values neither carried nor disposed: {leaked}"
        return None

    async def quiesce(self, reloader: Reloader, kind: str) -> bool:
        """Before an episode: the last good content back, every save so far applied (a
        barrier module committed: reloads are serialized), the serving state converged.

        Without the barrier, writes still in the watcher's batch when the episode begins
        would share a batch with its edits (the torture found two bugs that way: see
        tests/reload/test_deletion_grace_plans.py); each episode is measured alone.
        """
        self.lift_transient_failures(now=True)
        self.files.restore()
        bound = self.settings.converge_within
        async with reloader.events() as events:
            barrier = self.files.write_barrier()
            with anyio.move_on_after(bound) as waited:
                await events.next(ReloadCommitted, path=barrier)
        if waited.cancelled_caught:
            self.report.count(NOT_CONVERGED, f"before '{kind}': no barrier commit in {bound:g} s")
            return False
        return await self.converge(reloader, f"before '{kind}'")

    async def converge(
        self, reloader: Reloader, what: str, *, module: str = UI, family: str = "settling"
    ) -> bool:
        """Wait (bounded) until the serving state is the files'; then ask once."""
        bound = self.settings.converge_within
        began = anyio.current_time()
        why = self.divergence(reloader, module)
        with anyio.move_on_after(bound):
            while why is not None:
                await anyio.sleep(0.01)
                why = self.divergence(reloader, module)
        if why is not None:
            self.report.count(NOT_CONVERGED, f"{what}: after {bound:g} s, {why}")
            return False
        self.converged.setdefault(family, []).append(anyio.current_time() - began)
        self.checks += 1
        question = f"converged-{self.checks}"
        outcome = await self.ask_once(question, 0.0, cancel=False)
        expected = f"{question}@{self.serving_generation()!r}"
        if outcome.answer != expected:
            got = outcome.answer or outcome.code
            self.report.count(NO_ANSWER, f"{what}: got {got!r}, expected {expected!r}")
        return True

    # -- the end ----------------------------------------------------------------------------------

    async def settle(self, reloader: Reloader) -> bool:
        if not await super().settle(reloader):
            return False
        return await self.converge(reloader, "after the last edit")

    def tally(self) -> None:
        super().tally()
        self.ledger.never_disposed()
        for outcome in self.outcomes.values():
            if not outcome.failed:
                continue
            ended = outcome.ended if outcome.ended is not None else float("inf")
            for window in self.windows:
                if window.within and outcome.started <= window.ended and ended >= window.started:
                    self.report.count(
                        LOST_WITHIN,
                        f"{window.kind}: {outcome.question} failed with {outcome.code} at "
                        f"+{ended - window.started:.3f} s",
                    )
                    break
        episodes = self.report.section("episodes")
        episodes["episodes"] = len(self.windows)
        for family, times in sorted(self.converged.items()):
            self.report.figures[f"converged ({family}): n / median / max"] = (
                f"{len(times)} / {statistics.median(times):.3f} s / {max(times):.3f} s"
            )


async def run_daemon_torture(project: Path, settings: DaemonSettings | None = None) -> Report:
    """Run the daemon torture in ``project`` (an empty directory) and return its report."""
    return await DaemonTorture(project, settings or DaemonSettings()).run()


async def main(settings: DaemonSettings) -> int:
    # Broken saves and failing disposers are made on purpose: their logs would be noise.
    logging.getLogger("hotseam").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory() as tmp:
        report = await run_daemon_torture(Path(tmp), settings)
    print(report.render())
    return 0 if report.ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--edits", type=int)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hang-after", type=float, default=30.0)
    parser.add_argument("--grace", type=float, default=DaemonSettings.grace)
    parser.add_argument("--root-check", type=float, default=DaemonSettings.root_check)
    parser.add_argument("--episodes", type=float, default=DaemonSettings.episodes)
    parser.add_argument("--no-git", action="store_true", help="no git checkout/stash episodes")
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--cli", action="store_true", help="against a real hotseam run")
    options = parser.parse_args()
    if options.cli:
        from _torture_cli import CliSettings, run_cli

        cli = CliSettings(
            edits=CliSettings.edits if options.edits is None else options.edits,
            seed=options.seed,
            grace=options.grace,
            git=not options.no_git,
        )
        sys.exit(run_cli(cli))
    chosen = DaemonSettings(
        edits=DaemonSettings.edits if options.edits is None else options.edits,
        seed=options.seed,
        hang_after=options.hang_after,
        grace=options.grace,
        root_check=options.root_check,
        episodes=options.episodes,
        git=not options.no_git,
    )
    sys.exit(anyio.run(main, chosen, backend=options.backend))
