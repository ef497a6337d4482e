"""The tool gate: the seam a tool registered as needing approval is put through before it
runs (``ctx.tools.execute``).

The core knows only that a call may be let through (with its input, or an edited one),
refused, or answered instead of run; who decides, and how, is a provider of
:data:`TOOL_GATE` — :class:`hotseam.interaction.approvals.HumanGate` asks the human
through the user-interaction seam. One seam, so a reload can swap the gate like any
provider, and a test can provide its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ._errors import ToolError
from ._seam import Seam

if TYPE_CHECKING:
    from pydantic import BaseModel


@dataclass(frozen=True, slots=True)
class GateVerdict:
    """What the gate decided about one call.

    ``run``: the tool runs with ``input`` (the call's, or edited arguments validated by the
    tool's model); ``refuse``: it does not, and the caller gets the error ``code`` with
    ``message``; ``respond``: it does not, and ``output`` is returned as its result.
    """

    kind: Literal["run", "refuse", "respond"]
    input: BaseModel | None = None
    code: str | None = None
    message: str | None = None
    output: Any = None
    details: dict[str, Any] | None = None

    @classmethod
    def run(cls, input: BaseModel, **details: Any) -> GateVerdict:
        """Let the call run with ``input``."""
        return cls("run", input=input, details=details or None)

    @classmethod
    def refuse(cls, message: str, code: str = "APPROVAL_REJECTED", **details: Any) -> GateVerdict:
        """Do not run the call: the caller's result is the error ``code``."""
        return cls("refuse", code=code, message=message, details=details or None)

    @classmethod
    def respond(cls, output: Any, **details: Any) -> GateVerdict:
        """Do not run the call: ``output`` is its result."""
        return cls("respond", output=output, details=details or None)


@runtime_checkable
class ToolGate(Protocol):
    """Decides whether a call of a tool needing approval runs."""

    async def review(self, tool: Any, input: BaseModel, call: Any) -> GateVerdict:
        """The verdict on calling ``tool`` (a :class:`~hotseam.Tool`) with ``input``
        (validated by its model), for ``call`` (a :class:`~hotseam.ToolCall`: typed loosely
        here, as this module comes before the tools it gates)."""
        ...


def no_gate_error(name: str = "tool-gate") -> ToolError:
    """``APPROVAL_UNAVAILABLE``: a call needs approval and no gate is provided."""
    return ToolError(
        f"the tool needs approval and nothing can give it: no {name} provider (provide "
        "hotseam.interaction.approvals.HumanGate(), or your own TOOL_GATE)",
        "APPROVAL_UNAVAILABLE",
    )


TOOL_GATE: Seam[ToolGate] = Seam("tool-gate", ToolGate, missing=no_gate_error)
"""The seam a tool needing approval is put through before it runs."""
