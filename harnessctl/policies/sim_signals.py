"""What a simulated agent "notices" in the messages a harness sends it: the generic part,
shared by every environment's simulated policy (each environment's own signals live in its
package, e.g. ``harnessctl.envs.dbbench.sim_signals``).

Harnesses are written by different people and LLMs and word things differently, so every
detection here is a deliberately loose, documented rule (docs/sim-policy.md lists them):
case-insensitive substring checks and one regex, applied to well-defined slices of the
conversation. Messages may be malformed; everything degrades to text, never raises.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

LONG_OBSERVATION_CHARS = 500

# "This is the last round", "final turn", "no more rounds left", "1 round left", "you must
# answer now": the harness is telling the agent to stop exploring and commit.
COMMIT_SIGNAL = re.compile(
    r"\b(last|final) (round|turn|step|chance)\b"
    r"|\bno (more )?(rounds?|turns?|steps?) left\b"
    r"|\b(1|one) (round|turn|step) (left|remaining)\b"
    r"|\bmust (now )?(answer|commit)\b",
    re.IGNORECASE,
)


def text_of(content: Any) -> str:
    """Message content as text: str as is, OpenAI content parts joined, None empty, else str()."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text_of(part) for part in content)
    if isinstance(content, dict):
        return text_of(content.get("text", content.get("content", "")))
    return str(content)


def role_and_text(message: Any) -> tuple[str, str]:
    if isinstance(message, dict):
        return str(message.get("role") or "user"), text_of(message.get("content"))
    role = getattr(message, "role", None)
    if role is not None:
        return str(role), text_of(getattr(message, "content", None))
    return "user", text_of(message)


@dataclass(frozen=True)
class History:
    """The conversation split the way the simulated agent reads it.

    ``turn`` is the number of assistant messages (the sim's own earlier replies); ``initial`` is
    everything before the first of them; ``feedback[i]`` is everything non-assistant between
    assistant reply ``i`` and the next; ``latest`` is what came after the last reply (the
    initial context on turn 0).
    """

    turn: int
    initial: str
    replies: tuple[str, ...]
    feedback: tuple[str, ...]
    observations: tuple[str, ...]

    @property
    def latest(self) -> str:
        return self.feedback[-1] if self.feedback else self.initial


def task_start(messages: list[Any], task_text: str) -> int:
    """The index of the first non-assistant message holding ``task_text`` (the task's
    description): what comes before it the harness wrote itself (an in-context example, the
    "Ok." AgentBench's DBBench protocol injects), assistant turns included. 0 when
    ``task_text`` is empty or not found."""
    if not task_text:
        return 0
    for i, message in enumerate(messages):
        role, text = role_and_text(message)
        if role != "assistant" and task_text in text:
            return i
    return 0


def read_history(messages: Iterable[Any] | None, task_text: str = "") -> History:
    """Split ``messages`` (any shape) into a :class:`History`.

    ``task_text`` (the task's description, as the oracle knows it): every message before the
    first non-assistant message that contains it belongs to the initial context, assistant
    messages included: they are turns the harness wrote itself (an in-context example, the
    "Ok." AgentBench's DBBench protocol injects), not the agent's replies. Empty, or not
    found: the agent's replies are every assistant message."""
    listed = list(messages or ())
    start = task_start(listed, task_text)
    initial: list[str] = [role_and_text(m)[1] for m in listed[:start]]
    replies: list[str] = []
    feedback: list[list[str]] = []
    observations: list[str] = []
    for message in listed[start:]:
        role, text = role_and_text(message)
        if role == "assistant":
            replies.append(text)
            feedback.append([])
        elif replies:
            feedback[-1].append(text)
            observations.append(text)
        else:
            initial.append(text)
    return History(
        turn=len(replies),
        initial="\n".join(initial),
        replies=tuple(replies),
        feedback=tuple("\n".join(parts) for parts in feedback),
        observations=tuple(observations),
    )


def commit_signal(text: str) -> bool:
    """The message says this is the last round / the agent must answer now."""
    return COMMIT_SIGNAL.search(text) is not None


def saw_long_observation(history: History) -> bool:
    """Some message after the first reply is longer than ``LONG_OBSERVATION_CHARS``."""
    return any(len(o) > LONG_OBSERVATION_CHARS for o in history.observations)


def offered_functions(tools: Any) -> set[str]:
    """The function names a request's ``tools`` offer (malformed entries are skipped)."""
    names: set[str] = set()
    for tool in tools or ():
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.add(function["name"])
    return names


def field_of(obj: Any, name: str) -> Any:
    """``obj[name]`` of a dict, else the attribute (None when missing)."""
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def calls_as_text(messages: Iterable[Any] | None, call_text: Callable[[Any], str]) -> list[Any]:
    """``messages`` with every assistant message that makes function calls rewritten as a
    text-protocol reply: its content, then its first call (the one a harness runs) as
    ``call_text`` writes it. Other messages (tool results included) are kept as they are."""
    out: list[Any] = []
    for message in messages or ():
        calls = field_of(message, "tool_calls")
        role, text = role_and_text(message)
        if role == "assistant" and isinstance(calls, list | tuple) and calls:
            reply = "\n".join(part for part in (text, call_text(calls[0])) if part)
            out.append({"role": "assistant", "content": reply})
        else:
            out.append(message)
    return out
