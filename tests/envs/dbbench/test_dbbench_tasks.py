"""Loading DBBench JSONL, preparing task directories, the oracle and the registry."""

from __future__ import annotations

import copy
import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from harnessctl.envs import (
    Environment,
    TaskSet,
    get_environment,
    known_environments,
    register_environment,
)
from harnessctl.envs.dbbench import DBBenchEnvironment, build_database
from harnessctl.envs.dbbench.sandbox.hxenv_dbbench import sqlcompat
from harnessctl.errors import ConfigError
from tests.helpers import ROOT

DEV = ROOT / "examples" / "dbbench" / "dev.jsonl"
RECORDS = [json.loads(line) for line in DEV.read_text(encoding="utf-8").splitlines()]
ENV = DBBenchEnvironment()


def test_dev_file_is_the_attributed_one():
    assert hashlib.md5(DEV.read_bytes()).hexdigest() == "78f943f463996ff59428d42f0a3c9015"


def test_load_real_dev_split():
    loaded = ENV.load_tasks(DEV)
    assert loaded.problems == []
    assert [t.id for t in loaded.tasks] == [f"dev-{i:03d}" for i in range(60)]
    first = loaded.tasks[0]
    assert (first.env, first.category, first.source) == ("dbbench", "other", f"{DEV}:1")
    assert first.record == RECORDS[0]
    canonical = json.dumps(RECORDS[0], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert first.content_hash == hashlib.sha256(canonical.encode()).hexdigest()
    assert loaded.tasks[20].category == "INSERT" and loaded.tasks[40].category == "UPDATE"


def _broken(path: Path) -> TaskSet:
    insert = next(r for r in RECORDS if r["type"][0] == "INSERT")
    no_columns = copy.deepcopy(RECORDS[0])
    del no_columns["table"]["table_info"]["columns"]
    bad_columns = copy.deepcopy(RECORDS[0])
    bad_columns["table"]["table_info"]["columns"] = "Name,Title"
    short_row = copy.deepcopy(RECORDS[1])
    short_row["table"]["table_info"]["rows"][2] = ["only one value"]
    no_label = copy.deepcopy(RECORDS[2])
    del no_label["label"]
    no_md5 = copy.deepcopy(insert)
    del no_md5["answer_md5"]
    bad_md5 = copy.deepcopy(insert)
    bad_md5["answer_md5"] = "deadbeef"
    lines = [
        json.dumps(RECORDS[3]),  # line 1: fine
        "",  # line 2: blank, skipped
        '{"description": "cut off',  # line 3
        json.dumps(no_columns),  # line 4
        json.dumps(bad_columns),  # line 5
        json.dumps(short_row),  # line 6
        json.dumps(no_label),  # line 7
        json.dumps(no_md5),  # line 8
        json.dumps(bad_md5),  # line 9
        "   ",  # line 10: blank
        json.dumps(RECORDS[4]),  # line 11: fine
        "[1, 2]",  # line 12
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ENV.load_tasks(path)


def test_broken_records_become_problems_naming_file_line_and_field(tmp_path):
    path = tmp_path / "mixed.jsonl"
    loaded = _broken(path)
    # ids count non-blank lines, broken ones included: fixing a record renumbers nothing
    assert [(t.id, t.source) for t in loaded.tasks] == [
        ("mixed-000", f"{path}:1"),
        ("mixed-008", f"{path}:11"),
    ]
    found = {p.line: p.message for p in loaded.problems}
    assert all(p.file == str(path) for p in loaded.problems)
    assert sorted(found) == [3, 4, 5, 6, 7, 8, 9, 12]
    assert found[3].startswith("record: invalid JSON")
    assert found[4] == "table.table_info.columns: missing"
    assert found[5] == "table.table_info.columns: expected array, got string"
    assert found[6] == "table.table_info.rows[2]: has 1 values, expected 7"
    assert found[7] == "label: missing"
    assert found[8] == "answer_md5: missing"
    assert found[9].startswith("answer_md5: expected")
    assert found[12] == "record: expected object, got array"
    assert str(loaded.problems[0]) == f"{path}:3: {found[3]}"


def test_unreadable_task_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError) as err:
        ENV.load_tasks(tmp_path / "absent.jsonl")
    assert err.value.where == str(tmp_path / "absent.jsonl")


def test_prepare_writes_only_public_material(tmp_path):
    for task in ENV.load_tasks(DEV).tasks:
        workdir = tmp_path / task.id
        ENV.prepare(task, workdir)
        assert sorted(p.name for p in workdir.iterdir()) == ["db.sqlite", "task.json"]
        public = json.loads((workdir / "task.json").read_text(encoding="utf-8"))
        assert public == {
            "task_id": task.id,
            "env": "dbbench",
            "instruction": task.record["description"],
            "context": task.record["add_description"],
            "table_name": task.record["table"]["table_name"],
            "database": "db.sqlite",
        }
        task_json = (workdir / "task.json").read_text(encoding="utf-8")
        db_bytes = (workdir / "db.sqlite").read_bytes()
        cells = {str(v) for row in task.record["table"]["table_info"]["rows"] for v in row}
        gold = [task.record.get("answer_md5", ""), *map(str, task.record["label"])]
        gold.append(task.record.get("sql", {}).get("query", ""))
        assert '"type"' not in task_json and "label" not in task_json
        for secret in filter(None, gold):
            assert secret not in task_json, (task.id, secret)
            if not any(secret in cell for cell in cells):  # labels are often table cells
                assert secret.encode() not in db_bytes, (task.id, secret)


def test_prepared_table_matches_the_record(tmp_path):
    record = RECORDS[31]  # horse_races: integer cells in the JSON
    build_database(record, tmp_path / "db.sqlite")
    conn = sqlite3.connect(tmp_path / "db.sqlite")
    rows = conn.execute('SELECT * FROM "horse_races"').fetchall()
    assert rows == [tuple(str(v) for v in row) for row in record["table"]["table_info"]["rows"]]
    assert any(isinstance(v, int) for row in record["table"]["table_info"]["rows"] for v in row)
    assert {r[1] for r in conn.execute('PRAGMA table_info("horse_races")')} == {
        c["name"] for c in record["table"]["table_info"]["columns"]
    }
    conn.close()


def test_cells_are_stored_as_mysql_stores_them_and_compare_case_insensitively(tmp_path):
    record = copy.deepcopy(RECORDS[0])
    record["table"]["table_info"]["rows"] = [["John Smith", 7, None, True, 2.5]]
    build_database(record, tmp_path / "db.sqlite")
    conn = sqlcompat.connect(str(tmp_path / "db.sqlite"))
    table = sqlcompat.quote_ident(record["table"]["table_name"])
    ok, rows = sqlcompat.execute(conn, f"SELECT * FROM {table} WHERE Representative = 'john SMITH'")
    assert (ok, rows) == (True, [("John Smith", "7", None, "1", "2.5")])
    conn.close()


def test_an_update_naming_the_unaccented_value_changes_the_row(tmp_path):
    """The table is built under MySQL 8's default collation (utf8mb4_0900_ai_ci): an UPDATE
    whose WHERE names 'Jose' changes the row holding 'José', as it does on MySQL, and the
    checksum sees the change."""
    record = copy.deepcopy(RECORDS[0])
    record["table"]["table_info"]["rows"] = [
        ["José Pérez", 7, "x", "y", "z"],
        ["Ann", 1, "", "", ""],
    ]
    build_database(record, tmp_path / "db.sqlite")
    conn = sqlcompat.connect(str(tmp_path / "db.sqlite"))
    table = sqlcompat.quote_ident(record["table"]["table_name"])
    column = sqlcompat.quote_ident(record["table"]["table_info"]["columns"][1]["name"])
    before = sqlcompat.table_hash(conn, record["table"]["table_name"])
    sql = f"UPDATE {table} SET {column} = '8' WHERE Representative = 'jose perez'"
    assert sqlcompat.execute(conn, sql) == (True, [])
    assert conn.execute(f"SELECT {column} FROM {table} WHERE rowid = 1").fetchone() == ("8",)
    assert sqlcompat.table_hash(conn, record["table"]["table_name"]) != before
    schema = conn.execute("SELECT sql FROM sqlite_master").fetchone()[0]
    assert schema.count(f"COLLATE {sqlcompat.COLLATION}") == 5
    conn.close()


def test_prepare_replaces_a_previous_database(tmp_path):
    task = ENV.load_tasks(DEV).tasks[45]
    ENV.prepare(task, tmp_path)
    conn = sqlcompat.connect(str(tmp_path / "db.sqlite"))
    sqlcompat.execute(conn, task.record["label"][0])
    conn.close()
    assert ENV.score(task, tmp_path, None).success
    ENV.prepare(task, tmp_path)
    assert not ENV.score(task, tmp_path, None).success


def test_oracle_describes_the_task_for_offline_policies():
    tasks = ENV.load_tasks(DEV).tasks
    mutation = ENV.oracle(tasks[21])
    assert mutation["kind"] == "mutation" and mutation["type"] == "INSERT"
    assert mutation["reference_sql"] == RECORDS[21]["label"][0]
    assert mutation["query_sql"] is None
    assert mutation["columns"][0] == "Position"
    assert len(mutation["rows"]) == len(RECORDS[21]["table"]["table_info"]["rows"])
    query = ENV.oracle(tasks[4])
    assert query["kind"] == "query" and query["label"] == ["1.0"]
    assert query["reference_sql"] is None
    assert query["query_sql"] == RECORDS[4]["sql"]["query"]
    assert set(query) == {
        "task_id", "type", "kind", "description", "table_name", "columns", "rows", "label",
        "reference_sql", "query_sql",
    }  # fmt: skip


def test_registry_resolves_kinds_and_names_the_known_ones():
    env = get_environment("dbbench")
    assert isinstance(env, DBBenchEnvironment) and isinstance(env, Environment)
    with pytest.raises(ConfigError) as err:
        get_environment("nosuchkind")
    assert "nosuchkind" in err.value.message and "dbbench" in err.value.message
    assert get_environment("harnessctl.envs.dbbench:DBBenchEnvironment").kind == "dbbench"

    class Custom(DBBenchEnvironment):
        kind = "custom-sql"

    register_environment("custom-sql", Custom)
    assert "custom-sql" in known_environments()
    assert get_environment("custom-sql").kind == "custom-sql"
