"""DBBench's tools inside the sandbox: one SQL statement per call on the task's SQLite file.

The runtime calls :func:`open_tools` with the task directory and its own package (for
``Observation``); this package never imports the runtime, so it works under either name.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from types import ModuleType
from typing import Any

from . import sqlcompat

DEFAULT_DATABASE = "db.sqlite"


class SQLTool:
    """One SQL statement per call against the task's SQLite database."""

    name = "sql"

    def __init__(self, db_path: Path, runtime: ModuleType) -> None:
        self.db_path = db_path
        self._runtime = runtime
        self._conn: sqlite3.Connection | None = None

    @property
    def conn(self) -> sqlite3.Connection:  # opened lazily: a harness may not use it
        if self._conn is None:
            self._conn = sqlcompat.connect(str(self.db_path))
        return self._conn

    def run(self, sql: str, limit: int = 800) -> Any:
        ok, payload = sqlcompat.execute(self.conn, sql)
        text = sqlcompat.observation(ok, payload, limit)
        return self._runtime.Observation(text=text, ok=ok, payload=payload)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def open_tools(task_dir: Path, runtime: ModuleType) -> dict[str, Any]:
    """``{"sql": SQLTool}`` on the database ``task.json`` names (empty without task.json)."""
    spec = Path(task_dir) / "task.json"
    if not spec.exists():
        return {}
    task = json.loads(spec.read_text(encoding="utf-8"))
    database = task.get("database") or DEFAULT_DATABASE
    return {"sql": SQLTool(Path(task_dir) / database, runtime)}
