"""What the simulated agent "notices" in the messages a harness sends it.

Harnesses are written by different people and LLMs and word things differently, so every
detection here is a deliberately loose, documented rule (docs/sim-policy.md lists them):
case-insensitive substring checks and one regex, applied to well-defined slices of the
conversation. Messages may be malformed; everything degrades to text, never raises.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Sequence
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
_SQL_BLOCK = re.compile(r"```sql\s*(.*?)```", re.IGNORECASE | re.DOTALL)
_FINAL = re.compile(r"Final Answer:(.*)", re.IGNORECASE | re.DOTALL)


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


def _role_and_text(message: Any) -> tuple[str, str]:
    if isinstance(message, dict):
        return str(message.get("role") or "user"), text_of(message.get("content"))
    role = getattr(message, "role", None)
    if role is not None:
        return str(role), text_of(getattr(message, "content", None))
    return "user", text_of(message)


def reply_kind(text: str) -> str:
    """How the DBBench v0.2 protocol would read a reply: answer / bare / sql / prose."""
    final = _FINAL.search(text)
    if final:
        return "answer" if _is_list(final.group(1).strip()) else "bare"
    return "sql" if _SQL_BLOCK.search(text) else "prose"


def sql_of(text: str) -> str | None:
    """The first ```sql block of a reply, stripped, or None."""
    match = _SQL_BLOCK.search(text)
    return match.group(1).strip() if match else None


def _is_list(text: str) -> bool:
    for parse in (json.loads, ast.literal_eval):
        try:
            return isinstance(parse(text), list)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return False


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

    @property
    def last_kind(self) -> str | None:
        return reply_kind(self.replies[-1]) if self.replies else None


def read_history(messages: Iterable[Any] | None) -> History:
    """Split ``messages`` (any shape) into a :class:`History`."""
    initial: list[str] = []
    replies: list[str] = []
    feedback: list[list[str]] = []
    observations: list[str] = []
    for message in messages or ():
        role, text = _role_and_text(message)
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


def restates_format(text: str) -> bool:
    """The message restates the action format: mentions the SQL action and the answer action."""
    low = text.lower()
    return ("```sql" in low or "action: operation" in low) and "final answer" in low


def asks_for_list(text: str) -> bool:
    """The message asks for the final answer as a list."""
    low = text.lower()
    return "final answer" in low and ("list" in low or "[" in low)


def commit_signal(text: str) -> bool:
    """The message says this is the last round / the agent must answer now."""
    return COMMIT_SIGNAL.search(text) is not None


def names_every_column(text: str, columns: Sequence[str]) -> bool:
    """Every (non-blank) column name occurs in ``text``, case-insensitively."""
    folded = text.casefold()
    return all(c.casefold() in folded for c in columns if c.strip())


def shows_a_row(text: str, rows: Sequence[Sequence[str | None]], description: str) -> bool:
    """Some table row has all its non-empty cells in ``text``.

    Rows whose cells all occur in the task description anyway (e.g. a row of small digits)
    are ignored: seeing them proves nothing about whether the harness showed sample rows.
    """
    for row in rows:
        cells = [c for c in row if c and c.strip()]
        if not cells or all(c in description for c in cells):
            continue
        if all(c in text for c in cells):
            return True
    return False


def saw_long_observation(history: History) -> bool:
    """Some message after the first reply is longer than ``LONG_OBSERVATION_CHARS``."""
    return any(len(o) > LONG_OBSERVATION_CHARS for o in history.observations)
