"""The parts of :class:`~hotseam.providers.terminal.TerminalProvider`, one concept a module.

* ``_protocol``: the text protocol shared by both paths (a reply line → an answer, or the
  one-line reason to ask again; a stepper's ``1,3``, ``/back`` and ``/skip``), and the hint
  and outcome wording;
* ``_stepper``: an ask of several questions shown one after the other (place, answers
  given, ticks, typed text), whose state a ``_draft.Draft`` keeps across a reload;
* ``_render``: the question block as styled fragments (plain text for line mode);
* ``_outcome``: how a question ended without an answer (markers and messages);
* ``_queue``: one question on screen at a time, the others waiting in arrival order;
* ``_reader``: a cancellable, chunked line reader on a file descriptor that hands each reader
  exactly its line (and discards one over the length limit);
* ``_visible``: model text with control characters and bidi controls shown, not obeyed;
* ``_lines``: the plain-line path (pipes, CI, trio);
* ``_tty``: the prompt_toolkit path (a real terminal, asyncio only);
* ``_wrap``: wrapping the prompt's question block to the terminal's width;
* ``_provider``: the provider that picks a path per question and owns the outcome markers.
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
