"""What the simulated DBBench agent notices in a harness's messages: DBBench's own signals
(the text protocol's actions, the function-calling protocol's two functions, the table's
columns and rows). The generic ones (history, commit signal, long observations, offered
functions) are :mod:`harnessctl.policies.sim_signals`. Every detection is a deliberately
loose, documented rule (docs/sim-policy.md); messages may be malformed and nothing raises.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from harnessctl.policies.sim_signals import (
    History,
    field_of,
)
from harnessctl.policies.sim_signals import (
    calls_as_text as _calls_as_text,
)

_SQL_BLOCK = re.compile(r"```sql\s*(.*?)```", re.IGNORECASE | re.DOTALL)
_FINAL = re.compile(r"Final Answer:(.*)", re.IGNORECASE | re.DOTALL)


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


def _call_text(call: Any) -> str:
    """A function call of DBBench's function-calling protocol as the text-protocol action it
    stands for (``execute_sql`` -> a ```sql block, ``commit_final_answer`` -> ``Final
    Answer:``; an answer that is not a list is written as it came, so it reads as *bare*)."""
    function = field_of(call, "function") or call
    name, raw = field_of(function, "name"), field_of(function, "arguments")
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


def last_kind(history: History) -> str | None:
    """How the protocol reads the agent's last reply (``reply_kind``), None on turn 0."""
    return reply_kind(history.replies[-1]) if history.replies else None


def calls_as_text(messages: Iterable[Any] | None) -> list[Any]:
    """``messages`` with DBBench's function calls read as the text-protocol replies they
    stand for (see ``_call_text``)."""
    return _calls_as_text(messages, _call_text)
