"""Behaviour 1: an edited provider module replaces the old provider, old effects first."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from tests._timing import scaled

from hotseam import Context
from hotseam.interaction import USER_INTERACTION, AskUserQuestionAnswer, ask
from hotseam.providers.scripted import ScriptedProvider
from hotseam.reload import ReloadCommitted, Reloader

from ._support import Probe, provider_source
from .conftest import QUESTION, write

pytestmark = pytest.mark.anyio

# Every line of the log that the provider modules below write, in order, tells the story.
SPAWN_LIVE = "scope.spawn(reload_probe.probe.live, VERSION)"
SEEN_AT_DISPOSE = "scope.defer(lambda: reload_probe.probe.note_serving('seen at dispose'))"


def _serving(context: Context) -> ScriptedProvider:
    provider = context.get(USER_INTERACTION)
    assert isinstance(provider, ScriptedProvider)
    return provider


class TestReplaceProvider:
    async def test_an_edit_replaces_the_provider_and_moves_the_pending_ask(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Real watcher: old UI sees cancellation, disposers run once before the new one is live.

        The new module is executed and set up (staged) first, then the old generation is
        disposed, then the new one activated (its task starts); the pending ask is answered
        by the new provider.
        """
        probe.values["context"] = context
        ui = write(
            folder / "my_ui.py",
            provider_source(1, reply="Reply.never()", setup_lines=[SPAWN_LIVE, SEEN_AT_DISPOSE]),
        )
        answers: list[AskUserQuestionAnswer] = []
        with anyio.fail_after(scaled(10)):
            async with Reloader(context, [folder]) as reloader:
                old = _serving(context)
                async with anyio.create_task_group() as tg:

                    async def asker() -> None:
                        answers.append(await ask(QUESTION, context=context))

                    tg.start_soon(asker)
                    await old.wait_for_requests(1)
                    async with reloader.events() as events:
                        write(
                            ui,
                            provider_source(2, reply="'Postgres'", setup_lines=[SPAWN_LIVE]),
                        )
                        committed = await events.next(ReloadCommitted, path=ui)
                new = _serving(context)
                assert [a.answer for a in answers] == ["Postgres"]
                assert old.cancelled == [QUESTION]
                assert new.requests == [QUESTION]
                assert committed.generation == 2
                assert reloader.status_of(ui).generation == 2
        log = probe.log
        assert log.count(("dispose", 1)) == 1
        assert log.count(("dispose", 2)) == 1
        assert log.index(("setup", 2)) < log.index(("dispose", 1)) < log.index(("live", 2))
        # When v1's disposers ran, v1 was withdrawn and v2's provider not active yet.
        assert probe.entries("seen at dispose") == [None]

    async def test_the_next_ask_is_served_by_the_new_provider(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """By hand: reload() returns once the new generation serves."""
        ui = write(folder / "my_ui.py", provider_source(1))
        async with Reloader(context, [folder], watch=False) as reloader:
            assert (await ask(QUESTION, context=context)).answer == "answer v1"
            write(ui, provider_source(2))
            result = await reloader.reload(ui)
            assert [(c.path, c.generation) for c in result.committed] == [(ui, 2)]
            assert (await ask(QUESTION, context=context)).answer == "answer v2"
            assert probe.log == [
                ("exec", 1),
                ("setup", 1),
                ("exec", 2),
                ("setup", 2),
                ("dispose", 1),
            ]

    async def test_nothing_of_a_closing_generation_is_served_in_readme_order(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """provide and register_tool first, then an async disposer (the README's order):
        while the disposer runs, neither the provider nor the tool is served, and calls of
        both wait for the new generation."""
        gate = anyio.Event()
        probe.values["gate"] = gate
        probe.values["entered"] = anyio.Event()
        template = """
            import reload_probe
            from pydantic import BaseModel
            from hotseam import Tool
            from hotseam.interaction import USER_INTERACTION
            from hotseam.providers.scripted import ScriptedProvider

            class Empty(BaseModel):
                pass

            async def version(value, call):
                return "v{n}"

            def setup(scope):
                scope.provide(USER_INTERACTION, ScriptedProvider(["from v{n}"], name="v{n}"))
                scope.register_tool(Tool("version", "Which version", Empty, version))
                {disposer}
        """
        ui = write(
            folder / "my_ui.py",
            template.format(n=1, disposer="scope.defer(reload_probe.probe.hold)"),
        )
        answers: list[str] = []
        outputs: list[object] = []
        with anyio.fail_after(scaled(5)):
            async with (
                Reloader(context, [folder], watch=False) as reloader,
                anyio.create_task_group() as tg,
            ):
                write(ui, template.format(n=2, disposer="pass"))
                tg.start_soon(reloader.reload, ui)
                await probe.values["entered"].wait()
                assert context.lookup(USER_INTERACTION) is None
                assert context.tools.get("version") is None

                async def asker() -> None:
                    answers.append((await ask(QUESTION, context=context)).answer)

                async def caller() -> None:
                    outputs.append((await context.tools.execute("version", {})).output)

                tg.start_soon(asker)
                tg.start_soon(caller)
                await anyio.wait_all_tasks_blocked()
                assert answers == [] and outputs == []  # waiting, not failed
                gate.set()
        assert answers == ["from v2"]
        assert outputs == ["v2"]

    async def test_asks_arriving_during_the_swap_wait_for_the_new_provider(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """Between the old provider's removal and the new one's activation, asks wait.

        v1 has a disposer that runs after its registration was removed (registered before
        it, so it runs after it) and blocks until the test lets it go: the swap is held
        open with no provider active. An ask made then neither fails nor reaches v1.
        """
        gate = anyio.Event()
        probe.values["gate"] = gate
        probe.values["entered"] = anyio.Event()
        v1 = """
            import reload_probe
            from hotseam.interaction import USER_INTERACTION
            from hotseam.providers.scripted import ScriptedProvider

            def setup(scope):
                scope.defer(reload_probe.probe.hold)
                scope.provide(USER_INTERACTION, ScriptedProvider(["from v1"], name="v1"))
        """
        v2 = """
            from hotseam.interaction import USER_INTERACTION
            from hotseam.providers.scripted import ScriptedProvider

            def setup(scope):
                scope.provide(USER_INTERACTION, ScriptedProvider(["from v2"], name="v2"))
        """
        ui = write(folder / "my_ui.py", v1)
        answers: list[str] = []
        with anyio.fail_after(scaled(5)):
            async with (
                Reloader(context, [folder], watch=False) as reloader,
                anyio.create_task_group() as tg,
            ):
                write(ui, v2)
                tg.start_soon(reloader.reload, ui)
                await probe.values["entered"].wait()
                assert context.lookup(USER_INTERACTION) is None  # the gap, inside the swap

                async def asker() -> None:
                    answers.append((await ask(QUESTION, context=context)).answer)

                tg.start_soon(asker)
                await anyio.wait_all_tasks_blocked()
                assert answers == []  # waiting, not failed
                gate.set()
        assert answers == ["from v2"]
