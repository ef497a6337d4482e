"""The parts of :mod:`hotseam.providers.acp`, one concept per module.

* ``_permission``: a question as the ``session/request_permission`` fallback, and its
  outcome read back;
* ``_conversation``: the last fallback, a question asked in the chat and answered by the
  next prompt;
* ``_wire``: what the ``agent-client-protocol`` 0.12.1 SDK lacks on the agent side
  (raw requests that keep ``"type": "object"``, ``$/cancel_request`` out and in, late
  answers ignored), and JSON-RPC over stdin from an untrusted client, on the surface kit's
  bounded reader (size and depth limits, the id of a refused line);
* ``_provider``: the user-interaction provider: which ACP session (and tool call) an ask
  belongs to, as a context variable, and an ask as an ``elicitation/create`` request (the
  form and its reading are the surface kit's, ``hotseam.providers._kit``);
* ``_sessions``: the agent's sessions (released on ``session/close`` or when idle) and the
  runs of the agent function, which may span prompt turns;
* ``_agent``: the ACP agent that runs a hotseam agent function for each prompt turn, and
  running it over stdio or an in-process transport.

The names below are what :mod:`hotseam.providers.acp` imports from here.
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
