"""Dataset rows that every trainer's loader accepts: the task as one JSON string.

A trainer's dataset is a table (parquet through pandas/pyarrow, or ``datasets``), and a
table wants one type per column. Task records do not have one: a DBBench record's table
rows mix strings and numbers in one list, tau2's tasks nest objects of varying shape, and
two records of one file may differ in their keys. Put such a record in a column and pyarrow
refuses it (``ArrowInvalid: Could not convert 'Dabney H. Maury' ... int64``) or, worse,
infers a struct from the first rows that later rows break. So a row carries its task as a
JSON string (:func:`encode_task`) beside a few typed columns (:func:`task_columns`), and
the integration that runs the task decodes it (:func:`decode_task`).

The string is ``{"version": 1, "record": {...}}`` for a raw record (one line of a task
file, as the Pool API takes it), plus ``"task": {"id", "env", "category", "content_hash",
"source"}`` when it was a loaded :class:`~harnessctl.envs.Task`: some environments
normalise a record when they load it (os_interaction reads its scripts in), so a loaded
task comes back as that task, not as a record to parse again. A bare JSON object without
the envelope, or a dict (rows built in memory), is taken as a raw record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..envs import Task

#: The column (verl: the ``extra_info`` key) that carries the task.
TASK_KEY = "harnessctl_task"
VERSION = 1
_TASK_FIELDS = ("id", "env", "category", "content_hash", "source")


def encode_task(task: Task | Mapping[str, Any]) -> str:
    """``task`` (a loaded Task or a raw record) as the JSON string a row carries."""
    if isinstance(task, Task):
        meta = {name: getattr(task, name) for name in _TASK_FIELDS}
        payload: dict[str, Any] = {"version": VERSION, "task": meta, "record": task.record}
    elif isinstance(task, Mapping):
        payload = {"version": VERSION, "record": dict(task)}
    else:
        raise TypeError(f"a task is a harnessctl Task or a raw record (dict), not {type(task)}")
    return json.dumps(payload, ensure_ascii=False, sort_keys=True)


def decode_task(value: str | bytes | Mapping[str, Any] | Task) -> Task | dict[str, Any]:
    """What :func:`encode_task` encoded: the Task, or the raw record (a pool harness's
    ``rollout`` takes either). A dict or a Task is returned as it is (rows made in memory)."""
    if isinstance(value, Task):
        return value
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if not isinstance(value, str):
        raise TypeError(f"a row's task is a JSON string, not a {type(value).__name__}")
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"a row's task is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"a row's task is a JSON object, not a {type(data).__name__}")
    if not ("version" in data and "record" in data):
        return data  # a bare record
    if data["version"] != VERSION:
        raise ValueError(
            f"a row's task has version {data['version']!r}; this harnessctl reads {VERSION}"
        )
    record = data["record"]
    if not isinstance(record, dict):
        raise ValueError("a row's task record is not a JSON object")
    meta = data.get("task")
    if meta is None:
        return record
    missing = [name for name in _TASK_FIELDS if not isinstance(meta.get(name), str)]
    if missing:
        raise ValueError(f"a row's task lacks {', '.join(missing)}")
    return Task(record=record, **{name: meta[name] for name in _TASK_FIELDS})


def task_columns(task: Task | Mapping[str, Any], index: int) -> dict[str, Any]:
    """The typed columns of a task's row, the same keys and types for every row: ``index``
    (int), ``task_id``, ``env``, ``category`` (strings; empty for a raw record, whose id
    and kind only its environment can tell) and :data:`TASK_KEY` (the JSON string)."""
    if isinstance(task, Task):
        task_id, env, category = task.id, task.env, task.category
    else:
        task_id, env = "", ""
        given = task.get("category")
        category = given if isinstance(given, str) else ""
    return {
        "index": int(index),
        "task_id": task_id,
        "env": env,
        "category": category,
        TASK_KEY: encode_task(task),
    }
