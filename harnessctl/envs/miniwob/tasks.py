"""Reading MiniWoB++ task files: JSON Lines, one episode a line.

A record is ``{"task": "<MiniWoB++ task name>", "seed": <int>, "category": "<category>"}``:
the task page (``miniwob/html/miniwob/<task>.html`` of MiniWoB++'s package), the seed its
problem generator gets (``Math.seedrandom``; the same seed draws the same problem, so a task
is one reproducible episode, as an ALFWorld game file is) and the category (default: the
file's stem). A task's id is ``<task>.<seed>``. A record that fails a check becomes a
``TaskProblem`` naming the file, the line and the field; the others still load.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from harnessctl.envs import Task, TaskProblem, TaskSet

KIND = "miniwob"
CATEGORIES = ("click", "type", "form", "navigation", "search")
"""The suite's categories (MiniWoB++'s own grouping is informal: these are the issue's)."""
_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


class RecordError(ValueError):
    """A record is wrong; ``str()`` is ``field: what is wrong``."""


def check_record(record: Any) -> None:
    """Raise ``RecordError`` naming the first field that is missing or wrong."""
    if not isinstance(record, dict):
        raise RecordError(f"(top level): expected a JSON object, got {type(record).__name__}")
    name = record.get("task")
    if not isinstance(name, str) or not _NAME.match(name):
        raise RecordError("task: missing or not a MiniWoB++ task name (e.g. click-button)")
    seed = record.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise RecordError("seed: missing or not a non-negative integer")
    category = record.get("category")
    if category is not None and (not isinstance(category, str) or not category.strip()):
        raise RecordError("category: not a non-empty string")
    pages = _pages()
    if pages is not None and name not in pages:
        raise RecordError(f"task: {name!r} is not one of MiniWoB++'s task pages")


def _pages() -> set[str] | None:
    """The task pages of the installed package, or None when it is not installed."""
    try:
        from .browser import html_dir

        root = html_dir() / "miniwob"
    except Exception:  # noqa: BLE001 - no package: names are checked when an episode opens
        return None
    return {p.stem for p in root.glob("*.html")}


def make_task(record: dict[str, Any], source: str, category: str = "") -> Task:
    """A checked record as a task (``RecordError`` when it does not check)."""
    check_record(record)
    blob = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return Task(
        id=f"{record['task']}.{record['seed']}",
        env=KIND,
        category=str(record.get("category") or category or "task"),
        record=dict(record),
        content_hash=hashlib.sha256(blob.encode()).hexdigest(),
        source=source,
    )


def task_files(root: Path) -> list[Path]:
    """``root`` itself when it is a file, else every ``*.jsonl`` under it, sorted."""
    root = Path(root)
    return [root] if root.is_file() else sorted(root.rglob("*.jsonl"))


def load_tasks(root: Path) -> TaskSet:
    """Every record of the task files under ``root`` (see the module docstring)."""
    tasks: list[Task] = []
    problems: list[TaskProblem] = []
    seen: dict[str, str] = {}
    for path in task_files(root):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(TaskProblem(str(path), number, f"(line): not JSON: {exc.msg}"))
                continue
            try:
                task = make_task(record, f"{path}:{number}", path.stem)
            except RecordError as exc:
                problems.append(TaskProblem(str(path), number, str(exc)))
                continue
            if task.id in seen:
                problems.append(
                    TaskProblem(str(path), number, f"(id): {task.id} also at {seen[task.id]}")
                )
                continue
            seen[task.id] = task.source
            tasks.append(task)
    if not tasks and not problems:
        problems.append(TaskProblem(str(root), 0, "no *.jsonl task file under this path"))
    return TaskSet(tasks, problems)


__all__ = ["CATEGORIES", "KIND", "RecordError", "check_record", "load_tasks", "make_task"]
