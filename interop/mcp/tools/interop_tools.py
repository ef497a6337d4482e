"""The tools `make interop` serves with `hotseam mcp`: for the MCP Inspector's CLI (echo)
and for the conformance suite's server scenarios (the test_* tools it calls by name)."""

from pydantic import BaseModel, ConfigDict

from hotseam import ToolCall, tool
from hotseam.interaction import AskUserQuestionRequest, Question, ask

JSON_SCHEMA_2020_12 = "https://json-schema.org/draft/2020-12/schema"


class Text(BaseModel):
    text: str


class Nothing(BaseModel):
    pass


class Message(BaseModel):
    message: str


class address(BaseModel):  # noqa: N801 - the conformance scenario looks for $defs.address
    street: str | None = None
    city: str | None = None


Address = address  # the field below is named address too


class Person(BaseModel):
    """A tool input with JSON Schema 2020-12 features: $schema, $defs, additionalProperties."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"$schema": JSON_SCHEMA_2020_12})

    name: str | None = None
    address: Address | None = None


@tool()
async def echo(input: Text, call: ToolCall) -> str:
    """Return the text."""
    return input.text


@tool()
async def test_simple_text(input: Nothing, call: ToolCall) -> str:
    """Return a simple text."""
    return "This is a simple text response for testing."


@tool()
async def test_error_handling(input: Nothing, call: ToolCall) -> str:
    """Always fail."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@tool()
async def test_elicitation(input: Message, call: ToolCall) -> str:
    """Ask the human for a username and an email address."""
    answer = await ask(
        AskUserQuestionRequest.of(
            [
                Question(input.message, header="Username", id="username"),
                Question("Your email address?", header="Email", id="email"),
            ]
        ),
        context=call.context,
    )
    return f"User response: {answer.answer}"


@tool()
async def json_schema_2020_12_tool(input: Person, call: ToolCall) -> str:
    """Tool with JSON Schema 2020-12 features."""
    return input.model_dump_json()


def setup(scope):
    for each in (echo, test_simple_text, test_error_handling, test_elicitation):
        scope.register_tool(each)
    scope.register_tool(json_schema_2020_12_tool)
