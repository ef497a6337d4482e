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

__all__: list[str] = []
