"""The ``dbbench`` environment: AgentBench DBBench tasks on SQLite made to behave like MySQL 8.

A task's public material is ``task.json`` (instruction, context, table name, database file
name) and ``db.sqlite`` (the table, built as the official init builds it: see ``database``).
Gold labels, ``answer_md5``, the reference SQL and the task type never leave the host; they
are used by ``score`` (see ``scoring``) and ``oracle``.

Harnesses speak either protocol AgentBench has used: v0.2's text protocol
(``harnesses/dbbench-base``) or the current function-calling one, tools ``execute_sql`` and
``commit_final_answer`` (``harnesses/dbbench-fc``); both run SQL through the same ``sql`` tool
and are scored by the same scorer. Query answers are compared under the environment's
``rules`` (``rules.py``: ``agentbench-fc`` by default, or ``v0.2``), named in every score.

The library functions work on any DBBench JSONL without the environment object:
``load_jsonl``, ``check_record``, ``build_database``, ``score_record``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harnessctl.envs import Environment, Episode, ReplayScript, SandboxCode, Score, Task, TaskSet

from .database import build_database, column_names, table_rows
from .records import KIND, MUTATION_TYPES, RecordError, check_record, is_mutation, load_jsonl
from .rules import DEFAULT_RULES, RULES, get_rules
from .scoring import answers_match, normalise, parse_answer, score_record

DB_FILE = "db.sqlite"
TASK_FILE = "task.json"
HERE = Path(__file__).resolve().parent
#: The SQL layer the harness's ``sql`` tool runs in the sandbox (also used by the scorer).
SANDBOX_CODE = SandboxCode(package="hxenv_dbbench", path=HERE / "sandbox" / "hxenv_dbbench")


def public_task(task: Task) -> dict[str, Any]:
    """What the sandbox may see of a task (the content of ``task.json``)."""
    record = task.record
    return {
        "task_id": task.id,
        "env": KIND,
        "instruction": record["description"],
        "context": record["add_description"],
        "table_name": record["table"]["table_name"],
        "database": DB_FILE,
    }


class DBBenchEnvironment(Environment):
    """AgentBench DBBench on SQLite; in-sandbox (the SQL tool runs there).

    ``rules`` names the answer comparison (``rules.RULES``); a suite chooses it with
    ``env_options: {rules: v0.2}``. An unknown name is a ``ValueError`` naming the known ones.
    """

    kind = KIND
    surface = "sandbox"
    sandbox_code = SANDBOX_CODE
    #: Bumped when loading or scoring changes what a rollout's outcome would be
    #: (2: the MySQL collation and the versioned comparison rules).
    revision = "2"
    #: Repair directions (and the rule-based editor's repairs) for DBBench harnesses.
    directions = HERE / "directions"

    def __init__(self, rules: str = DEFAULT_RULES) -> None:
        self.rules = get_rules(rules).name
        #: Part of the rollout cache key: the revision and the comparison rules.
        self.version = f"{self.revision}+{self.rules}"

    def load_tasks(self, path: Path) -> TaskSet:
        """Load a DBBench JSONL file; broken records become problems (``records``)."""
        return load_jsonl(Path(path))

    def task_from_record(self, record: dict[str, Any], task_id: str | None = None) -> Task:
        """A task from one raw DBBench record (the Pool API's input); a broken record is a
        ``ConfigError`` naming the field."""
        from harnessctl.errors import ConfigError

        from .records import content_hash

        try:
            check_record(record)
        except RecordError as exc:
            raise ConfigError("record", str(exc)) from None
        digest = content_hash(record)
        return Task(
            id=task_id or f"task-{digest[:10]}",
            env=KIND,
            category=record["type"][0],
            record=record,
            content_hash=digest,
            source="<record>",
        )

    def prepare(self, task: Task, workdir: Path) -> None:
        """Write ``task.json`` and a fresh ``db.sqlite`` into ``workdir``; nothing gold."""
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        build_database(task.record, workdir / DB_FILE)
        text = json.dumps(public_task(task), ensure_ascii=False, indent=2)
        (workdir / TASK_FILE).write_text(text + "\n", encoding="utf-8")

    def score(
        self, task: Task, workdir: Path, answer: str | None, episode: Episode | None = None
    ) -> Score:
        """Score the table left in ``workdir/db.sqlite`` or the final ``answer``."""
        return score_record(task.record, Path(workdir) / DB_FILE, answer, self.rules)

    def replay(self, task: Task) -> ReplayScript:
        """The gold as a script for ``replay/dbbench`` (host only): the reference SQL (a
        mutation's statement, or a query's SQL where the record has one), then the label as
        the final answer. Each step in the text protocol and as a function call."""
        record = task.record
        mutation = is_mutation(record)
        sql = record["label"][0] if mutation else None
        if not mutation and isinstance(record.get("sql"), dict):
            sql = record["sql"].get("query")
        answer = [] if mutation else list(record["label"])
        shown = json.dumps(answer, ensure_ascii=False)
        steps: list[dict[str, Any]] = []
        if sql:
            steps.append(
                {
                    "text": f"Action: Operation\n```sql\n{sql}\n```",
                    "tool_call": {"name": "execute_sql", "arguments": {"query": sql}},
                }
            )
        steps.append(
            {
                "text": f"Action: Answer\nFinal Answer: {shown}",
                "tool_call": {"name": "commit_final_answer", "arguments": {"answers": answer}},
            }
        )
        return steps

    def oracle(self, task: Task) -> dict[str, Any]:
        """The whole task, gold included, for the offline simulated policy (host only)."""
        record = task.record
        mutation = is_mutation(record)
        sql = record.get("sql")
        return {
            "task_id": task.id,
            "type": record["type"][0],
            "kind": "mutation" if mutation else "query",
            "description": record["description"],
            "table_name": record["table"]["table_name"],
            "columns": column_names(record),
            "rows": table_rows(record),
            "label": list(record["label"]),
            "reference_sql": record["label"][0] if mutation else None,
            "query_sql": sql.get("query") if isinstance(sql, dict) else None,
        }


__all__ = [
    "DEFAULT_RULES",
    "DB_FILE",
    "RULES",
    "SANDBOX_CODE",
    "KIND",
    "MUTATION_TYPES",
    "TASK_FILE",
    "DBBenchEnvironment",
    "RecordError",
    "answers_match",
    "build_database",
    "check_record",
    "load_jsonl",
    "normalise",
    "parse_answer",
    "public_task",
    "score_record",
]
