"""Text from files and stores made safe to show: names, labels and messages that a recording,
a store or a space file supplied, on their way to a terminal or into a generated file.

A recording imported from anywhere can name its kernel ``"\\x1b]0;TITLE\\x07"`` or
``"\\x1b[8m"``: printed raw, that retitles the terminal or hides what follows. Every control
character is therefore written as an escape a person can read (``\\x1b``, ``\\n``), and the
bidirectional controls that reorder what a line appears to say are too.
"""

from __future__ import annotations

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: C0 controls, DEL and the C1 controls (0x9b is a one-byte CSI to some terminals), and the
#: Unicode bidirectional embeddings, overrides and isolates
_CONTROLS = [*range(0x20), *range(0x7F, 0xA0), 0x200E, 0x200F, *range(0x202A, 0x202F)]
_CONTROLS += [*range(0x2066, 0x206A)]
_ESCAPES = {c: _NAMED.get(chr(c), f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _CONTROLS}
_ESCAPES_KEEPING_NEWLINES = {c: e for c, e in _ESCAPES.items() if c != ord("\n")}


def printable(text: object, *, newlines: bool = False) -> str:
    """``text`` with every control character written as an escape (``\\x1b``, ``\\n``);
    ``newlines``: a newline is kept (text laid out in lines, e.g. a table)."""
    return str(text).translate(_ESCAPES_KEEPING_NEWLINES if newlines else _ESCAPES)
