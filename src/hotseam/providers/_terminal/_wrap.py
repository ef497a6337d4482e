"""Wrap the prompt's question block to the terminal's width.

prompt_toolkit draws the lines of a multi-line prompt message in a window that does not
wrap, so a question or a description wider than the terminal would be cut off. The block is
wrapped here instead, at spaces where possible, each time the prompt is drawn (so a resized
terminal gets a new wrapping); a continuation line keeps its line's indentation, so wrapped
descriptions stay under their labels.
"""

from __future__ import annotations

from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.formatted_text.utils import split_lines
from prompt_toolkit.utils import get_cwidth

__all__ = ["wrap_fragments"]

_Cell = tuple[str, str]  # (style, one character)


def wrap_fragments(fragments: StyleAndTextTuples, width: int) -> StyleAndTextTuples:
    """Return ``fragments`` with every line at most ``width`` columns wide."""
    if width < 2:
        return fragments
    wrapped: StyleAndTextTuples = []
    for number, line in enumerate(split_lines(fragments)):
        if number:
            wrapped.append(("", "\n"))
        wrapped.extend(_wrap_line(line, width))
    return wrapped


def _wrap_line(line: StyleAndTextTuples, width: int) -> StyleAndTextTuples:
    cells: list[_Cell] = [(style, char) for style, text, *_ in line for char in text]
    text = "".join(char for _, char in cells)
    if get_cwidth(text) <= width:
        return line
    indent = len(text) - len(text.lstrip(" "))
    if indent * 2 > width:
        indent = 0
    rows: list[list[_Cell]] = []
    row: list[_Cell] = []
    for cell in cells:
        if cell[1] == " " and rows and len(row) == indent:
            continue  # a continuation line starts with a word
        if _width(row) + get_cwidth(cell[1]) > width and len(row) > indent:
            rest: list[_Cell] = []
            spaces = [i for i in range(indent + 1, len(row)) if row[i][1] == " "]
            if cell[1] != " " and spaces:  # break at the last space; else cut the word
                rest = row[spaces[-1] + 1 :]
                row = row[: spaces[-1]]
            rows.append(row)
            row = [("", " ")] * indent + rest
            if cell[1] == " ":
                continue
        row.append(cell)
    rows.append(row)
    result: StyleAndTextTuples = []
    for number, cells_of_row in enumerate(rows):
        if number:
            result.append(("", "\n"))
        for style, char in cells_of_row:
            if result and result[-1][0] == style and result[-1][1] != "\n":
                result[-1] = (style, result[-1][1] + char)
            else:
                result.append((style, char))
    return result


def _width(row: list[_Cell]) -> int:
    return sum(get_cwidth(char) for _, char in row)
