"""The ACP provider: questions reach the human as Agent Client Protocol form elicitations.

An agent served over ACP (``hotseam acp``, or :func:`serve`) asks through
:class:`AcpProvider`: each question becomes an ``elicitation/create`` request in form mode,
scoped to the session of the prompt turn that asks and to its tool call, with the options
as a titled ``oneOf``, the recommended one as the ``default``, and custom answers as an
extra free-text field; an ask of several questions is one form with a property per
question (a multi-select one an ``array`` of titled ``anyOf`` items with
``minItems``/``maxItems``). A client without form elicitation gets questions with options
as ``session/request_permission`` and free-form ones in the conversation (the next prompt
is the answer), one question after the other, so no client leaves the human unasked. See
``docs/acp.md`` for what each client gets, the mapping, cancellation, sessions, and the
defects of the ``agent-client-protocol`` SDK 0.12.1 wrapped here.

Needs the asyncio backend: the SDK is asyncio-based.
"""

from __future__ import annotations

from .._core import present_as
from .._extras import raise_if_missing

try:
    from ._acp import (
        AcpAgent,
        AcpProvider,
        AgentFunction,
        AskScope,
        ContentBlock,
        PromptTurn,
        ask_scope,
        current_ask_scope,
        current_turn,
        serve,
    )
except ModuleNotFoundError as error:  # installed without the acp extra
    raise_if_missing(error, "acp", __name__)
    raise

__all__ = [
    "AcpAgent",
    "AcpProvider",
    "AgentFunction",
    "AskScope",
    "ContentBlock",
    "PromptTurn",
    "ask_scope",
    "current_ask_scope",
    "current_turn",
    "serve",
]

present_as(__name__, globals(), __all__)
