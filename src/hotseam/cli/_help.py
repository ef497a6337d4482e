"""``--help`` texts for people: module docstrings without their reStructuredText markup.

The subcommands' descriptions are their modules' docstrings, written for Sphinx; a
terminal shows them as plain text, paragraphs and indented examples kept.
"""

from __future__ import annotations

import argparse
import os
import re
import sys


def plain(text: str | None) -> str | None:
    """``text`` without reStructuredText markup (roles, literals, emphasis, escapes)."""
    if text is None:
        return None
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text)  # :func:`name` -> name
    text = re.sub(r"``([^`]+)``", r"\1", text)  # ``code`` -> code
    text = re.sub(r"(?<![\w`])`([^`]+)`(?![\w`])", r"\1", text)  # `title` -> title
    text = re.sub(r"(?<![\w*])\*\*([^*]+)\*\*(?![\w*])", r"\1", text)  # **strong**
    text = re.sub(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])", r"\1", text)  # *emphasis*
    return text.replace("\\\\", "\\")


def terminal_columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` tells it, without importing
    shutil (zlib, bz2 and lzma: most of what ``hotseam --help`` cost)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class HelpFormatter(argparse.HelpFormatter):
    """Wraps each paragraph of a description on its own; indented lines stay as written."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        if width is None:
            width = terminal_columns() - 2  # as argparse does
        super().__init__(prog, indent_increment, max_help_position, width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = re.split(r"\n\s*\n", text.strip("\n"))
        filled: list[str] = []
        for paragraph in paragraphs:
            lines = paragraph.splitlines()
            if any(line.startswith(("  ", "* ", "- ")) for line in lines):
                filled.append("\n".join(indent + line for line in lines))
            else:
                filled.append(super()._fill_text(paragraph, width, indent))
        return "\n\n".join(filled)


class DocstringFormatter(HelpFormatter):
    """Shows a subcommand's description, its module's docstring, as plain text (rendered
    when the help is printed, not each time the command starts)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return super()._fill_text(plain(text) or "", width, indent)
