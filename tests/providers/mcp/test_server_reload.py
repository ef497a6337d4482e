"""The server under a real reloader (told when to reload): the tool list announced after a
save, and a question open while its provider's module is saved answered exactly once."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from tests._timing import scaled

from .conftest import ERAS, WAIT, Served, serving

TOOL = '''
from pydantic import BaseModel
from hotseam import tool

class Named(BaseModel):
    name: str

@tool(name="{name}")
async def handler(input: Named, call) -> str:
    """{description}"""
    return "{greeting} " + input.name

def setup(scope):
    scope.register_tool(handler)
'''

ASKING_TOOL = '''
from pydantic import BaseModel
from hotseam import tool
from hotseam.interaction import AskUserQuestionOption, AskUserQuestionRequest, ask

class Nothing(BaseModel):
    pass

@tool()
async def pick(input: Nothing, call) -> str:
    """Ask which database."""
    request = AskUserQuestionRequest("Which database?", options=[
        AskUserQuestionOption("Postgres"), AskUserQuestionOption("SQLite")])
    return (await ask(request)).answer

def setup(scope):
    scope.register_tool(pick)
'''

UI = """
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.mcp import McpProvider

def setup(scope):
    scope.provide(USER_INTERACTION, McpProvider(name="{version}"))
"""


def _write(path: Path, text: str, **fields: str) -> Path:
    path.write_text(textwrap.dedent(text).format(**fields))
    return path


async def _tool_names(served: Served) -> list[str]:
    return [t.name for t in (await served.client.list_tools(cache_mode="bypass")).tools]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_tools_list_changed_within_100_ms_of_a_commit(tmp_path: Path, mode: str) -> None:
    """A tool added, one removed, one whose description changed: each announced within
    100 ms of its commit; an edited body alone is not announced (a host keeps calling the
    tool by name, and the new code serves it)."""
    greet = _write(tmp_path / "greet.py", TOOL, name="greet", description="Greet.", greeting="hi")
    async with serving(mode=mode, folder=tmp_path) as served:
        assert served.reloader is not None
        assert await _tool_names(served) == ["greet"]
        arrivals: list[float] = []
        arrived = anyio.Event()

        def note() -> None:
            nonlocal arrived
            arrivals.append(time.perf_counter())
            arrived.set()
            arrived = anyio.Event()

        async def reload_and_wait() -> float:
            waiting = arrived
            await served.reloader.reload()  # type: ignore[union-attr]
            committed = time.perf_counter()
            with anyio.fail_after(scaled(WAIT)):
                await waiting.wait()
            return arrivals[-1] - committed

        async with anyio.create_task_group() as group:
            if mode == "legacy":

                async def on_notification() -> None:
                    seen = 0
                    while True:
                        await served.notified.wait()
                        served.notified = anyio.Event()
                        changed = [
                            n
                            for n in served.notifications
                            if isinstance(n, types.ToolListChangedNotification)
                        ]
                        for _ in changed[seen:]:
                            note()
                        seen = len(changed)

                group.start_soon(on_notification)
                delays = await _changes(served, tmp_path, greet, reload_and_wait)
            else:
                async with served.client.listen(tools_list_changed=True) as subscription:

                    async def on_event() -> None:
                        async for _ in subscription:
                            note()

                    group.start_soon(on_event)
                    delays = await _changes(served, tmp_path, greet, reload_and_wait)
            group.cancel_scope.cancel()
        assert len(arrivals) == 3, arrivals
        assert max(delays) < scaled(0.1), delays


async def _changes(served: Served, folder: Path, greet: Path, reload_and_wait: Any) -> list[float]:
    delays = []
    _write(folder / "waving.py", TOOL, name="wave", description="Wave.", greeting="o/")
    delays.append(await reload_and_wait())
    assert await _tool_names(served) == ["greet", "wave"]

    _write(greet, TOOL, name="greet", description="Greet.", greeting="hello")  # body only
    await served.reloader.reload()  # type: ignore[union-attr]
    result = await served.client.call_tool("greet", {"name": "Ada"})
    assert result.content[0].text == "hello Ada"  # type: ignore[union-attr]

    _write(greet, TOOL, name="greet", description="Greet warmly.", greeting="hello")
    delays.append(await reload_and_wait())
    (folder / "waving.py").unlink()
    delays.append(await reload_and_wait())
    assert await _tool_names(served) == ["greet"]
    return delays


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_a_save_during_an_open_question_is_answered_exactly_once(
    tmp_path: Path, mode: str
) -> None:
    """The provider's module is saved while its form is open. 2025-11-25: the request is
    withdrawn (notifications/cancelled: the client's form handler is cancelled) and the
    question asked again on the new provider, whose answer is the tool's. 2026-07-28: the
    question keeps its key, and the answer that comes back with the retry is the answer of
    the question asked again — the client is shown it once."""
    _write(tmp_path / "pick.py", ASKING_TOOL)
    ui = _write(tmp_path / "ui.py", UI, version="v1")
    shown = anyio.Event()
    saved = anyio.Event()
    withdrawn: list[int] = []
    forms = 0

    async def elicit(params: types.ElicitRequestFormParams) -> types.ElicitResult:
        nonlocal forms
        forms += 1
        if forms == 1:
            shown.set()
            try:
                await saved.wait()
                if mode == "legacy":
                    await anyio.sleep_forever()  # until the server withdraws it
            except anyio.get_cancelled_exc_class():
                withdrawn.append(forms)
                raise
        return types.ElicitResult(action="accept", content={"answer": "SQLite"})

    async with serving(mode=mode, folder=tmp_path, provide=False, elicit=elicit) as served:
        assert served.reloader is not None
        results: list[types.CallToolResult] = []

        async def call() -> None:
            results.append(await served.client.call_tool("pick", {}))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            with anyio.fail_after(scaled(WAIT)):
                await shown.wait()
            _write(ui, UI, version="v2")
            result = await served.reloader.reload()
            assert [event.path for event in result.committed] == [ui]
            saved.set()
        (answered,) = results
        assert not answered.is_error, answered
        assert answered.content[0].text == "SQLite"  # type: ignore[union-attr]
        if mode == "legacy":
            assert withdrawn == [1]
            assert forms == 2
        else:
            assert withdrawn == []
            assert forms == 1


SLOW_TO_GO = '''
import sys
from pydantic import BaseModel
from hotseam import tool

GATE = sys.modules["{test_module}"].GATE

class Named(BaseModel):
    name: str

@tool(name="greet")
async def handler(input: Named, call) -> str:
    """Greet."""
    return "{greeting} " + input.name

def setup(scope):
    scope.register_tool(handler)

    async def linger():
        GATE.closing.set()
        await GATE.release.wait()

    scope.defer(linger)  # the old generation takes its time to go: the swap stays open
'''


class _Gate:
    def __init__(self) -> None:
        self.closing = anyio.Event()
        self.release = anyio.Event()


GATE = _Gate()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_a_call_during_a_real_reload_runs_the_new_code(tmp_path: Path, mode: str) -> None:
    """A call that arrives while the reloader swaps the tool's module (its old generation
    still closing) waits for the commit and runs the new code: never 'unknown tool'."""
    global GATE
    GATE = _Gate()
    module = tmp_path / "slow_greet.py"
    _write(module, SLOW_TO_GO, test_module=__name__, greeting="hi")
    async with serving(mode=mode, folder=tmp_path) as served:
        assert served.reloader is not None
        results: list[types.CallToolResult] = []

        async def call() -> None:
            results.append(await served.client.call_tool("greet", {"name": "Ada"}))

        _write(module, SLOW_TO_GO, test_module=__name__, greeting="hello")
        async with anyio.create_task_group() as group:
            group.start_soon(served.reloader.reload)
            with anyio.fail_after(scaled(WAIT)):
                await GATE.closing.wait()  # the swap is under way
            group.start_soon(call)
            await anyio.wait_all_tasks_blocked()  # the call is in, waiting
            assert results == []
            GATE.release.set()
        (result,) = results
        assert not result.is_error, result
        assert result.content[0].text == "hello Ada"  # type: ignore[union-attr]
