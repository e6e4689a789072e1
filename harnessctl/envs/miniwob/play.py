"""How the offline test doubles (``replay/miniwob``, ``sim/miniwob``) read a conversation and
write their replies: the latest page the harness showed, the actions taken so far, and an
action as text or as a function call. Standard library only.

Every reply states the action it means on its ``Think:`` line (``the next step of the task
is: click [6]``) before the ``Action:`` line that may word it otherwise (``sim/miniwob``'s
modes), so the double reads its own progress back from the conversation alone: an action counts as
taken when the answer after it is not an error (``NOT_RUN_WORDS``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harnessctl.policies.sim_signals import field_of, text_of

from .actions import TOOLS, ActionError, parse_action

MEANT = re.compile(r"the next step of the task is: (.+)$", re.M)
_ACTION = re.compile(r"^\s*Action:\s*(.+?)\s*$", re.M)
#: Words in the answer to an action that mean it was not carried out.
NOT_RUN_WORDS = ("error:", "not run", "not sent", "rejected", "refused")


@dataclass(frozen=True)
class Exchange:
    """One reply: the action it meant, the action it sent, and the answer after it."""

    meant: str | None
    sent: str | None
    feedback: str

    @property
    def carried_out(self) -> bool:
        feedback = self.feedback.lower()
        return self.sent is not None and not any(w in feedback for w in NOT_RUN_WORDS)


def normal(tool: str, argument: str = "", arguments: dict[str, Any] | None = None) -> str | None:
    """An action in its one written form (``click [5]``...), or None when it is not one."""
    try:
        return parse_action(tool, argument, arguments).describe()
    except ActionError:
        return None


def _sent(message: Any) -> str | None:
    calls = field_of(message, "tool_calls") or []
    if calls:
        function = field_of(calls[0], "function") or {}
        raw = field_of(function, "arguments")
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            return None
        name = str(field_of(function, "name") or "")
        return normal(name, "", arguments if isinstance(arguments, dict) else {})
    text = text_of(field_of(message, "content"))
    match = _ACTION.search(text)
    if match is None:
        written = written_call(text)
        return normal(written["name"], "", written["arguments"]) if written else None
    tool, _, argument = match.group(1).partition(" ")
    return normal(tool, argument) or match.group(1)


def written_call(text: str) -> dict[str, Any] | None:
    """The first JSON object of ``text`` that is a call of one of the environment's tools
    (``{"name": "click", "arguments": {"ref": 6}}``), as ``{"name", "arguments"}``: how
    ``sim/miniwob``'s ``format`` mode writes its call under function calling."""
    decoder, start = json.JSONDecoder(), text.find("{")
    while start != -1:
        try:
            found, end = decoder.raw_decode(text, start)
        except ValueError:
            found, end = None, start + 1
        if isinstance(found, dict) and found.get("name") in TOOLS:
            arguments = found.get("arguments")
            if isinstance(arguments, dict):
                return {"name": found["name"], "arguments": arguments}
        start = text.find("{", end)
    return None


def read_history(messages: Sequence[Any]) -> list[Exchange]:
    """The double's replies in the conversation, each with the messages that followed it."""
    turns: list[Exchange] = []
    for message in messages or []:
        role = str(field_of(message, "role") or "user")
        if role == "assistant":
            meant = MEANT.search(text_of(field_of(message, "content")))
            turns.append(Exchange(meant.group(1) if meant else None, _sent(message), ""))
        elif turns and role in ("user", "tool"):
            last = turns[-1]
            text = text_of(field_of(message, "content"))
            turns[-1] = Exchange(last.meant, last.sent, f"{last.feedback}\n{text}".strip())
    return turns


def taken(history: Sequence[Exchange]) -> list[str]:
    """The actions carried out so far, as the double meant them."""
    return [e.meant or e.sent or "" for e in history if e.carried_out]


def latest_observation(messages: Sequence[Any]) -> str:
    """The last message from the harness that shows a page (``Task: ...`` then ``Page:``)."""
    for message in reversed(messages or []):
        if field_of(message, "role") in ("user", "tool"):
            text = text_of(field_of(message, "content"))
            if re.search(r"^Task: ", text, re.M) and "Page:" in text:
                return text
    return ""


def as_call(action: str) -> dict[str, Any] | None:
    """An action of the text form as a function call ``{"name", "arguments"}``."""
    tool, _, argument = action.partition(" ")
    try:
        parsed = parse_action(tool, argument, None)
    except ActionError:
        return None
    if parsed.kind == "click":
        return {"name": "click", "arguments": {"ref": parsed.ref}}
    if parsed.kind == "type":
        return {"name": "type", "arguments": {"ref": parsed.ref, "text": parsed.text}}
    return {"name": "press", "arguments": {"key": parsed.text}}


def text_reply(meant: str, sent: str | None = None) -> str:
    """A reply of the text protocol: the meant action on the Think line, then the Action."""
    return f"Think: the next step of the task is: {meant}\nAction: {sent or meant}"


__all__ = [
    "Exchange",
    "as_call",
    "latest_observation",
    "normal",
    "read_history",
    "taken",
    "text_reply",
    "written_call",
]
