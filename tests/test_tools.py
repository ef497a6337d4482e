"""Tools: pydantic inputs, effect-bound registration, results that keep name and code."""

from __future__ import annotations

import logging

import anyio
import pytest
from pydantic import BaseModel, Field

from hotseam import (
    AbortController,
    Agent,
    Context,
    HarnessError,
    Scope,
    Tool,
    ToolCall,
    ToolError,
    tool,
)

pytestmark = pytest.mark.anyio


class Point(BaseModel):
    x: int
    y: int = Field(default=0, description="vertical position")


class Polygon(BaseModel):
    name: str
    points: list[Point]


class ThingFailed(HarnessError):
    """A domain error with its own name."""


@tool(description="Add the coordinates of a point.")
async def add(point: Point, call: ToolCall) -> dict[str, int]:
    return {"sum": point.x + point.y}


async def _crash(polygon: Polygon, call: ToolCall) -> None:
    raise ZeroDivisionError("boom")


async def _harness_failure(polygon: Polygon, call: ToolCall) -> None:
    raise ThingFailed("the thing failed", "THING_FAILED")


async def _echo_call(point: Point, call: ToolCall) -> Point:
    assert call.agent is not None
    return Point(x=point.x, y=len(call.agent.display_name))


class TestRegistration:
    async def test_register_tool_is_effect_bound(self) -> None:
        """The tool exists while its scope is open."""
        context = Context("tools")
        async with Scope("s", context=context) as scope:
            registration = scope.register_tool(add)
            assert "add" in context.tools and registration.active
        assert "add" not in context.tools
        assert not registration.active

    async def test_a_duplicate_name_raises(self) -> None:
        """Two tools with one name in one context is an error, not a replacement."""
        context = Context("tools")
        context.tools.register(add)
        with pytest.raises(ToolError) as caught:
            context.tools.register(Tool("add", "another", Point, _echo_call))
        assert caught.value.code == "DUPLICATE_TOOL"

    async def test_child_contexts_inherit_and_shadow_tools(self) -> None:
        """Tools are inherited like providers."""
        parent = Context("parent")
        parent.tools.register(add)
        child = parent.child()
        assert child.tools.names() == ["add"]
        child.tools.register(Tool("add", "shadow", Point, _echo_call))
        assert child.tools.get("add") is not add
        assert parent.tools.get("add") is add

    async def test_the_decorator_needs_an_input_model(self) -> None:
        """A handler without an annotated input parameter is refused clearly."""
        with pytest.raises(TypeError, match="annotated first parameter"):

            @tool()
            async def bad(x, call):  # type: ignore[no-untyped-def]
                return None


class TestExecute:
    async def test_success_returns_the_output(self) -> None:
        """A dict or a pydantic model output comes back JSON-ready."""
        context = Context("tools")
        context.tools.register(add)
        context.tools.register(Tool("echo", "echo", Point, _echo_call))
        result = await context.tools.execute("add", {"x": 2, "y": 3})
        assert result.ok and result.output == {"sum": 5}
        assert result.to_dict() == {"ok": True, "output": {"sum": 5}}
        echoed = await context.tools.execute(
            "echo", '{"x": 1}', agent=Agent("a", "Planner"), signal=AbortController().signal
        )
        assert echoed.output == {"x": 1, "y": len("Planner")}

    async def test_unknown_tool(self) -> None:
        """TOOL_NOT_FOUND, listing the tools that exist."""
        context = Context("tools")
        context.tools.register(add)
        result = await context.tools.execute("nope", {})
        assert result.error is not None
        assert result.error["code"] == "TOOL_NOT_FOUND"
        assert result.error["name"] == "ToolError"
        assert "available: add" in result.error["message"]

    async def test_invalid_input_names_the_bad_field(self) -> None:
        """INVALID_INPUT with a path like points[1].x."""
        context = Context("tools")
        context.tools.register(Tool("poly", "polygon", Polygon, _crash))
        result = await context.tools.execute(
            "poly", {"name": "tri", "points": [{"x": 1}, {"x": "not a number"}]}
        )
        assert result.error is not None
        assert result.error["code"] == "INVALID_INPUT"
        assert "points[1].x" in result.error["message"]
        assert result.error["details"]["errors"][0]["field"] == "points[1].x"

    async def test_invalid_json_is_invalid_input(self) -> None:
        """A malformed JSON string is reported, not raised."""
        context = Context("tools")
        context.tools.register(add)
        result = await context.tools.execute("add", "{not json")
        assert result.error is not None and result.error["code"] == "INVALID_INPUT"

    async def test_a_harness_error_keeps_its_name_and_code(self) -> None:
        """{"name": "ThingFailed", "code": "THING_FAILED", ...} reaches the model."""
        context = Context("tools")
        context.tools.register(Tool("thing", "thing", Polygon, _harness_failure))
        result = await context.tools.execute("thing", {"name": "x", "points": []})
        assert result.error == {
            "name": "ThingFailed",
            "code": "THING_FAILED",
            "message": "the thing failed",
        }

    async def test_any_other_exception_is_internal_and_logged(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The class name with code INTERNAL, and a log record with the traceback."""
        context = Context("tools")
        registration = context.tools.register(Tool("crash", "crash", Polygon, _crash))
        with caplog.at_level(logging.ERROR, logger="hotseam.tools"):
            result = await context.tools.execute("crash", {"name": "x", "points": []})
        await registration.dispose()  # caplog keeps the traceback, and with it the context
        assert result.error == {"name": "ZeroDivisionError", "code": "INTERNAL", "message": "boom"}
        (record,) = [r for r in caplog.records if r.name == "hotseam.tools"]
        assert record.exc_info is not None and record.exc_info[0] is ZeroDivisionError

    async def test_cancellation_of_the_caller_is_never_swallowed(self) -> None:
        """A cancelled execute propagates cancellation instead of returning a result."""
        context = Context("tools")
        started = anyio.Event()

        async def waits(point: Point, call: ToolCall) -> None:
            started.set()
            await anyio.sleep_forever()

        context.tools.register(Tool("waits", "waits", Point, waits))
        results: list[object] = []
        async with anyio.create_task_group() as tg:

            async def caller() -> None:
                results.append(await context.tools.execute("waits", {"x": 1}))

            tg.start_soon(caller)
            await started.wait()
            tg.cancel_scope.cancel()
        assert results == []


class TestDefinitions:
    @pytest.mark.parametrize(
        ("format", "path"),
        [
            ("anthropic", ("input_schema",)),
            ("openai", ("function", "parameters")),
            ("mcp", ("inputSchema",)),
        ],
    )
    async def test_each_format_carries_the_pydantic_schema(
        self, format: str, path: tuple[str, ...]
    ) -> None:
        """The schema comes from the input model, in each API's envelope."""
        context = Context("tools")
        context.tools.register(add)
        (definition,) = context.tools.definitions(format)  # type: ignore[arg-type]
        schema = definition
        for key in path:
            schema = schema[key]
        assert schema == Point.model_json_schema()
        name = definition["function"]["name"] if format == "openai" else definition["name"]
        assert name == "add"

    async def test_an_unknown_format_is_a_clear_error(self) -> None:
        """The error lists the formats that exist."""
        with pytest.raises(ValueError, match="anthropic"):
            Context("tools").tools.definitions("gemini")  # type: ignore[arg-type]
