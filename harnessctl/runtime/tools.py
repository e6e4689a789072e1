"""Environment tools the runtime offers a harness, chosen by the task's ``env``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from . import sqlcompat


class SQLTool:
    """One SQL statement per call against the task's SQLite database."""

    name = "sql"

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self._conn: sqlite3.Connection | None = None

    @property
    def conn(self) -> sqlite3.Connection:  # opened lazily: a harness may not use it
        if self._conn is None:
            self._conn = sqlcompat.connect(str(self.db_path))
        return self._conn

    def run(self, sql: str, limit: int = 800):
        from .harness import Observation

        ok, payload = sqlcompat.execute(self.conn, sql)
        return Observation(text=sqlcompat.observation(ok, payload, limit), ok=ok, payload=payload)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def open_tools(task_dir: Path) -> dict:
    """The tools for the task in ``task_dir`` (empty when there is no task.json)."""
    spec = task_dir / "task.json"
    if not spec.exists():
        return {}
    task = json.loads(spec.read_text(encoding="utf-8"))
    if task.get("env") == "dbbench":
        return {"sql": SQLTool(task_dir / task.get("database", "db.sqlite"))}
    return {}
