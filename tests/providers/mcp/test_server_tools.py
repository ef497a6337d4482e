"""``tools/list`` and ``tools/call`` through the SDK's own client, on both revisions."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from hotseam import ToolCall, tool
from hotseam.interaction import ErrorCode, UserInteractionError

from .conftest import ERAS, serving


class Named(BaseModel):
    name: str
    times: int = 1


@tool()
async def greet(input: Named, call: ToolCall) -> str:
    """Greet someone."""
    return " ".join([f"hello {input.name}"] * input.times)


@tool()
async def describe(input: Named, call: ToolCall) -> dict[str, Any]:
    """Describe the call."""
    return {"name": input.name, "context": call.context.name}


@tool()
async def fails(input: Named, call: ToolCall) -> str:
    """Fail with a seam error."""
    raise UserInteractionError("the human declined", ErrorCode.ASK_DECLINED)


@tool()
async def crashes(input: Named, call: ToolCall) -> str:
    """Fail with a bug."""
    raise ZeroDivisionError("boom")


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_list_and_call(mode: str) -> None:
    """Listed by name with the input model's schema; outputs as text (and objects as
    structured content); failures as isError keeping {name, code}; an unknown tool is
    -32602 with the same structure in its data."""
    async with serving([greet, fails, describe, crashes], mode=mode) as served:
        if mode == "legacy":
            capabilities = served.client.server_capabilities  # initialize's answer
        else:  # what server/discover answers (the client here adopted a synthesized one)
            capabilities = served.server.lowlevel.get_capabilities(protocol_version=mode)
        assert capabilities.tools is not None
        assert capabilities.tools.list_changed is True
        listed = (await served.client.list_tools()).tools
        assert [t.name for t in listed] == ["crashes", "describe", "fails", "greet"]
        schema = next(t for t in listed if t.name == "greet").input_schema
        assert schema["properties"]["name"]["type"] == "string"
        assert schema["required"] == ["name"]
        assert next(t for t in listed if t.name == "greet").description == "Greet someone."

        result = await served.client.call_tool("greet", {"name": "Ada", "times": 2})
        assert not result.is_error
        assert result.content[0].text == "hello Ada hello Ada"  # type: ignore[union-attr]

        result = await served.client.call_tool("describe", {"name": "Ada"})
        assert result.structured_content == {"name": "Ada", "context": "mcp.tools"}

        result = await served.client.call_tool("fails", {"name": "x"})
        assert result.is_error
        assert result.structured_content is not None
        assert result.structured_content["name"] == "UserInteractionError"
        assert result.structured_content["code"] == "ASK_DECLINED"
        assert "ASK_DECLINED" in result.content[0].text  # type: ignore[union-attr]

        result = await served.client.call_tool("greet", {"times": "x"})
        assert result.is_error
        assert result.structured_content["code"] == "INVALID_INPUT"  # type: ignore[index]

        result = await served.client.call_tool("crashes", {"name": "x"})
        assert result.is_error
        assert result.structured_content["name"] == "ZeroDivisionError"  # type: ignore[index]
        assert result.structured_content["code"] == "INTERNAL"  # type: ignore[index]

        with pytest.raises(MCPError) as unknown:
            await served.client.call_tool("nope", {})
        assert unknown.value.code == -32602
        assert unknown.value.data["code"] == "TOOL_NOT_FOUND"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_a_call_during_a_swap_waits_for_it_and_runs_the_new_code(mode: str) -> None:
    """A call that arrives while the tool's generation is swapped out waits for the swap
    (as ctx.tools.execute does) and is served by the new code: never 'unknown tool'."""
    async with serving([], mode=mode) as served:
        registration = served.scope.register_tool(greet)

        @tool(name="greet")
        async def greet_v2(input: Named, call: ToolCall) -> str:
            """Greet someone, version 2."""
            return f"hi {input.name}"

        results: list[Any] = []

        async def call() -> None:
            results.append(await served.client.call_tool("greet", {"name": "Ada"}))

        async with (
            anyio.create_task_group() as group,
            served.tools.swap(tools=["greet"]),  # what a reload's commit does
        ):
            await registration.dispose()
            group.start_soon(call)
            await anyio.wait_all_tasks_blocked()  # the call is in, waiting for the swap
            assert results == []
            served.scope.register_tool(greet_v2)
        assert results[0].content[0].text == "hi Ada"
