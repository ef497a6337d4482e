"""TerminalProvider: the human answers in the terminal, on a TTY or through pipes.

On a terminal (stdin and stdout both TTYs, asyncio) each question is a prompt_toolkit
prompt; otherwise (pipes, CI, supervisors, trio) it is plain text lines speaking the same
protocol. See ``docs/terminal.md`` for the protocol, the keys and the modes::

    from hotseam.providers.terminal import TerminalProvider

    scope.provide(USER_INTERACTION, TerminalProvider())

An ask of several questions is a stepper: one question after the other, "2 of 3". A
hot-reloaded provider keeps the half-typed reply, and a stepper's answers and place, by
carrying a :class:`Draft`: ``TerminalProvider(draft=scope.carry("draft", Draft))``.
"""

from __future__ import annotations

from .._core import present_as
from ._terminal import Draft, Mode, TerminalProvider

__all__ = ["Draft", "Mode", "TerminalProvider"]

present_as(__name__, globals(), __all__)
