"""Names in exported traces, from untrusted text: a tool, a harness, a model name.

Span names and name attributes are what trace viewers list and terminals print (Phoenix's
span tree, ``otel-cli``, a ``jq`` over the file): a tool name forged as
``"sql\\x1b]0;owned\\x07\\x1b[2J"`` would retitle or clear the terminal of whoever reads the
export. A name keeps its printable characters only: escape sequences go whole, then every
control, format (bidirectional overrides, zero-width), line or paragraph separator character,
and it is bounded. Content (messages, arguments, results) stays as recorded: it is data, and
JSON carries it escaped.
"""

from __future__ import annotations

import re
import unicodedata

MAX_NAME_CHARS = 256
"""A name's length once cleaned (OpenTelemetry SDKs bound attribute values likewise)."""
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]"  # CSI: colours, cursor, clear
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC, DCS
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]"  # any other escape (ESC c resets the terminal)
)
_DROPPED = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def clean_name(value: object) -> str:
    """``value`` as a name: escape sequences and non-printing characters removed, at most
    :data:`MAX_NAME_CHARS` characters."""
    text = _SEQUENCE.sub("", str(value))
    kept = "".join(c for c in text if unicodedata.category(c) not in _DROPPED)
    return kept[:MAX_NAME_CHARS]
