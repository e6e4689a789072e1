"""The one filter for untrusted text on its way to a terminal, and rich ``Text`` built through
it (part of :mod:`.render`, kept apart so that the status line, which render starts, uses them
without an import cycle)."""

from __future__ import annotations

import re
from typing import Any

from rich.text import Text

# A whole sequence first (so its parameters do not print as text), then any control
# character left (a lone ESC, an unterminated string's introducer): nothing that a terminal
# reads as a command survives. 7-bit (ESC ...) and 8-bit (C1) forms alike.
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]"  # CSI: colours, cursor, clear
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x00-\x1f\x7f-\x9f]*(?:\x07|\x1b\\|\x9c)"  # OSC...
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]"  # other escapes (ESC c resets the terminal)
)
# C0 but tab and newline (CR rewrites a line), DEL, C1; bidirectional overrides and
# isolates, which reorder what a line shows
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(value: Any) -> str:
    """``value`` as text with every terminal control sequence and control character removed
    (tab and newline kept): the one filter for untrusted text on its way to a terminal."""
    return _CONTROL.sub("", _SEQUENCE.sub("", str(value)))


def text(*parts: Any, style: str = "") -> Text:
    """A rich ``Text`` of untrusted parts (each a value or a ``(value, style)`` pair, as
    ``Text.assemble`` takes them), control sequences removed."""
    out = Text(style=style)
    for part in parts:
        if isinstance(part, tuple):
            out.append(terminal_safe(part[0]), style=part[1])
        else:
            out.append(terminal_safe(part))
    return out
