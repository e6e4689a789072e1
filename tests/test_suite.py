"""suite.yaml: loading, splits, and errors that name the file and the field."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from harnessctl.errors import ConfigError
from harnessctl.suite import PartitionSpec, load_suite, partition
from tests.helpers import ROOT

EXAMPLE = ROOT / "examples" / "dbbench"


@pytest.fixture
def suite_dir(tmp_path) -> Path:
    target = tmp_path / "suite"
    shutil.copytree(EXAMPLE, target)
    return target


def write(suite_dir: Path, text: str) -> Path:
    path = suite_dir / "suite.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def ids(suite, split):
    return [t.id for t in suite.tasks(split).tasks]


def test_example_suite_loads_from_dir_or_file():
    suite = load_suite(EXAMPLE)
    assert (suite.name, suite.root, suite.image, suite.timeout_s) == (
        "dbbench-dev",
        EXAMPLE,
        "harnessctl-runtime:latest",
        60,
    )
    assert suite.environment.kind == "dbbench"
    assert suite.split_names == ["dev", "train", "test"]
    assert load_suite(EXAMPLE / "suite.yaml").id == suite.id
    assert suite.id.startswith("dbbench-dev@") and len(suite.id.split("@")[1]) == 12


def test_splits_are_stratified_disjoint_and_cover_dev():
    suite = load_suite(EXAMPLE)
    dev, train, test = (set(ids(suite, s)) for s in ("dev", "train", "test"))
    assert len(dev) == 60 and not train & test and train | test == dev
    tasks = suite.tasks("dev").tasks
    per_category = Counter(t.category for t in tasks)
    in_train = Counter(t.category for t in tasks if t.id in train)
    for category, size in per_category.items():
        assert in_train[category] == int(0.67 * size + 0.5), category
    assert (len(train), len(test)) == (40, 20)
    assert ids(suite, "test") == sorted(test)  # file order is kept


def test_same_seed_same_ids_other_seed_other_ids(suite_dir):
    first = ids(load_suite(EXAMPLE), "train")
    assert ids(load_suite(EXAMPLE), "train") == first
    text = (suite_dir / "suite.yaml").read_text(encoding="utf-8").replace("seed: 13", "seed: 14")
    reseeded = ids(load_suite(write(suite_dir, text)), "train")
    assert reseeded != first and len(reseeded) == len(first)


def test_unstratified_partition_ignores_categories():
    tasks = load_suite(EXAMPLE).tasks("dev").tasks
    chosen = partition(tasks, PartitionSpec(seed=3, fraction=0.5, stratify="none"))
    assert len(chosen) == 30
    # the order of the task list does not matter, only seed and ids
    again = partition(list(reversed(tasks)), PartitionSpec(seed=3, fraction=0.5, stratify="none"))
    assert chosen == again
    stratified = partition(tasks, PartitionSpec(seed=3, fraction=0.5))
    assert Counter(t.category for t in tasks if t.id in stratified)["INSERT"] == 10


def test_default_splits_and_suite_id_tracks_task_contents(suite_dir):
    path = write(suite_dir, "name: mini\nenv: dbbench\ntasks: [dev.jsonl]\n")
    suite = load_suite(path)
    assert suite.split_names == ["dev", "train", "test"]
    assert ids(suite, "train") == ids(load_suite(EXAMPLE), "train")
    before = suite.id
    with (suite_dir / "dev.jsonl").open("a", encoding="utf-8") as f:
        f.write("\n")
    assert load_suite(path).id != before


def test_unknown_split_names_the_available_ones():
    with pytest.raises(ConfigError) as err:
        load_suite(EXAMPLE).tasks("validation")
    assert err.value.where == f"{EXAMPLE / 'suite.yaml'}: splits"
    assert "validation" in err.value.message and "dev, train, test" in err.value.message


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ("name: x\nenv: dbbench\ntasks: [dev.jsonl]\ntimeout: 5\n", "timeout", "Extra"),
        ("name: x\nenv: dbbench\ntasks: [dev.jsonl]\ntimeout_s: -1\n", "timeout_s", "greater"),
        ("name: x\nenv: dbbench\n", "tasks", "required"),
        ("name: x\nenv: dbbench\ntasks: [dev.jsonl, 3]\n", "tasks[1]", "string"),
        ("name: x\nenv: dbbench\ntasks: [nope.jsonl]\n", "tasks[0]", "no such task file"),
        ("name: x\nenv: nosql\ntasks: [dev.jsonl]\n", "env", "dbbench"),
        ("name: 'bad name'\nenv: dbbench\ntasks: [dev.jsonl]\n", "name", "pattern"),
        (
            "name: x\nenv: dbbench\ntasks: [dev.jsonl]\n"
            "splits: {train: {partition: {seed: 1, fraction: 1.5}}}\n",
            "splits.train.partition.fraction",
            "less than 1",
        ),
        (
            "name: x\nenv: dbbench\ntasks: [dev.jsonl]\n"
            "splits: {train: {partition: {seed: 1}, complement_of: dev}}\n",
            "splits.train",
            "not both",
        ),
        (
            "name: x\nenv: dbbench\ntasks: [dev.jsonl]\nsplits: {test: {complement_of: train}}\n",
            "splits.test.complement_of",
            "unknown split",
        ),
        (
            "name: x\nenv: dbbench\ntasks: [dev.jsonl]\n"
            "splits: {a: {}, b: {complement_of: a}, c: {complement_of: b}}\n",
            "splits.c.complement_of",
            "not a complement",
        ),
    ],
)
def test_errors_name_file_and_field(suite_dir, body, field, words):
    path = write(suite_dir, body)
    with pytest.raises(ConfigError) as err:
        load_suite(suite_dir)
    assert err.value.where == f"{path}: {field}"
    assert words in err.value.message


def test_yaml_syntax_error_names_the_line(suite_dir):
    path = write(suite_dir, "name: x\nenv: dbbench\ntasks: [dev.jsonl\nimage: y\n")
    with pytest.raises(ConfigError) as err:
        load_suite(path)
    assert err.value.where.startswith(f"{path}:")
    assert int(err.value.where.rsplit(":", 1)[1]) in (3, 4)
    write(suite_dir, "- just\n- a list\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_suite(path)
    with pytest.raises(ConfigError, match="no such suite file"):
        load_suite(suite_dir / "elsewhere")


def test_duplicate_task_ids_across_files_are_refused(suite_dir):
    (suite_dir / "other").mkdir()
    shutil.copy(suite_dir / "dev.jsonl", suite_dir / "other" / "dev.jsonl")
    path = write(suite_dir, "name: x\nenv: dbbench\ntasks: [dev.jsonl, other/dev.jsonl]\n")
    with pytest.raises(ConfigError) as err:
        load_suite(path).tasks("dev")
    assert err.value.where == f"{path}: tasks" and "dev-000" in err.value.message


def test_problems_are_reported_with_every_split(suite_dir):
    with (suite_dir / "dev.jsonl").open("a", encoding="utf-8") as f:
        f.write('{"broken": true}\n')
    suite = load_suite(suite_dir)
    for split in ("dev", "train", "test"):
        problems = suite.tasks(split).problems
        assert [(p.line, p.message) for p in problems] == [(61, "description: missing")]
    assert len(ids(suite, "dev")) == 60
