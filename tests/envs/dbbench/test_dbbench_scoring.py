"""Host-side DBBench scoring on the real dev split, through the environment's own path."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harnessctl.envs import Task, get_environment
from harnessctl.envs.dbbench import answers_match, normalise, parse_answer, score_record
from harnessctl.envs.dbbench.sandbox.hxenv_dbbench import sqlcompat
from tests.helpers import ROOT

DEV = ROOT / "examples" / "dbbench" / "dev.jsonl"
ENV = get_environment("dbbench")
TASKS = ENV.load_tasks(DEV).tasks
MUTATIONS = [t for t in TASKS if t.category in ("INSERT", "UPDATE")]
QUERIES = [t for t in TASKS if t.category not in ("INSERT", "UPDATE")]


def run_sql(workdir: Path, sql: str) -> None:
    conn = sqlcompat.connect(str(workdir / "db.sqlite"))
    ok, payload = sqlcompat.execute(conn, sql)
    conn.close()
    assert ok, payload


def test_dev_split_loads_completely():
    assert (len(MUTATIONS), len(QUERIES)) == (40, 20)


@pytest.mark.slow
@pytest.mark.parametrize("task", MUTATIONS, ids=[t.id for t in MUTATIONS])
def test_reference_sql_reproduces_answer_md5(task: Task, tmp_path):
    ENV.prepare(task, tmp_path)
    untouched = ENV.score(task, tmp_path, None)
    assert not untouched.success  # the task is not solved before the change
    run_sql(tmp_path, task.record["label"][0])
    score = ENV.score(task, tmp_path, "anything at all")
    assert score.success, score.detail
    assert f"('{score.detail['actual_hash']}',)" in task.record["answer_md5"]
    assert not score.answer_unparsable


@pytest.mark.parametrize("task", MUTATIONS[::8], ids=[t.id for t in MUTATIONS[::8]])
def test_perturbed_tables_fail(task: Task, tmp_path):
    table = sqlcompat.quote_ident(task.record["table"]["table_name"])
    first = sqlcompat.quote_ident(task.record["table"]["table_info"]["columns"][0]["name"])
    ENV.prepare(task, tmp_path)
    run_sql(tmp_path, task.record["label"][0])
    run_sql(tmp_path, f"INSERT INTO {table} ({first}) VALUES ('an extra row')")
    assert not ENV.score(task, tmp_path, None).success
    ENV.prepare(task, tmp_path)  # fresh table
    run_sql(tmp_path, task.record["label"][0])
    run_sql(tmp_path, f"UPDATE {table} SET {first} = {first} || '!' WHERE rowid = 1")
    assert not ENV.score(task, tmp_path, None).success


def test_mutation_database_is_checked_before_it_is_opened(tmp_path):
    task = MUTATIONS[0]
    ENV.prepare(task, tmp_path)
    run_sql(tmp_path, task.record["label"][0])
    solved = tmp_path / "solved.sqlite"
    (tmp_path / "db.sqlite").rename(solved)
    missing = ENV.score(task, tmp_path, None)
    assert not missing.success and "missing" in missing.detail["error"]
    os.symlink(solved, tmp_path / "db.sqlite")
    linked = ENV.score(task, tmp_path, None)
    assert not linked.success and "symlink" in linked.detail["error"]
    (tmp_path / "db.sqlite").unlink()
    (tmp_path / "db.sqlite").mkdir()
    directory = ENV.score(task, tmp_path, None)
    assert not directory.success and "regular file" in directory.detail["error"]
    # the scorer reads without writing: scoring twice leaves the file byte-identical
    (tmp_path / "db.sqlite").rmdir()
    solved.rename(tmp_path / "db.sqlite")
    before = (tmp_path / "db.sqlite").read_bytes()
    assert ENV.score(task, tmp_path, None).success
    assert (tmp_path / "db.sqlite").read_bytes() == before


def test_replaced_or_dropped_table_fails(tmp_path):
    task = MUTATIONS[1]
    table = sqlcompat.quote_ident(task.record["table"]["table_name"])
    ENV.prepare(task, tmp_path)
    run_sql(tmp_path, f"DROP TABLE {table}")
    dropped = ENV.score(task, tmp_path, None)
    assert not dropped.success and "no such table" in dropped.detail["error"]
    run_sql(tmp_path, f"CREATE VIEW {table} AS SELECT 1")
    assert not ENV.score(task, tmp_path, None).success
    garbage = tmp_path / "db.sqlite"
    garbage.unlink()
    garbage.write_bytes(b"not a database at all" * 100)
    assert not ENV.score(task, tmp_path, None).success


@pytest.mark.parametrize("task", QUERIES, ids=[t.id for t in QUERIES])
def test_query_labels_score_success(task: Task, tmp_path):
    label = task.record["label"]
    assert ENV.score(task, tmp_path, json.dumps(label)).success
    assert ENV.score(task, tmp_path, repr(label)).success  # Python literal form
    assert ENV.score(task, tmp_path, json.dumps(list(reversed(label)))).success


@pytest.mark.parametrize("task", QUERIES, ids=[t.id for t in QUERIES])
def test_perturbed_answers_fail(task: Task, tmp_path):
    label = task.record["label"]
    wrong = ENV.score(task, tmp_path, json.dumps(["certainly not " + str(label[0])]))
    assert not wrong.success and not wrong.answer_unparsable
    extra = ENV.score(task, tmp_path, json.dumps([*label, "an extra value"]))
    assert not extra.success
    bare = ENV.score(task, tmp_path, str(label[0]) + " is the answer")
    assert not bare.success and bare.answer_unparsable
    assert ENV.score(task, tmp_path, None).answer_unparsable


def test_answers_from_sqlite_rows_match_mysql_era_labels():
    by_label = {json.dumps(t.record["label"]): t.record for t in QUERIES}
    sum_2011 = by_label['["2011.0"]']  # SUM gives 2011 in SQLite, 2011.0 in MySQL
    assert score_record(sum_2011, None, "[2011]").success
    assert score_record(sum_2011, None, "[(2011,)]").success  # pasted from an observation
    assert score_record(sum_2011, None, "[2011.004]").success
    assert not score_record(sum_2011, None, "[2011.5]").success
    none_label = by_label['["none"]']
    assert score_record(none_label, None, "[null]").success
    assert score_record(none_label, None, "['None']").success
    assert not score_record(none_label, None, "['7']").success


@pytest.mark.parametrize(
    ("answer", "label", "expected"),
    [
        (["1,429"], ["1429"], True),
        (["99.8%"], ["99.8"], True),
        (['"Giza"'], ["Giza"], True),
        ([" Giza "], ["Giza"], True),
        (["giza"], ["Giza"], False),  # strings stay case-sensitive, as in both evaluators
        (["1985, 1993"], ["19851993"], False),  # commas go, the space stays
        ([""], ["none"], True),
        (["a", "b"], ["b", "a"], True),
        (["a", "a", "b"], ["a", "b"], True),  # v0.2 set equality
        (["a"], ["a", "b"], False),
        ([1, 2], ["1.0", "2.001"], True),
        ([], [], True),
        ([], ["none"], False),
    ],
)
def test_comparison_rule(answer, label, expected):
    assert answers_match(answer, label) is expected


def test_parse_answer():
    assert parse_answer('["a", 1]') == ["a", 1]
    assert parse_answer("['a', None]") == ["a", None]
    assert parse_answer("Final Answer: ['x']") == ["x"]
    assert parse_answer("[('a',), ('b',)]") == [("a",), ("b",)]  # the rules unwrap, or not
    assert parse_answer("('a', 'b')") is None
    assert parse_answer("a, b") is None
    assert parse_answer("[" * 10_000) is None
    assert parse_answer("[" + "1," * 60_000 + "]") is None  # over the size bound
    assert normalise(None) == "0" and normalise("NaN") == "0" and normalise("12,345.5") == "12345.5"


def test_unparsable_detail_is_json_serialisable(tmp_path):
    task = QUERIES[0]
    score = ENV.score(task, tmp_path, "[b'raw', {1, 2}]")
    assert not score.success
    detail = json.loads(json.dumps(score.detail))
    assert detail["parsed"] == ["b'raw'", "{1, 2}"] and detail["rules"] == "agentbench-fc"
