"""The walkthrough's UI provider: a terminal prompt with a banner.

Run ``hotseam dev examples/providers --agent examples/agent.py:main``, then change
``BANNER`` below and save while the question is open: the reloader disposes this
generation (its prompt disappears), sets up the new one, and the same question is asked
again under the new banner. What you had typed is still in the prompt, cursor and all (and,
in an ask of several questions, the answers already given and where you were): the draft
is carried from generation to generation (``scope.carry``).
"""

from __future__ import annotations

import look

from hotseam import Scope
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.terminal import Draft, TerminalProvider

BANNER = "my_ui, first version: edit BANNER in examples/providers/my_ui.py and save"


def setup(scope: Scope) -> None:
    """Provide the terminal UI for as long as this generation lives."""
    draft = scope.carry("draft", Draft)  # the same Draft in every generation
    scope.provide(USER_INTERACTION, TerminalProvider(banner=look.frame(BANNER), draft=draft))
