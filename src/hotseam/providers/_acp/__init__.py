"""The parts of :mod:`hotseam.providers.acp`, one concept per module: ``_permission`` and
``_conversation`` (the fallbacks without form elicitation), ``_wire`` (what the 0.12.1 SDK
lacks on the agent side, and stdin from an untrusted client on the kit's bounded reader),
``_provider`` (the ask scope, and an ask as ``elicitation/create``), ``_turn`` and
``_sessions`` (prompt turns, and runs that may span them), ``_agent`` (the ACP agent
running a hotseam agent function, and serving it).
"""

from __future__ import annotations

from ._agent import AcpAgent as AcpAgent
from ._agent import AgentFunction as AgentFunction
from ._agent import serve as serve
from ._provider import AcpProvider as AcpProvider
from ._provider import AskScope as AskScope
from ._provider import ask_scope as ask_scope
from ._provider import current_ask_scope as current_ask_scope
from ._turn import ContentBlock as ContentBlock
from ._turn import PromptTurn as PromptTurn
from ._turn import current_turn as current_turn
