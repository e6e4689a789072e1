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
    """The message restates the action format: mentions the SQL action and the answer action
    (in the text protocol, or the two functions of the function-calling one)."""
    low = text.lower()
    text_protocol = ("```sql" in low or "action: operation" in low) and "final answer" in low
    return text_protocol or ("execute_sql" in low and "commit_final_answer" in low)


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


def offered_functions(tools: Any) -> set[str]:
    """The function names a request's ``tools`` offer (malformed entries are skipped)."""
    names: set[str] = set()
    for tool in tools or ():
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.add(function["name"])
    return names


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _call_text(call: Any) -> str:
    """A function call of DBBench's function-calling protocol as the text-protocol action it
    stands for (``execute_sql`` -> a ```sql block, ``commit_final_answer`` -> ``Final
    Answer:``; an answer that is not a list is written as it came, so it reads as *bare*)."""
    function = _field(call, "function") or call
    name, raw = _field(function, "name"), _field(function, "arguments")
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        return f"{name}({raw})"
    if name == "execute_sql":
        return f"Action: Operation\n```sql\n{arguments.get('query')}\n```"
    if name == "commit_final_answer":
        answers = arguments.get("answers")
        shown = json.dumps(answers, ensure_ascii=False) if isinstance(answers, list) else answers
        return f"Action: Answer\nFinal Answer: {shown}"
    return f"{name}({raw})"


def calls_as_text(messages: Iterable[Any] | None) -> list[Any]:
    """``messages`` with every assistant message that makes function calls rewritten as a
    text-protocol reply: its content, then its first call (the one a harness runs). Other
    messages (tool results included) are kept as they are."""
    out: list[Any] = []
    for message in messages or ():
        calls = _field(message, "tool_calls")
        role, text = _role_and_text(message)
        if role == "assistant" and isinstance(calls, list | tuple) and calls:
            reply = "\n".join(part for part in (text, _call_text(calls[0])) if part)
            out.append({"role": "assistant", "content": reply})
        else:
            out.append(message)
    return out
