"""The question block, as styled fragments: the prompt shows them, line mode prints the text.

One renderer keeps both transcripts alike; all ASCII, so a pipe or log of any encoding
carries it. What the model wrote goes through ``visible``: shown, never obeyed.
"""

from __future__ import annotations

from collections.abc import Sequence

from prompt_toolkit.formatted_text import StyleAndTextTuples, fragment_list_to_text
from prompt_toolkit.styles import Style

from ..._core import Agent
from ...interaction import AskUserQuestionRequest, Question
from ._protocol import hint, visible

STYLE = Style.from_dict(
    {
        "banner": "ansimagenta bold",
        "header": "ansicyan bold",
        "agent": "bold",
        "question": "bold",
        "number": "ansicyan",
        "recommended": "ansigreen",
        "place": "ansicyan",
        "resumed": "ansiyellow",
        "cursor": "ansicyan bold",
        "tick": "ansigreen bold",
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
        "back": "ansiyellow",
        "sent": "ansigreen",
        "tool": "ansicyan bold",
        "label-of": "bold",
        "arguments": "",
    }
)


def question_block(
    request: AskUserQuestionRequest,
    *,
    banner: str | None = None,
    keys: str | None = None,
) -> StyleAndTextTuples:
    """Who asks, the header, the question, numbered options with their descriptions, and
    a hint line (``keys``: a second one)."""
    return step_block(request, request.agent, banner=banner, hints=[hint(request), keys])


def step_block(
    asked: AskUserQuestionRequest | Question,
    agent: Agent | None,
    *,
    hints: Sequence[str | None],
    banner: str | None = None,
    place: tuple[int, int] | None = None,
    ticked: frozenset[int] | None = None,
    cursor: int | None = None,
    resumed: int = 0,
    preface: StyleAndTextTuples | None = None,
) -> StyleAndTextTuples:
    """As :func:`question_block`, with a stepper's ``place`` ("2 of 3"), checkboxes for
    ``ticked``, ``> `` at ``cursor``, a line saying ``resumed`` answers were kept, and
    ``preface`` (an approval's call) between who asks and the question."""
    fragments: StyleAndTextTuples = [("", "\n")]
    if banner:
        fragments += [("class:banner", visible(banner)), ("", "\n")]
    if resumed:
        kept = "1 answer" if resumed == 1 else f"{resumed} answers"
        fragments += [("class:resumed", f"(resumed: {kept} kept from before)"), ("", "\n")]
    who = visible(agent.display_name) if agent is not None else None
    where = f"({place[0]} of {place[1]})" if place is not None else None
    line: StyleAndTextTuples = []
    if asked.header:
        line.append(("class:header", f"[{visible(asked.header)}]"))
    if who:
        line.append(("class:agent", f"{who} asks" + (f" {where}:" if where else ":")))
    elif where:
        line.append(("class:place", where))
    if line:
        fragments += [*_spaced(line), ("", "\n")]
    if preface:
        fragments += preface
    fragments += [("class:question", visible(asked.question, lines=True)), ("", "\n")]
    choices = asked.choices
    width = len(str(len(choices)))
    box = 0 if ticked is None else 4
    for number, option in enumerate(choices, start=1):
        fragments.append(("class:cursor", "> ") if cursor == number - 1 else ("", "  "))
        if ticked is not None:
            fragments.append(("class:tick", "[x] " if number - 1 in ticked else "[ ] "))
        fragments += [
            ("class:number", f"{number:>{width}}."),
            ("", " "),
            ("class:label", visible(option.label)),
        ]
        if option.recommended:
            fragments.append(("class:recommended", " (recommended)"))
        fragments.append(("", "\n"))
        if option.description:
            indent = " " * (width + 4 + box)
            text = visible(option.description, lines=True).replace("\n", "\n" + indent)
            fragments += [("", indent), ("class:description", text), ("", "\n")]
    for line_of_hint in hints:
        if line_of_hint:
            fragments += [("class:hint", line_of_hint), ("", "\n")]
    return fragments


def _spaced(parts: StyleAndTextTuples) -> StyleAndTextTuples:
    spaced: StyleAndTextTuples = []
    for part in parts:
        if spaced:
            spaced.append(("", " "))
        spaced.append(part)
    return spaced


def waiting_line(waiting: int) -> StyleAndTextTuples:
    if waiting <= 0:
        return []
    noun = "question" if waiting == 1 else "questions"
    return [("class:waiting", f"({waiting} more {noun} waiting)"), ("", "\n")]


def outcome(kind: str, text: str) -> StyleAndTextTuples:
    return [(f"class:{kind}", text), ("", "\n")]


def plain(fragments: StyleAndTextTuples) -> str:
    """The text of ``fragments``, nothing in it a terminal would obey."""
    return visible(fragment_list_to_text(fragments), lines=True)


def shown(fragments: StyleAndTextTuples) -> StyleAndTextTuples:
    """``fragments`` with nothing a terminal would obey (a last pass before drawing)."""
    return [(style, visible(text, lines=True), *rest) for style, text, *rest in fragments]  # type: ignore[misc]
