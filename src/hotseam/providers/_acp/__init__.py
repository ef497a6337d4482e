"""The parts of :mod:`hotseam.providers.acp`, one concept per module.

* ``_form``: an ask as an ``elicitation/create`` form, and the client's result read back;
* ``_fields``: one question's properties in such a form (one choice, several, free text,
  custom text, skipping), and its answer read from the result;
* ``_permission``: the same for the ``session/request_permission`` fallback;
* ``_conversation``: the last fallback, a question asked in the chat and answered by the
  next prompt;
* ``_wire``: what the ``agent-client-protocol`` 0.12.1 SDK lacks on the agent side
  (raw requests that keep ``"type": "object"``, ``$/cancel_request`` out and in, late
  answers ignored);
* ``_scope``: which ACP session (and tool call) an ask belongs to, as a context variable;
* ``_provider``: the user-interaction provider;
* ``_sessions``: the agent's sessions (released on ``session/close`` or when idle) and the
  runs of the agent function, which may span prompt turns;
* ``_agent``: the ACP agent that runs a hotseam agent function for each prompt turn;
* ``_serve``: running that agent over stdio or an in-process transport;
* ``_lines`` and ``_envelope``: reading stdin lines from an untrusted client, and what a
  line that cannot be decoded whole says about itself (its id).
"""

from __future__ import annotations
