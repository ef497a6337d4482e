"""The ACP provider: questions reach the human as Agent Client Protocol form elicitations.

An agent served over ACP (``hotseam acp``, or :func:`serve`) asks through
:class:`AcpProvider`: each ask becomes one ``elicitation/create`` form, scoped to the
session and tool call of the prompt turn that asks (options as a titled ``oneOf``, the
recommended one as the ``default``, a property per question). A client without form
elicitation gets ``session/request_permission``, or the question in the conversation, so
no client leaves the human unasked. See ``docs/acp.md`` for what each client gets, the
mapping, cancellation, sessions, and the SDK defects wrapped here.

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
