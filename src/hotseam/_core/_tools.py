"""Tools: model-facing operations with pydantic inputs and failures a model can read.

``ctx.tools.execute(name, input)`` never raises for a tool's failure: its
:class:`ToolResult`'s ``error`` keeps a :class:`~hotseam.HarnessError`'s ``name`` and
``code``, so a model learns what went wrong; the caller's cancellation is never swallowed."""

from __future__ import annotations

import inspect
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar, get_type_hints

import anyio

from . import _module_body
from ._abort import AbortSignal
from ._agent import Agent
from ._callbacks import InactiveCallbacks
from ._effects import Effect, EffectOwner, ScopeExit
from ._errors import DisposalError, HarnessError, ToolError
from ._gate import TOOL_GATE, no_gate_error
from ._log import get_logger
from ._seam import Seam
from ._swap import DEFAULT_SWAP_WAIT, Swap

if TYPE_CHECKING:
    # Imported where used at run time: pydantic costs ~55 ms, and ``import hotseam`` must
    # not pay it before anyone defines a tool (whose input model imports it anyway).
    from pydantic import BaseModel, ValidationError

InputT = TypeVar("InputT", bound="BaseModel")
T = TypeVar("T")
ToolFormat = Literal["anthropic", "openai", "mcp"]
_FORMATS: tuple[ToolFormat, ...] = ("anthropic", "openai", "mcp")
_log = get_logger("hotseam.tools")


class ToolContext(Protocol):
    """The context a tool runs in, as tools see it: a :class:`~hotseam.Context`, whose
    providers a handler looks up and whose tools (and inherited ones) are offered."""

    @property
    def name(self) -> str: ...

    @property
    def parent(self) -> ToolContext | None: ...

    @property
    def tools(self) -> ToolRegistry: ...

    def lookup(self, seam: Seam[T]) -> T | None: ...

    def get(self, seam: Seam[T]) -> T: ...

    def _swap_covering_tool(self, name: str) -> Swap | None: ...


@dataclass(frozen=True, slots=True)
class ToolCall:
    """What a tool handler learns about the call: who, in which context, and a signal."""

    context: ToolContext
    tool: str
    agent: Agent | None = None
    signal: AbortSignal | None = None
    call_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])


Handler = Callable[[InputT, ToolCall], Awaitable[object]]
ApprovalPolicy = Callable[[InputT, ToolCall], "bool | Awaitable[bool]"]
"""Whether one call of a tool needs approval (given its validated input)."""


class Tool(Generic[InputT]):
    """A named operation a model can call, with a pydantic model as its input.

    Args:
        name: What the model calls (``"ask_user_question"``).
        description: Tells the model when and how to use the tool.
        input_model: Validates the input and provides the JSON schema: the model class, or
            a function returning it, called when the tool is first used (so that
            registering the tool imports nothing its model needs).
        handler: ``async def handler(input, call) -> output``; the output is a pydantic
            model or any JSON-ready value.
        needs_approval: ``True`` puts every call through the tool gate
            (:data:`~hotseam.TOOL_GATE`: the human approves, edits, rejects or answers it)
            before it runs; a function ``(input, call) -> bool`` (or an awaitable of one)
            decides per call.
    """

    __slots__ = ("_input_model", "description", "handler", "name", "needs_approval")

    def __init__(
        self,
        name: str,
        description: str,
        input_model: type[InputT] | Callable[[], type[InputT]],
        handler: Handler[InputT],
        *,
        needs_approval: bool | ApprovalPolicy[InputT] = False,
    ) -> None:
        if not name or not name.replace("_", "").replace("-", "").isalnum():
            raise ValueError(f"tool name must be letters, digits, '_' or '-', got {name!r}")
        if isinstance(input_model, type):
            _check_model(name, input_model)
        elif not callable(input_model):
            raise TypeError(f"tool {name!r}: input_model must be a pydantic model class")
        self.name = name
        self.description = description
        self._input_model = input_model
        self.handler = handler
        if not isinstance(needs_approval, bool) and not callable(needs_approval):
            raise TypeError(
                f"tool {name!r}: needs_approval must be True, False or a function of "
                f"(input, call), got {type(needs_approval).__name__}"
            )
        self.needs_approval = needs_approval

    def __repr__(self) -> str:
        return f"<Tool {self.name!r} input={self.input_model.__qualname__}>"

    @property
    def input_model(self) -> type[InputT]:
        """The pydantic model of the input (made now if it was given as a function)."""
        model = self._input_model
        if not isinstance(model, type):
            model = model()
            _check_model(self.name, model)
            self._input_model = model
        return model

    @property
    def input_schema(self) -> dict[str, Any]:
        """The JSON schema of the input, generated by pydantic."""
        return self.input_model.model_json_schema()

    def definition(self, format: ToolFormat = "anthropic") -> dict[str, Any]:
        """Return this tool's definition in an LLM API's format."""
        key = {"anthropic": "input_schema", "openai": "parameters", "mcp": "inputSchema"}.get(
            format
        )
        if key is None:
            raise ValueError(f"unknown tool definition format {format!r}; use one of {_FORMATS}")
        named = {"name": self.name, "description": self.description, key: self.input_schema}
        return {"type": "function", "function": named} if format == "openai" else named


def _check_model(name: str, model: object) -> None:
    from pydantic import BaseModel

    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"tool {name!r}: input_model must be a pydantic model class")


def tool(
    name: str | None = None,
    *,
    description: str | None = None,
    needs_approval: bool | ApprovalPolicy[Any] = False,
) -> Callable[[Handler[InputT]], Tool[InputT]]:
    """Make a :class:`Tool` from ``async def handler(input: Model, call: ToolCall)``: the
    first parameter's annotation is the input model, the docstring the default description.
    ``needs_approval`` as for :class:`Tool`.
    """

    def decorate(handler: Handler[InputT]) -> Tool[InputT]:
        hints = get_type_hints(handler)
        parameters = list(inspect.signature(handler).parameters)
        if not parameters or parameters[0] not in hints:
            raise TypeError(
                f"@tool handler {handler.__qualname__} needs an annotated first parameter "
                "(its pydantic input model)"
            )
        text = description or inspect.getdoc(handler) or ""
        return Tool(
            name or handler.__name__,
            text,
            hints[parameters[0]],
            handler,
            needs_approval=needs_approval,
        )

    return decorate


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The outcome of ``ctx.tools.execute``: an ``output`` or an ``error`` dict, never both."""

    tool: str
    output: Any = None
    error: dict[str, Any] | None = None
    call_id: str = ""

    @property
    def ok(self) -> bool:
        """True when the tool succeeded."""
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        """``{"ok": true, "output": ...}`` or ``{"ok": false, "error": {"name", "code", ...}}``."""
        if self.error is None:
            return {"ok": True, "output": self.output}
        return {"ok": False, "error": self.error}


class ToolRegistration(Effect):
    """The handle of one tool registration; disposing it withdraws the tool."""

    __slots__ = ("_inactive", "_started", "active", "registry", "tool")

    serves = True

    def __init__(self, registry: ToolRegistry, tool: Tool[Any], owner: EffectOwner | None) -> None:
        super().__init__(owner)
        self.registry = registry
        self.tool = tool
        self.active = False
        self._started = False
        self._inactive = InactiveCallbacks()

    def on_inactive(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call ``callback()`` once when the tool stops being offered (withdrawn, disposed,
        or discarded while staged; at once if it did); return an unsubscriber."""
        return self._inactive.add(callback, self._done or (self._started and not self.active))

    @property
    def label(self) -> str:
        return f"tool {self.tool.name!r}"

    def _start(self) -> None:
        if self.active or self._done:
            return
        current = self.registry._own.get(self.tool.name)
        if current is not None and current is not self:
            raise ToolError(
                f"a tool named {self.tool.name!r} is already registered in context "
                f"{self.registry.context.name!r}",
                "DUPLICATE_TOOL",
            )
        self.registry._own[self.tool.name] = self
        self.active = self._started = True

    def _rollback_start(self) -> None:
        if self.active:
            self.active = self._started = False
            if self.registry._own.get(self.tool.name) is self:
                del self.registry._own[self.tool.name]

    def _withdraw(self) -> None:
        if self.active:
            self.active = False
            if self.registry._own.get(self.tool.name) is self:
                del self.registry._own[self.tool.name]
            self._inactive.fire()

    def _undo(self, exit_: ScopeExit) -> object:
        self._withdraw()
        self._inactive.fire()
        return None


class ToolRegistry:
    """The tools visible in a context (its own, then inherited ones), and their execution."""

    def __init__(self, context: ToolContext) -> None:
        self.context = context
        self._own: dict[str, ToolRegistration] = {}

    def __repr__(self) -> str:
        return f"<ToolRegistry {self.context.name!r} {self.names()}>"

    def register(self, tool: Tool[Any]) -> ToolRegistration:
        """Offer ``tool`` until the returned handle is disposed (prefer ``scope.register_tool``).

        Raises:
            ToolError: (``DUPLICATE_TOOL``) a tool of that name is registered in this context.
            ScopeError: (``MODULE_LEVEL_REGISTRATION``) called while a hot-reloaded module's
                body executes: nothing would dispose it at the next reload.
        """
        return self._register(tool, owner=None, what="register")

    def _register(
        self, tool: Tool[Any], *, owner: EffectOwner | None, what: str
    ) -> ToolRegistration:
        if _module_body.executing_path() is not None:  # the caller of register(_tool)
            location = _module_body.caller_location(3)
            _module_body.refuse_registration(f"{what}({tool.name!r})", location)
        registration = ToolRegistration(self, tool, owner)
        registration._place()
        return registration

    def get(self, name: str) -> Tool[Any] | None:
        """Return the visible tool called ``name``, or ``None``."""
        context: ToolContext | None = self.context  # not _chain(): every execute looks
        while context is not None:
            registration = context.tools._own.get(name)
            if registration is not None:
                return registration.tool
            context = context.parent
        return None

    def _chain(self) -> Iterator[ToolContext]:
        """This context, then its parents: whose tools are visible here, nearest first."""
        context: ToolContext | None = self.context
        while context is not None:
            yield context
            context = context.parent

    async def _wait_for_swap(self, name: str) -> Tool[Any] | None:
        """Wait (bounded) for a swap that may bring the tool ``name`` back; return it."""
        with anyio.move_on_after(DEFAULT_SWAP_WAIT):
            while (swap := self.context._swap_covering_tool(name)) is not None:
                await swap._finished.wait()
                found = self.get(name)
                if found is not None:
                    return found
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __iter__(self) -> Iterator[Tool[Any]]:
        seen: set[str] = set()
        for context in self._chain():
            for name, registration in context.tools._own.items():
                if name not in seen:
                    seen.add(name)
                    yield registration.tool

    def names(self) -> list[str]:
        """The names of the visible tools, sorted."""
        return sorted(tool.name for tool in self)

    def definitions(self, format: ToolFormat = "anthropic") -> list[dict[str, Any]]:
        """Every visible tool's definition in ``"anthropic"``, ``"openai"`` or ``"mcp"`` form."""
        if format not in _FORMATS:
            raise ValueError(f"unknown tool definition format {format!r}; use one of {_FORMATS}")
        return [tool.definition(format) for tool in sorted(self, key=lambda t: t.name)]

    async def execute(
        self,
        name: str,
        input: Mapping[str, Any] | BaseModel | str | None = None,
        *,
        agent: Agent | None = None,
        signal: AbortSignal | None = None,
    ) -> ToolResult:
        """Validate ``input``, run the tool and return its result; never raise for its failure.

        ``input``: a mapping, a JSON string of an object or an input-model instance (``None``
        is an empty object). Unknown tool → ``TOOL_NOT_FOUND``; other input, or invalid
        fields → ``INVALID_INPUT`` naming each problem; a HarnessError keeps its name and
        code; anything else → its class name, code ``INTERNAL`` (logged with its traceback).
        A tool being swapped (a hot reload) is waited for. Cancellation propagates.
        """
        given: object = name  # models send anything; the annotation is what a caller means
        if not isinstance(given, str):
            call = ToolCall(self.context, repr(given), agent, signal)
            return _failure(
                call,
                ToolError(
                    f"a tool name is a string, got {type(given).__name__} {given!r}",
                    "TOOL_NOT_FOUND",
                ),
            )
        call = ToolCall(self.context, name, agent, signal)
        found = self.get(name)
        if found is None:
            found = await self._wait_for_swap(name)
        if found is None:
            available = ", ".join(self.names()) or "none"
            return _failure(
                call,
                ToolError(f"no tool named {name!r} (available: {available})", "TOOL_NOT_FOUND"),
            )
        from pydantic import BaseModel, ValidationError

        try:
            parsed = _parse_input(found, input)
        except (ValidationError, _InputShapeError) as invalid:
            if isinstance(invalid, ValidationError):
                problem, errors = format_validation_error(invalid), _error_list(invalid)
            else:
                problem, errors = str(invalid), [{"field": "input", "message": str(invalid)}]
            message = f"invalid input for tool {name!r}: {problem}"
            return _failure(call, ToolError(message, "INVALID_INPUT", details={"errors": errors}))
        except Exception as failure:  # a bug in the input model's own validators
            return _crashed(call, failure)
        if found.needs_approval is not False:
            try:
                gated = await _through_gate(self.context, found, parsed, call)
            except Exception as failure:
                error = _single(failure)
                if isinstance(error, HarnessError | DisposalError):
                    return _failure(call, error)
                return _crashed(call, error)
            if isinstance(gated, ToolResult):
                return gated
            parsed = gated
        started = time.perf_counter()
        try:
            output = await found.handler(parsed, call)
        except Exception as failure:
            error = _single(failure)
            if isinstance(error, HarnessError | DisposalError):
                return _failure(call, error)
            return _crashed(call, error)
        if _log.enabled("debug"):
            _log.debug(
                "tool.succeeded",
                tool=name,
                call_id=call.call_id,
                duration_ms=round((time.perf_counter() - started) * 1000, 3),
            )
        if isinstance(output, BaseModel):
            output = output.model_dump(mode="json")
        return ToolResult(name, output=output, call_id=call.call_id)


async def _through_gate(
    context: ToolContext, tool: Tool[Any], parsed: BaseModel, call: ToolCall
) -> BaseModel | ToolResult:
    """The input to run ``tool`` with, once the tool gate let the call through; or the
    result the caller gets instead (a refusal, a response)."""
    policy = tool.needs_approval
    if policy is not True:
        assert callable(policy)
        needed = policy(parsed, call)
        if inspect.isawaitable(needed):
            needed = await needed
        if not needed:
            return parsed
    gate = context.lookup(TOOL_GATE)
    if gate is None:
        return _failure(call, no_gate_error())
    verdict = await gate.review(tool, parsed, call)
    if verdict.kind == "run":
        edited: object = verdict.input
        model: type[BaseModel] = tool.input_model
        if not isinstance(edited, model):
            raise TypeError(
                f"the tool gate let {tool.name!r} run with {type(verdict.input).__name__}, "
                f"not its input model {model.__qualname__}"
            )
        return edited
    if verdict.kind == "respond":
        return ToolResult(tool.name, output=verdict.output, call_id=call.call_id)
    refusal = ToolError(
        verdict.message or f"the call of {tool.name!r} was not approved",
        verdict.code or "APPROVAL_REJECTED",
        details=verdict.details,
    )
    return _failure(call, refusal)


class _InputShapeError(Exception):
    """The tool input is not an object at all (a list, a number, bytes...)."""


def _parse_input(tool: Tool[Any], raw: object) -> BaseModel:
    from pydantic import BaseModel

    model: type[BaseModel] = tool.input_model
    if isinstance(raw, model):
        return raw
    if isinstance(raw, str):
        return model.model_validate_json(raw)
    if isinstance(raw, BaseModel):
        return model.model_validate(raw.model_dump())
    if raw is None:
        return model.model_validate({})
    if not isinstance(raw, Mapping):
        # dict() would take a list of pairs for a mapping; a model never means that.
        raise _InputShapeError(
            f"the input must be an object (a mapping or a JSON string of one), "
            f"got {type(raw).__name__}"
        )
    try:
        as_dict = dict(raw)
    except Exception as broken:  # a Mapping whose iteration fails
        raise _InputShapeError(
            f"the input mapping could not be read ({type(broken).__name__}: {broken})"
        ) from broken
    return model.model_validate(as_dict)


def _crashed(call: ToolCall, error: Exception) -> ToolResult:
    _log.error(
        "tool.crashed",
        exc_info=True,
        tool=call.tool,
        call_id=call.call_id,
        error=type(error).__name__,
    )
    return ToolResult(
        call.tool,
        error={"name": type(error).__name__, "code": "INTERNAL", "message": str(error)},
        call_id=call.call_id,
    )


def _failure(call: ToolCall, error: HarnessError | DisposalError) -> ToolResult:
    _log.info("tool.failed", tool=call.tool, call_id=call.call_id, code=error.code)
    return ToolResult(call.tool, error=error.to_dict(), call_id=call.call_id)


def _single(error: Exception) -> Exception:
    """Unwrap a group of exactly one error (a task group inside a handler, say)."""
    while (
        isinstance(error, ExceptionGroup)
        and not isinstance(error, DisposalError)
        and len(error.exceptions) == 1
    ):
        error = error.exceptions[0]
    return error


def field_path(location: tuple[int | str, ...]) -> str:
    """Render a pydantic error location as ``options[2].label``."""
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "input"


def _error_list(invalid: ValidationError) -> list[dict[str, Any]]:
    return [
        {"field": field_path(error["loc"]), "message": error["msg"], "type": error["type"]}
        for error in invalid.errors(include_url=False)
    ]


def format_validation_error(invalid: ValidationError) -> str:
    """One line naming every bad field: ``options[2].label: Field required; ...``."""
    parts = []
    for error in invalid.errors(include_url=False):
        where = field_path(error["loc"])
        if error["type"] == "json_invalid":
            parts.append(f"not valid JSON ({error['msg']})")
        else:
            parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)
