"""Scoring one DBBench episode on the host, with the gold labels.

INSERT / UPDATE / DELETE records: the final table is hashed (``sqlcompat.table_hash``, the
official checker's checksum over the record's columns) and compared with ``answer_md5``,
whatever the agent answered. The database file must be a regular file (not missing, not a
symlink); it is opened read-only and is never trusted to hold anything but data. The hash
runs in a worker process (``hash_worker``) under the limits of ``harnessctl.bounds``: a
wall clock (``SCORE_TIMEOUT_S``, then the worker is killed and ``ScoringLimit`` raised: the
rollout ends ``timeout``), an address space (``SCORE_MEMORY_BYTES``) and the largest value
one SQLite step may build (``SCORE_MAX_VALUE_BYTES``); a worker that fails or dies within
them scores the table wrong, the reason in the score's detail.

Query records: the final answer (the text after ``Final Answer:`` in the text protocol, the
``answers`` array of ``commit_final_answer`` as JSON in the function-calling one) must parse
as a list: JSON first, then a Python literal (``ast.literal_eval``). Anything else is
*unparsable* (``Score.answer_unparsable``, the rollout's outcome becomes ``invalid_format``).
The list is compared with the label under the run's comparison rules (``rules``: the
official function-calling task's by default, or v0.2's); ``Score.detail["rules"]`` names them.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harnessctl import bounds
from harnessctl.envs import Score

from .database import column_names
from .records import gold_hash, is_mutation
from .rules import DEFAULT_RULES, Rules, get_rules

MAX_ANSWER_CHARS = 100_000  # parsing is bounded: literal_eval on megabytes is a DoS vector
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
    return value if isinstance(value, list) else None


def normalise(value: Any) -> str:
    """One value as the default rules compare it (``rules.clean_value``)."""
    return get_rules(DEFAULT_RULES).clean(value)


def answers_match(answer: list[Any], label: list[Any], rules: str = DEFAULT_RULES) -> bool:
    """Does the parsed ``answer`` equal the ``label`` under ``rules``?"""
    return get_rules(rules).match(answer, label)


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


def score_mutation(
    record: dict[str, Any], db_path: Path | None, rules: str = DEFAULT_RULES
) -> Score:
    """Hash the final table and compare it with ``answer_md5`` (the same under every rules
    version; the detail still names the run's)."""
    expected = gold_hash(record)
    table = record["table"]["table_name"]
    detail: dict[str, Any] = {
        "kind": "mutation",
        "rules": get_rules(rules).name,
        "table": table,
        "expected_hash": expected,
    }
    problem = "no database file" if db_path is None else _regular_file_problem(db_path)
    if problem is not None or db_path is None:
        return Score(False, detail={**detail, "actual_hash": None, "error": problem})
    started = time.monotonic()
    actual, error = table_hash_limited(db_path, table, column_names(record))
    detail["scoring_s"] = round(time.monotonic() - started, 3)
    if error is not None:
        return Score(False, detail={**detail, "actual_hash": None, "error": error})
    return Score(actual == expected, detail={**detail, "actual_hash": actual})


WORKER = Path(__file__).with_name("hash_worker.py")
PACKAGE_DIR = Path(__file__).with_name("sandbox")


def table_hash_limited(
    db_path: Path, table: str, columns: list[str]
) -> tuple[str | None, str | None]:
    """``sqlcompat.table_hash`` of ``table`` in ``db_path``, run in a worker process under
    the scoring limits of ``harnessctl.bounds`` (read when called): (hash, None) or (None,
    why it failed). Raises ``ScoringLimit`` when the wall clock ran out (the worker killed)."""
    limit_s = bounds.SCORE_TIMEOUT_S
    request = {
        "package_dir": str(PACKAGE_DIR),
        "db": str(db_path),
        "table": table,
        "columns": columns,
        "memory": bounds.SCORE_MEMORY_BYTES,
        "cpu_s": math.ceil(limit_s) + 1,  # the wall clock comes first; this is a backstop
        "max_length": bounds.SCORE_MAX_VALUE_BYTES,
    }
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", str(WORKER)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # killed with everything it started
    )
    try:
        out, err = proc.communicate(json.dumps(request).encode(), timeout=limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise bounds.ScoringLimit(
            f"host scoring stopped at its {limit_s:g} s limit: the final table could not be "
            "hashed in time (the scoring worker was killed)"
        ) from None
    try:
        answer = json.loads(out)
        if isinstance(answer, dict) and ("hash" in answer or "error" in answer):
            return answer.get("hash"), answer.get("error")
    except ValueError:
        pass
    if proc.returncode < 0:  # its CPU (SIGXCPU) or memory limit, or a crash on the file
        name = signal.Signals(-proc.returncode).name
        return None, f"the scoring worker died of {name} within its limits"
    tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
    return None, f"the scoring worker failed (exit {proc.returncode}): {tail[0][:300]}"


def _shown(values: list[Any]) -> list[Any]:
    # detail is stored as JSON: odd literals (bytes, sets, tuples) are kept as repr
    return [v if isinstance(v, _JSON_SCALARS) else repr(v) for v in values]


def score_query(record: dict[str, Any], answer: str | None, rules: str = DEFAULT_RULES) -> Score:
    """Compare the final answer with the label under ``rules`` (module docstring)."""
    chosen: Rules = get_rules(rules)
    label = record["label"]
    shown = answer if answer is None or len(answer) <= 2000 else answer[:2000] + "..."
    detail: dict[str, Any] = {
        "kind": "query",
        "rules": chosen.name,
        "label": label,
        "answer": shown,
    }
    parsed = parse_answer(answer)
    if parsed is None:
        reason = "no final answer" if answer is None else "final answer is not a list"
        return Score(False, answer_unparsable=True, detail={**detail, "error": reason})
    detail["parsed"] = _shown(parsed)
    detail["compared"] = {
        "answer": _shown([chosen.clean(v) for v in parsed]),
        "label": _shown([chosen.clean(v) for v in label]),
    }
    return Score(chosen.match(parsed, label), detail=detail)


def score_record(
    record: dict[str, Any],
    db_path: Path | None,
    answer: str | None,
    rules: str = DEFAULT_RULES,
) -> Score:
    """Score one episode of any DBBench record: the table for mutations, else the answer,
    compared under ``rules`` (``agentbench-fc`` or ``v0.2``, see ``rules``)."""
    if is_mutation(record):
        return score_mutation(record, db_path, rules)
    return score_query(record, answer, rules)
