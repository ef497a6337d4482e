"""Save → the host's next call, at 100 tool modules: what a commit costs the calls behind it.

``bench/mcp.py`` measures the whole path (goal: median ≤ 25 ms at 100 modules). A run
missed it (27.5 ms median, p95 58-68 ms, max 288 ms, on 2 busy cores) although the reload
committed 2-3 ms after the save: after each commit the server checked whether the tool
list changed by building every visible tool's definition, and each definition regenerated
its input model's JSON schema (pydantic's ``model_json_schema``): 100 schemas, 17-95 ms,
on the event loop the waiting call needs. Only the committed module's tools are new
objects, so only their definitions may be built again (the median is now 7-8 ms).
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import pytest
from pydantic import BaseModel, create_model

from hotseam import Context, Scope, Tool, ToolCall
from hotseam.providers.mcp import McpServer

pytestmark = pytest.mark.anyio

MODULES = 100


async def _say(input: BaseModel, call: ToolCall) -> str:
    return "ok"


def _tool(index: int) -> Tool[Any]:
    model = create_model(f"Input{index}", text=(str, ""))  # a new class, the same schema
    return Tool(f"tool_{index:03d}", "Say which version serves.", model, _say)


async def test_a_commit_of_one_module_rebuilds_only_that_modules_schemas(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One module of 100 saved (its body edited, the tool unchanged to a client): the
    server's check for a changed list builds at most that module's tool's schema."""
    context = Context("mcp")
    async with AsyncExitStack() as stack:
        scopes = []
        for index in range(MODULES):
            scope = await stack.enter_async_context(Scope(f"module_{index}", context=context))
            scope.register_tool(_tool(index))
            scopes.append(scope)
        server = McpServer(context)
        assert await server.tools_changed() is False

        await scopes[42].aclose()  # a reload of module 42: the old generation goes...
        new = await stack.enter_async_context(Scope("module_42 g2", context=context))
        new.register_tool(_tool(42))  # ...and the new one commits

        built: list[str] = []
        original = BaseModel.model_json_schema.__func__  # type: ignore[attr-defined]

        def counted(cls: type[BaseModel], *args: Any, **kwargs: Any) -> dict[str, Any]:
            built.append(cls.__name__)
            return original(cls, *args, **kwargs)  # type: ignore[no-any-return]

        monkeypatch.setattr(BaseModel, "model_json_schema", classmethod(counted))
        assert await server.tools_changed() is False  # same name, description and schema
        assert len(built) <= 1, f"{len(built)} schemas built for one module's commit"
