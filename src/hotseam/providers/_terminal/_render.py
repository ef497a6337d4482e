"""The question block, as styled fragments: the prompt shows them, line mode prints the text.

One renderer for both paths keeps the two transcripts alike. Everything is ASCII, so a pipe
or a log file with any encoding can carry it. What the model (or the app) wrote is shown
through ``visible``: control characters and bidi controls are shown, never obeyed.
"""

from __future__ import annotations

from prompt_toolkit.formatted_text import StyleAndTextTuples, fragment_list_to_text
from prompt_toolkit.styles import Style

from ...interaction import AskUserQuestionRequest
from ._protocol import hint
from ._visible import visible

__all__ = ["STYLE", "outcome", "plain", "question_block", "shown", "waiting_line"]

STYLE = Style.from_dict(
    {
        "banner": "ansimagenta bold",
        "header": "ansicyan bold",
        "agent": "bold",
        "question": "bold",
        "number": "ansicyan",
        "recommended": "ansigreen",
        "description": "ansibrightblack",
        "hint": "ansibrightblack",
        "waiting": "ansiyellow",
        "reason": "ansired",
        "prompt": "bold",
        "placeholder": "ansibrightblack",
        "answer": "ansigreen",
        "withdrawn": "ansiyellow",
        "dismissed": "ansiyellow",
        "timeout": "ansiyellow",
    }
)
"""The prompt_toolkit style of the TTY path (line mode has no colours)."""


def question_block(
    request: AskUserQuestionRequest,
    *,
    banner: str | None = None,
    keys: str | None = None,
) -> StyleAndTextTuples:
    """A blank line, then who asks, the header, the question, numbered options with their
    descriptions, and a hint line.

    ``keys`` is a second hint line (the TTY path names Tab and Ctrl-C there).
    """
    fragments: StyleAndTextTuples = [("", "\n")]
    if banner:
        fragments += [("class:banner", visible(banner)), ("", "\n")]
    who = visible(request.agent.display_name) if request.agent is not None else None
    if request.header or who:
        if request.header:
            fragments.append(("class:header", f"[{visible(request.header)}]"))
            if who:
                fragments.append(("", " "))
        if who:
            fragments.append(("class:agent", f"{who} asks:"))
        fragments.append(("", "\n"))
    fragments += [("class:question", visible(request.question, lines=True)), ("", "\n")]
    choices = request.choices
    width = len(str(len(choices)))
    for number, option in enumerate(choices, start=1):
        fragments += [
            ("", "  "),
            ("class:number", f"{number:>{width}}."),
            ("", " "),
            ("class:label", visible(option.label)),
        ]
        if option.recommended:
            fragments.append(("class:recommended", " (recommended)"))
        fragments.append(("", "\n"))
        if option.description:
            indent = " " * (width + 4)
            text = visible(option.description, lines=True).replace("\n", "\n" + indent)
            fragments += [("", indent), ("class:description", text), ("", "\n")]
    fragments += [("class:hint", hint(request)), ("", "\n")]
    if keys:
        fragments += [("class:hint", keys), ("", "\n")]
    return fragments


def waiting_line(waiting: int) -> StyleAndTextTuples:
    """``(2 more questions waiting)``, or nothing when none wait."""
    if waiting <= 0:
        return []
    noun = "question" if waiting == 1 else "questions"
    return [("class:waiting", f"({waiting} more {noun} waiting)"), ("", "\n")]


def outcome(kind: str, text: str) -> StyleAndTextTuples:
    """A one-line outcome marker (``answer``, ``withdrawn``, ``dismissed``, ``timeout``)."""
    return [(f"class:{kind}", text), ("", "\n")]


def plain(fragments: StyleAndTextTuples) -> str:
    """The text of ``fragments`` without styles, nothing in it a terminal would obey."""
    return visible(fragment_list_to_text(fragments), lines=True)


def shown(fragments: StyleAndTextTuples) -> StyleAndTextTuples:
    """``fragments`` with nothing a terminal would obey (a last pass before drawing)."""
    return [(style, visible(text, lines=True), *rest) for style, text, *rest in fragments]  # type: ignore[misc]
