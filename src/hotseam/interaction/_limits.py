"""What a request may hold, shared by the dataclasses and their JSON form (the input
models): at most :data:`MAX_QUESTIONS` questions, and why a question may have no answer."""

from __future__ import annotations

from typing import Literal, TypeAlias

MAX_QUESTIONS = 8
"""The most questions one ask may hold (Claude Code's AskUserQuestion takes 4, Codex's 3)."""

SkipReason: TypeAlias = Literal["skipped", "dismissed"]
"""Why a question the request lets the human skip has no answer: the human chose to skip
it (``"skipped"``), or closed it without answering (``"dismissed"``)."""
