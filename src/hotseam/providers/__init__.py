"""UI surfaces of the user-interaction seam.

* :mod:`hotseam.providers.scripted`: answers from a script (tests, CI, automation);
* :mod:`hotseam.providers.terminal`: asks in the terminal (prompt_toolkit, or plain lines);
* :mod:`hotseam.providers.acp`: asks through Agent Client Protocol form elicitations.

Each is imported on its own (``from hotseam.providers.scripted import ScriptedProvider``),
so using one never imports the others' dependencies.
"""

from __future__ import annotations

__all__: list[str] = []
