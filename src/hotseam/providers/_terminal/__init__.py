"""The parts of :class:`~hotseam.providers.terminal.TerminalProvider`, one concept a module.

``_provider`` picks a path per question: ``_tty`` (prompt_toolkit, a real terminal on
asyncio) or ``_lines`` (plain lines: pipes, CI, trio); both speak ``_protocol`` and draw
``_render``'s block. Each module's docstring says what it holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._core import lazy_exports

if TYPE_CHECKING:  # what hotseam.providers.terminal uses, imported when first used
    from ._draft import Draft as Draft
    from ._provider import Mode as Mode
    from ._provider import TerminalProvider as TerminalProvider

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_exports(
        globals(),
        {
            "Draft": "._draft",
            "Mode": "._provider",
            "TerminalProvider": "._provider",
        },
    )

__all__: list[str] = []
