"""The agent's actions, as MiniWoB++'s action space has them: click an element
(``CLICK_ELEMENT``), type into an element (``FOCUS_ELEMENT_AND_TYPE_TEXT``: click it, then the
keystrokes) and press a key or a key combination (``PRESS_KEY``, MiniWoB++'s key syntax:
``C-``, ``S-``, ``A-``, ``M-`` prefixes and a character or a ``<Name>``).

Each is one tool of the environment, reached as text or as a function call:

========  ==========================  ===============================
tool      text argument               function arguments
========  ==========================  ===============================
click     ``5`` or ``[5]``            ``{"ref": 5}``
type      ``[5] "some text"``         ``{"ref": 5, "text": "some text"}``
press     ``<Enter>``, ``C-a``        ``{"key": "<Enter>"}``
========  ==========================  ===============================

Anything else is refused with the reason (:class:`ActionError`), which the episode answers as
the agent's error. Standard library only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

TOOLS = ("click", "type", "press")
#: Typed text longer than this is refused, not typed (a text field of a task holds a word).
TEXT_LIMIT = 500
#: MiniWoB++'s special key names (its ``WEBDRIVER_SPECIAL_KEYS``) and WebDriver's code points.
SPECIAL_KEYS = {
    "<Backspace>": "\ue003", "<Tab>": "\ue004", "<Clear>": "\ue005", "<Enter>": "\ue007",
    "<Shift>": "\ue008", "<Control>": "\ue009", "<Alt>": "\ue00a", "<Escape>": "\ue00c",
    "<Space>": " ", "<PageUp>": "\ue00e", "<PageDown>": "\ue00f", "<End>": "\ue010",
    "<Home>": "\ue011", "<ArrowLeft>": "\ue012", "<ArrowUp>": "\ue013",
    "<ArrowRight>": "\ue014", "<ArrowDown>": "\ue015", "<Insert>": "\ue016",
    "<Delete>": "\ue017", "<Meta>": "\ue03d",
}  # fmt: skip
MODIFIERS = {"C-": "\ue009", "S-": "\ue008", "A-": "\ue00a", "M-": "\ue03d"}
_REF = re.compile(r"^\s*\[?\s*(\d{1,6})\s*\]?\s*(.*)$", re.S)


class ActionError(ValueError):
    """The action is not one the environment takes; ``str()`` says why."""


@dataclass(frozen=True)
class WebAction:
    """One action of MiniWoB++'s action space."""

    kind: str  # click | type | press
    ref: int = 0
    text: str = ""  # type: the text; press: the key as written
    keys: tuple[str, ...] = ()  # press: the modifiers, then the key, as WebDriver code points

    def describe(self) -> str:
        if self.kind == "click":
            return f"click [{self.ref}]"
        if self.kind == "type":
            return f"type [{self.ref}] {json.dumps(self.text, ensure_ascii=False)}"
        return f"press {self.text}"


def parse_key(key: str) -> tuple[str, ...]:
    """MiniWoB++'s key syntax as WebDriver code points (modifiers first, then the key)."""
    raw, keys = key, []
    while raw[:2] in MODIFIERS and len(raw) > 2:
        keys.append(MODIFIERS[raw[:2]])
        raw = raw[2:]
    if raw in SPECIAL_KEYS:
        keys.append(SPECIAL_KEYS[raw])
    elif len(raw) == 1 and raw.isprintable():
        keys.append(raw)
    else:
        names = ", ".join(SPECIAL_KEYS)
        raise ActionError(
            f"unknown key {key!r}: a character or one of {names}, optionally after C-, S-, A- or M-"
        )
    return tuple(keys)


def _ref(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ActionError(f"ref must be an element's number, got {value!r}")
    text = str(value).strip().strip("[]").strip()
    if not text.isdigit() or len(text) > 6:
        raise ActionError(f"ref must be an element's number, got {value!r}")
    return int(text)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ActionError(f"text must be a string, got {type(value).__name__}")
    if len(value) > TEXT_LIMIT:
        raise ActionError(f"text too long ({len(value)} characters; at most {TEXT_LIMIT})")
    return value


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        try:
            value = json.loads(text)
        except ValueError:
            return text[1:-1]
        return value if isinstance(value, str) else text[1:-1]
    return text


def parse_action(tool: str, argument: str, arguments: dict[str, Any] | None) -> WebAction:
    """The action a step asks for; ``ActionError`` saying why it is not one."""
    if tool not in TOOLS:
        raise ActionError(f"unknown tool {tool!r}; the tools are {', '.join(TOOLS)}")
    if arguments is not None and not isinstance(arguments, dict):
        raise ActionError("arguments must be a JSON object")
    if tool == "press":
        key = arguments.get("key") if arguments is not None else argument.strip()
        if not isinstance(key, str) or not key:
            raise ActionError("press takes a key, e.g. <Enter>")
        key = _unquote(key) if len(key.strip()) > 2 else key.strip()
        return WebAction("press", text=key, keys=parse_key(key))
    if arguments is not None:
        ref = _ref(arguments.get("ref"))
        if tool == "click":
            return WebAction("click", ref=ref)
        return WebAction("type", ref=ref, text=_text(arguments.get("text", "")))
    match = _REF.match(argument or "")
    if match is None:
        raise ActionError(f"{tool} takes an element's ref first, e.g. [5]; got {argument[:80]!r}")
    ref, rest = int(match.group(1)), match.group(2)
    if tool == "click":
        if rest.strip():
            raise ActionError(f"click takes only an element's ref, e.g. [5]; got {argument[:80]!r}")
        return WebAction("click", ref=ref)
    return WebAction("type", ref=ref, text=_text(_unquote(rest)))


__all__ = ["TEXT_LIMIT", "TOOLS", "ActionError", "WebAction", "parse_action", "parse_key"]
