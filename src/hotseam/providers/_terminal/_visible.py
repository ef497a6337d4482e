"""Text a terminal would obey, made visible instead: what the model wrote is shown, never run.

A question, its header, its options and their descriptions come from a model, and a
terminal acts on what it prints: ``ESC [2J`` clears the screen, ``ESC ]52;c;...BEL`` writes
the clipboard, ``\\r`` and ``\\b`` overwrite what was shown, and a bidi override makes text
read in another order than it is (the "Trojan Source" trick). So every character a
terminal would act on is shown in a visible form, the same on the prompt and in plain-line
mode, and the same notation prompt_toolkit uses for control characters in its input line:

* C0 controls and DEL in caret notation: ``ESC`` → ``^[``, ``BEL`` → ``^G``, ``\\r`` →
  ``^M``, ``\\b`` → ``^H``;
* C1 controls (``\\x9b`` is a one-byte CSI) as ``<9b>``;
* bidi embeddings, overrides, isolates and marks as ``<U+202E>``;
* a tab is a space (its width would depend on the column, and wrapping counts cells);
* a line break (``\\n`` or ``\\r\\n``) stays one where the layout has room for it (the
  question, a description); elsewhere (a header, a label, the banner) it is a space.
"""

from __future__ import annotations

__all__ = ["visible"]

_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))

_SHOWN: dict[int, str] = {
    **{code: "^" + chr(code + 64) for code in range(0x20)},
    0x7F: "^?",
    **{code: f"<{code:02x}>" for code in range(0x80, 0xA0)},
    **{code: f"<U+{code:04X}>" for code in _BIDI},
    ord("\t"): " ",
}
_ONE_LINE = {**_SHOWN, ord("\n"): " "}
_LINES = {**_SHOWN, ord("\n"): "\n"}


def visible(text: str, *, lines: bool = False) -> str:
    """``text`` with every control character and bidi control in a visible form.

    ``lines``: keep line breaks (as ``\\n``); otherwise a line break becomes a space.
    The result is unchanged by a second pass.
    """
    if text.isprintable():  # the usual case: nothing to do
        return text
    text = text.replace("\r\n", "\n")
    return text.translate(_LINES if lines else _ONE_LINE)
