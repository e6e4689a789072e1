"""The offline rule-based editor's catalogue of DBBench repairs.

Every repair must be an edit the validator would accept (loads, applies on its parent
harness, stays inside its direction's files and budget, compiles, imports only the standard
library and the runtime), and must do what its description says: each one is exercised
in-process on a real SQLite task with a scripted model. Repairs whose id starts with ``fc-``
are for the function-calling base ``dbbench-fc`` (exercised in
tests/envs/dbbench/test_dbbench_fc.py), the others for the text-protocol base ``dbbench-base``.
"""

from __future__ import annotations

import ast
import fnmatch
import json
import re
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel, ConfigDict

import harnessctl.runtime as rt
from harnessctl.evolve.patch import (
    PatchError,
    apply_blocks,
    changed_lines,
    parse_patch,
    write_files,
)
from harnessctl.runtime.boot import load_harness
from harnessctl.runtime.loop import EventLog, run_episode
from tests.helpers import BASE_HARNESS, ROOT

FC_HARNESS = ROOT / "harnesses" / "dbbench-fc"

sys.modules.setdefault("harnessctl_runtime", rt)  # the name harness code imports it by

DIRECTIONS_DIR = ROOT / "harnessctl" / "envs" / "dbbench" / "directions"
REPAIRS_DIR = DIRECTIONS_DIR / "repairs"
REPAIR_FILES = sorted(REPAIRS_DIR.glob("*.yaml"))
KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class RepairSpec(BaseModel):
    """The catalogue format, field for field (unknown fields are errors)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    direction: str
    description: str
    signals: list[str]
    requires: list[str]
    patch: str


def load(path: Path) -> RepairSpec:
    return RepairSpec.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))


def repairs() -> dict[str, RepairSpec]:
    return {spec.id: spec for spec in map(load, REPAIR_FILES)}


def directions() -> dict[str, dict]:
    found = {}
    for path in sorted(DIRECTIONS_DIR.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        found[data["name"]] = data
    return found


def base_of(repair_id: str) -> Path:
    """The base harness a repair is written against (``fc-``: the function-calling one)."""
    return FC_HARNESS if repair_id.startswith("fc-") else BASE_HARNESS


def chain(repair_id: str, catalogue: dict[str, RepairSpec]) -> list[str]:
    """The repair's prerequisites (depth first), then the repair itself."""
    order: list[str] = []
    for required in catalogue[repair_id].requires:
        order += [r for r in chain(required, catalogue) if r not in order]
    return [*order, repair_id]


def build(repair_id: str, dest: Path) -> Path:
    """A copy of the base harness with the repair and its prerequisites applied."""
    catalogue = repairs()
    shutil.copytree(base_of(repair_id), dest)
    for rid in chain(repair_id, catalogue):
        write_files(dest, apply_blocks(dest, parse_patch(catalogue[rid].patch)))
    return dest


def test_catalogue_is_there_and_ids_are_unique():
    ids = [load(path).id for path in REPAIR_FILES]
    assert len(ids) >= 5
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("path", REPAIR_FILES, ids=lambda p: p.stem)
def test_repair_file_is_well_formed(path):
    spec = load(path)
    assert KEBAB.match(spec.id) and spec.id == path.stem
    assert spec.direction in directions()
    assert spec.description.strip() and all(s.strip() for s in spec.signals)
    catalogue = repairs()
    for required in spec.requires:  # round-2 refinements build on their own direction
        assert catalogue[required].direction == spec.direction
        assert base_of(required) == base_of(spec.id)  # ... and on their own base
    assert chain(spec.id, catalogue).count(spec.id) == 1  # no cycle through itself


def test_every_direction_has_a_repair_for_each_base():
    for base in (BASE_HARNESS, FC_HARNESS):
        covered = {spec.direction for spec in repairs().values() if base_of(spec.id) == base}
        assert covered == set(directions()), base.name


def _imports(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add("." * node.level + (node.module or "").split(".")[0])
    return names


@pytest.mark.parametrize("path", REPAIR_FILES, ids=lambda p: p.stem)
def test_repair_applies_on_its_parent_within_its_direction(path, tmp_path):
    spec = load(path)
    direction = directions()[spec.direction]
    catalogue = repairs()
    parent = tmp_path / "parent"
    shutil.copytree(base_of(spec.id), parent)
    for rid in chain(spec.id, catalogue)[:-1]:
        write_files(parent, apply_blocks(parent, parse_patch(catalogue[rid].patch)))

    files = apply_blocks(parent, parse_patch(spec.patch))  # raises unless every SEARCH is unique
    for rel in files:
        assert any(fnmatch.fnmatchcase(rel, g) for g in direction["files"]), rel
    assert 0 < changed_lines(parent, files) <= direction["max_changed_lines"]

    write_files(parent, files)
    for source in parent.rglob("*.py"):
        tree = ast.parse(source.read_text(encoding="utf-8"), str(source))
        compile(tree, str(source), "exec")
        outside = {m for m in _imports(tree) if m not in sys.stdlib_module_names}
        assert outside <= {"harnessctl_runtime"}, outside


@pytest.mark.parametrize(
    "path", [p for p in REPAIR_FILES if load(p).requires], ids=lambda p: p.stem
)
def test_round_two_repair_needs_its_prerequisite(path):
    # A refinement must not be picked for the bare base: it is anchored on what it refines.
    spec = load(path)
    with pytest.raises(PatchError):
        apply_blocks(base_of(spec.id), parse_patch(spec.patch))


# --- what each repair does, on a real database with a scripted model ------------------------

COLUMNS = ["Game", "Opponent", "Attendance"]
ROWS = [(str(i), f"Team {i}", f"{10 + i},{100 + i}") for i in range(1, 41)]


class Script:
    """A model that answers from a list and records the messages it was shown."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.seen: list[list[dict]] = []

    def chat(self, messages, **params):
        self.seen.append(messages)
        return type("Reply", (), {"content": self.replies.pop(0)})()


@pytest.fixture
def task_dir(tmp_path, dbbench_runtime):
    task = tmp_path / "task"
    task.mkdir()
    conn = sqlite3.connect(task / "db.sqlite")
    conn.execute("CREATE TABLE `Game Schedule` (`Game` TEXT, `Opponent` TEXT, `Attendance` TEXT)")
    conn.executemany("INSERT INTO `Game Schedule` VALUES (?, ?, ?)", ROWS)
    conn.commit()
    conn.close()
    spec = {
        "task_id": "t1",
        "env": "dbbench",
        "instruction": "Which opponent drew most?",
        "context": "The table is Game Schedule.",
        "table_name": "Game Schedule",
        "database": "db.sqlite",
    }
    (task / "task.json").write_text(json.dumps(spec))
    return task


def episode(repair_id, tmp_path, task_dir, *replies, max_rounds=6):
    harness_dir = build(repair_id, tmp_path / repair_id)
    manifest = {"entry": "harness.py:DBBenchHarness", "settings": {"max_rounds": max_rounds}}
    harness = load_harness(harness_dir, task_dir, manifest)
    state = rt.State(
        task=json.loads((task_dir / "task.json").read_text()), max_rounds=harness.max_rounds
    )
    model = Script(*replies)
    log = EventLog(task_dir / "events.jsonl")
    run_episode(harness, state, model, log)
    log.close()
    return state, model


def sql(statement: str) -> str:
    return f"Action: Operation\n```sql\n{statement}\n```"


ANSWER = 'Action: Answer\nFinal Answer: ["Team 3"]'


def test_schema_on_error_names_the_table_and_every_column(tmp_path, task_dir):
    state, _ = episode(
        "recovery-schema-on-error",
        tmp_path,
        task_dir,
        sql("SELECT * FROM game_schedule_tbl"),
        ANSWER,
    )
    feedback = state.turns[0].feedback
    assert state.turns[0].kind == "tool_error" and "no such table" in feedback
    assert "`Game Schedule`" in feedback
    assert all(f"`{c}`" in feedback for c in COLUMNS)
    assert state.status == "answered"


def test_repeat_guard_never_applies_a_write_twice(tmp_path, task_dir):
    insert = "INSERT INTO `Game Schedule` VALUES ('41', 'Team 41', '1')"
    read = "SELECT COUNT(*) FROM `Game Schedule`"
    state, _ = episode(
        "recovery-repeat-guard",
        tmp_path,
        task_dir,
        sql(insert),
        sql(insert),
        sql(read),
        sql(read),
        ANSWER,
    )
    conn = sqlite3.connect(task_dir / "db.sqlite")
    assert conn.execute("SELECT COUNT(*) FROM `Game Schedule`").fetchone() == (41,)
    conn.close()
    assert "Not run" in state.turns[1].feedback
    assert state.turns[3].feedback.startswith("[(41,)]")
    assert "must commit now" in state.turns[3].feedback
    assert state.status == "answered"


def test_format_reprompt_restates_the_format_and_keeps_going(tmp_path, task_dir):
    state, model = episode(
        "format-reprompt-and-list-check",
        tmp_path,
        task_dir,
        "I should think about this first.",
        ANSWER,
    )
    feedback = state.turns[0].feedback
    assert state.turns[0].kind == "invalid_format"
    assert "```sql" in feedback and "Action: Operation" in feedback
    assert "Final Answer" in feedback
    assert model.seen[1][-2]["content"] == "I should think about this first."  # prose kept
    assert state.status == "answered" and state.answer == '["Team 3"]'


def test_answer_list_check_rejects_a_bare_answer(tmp_path, task_dir):
    state, _ = episode(
        "format-reprompt-and-list-check",
        tmp_path,
        task_dir,
        "Action: Answer\nFinal Answer: Team 3",
        ANSWER,
    )
    assert state.turns[0].kind == "invalid_action"
    assert "Final Answer" in state.turns[0].feedback and "[" in state.turns[0].feedback
    assert state.status == "answered" and state.answer == '["Team 3"]'


def test_context_shows_schema_and_example_rows(tmp_path, task_dir):
    _, model = episode("context-schema-and-rows", tmp_path, task_dir, ANSWER)
    task_message = model.seen[0][2]["content"]  # after AgentBench's prompt and the "Ok." turn
    assert task_message.startswith("Which opponent drew most?")
    first_user = task_message
    assert all(f"`{c}`" in first_user for c in COLUMNS) and "40 rows" in first_user
    assert all(cell in first_user for cell in ROWS[0])  # copied exactly as stored


def test_observations_are_short_and_count_rows(tmp_path, task_dir):
    state, _ = episode(
        "observation-compact-rows",
        tmp_path,
        task_dir,
        sql("SELECT * FROM `Game Schedule`"),
        sql("SELECT 1 WHERE 0"),
        ANSWER,
    )
    shaped = state.turns[0].feedback
    assert len(shaped) < 500 and shaped.startswith("40 rows; showing the first ")
    assert str(ROWS[0]) in shaped  # whole rows, one per line
    assert "no rows" in state.turns[1].feedback


def test_termination_warns_over_the_last_rounds(tmp_path, task_dir):
    explore = sql("SELECT COUNT(*) FROM `Game Schedule`")
    state, model = episode(
        "termination-last-rounds-warning", tmp_path, task_dir, *[explore] * 6, max_rounds=6
    )
    last_user = [call[-1]["content"] for call in model.seen]
    assert not any("rounds left" in text for text in last_user[:3])
    assert "3 rounds left" in last_user[3] and "must commit now" in last_user[3]
    assert "last round" in last_user[5] and "must answer now" in last_user[5]
    assert all(
        call[-1]["role"] == "user" and call[-2]["role"] == "assistant" for call in model.seen[1:]
    )  # the warning joins the feedback, no extra turn
    assert state.status == "step_limit"


def test_one_statement_per_block_and_tolerant_fences(tmp_path, task_dir):
    two = sql("SELECT COUNT(*) FROM `Game Schedule`; DELETE FROM `Game Schedule`")
    mysql = "Action: Operation\n```mysql\nSELECT COUNT(*) FROM `Game Schedule`; -- all\n```"
    state, _ = episode("format-one-statement-per-block", tmp_path, task_dir, two, mysql, ANSWER)
    assert state.turns[0].kind == "invalid_action"
    assert "2 statements" in state.turns[0].feedback and "```sql" in state.turns[0].feedback
    assert state.turns[1].kind == "tool" and state.turns[1].feedback == "[(40,)]"
    assert state.status == "answered"
