"""Reading AgentBench DBBench JSONL: one record per line, each checked field by field.

A record that fails a check becomes a ``TaskProblem`` naming the file, the 1-based line and
the field path (``table.table_info.rows[3]: ...``); the other records still load. Blank lines
are skipped. Task ids are ``f"{file stem}-{index:03d}"`` where ``index`` counts the non-blank
lines, broken ones included, so fixing one record never renumbers the others.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from harnessctl.envs import Task, TaskProblem, TaskSet
from harnessctl.errors import ConfigError

KIND = "dbbench"
MUTATION_TYPES = frozenset({"INSERT", "UPDATE", "DELETE"})
_ANSWER_MD5 = re.compile(r"^\s*\[\('([0-9a-fA-F]{32})',\)\]\s*$")
_SCALARS = (str, int, float, bool, type(None))


class RecordError(ValueError):
    """A record field is missing or ill-typed; ``str()`` is ``field.path: what is wrong``."""


_JSON_NAMES: dict[type, str] = {
    dict: "object",
    list: "array",
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def _type_name(value: Any) -> str:
    return _JSON_NAMES.get(type(value), type(value).__name__)


def _require(record: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in record:
        raise RecordError(f"{where}{key}: missing")
    value = record[key]
    if not isinstance(value, kind):
        expected = _JSON_NAMES[kind]
        raise RecordError(f"{where}{key}: expected {expected}, got {_type_name(value)}")
    return value


def _ascii_lower(name: str) -> str:
    # SQLite folds only ASCII letters when it compares identifiers.
    return "".join(ch.lower() if ch.isascii() else ch for ch in name)


def is_mutation(record: dict[str, Any]) -> bool:
    """INSERT/UPDATE/DELETE records are scored on the final table, not on the answer."""
    return str(record["type"][0]) in MUTATION_TYPES


def gold_hash(record: dict[str, Any]) -> str:
    """The 32-hex table checksum inside ``answer_md5`` (``"[('<hex>',)]"``), lower-cased."""
    match = _ANSWER_MD5.match(record["answer_md5"])
    if match is None:
        raise RecordError("answer_md5: expected \"[('<32 hex digits>',)]\"")
    return match.group(1).lower()


def check_record(record: Any) -> None:
    """Raise ``RecordError`` naming the first field of ``record`` that DBBench cannot use."""
    if not isinstance(record, dict):
        raise RecordError(f"record: expected object, got {_type_name(record)}")
    _require(record, "description", str, "")
    _require(record, "add_description", str, "")
    types = _require(record, "type", list, "")
    if not types or not isinstance(types[0], str) or not types[0]:
        raise RecordError("type[0]: expected a non-empty string (the task category)")
    if isinstance(record.get("table"), list):
        raise RecordError("table: multi-table records are not supported")
    table = _require(record, "table", dict, "")
    name = _require(table, "table_name", str, "table.")
    if not name or name.lower().startswith("sqlite_"):
        raise RecordError("table.table_name: must be non-empty and not start with 'sqlite_'")
    info = _require(table, "table_info", dict, "table.")
    columns = _require(info, "columns", list, "table.table_info.")
    if not columns:
        raise RecordError("table.table_info.columns: expected at least one column")
    seen: set[str] = set()
    for i, column in enumerate(columns):
        where = f"table.table_info.columns[{i}]"
        if not isinstance(column, dict):
            raise RecordError(f"{where}: expected object, got {_type_name(column)}")
        col_name = _require(column, "name", str, where + ".")
        # An empty name is kept (one dev record has it; SQLite accepts it quoted), but SQLite,
        # like MySQL, refuses two columns whose names differ only in case.
        folded = _ascii_lower(col_name)
        if folded in seen:
            raise RecordError(f"{where}.name: duplicate column name {col_name!r}")
        seen.add(folded)
    rows = _require(info, "rows", list, "table.table_info.")
    for r, row in enumerate(rows):
        where = f"table.table_info.rows[{r}]"
        if not isinstance(row, list):
            raise RecordError(f"{where}: expected array, got {_type_name(row)}")
        if len(row) != len(columns):
            raise RecordError(f"{where}: has {len(row)} values, expected {len(columns)}")
        for c, cell in enumerate(row):
            if not isinstance(cell, _SCALARS):
                raise RecordError(f"{where}[{c}]: expected a scalar, got {_type_name(cell)}")
    label = _require(record, "label", list, "")
    if "sql" in record:
        sql = _require(record, "sql", dict, "")
        if "query" in sql and not isinstance(sql["query"], str | type(None)):
            raise RecordError(f"sql.query: expected string, got {_type_name(sql['query'])}")
    if types[0] in MUTATION_TYPES:
        if not label or not isinstance(label[0], str) or not label[0].strip():
            raise RecordError("label[0]: expected the reference SQL of the INSERT/UPDATE/DELETE")
        _require(record, "answer_md5", str, "")
        gold_hash(record)
    else:
        for i, value in enumerate(label):
            if not isinstance(value, _SCALARS):
                raise RecordError(f"label[{i}]: expected a scalar, got {_type_name(value)}")


def content_hash(record: dict[str, Any]) -> str:
    """sha256 hex of the record as canonical JSON (sorted keys, compact, UTF-8)."""
    canonical = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def load_jsonl(path: Path) -> TaskSet:
    """Load a DBBench JSONL file. Raises ``ConfigError`` only if the file cannot be read."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(str(path), f"cannot read task file: {exc.strerror or exc}") from exc
    tasks: list[Task] = []
    problems: list[TaskProblem] = []
    index = 0
    for line_no, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        task_id = f"{path.stem}-{index:03d}"
        index += 1
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            problems.append(TaskProblem(str(path), line_no, "record: not valid UTF-8"))
            continue
        except json.JSONDecodeError as exc:
            message = f"record: invalid JSON: {exc.msg} (column {exc.colno})"
            problems.append(TaskProblem(str(path), line_no, message))
            continue
        try:
            check_record(record)
        except RecordError as exc:
            problems.append(TaskProblem(str(path), line_no, str(exc)))
            continue
        tasks.append(
            Task(
                id=task_id,
                env=KIND,
                category=record["type"][0],
                record=record,
                content_hash=content_hash(record),
                source=f"{path}:{line_no}",
            )
        )
    return TaskSet(tasks=tasks, problems=problems)
