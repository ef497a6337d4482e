"""The parts of :class:`~hotseam.providers.terminal.TerminalProvider`, one concept a module.

``_provider`` picks a path per question: ``_tty`` (prompt_toolkit, a real terminal on
asyncio) or ``_lines`` (plain lines: pipes, CI, trio); both speak ``_protocol`` and draw
``_render``'s block. Each module's docstring says what it holds.
"""

from __future__ import annotations

from ._provider import Mode as Mode
from ._provider import TerminalProvider as TerminalProvider
from ._stepper import Draft as Draft
