"""Scoring one DBBench episode on the host, with the gold labels.

INSERT / UPDATE / DELETE records: the final table is hashed (``sqlcompat.table_hash``, the
official checker's checksum over the record's columns) and compared with ``answer_md5``,
whatever the agent answered. The database file must be a regular file (not missing, not a
symlink); it is opened read-only and is never trusted to hold anything but data.

Query records: the final answer (the text after ``Final Answer:``) must parse as a list:
JSON first, then a Python literal (``ast.literal_eval``). Anything else is *unparsable*
(``Score.answer_unparsable``, the rollout's outcome becomes ``invalid_format``). Elements that
are one-element tuples or lists (``[('x',)]``, pasted from an observation) are unwrapped.

The comparison is the v0.2 rule made tolerant in the way the newer AgentBench evaluator is:

1. Normalise every value on both sides: ``str(v)``, strip whitespace and surrounding quotes,
   drop one trailing ``%``, drop the commas of a thousands-grouped number (``"1,429"`` ->
   ``"1429"``; commas elsewhere are kept, so ``"1985, 1993"`` stays one string), and map
   ``None``/``null``/``none``/``nan``/``undefined``/``inf``/``infinity`` (any case) and ``""``
   to ``"0"``.
2. Two normalised values match when they are equal strings, or both parse as finite floats
   within 0.01 of each other.
3. One value on each side: they must match. Otherwise (the v0.2 set rule, with tolerance):
   every answer value matches some label value and every label value matches some answer
   value, so order and repetition do not matter.

Every answer the strict v0.2 rule accepts is accepted here (normalisation applies to both
sides alike). The newer evaluator's one stricter case, lists of numbers of different lengths
(``[1, 1]`` against ``[1]``), follows v0.2 and is accepted.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import sqlite3
import stat
from pathlib import Path
from typing import Any

from harnessctl.envs import Score

from .database import column_names
from .records import gold_hash, is_mutation
from .sandbox.hxenv_dbbench import sqlcompat

FLOAT_TOLERANCE = 0.01
MAX_ANSWER_CHARS = 100_000  # parsing is bounded: literal_eval on megabytes is a DoS vector
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?")
_NULLISH = frozenset({"none", "null", "nan", "undefined", "inf", "infinity", "-inf", "-infinity"})
_JSON_SCALARS = (str, int, float, bool, type(None))
_FINAL_ANSWER = re.compile(r"^\s*Final Answer:", re.IGNORECASE)


def parse_answer(answer: str | None) -> list[Any] | None:
    """The final answer as a list, or None when it is missing or not a list."""
    if answer is None or len(answer) > MAX_ANSWER_CHARS:
        return None
    text = _FINAL_ANSWER.sub("", answer, count=1).strip()
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        try:
            value = ast.literal_eval(text)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None
    if not isinstance(value, list):
        return None
    return [v[0] if isinstance(v, tuple | list) and len(v) == 1 else v for v in value]


def normalise(value: Any) -> str:
    """Step 1 of the comparison (module docstring)."""
    if value is None:
        return "0"
    text = str(value).strip().strip("'\"").strip()
    if text.endswith("%"):
        text = text[:-1].strip()
    if _THOUSANDS.fullmatch(text):
        text = text.replace(",", "")
    return "0" if text == "" or text.lower() in _NULLISH else text


def _as_float(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def values_match(a: str, b: str) -> bool:
    """Step 2 of the comparison: equal strings, or floats within 0.01."""
    if a == b:
        return True
    fa, fb = _as_float(a), _as_float(b)
    return fa is not None and fb is not None and abs(fa - fb) <= FLOAT_TOLERANCE


def answers_match(answer: list[Any], label: list[Any]) -> bool:
    """Step 3 of the comparison: does the parsed ``answer`` equal the ``label``?"""
    got = [normalise(v) for v in answer]
    want = [normalise(v) for v in label]
    if len(got) == 1 and len(want) == 1:
        return values_match(got[0], want[0])
    return all(any(values_match(g, w) for w in want) for g in got) and all(
        any(values_match(g, w) for g in got) for w in want
    )


def _regular_file_problem(path: Path) -> str | None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return "database file is missing"
    except OSError as exc:
        return f"database file cannot be inspected: {exc.strerror or exc}"
    if stat.S_ISLNK(mode):
        return "database file is a symlink (refused)"
    if not stat.S_ISREG(mode):
        return "database file is not a regular file (refused)"
    return None


def score_mutation(record: dict[str, Any], db_path: Path | None) -> Score:
    """Hash the final table and compare it with ``answer_md5``."""
    expected = gold_hash(record)
    table = record["table"]["table_name"]
    detail: dict[str, Any] = {"kind": "mutation", "table": table, "expected_hash": expected}
    problem = "no database file" if db_path is None else _regular_file_problem(db_path)
    if problem is not None or db_path is None:
        return Score(False, detail={**detail, "actual_hash": None, "error": problem})
    try:
        conn = sqlcompat.connect(str(db_path), read_only=True)
    except sqlite3.Error as exc:
        return Score(False, detail={**detail, "actual_hash": None, "error": str(exc)})
    try:
        kind = conn.execute("SELECT type FROM sqlite_master WHERE name = ?", (table,)).fetchone()
        if kind is None or kind[0] != "table":
            raise sqlite3.OperationalError(f"no such table: {table}")
        actual = sqlcompat.table_hash(conn, table, column_names(record))
    except (sqlite3.Error, sqlite3.Warning) as exc:
        return Score(False, detail={**detail, "actual_hash": None, "error": str(exc)})
    finally:
        conn.close()
    return Score(actual == expected, detail={**detail, "actual_hash": actual})


def score_query(record: dict[str, Any], answer: str | None) -> Score:
    """Compare the final answer with the label (module docstring)."""
    label = record["label"]
    shown = answer if answer is None or len(answer) <= 2000 else answer[:2000] + "..."
    detail: dict[str, Any] = {"kind": "query", "label": label, "answer": shown}
    parsed = parse_answer(answer)
    if parsed is None:
        reason = "no final answer" if answer is None else "final answer is not a list"
        return Score(False, answer_unparsable=True, detail={**detail, "error": reason})
    # detail is stored as JSON: odd literals (bytes, sets, nested lists) are kept as repr
    detail["parsed"] = [v if isinstance(v, _JSON_SCALARS) else repr(v) for v in parsed]
    detail["normalised"] = {
        "answer": [normalise(v) for v in parsed],
        "label": [normalise(v) for v in label],
    }
    return Score(answers_match(parsed, label), detail=detail)


def score_record(record: dict[str, Any], db_path: Path | None, answer: str | None) -> Score:
    """Score one episode of any DBBench record: the table for mutations, else the answer."""
    if is_mutation(record):
        return score_mutation(record, db_path)
    return score_query(record, answer)
