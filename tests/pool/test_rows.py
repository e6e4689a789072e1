"""Dataset rows (harnessctl.pool.rows, examples/trainers' row builders) written as trainers
write them and read back as their loaders read them: pandas/pyarrow parquet, then
``datasets`` (verl's ``RLHFDataset`` loads with ``load_dataset("parquet")``; Agent Lightning
wraps a list with ``Dataset.from_list``), for every shipped environment's suite."""

from __future__ import annotations

import json
import sys

import pytest

from harnessctl.envs import Task
from harnessctl.pool.rows import TASK_KEY, decode_task, encode_task, task_columns
from harnessctl.suite import load_suite
from tests.helpers import ROOT
from tests.helpers.ci import unavailable

try:  # the trainers' own loaders (the `trainers` extra; .ci/run installs it)
    import pandas as pd
    from datasets import Dataset, load_dataset
except ImportError as exc:
    unavailable("the dataset-row tests", f"pip install -e '.[trainers]' ({exc})", module=True)

sys.path.insert(0, str(ROOT / "examples" / "trainers"))
from agentlightning_agent import rows as agentlightning_rows  # noqa: E402
from verl_agent_loop import to_verl_rows  # noqa: E402

SUITES = ["dbbench", "alfworld", "os_interaction", "tau2", "tau2/solo", "toyenv"]


def dev_tasks(suite: str) -> list[Task]:
    loaded = load_suite(ROOT / "examples" / suite / "suite.yaml").tasks("dev")
    assert loaded.tasks and not loaded.problems
    return loaded.tasks


def same_task(decoded, task: Task) -> None:
    assert isinstance(decoded, Task) and decoded == task  # id, env, category, hash, source
    assert decoded.record == task.record


@pytest.mark.parametrize("suite", SUITES)
def test_verl_rows_of_every_suite_survive_parquet_and_datasets(suite, tmp_path):
    tasks = dev_tasks(suite)
    rows = to_verl_rows(tasks)
    path = tmp_path / "train.parquet"
    pd.DataFrame(rows).to_parquet(path)  # as the example says; pyarrow writes it
    loaded = load_dataset("parquet", data_files=str(path), cache_dir=str(tmp_path / "cache"))
    for again in (loaded["train"], Dataset.from_parquet(str(path), cache_dir=str(tmp_path))):
        assert len(again) == len(tasks)
        assert again.features["extra_info"][TASK_KEY].dtype == "string"
        assert again.features["extra_info"]["index"].dtype == "int64"
        assert [r for r in again] == rows  # every column round-trips unchanged
        for row, task in zip(again, tasks, strict=True):
            same_task(decode_task(row["extra_info"][TASK_KEY]), task)
            assert row["data_source"] == task.env
            assert row["extra_info"]["task_id"] == task.id
            assert isinstance(row["prompt"][0]["content"], str)


@pytest.mark.parametrize("suite", SUITES)
def test_task_columns_of_every_suite_fit_one_arrow_table(suite, tmp_path):
    """The generic columns (Agent Lightning's and SkyRL's rows) in ``Dataset.from_list``,
    the call Agent Lightning's dataset wrapper makes, and through parquet."""
    tasks = dev_tasks(suite)
    rows = [task_columns(task, i) for i, task in enumerate(tasks)]
    data = Dataset.from_list(rows)
    data.to_parquet(str(tmp_path / "rows.parquet"))
    again = Dataset.from_parquet(str(tmp_path / "rows.parquet"), cache_dir=str(tmp_path))
    assert again.to_list() == rows
    for row, task in zip(again, tasks, strict=True):
        same_task(decode_task(row[TASK_KEY]), task)
        assert (row["task_id"], row["env"], row["category"]) == (task.id, task.env, task.category)


def test_raw_dbbench_records_with_mixed_type_tables_are_written_and_read_back(tmp_path):
    """The issue's failure: DBBench dev's table rows mix strings and numbers in one column,
    which pyarrow cannot type as a struct column; as JSON text every record goes through."""
    lines = (ROOT / "examples" / "dbbench" / "dev.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    with pytest.raises(ValueError, match="data_source"):
        to_verl_rows(records)
    rows = to_verl_rows(records, data_source="dbbench")
    pd.DataFrame(rows).to_parquet(tmp_path / "dev.parquet")
    loaded = load_dataset("parquet", data_files=str(tmp_path / "dev.parquet"))["train"]
    decoded = [decode_task(r["extra_info"][TASK_KEY]) for r in loaded]
    assert decoded == records
    assert loaded[0]["prompt"][0]["content"] == records[0]["description"]

    tasks_file = tmp_path / "dev.jsonl"
    tasks_file.write_text("\n".join(lines) + "\n")
    rows = agentlightning_rows(str(tasks_file))
    data = Dataset.from_list(rows)  # what Agent Lightning's dataset wrapper does
    assert [decode_task(r[TASK_KEY]) for r in data] == records
    assert data.features["index"].dtype == "int64" and data[3]["index"] == 3


def test_decoding_takes_rows_made_in_memory_and_refuses_what_is_no_task():
    record = {"description": "q", "label": [1, "a"]}
    assert decode_task(record) == record  # a dict row (made in memory) as it is
    assert decode_task(json.dumps(record)) == record  # a bare record's JSON
    assert decode_task(encode_task(record).encode()) == record
    newer = json.dumps({"version": 2, "record": record})
    with pytest.raises(ValueError, match="version 2"):
        decode_task(newer)
    for bad, message in (("[1]", "JSON object"), ("{", "not JSON")):
        with pytest.raises(ValueError, match=message):
            decode_task(bad)
    with pytest.raises(TypeError):
        decode_task(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        encode_task(["not", "a", "record"])  # type: ignore[arg-type]
