"""Which of hotseam's files two journeys cross: an ACP ask, and a save re-asking a question.

A reading aid for maintainers, not a speed figure: the fewer files a journey crosses, the
fewer places a reader must hold in mind to follow it. Each journey runs once warmed up
(imports and first-call caches are not counted), with a profile hook recording every
function entered in a file under ``src/hotseam``:

- **ACP ask**: from the agent's ``ask_user_question`` tool call to its result, in process
  against the ACP SDK's own client (the agent side and the client side share the loop);
- **save**: from the write of a provider module to the re-asked question arriving at the
  new generation's provider, through the library ``Reloader`` (every thread is hooked).

``_core`` (scopes, registry, effects: what every journey stands on) is listed apart.

    .venv/bin/python bench/crossings.py
"""

from __future__ import annotations

import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
SRC = str(ROOT / "src" / "hotseam") + "/"
sys.path.insert(0, str(ROOT))


class Crossed:
    """The hotseam files entered while :meth:`recording` is on, in every hooked thread."""

    def __init__(self) -> None:
        self.files: dict[str, int] = {}
        self.on = False

    def hook(self, frame: FrameType, event: str, arg: Any) -> None:
        if self.on and event == "call":
            name = frame.f_code.co_filename
            if name.startswith(SRC):
                short = name[len(SRC) :]
                self.files[short] = self.files.get(short, 0) + 1

    @contextmanager
    def recording(self) -> Iterator[None]:
        self.on = True
        try:
            yield
        finally:
            self.on = False

    def table(self, title: str) -> str:
        core = sorted(f for f in self.files if f.startswith("_core/"))
        rest = sorted(f for f in self.files if not f.startswith("_core/"))
        lines = [f"## {title}: {len(rest)} files (+ {len(core)} in _core)", ""]
        lines += [f"- {name} ({self.files[name]} calls)" for name in rest]
        lines += ["", "_core: " + ", ".join(core), ""]
        return "\n".join(lines)


async def acp_ask(crossed: Crossed) -> None:
    from tests.providers.acp._harness import connected

    from hotseam import Context
    from hotseam.providers.acp import current_turn

    question = {
        "header": "Storage",
        "question": "Which database?",
        "options": [{"label": "Postgres", "value": "pg"}, {"label": "SQLite"}],
    }
    rounds = 0

    async def agent(context: Context) -> None:
        nonlocal rounds
        rounds += 1
        if rounds == 2:  # the first round warms every cache
            with crossed.recording():
                result = await context.tools.execute("ask_user_question", question)
        else:
            result = await context.tools.execute("ask_user_question", question)
        await current_turn().say(f"answer: {result.output['answer']}\n")

    async with connected(agent) as acp:
        for _ in range(2):
            pending = acp.start_prompt()
            request = await acp.next_request()
            request.answer({"action": "accept", "content": {"answer": "pg"}})
            await pending.result()


PROVIDER = """\
import builtins
from hotseam.interaction import USER_INTERACTION

VERSION = {version}


class Provider:
    async def ask(self, request):
        return await builtins.bench_arrived(VERSION)


def setup(scope):
    scope.provide(USER_INTERACTION, Provider())
"""


async def save_reask(crossed: Crossed) -> None:
    import builtins

    from hotseam import Context
    from hotseam.interaction import AskUserQuestionRequest, ask
    from hotseam.reload import Reloader

    arrived = {version: anyio.Event() for version in range(3)}

    async def on_question(version: int) -> Any:
        crossed.on = False  # the question reached this generation's provider
        arrived[version].set()
        await anyio.sleep_forever()

    builtins.bench_arrived = on_question  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory() as folder:
        module = Path(folder) / "ui.py"
        module.write_text(PROVIDER.format(version=0))
        context = Context("bench")
        request = AskUserQuestionRequest("Which database?")
        async with Reloader(context, [Path(folder)]), anyio.create_task_group() as tg:
            tg.start_soon(lambda: ask(request, context=context))
            await arrived[0].wait()
            module.write_text(PROVIDER.format(version=1))  # the first save warms the caches
            await arrived[1].wait()
            crossed.on = True
            module.write_text(PROVIDER.format(version=2))
            await arrived[2].wait()
            tg.cancel_scope.cancel()


def main() -> None:
    for title, journey in (("ACP ask", acp_ask), ("save → re-asked question", save_reask)):
        crossed = Crossed()
        threading.setprofile(crossed.hook)
        sys.setprofile(crossed.hook)
        try:
            anyio.run(journey, crossed)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
        print(crossed.table(title))


if __name__ == "__main__":
    main()
