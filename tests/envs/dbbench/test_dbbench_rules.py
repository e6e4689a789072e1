"""The versioned answer comparison of DBBench query tasks (``envs/dbbench/rules.py``), rule by
rule, and how a run chooses and names its rules.

``agentbench-fc`` follows AgentBench's current ``result_processor.py``; ``v0.2`` its v0.2
metric. Each rule below is one place where the comparison before the rules were versioned
(v0.2's set rule made tolerant) gave the other verdict.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harnessctl.envs import get_environment
from harnessctl.envs.dbbench import DBBenchEnvironment, answers_match, score_record
from harnessctl.envs.dbbench.rules import DEFAULT_RULES, RULES, clean_value, get_rules
from harnessctl.errors import ConfigError
from harnessctl.suite import load_suite
from tests.helpers import ROOT

SUITE = ROOT / "examples" / "dbbench"
QUERIES = [
    t
    for t in get_environment("dbbench").load_tasks(SUITE / "dev.jsonl").tasks
    if t.category not in ("INSERT", "UPDATE")
]


def query(label: list) -> dict:
    """The parts of a query record the scorer reads."""
    return {"type": ["counting"], "label": label}


def fc(answer: list, label: list) -> bool:
    return answers_match(answer, label, "agentbench-fc")


# --- agentbench-fc: the official function-calling task's comparison ------------------------


def test_the_default_rules_are_the_official_current_ones():
    assert DEFAULT_RULES == "agentbench-fc" and set(RULES) == {"agentbench-fc", "v0.2"}
    assert DBBenchEnvironment().rules == "agentbench-fc"


def test_lists_of_numbers_match_one_to_one():
    assert not fc(["2", "2"], ["2"])  # a repeated number is not the single label
    assert not fc(["2"], ["2", "2"])
    assert fc(["2", "2"], ["2", "2"])
    assert fc(["1", "2.004"], ["2", "1"])  # any order, within 0.01 each
    assert not fc(["1", "1"], ["1", "2"])  # each label value is matched once
    assert not score_record(query(["2"]), None, '["2", "2"]').success  # through the scorer


def test_every_comma_is_removed_before_comparing():
    assert fc(["1985, 1993"], ["1985 1993"])
    assert fc(["Smith, John"], ["Smith John"])
    assert fc(["1,429"], ["1429"])
    assert not fc(["1985, 1993"], ["19851993"])  # the space stays
    assert clean_value("[1, 2]") == "[1, 2]"  # a bracketed value keeps its commas


def test_a_trailing_percent_ends_the_normalisation():
    assert fc(["99.8%"], ["99.8"])
    assert not fc(["1,000%"], ["1000"])  # the comma stays: "1,000" is not a number
    assert not fc(["1,000%"], ["1,000"])  # the label loses its comma, the answer keeps it
    assert not fc(["null%"], ["0"])  # no null-to-0 mapping after the %
    assert clean_value(" 12.5 % ") == "12.5"


def test_nested_one_element_lists_are_not_unwrapped():
    label = query(["x"])
    assert not score_record(label, None, '[["x"]]').success
    assert clean_value(["x"]) == "['x']"
    assert score_record(label, None, "[('x',)]").success  # one-element tuples are
    assert score_record(query(["2011.0"]), None, "[(2011,)]").success


def test_mixed_lists_compare_as_exact_sets():
    assert not fc(["1.0", "Paris"], ["1", "Paris"])  # no float tolerance outside all-numbers
    assert fc(["Paris", "1", "Paris"], ["1", "Paris"])  # order and repetition do not matter
    assert not fc(["paris"], ["Paris"])


def test_null_likes_become_zero_and_single_numbers_have_a_tolerance():
    for value in ("None", "null", "NaN", "undefined", "inf", "-Infinity", "", None):
        assert fc([value], ["0"]), value
    assert fc(["2011"], ["2011.0"]) and fc(["2011.004"], ["2011"])
    assert not fc(["2011.5"], ["2011"])
    assert fc([], []) and not fc([], ["0"])


# --- v0.2: AgentBench v0.2's metric, on the raw values ---------------------------------------


def v02(answer: list, label: list) -> bool:
    return answers_match(answer, label, "v0.2")


def test_v02_compares_raw_values():
    assert v02(["12"], [12]) and v02([" 12"], ["12.0"])  # one value each: as floats
    assert not v02(["Paris "], ["Paris"])  # no cleaning at all
    assert not v02(["1,429"], ["1429"]) and not v02(["99.8%"], ["99.8"])
    assert v02(["2", "2"], ["2"])  # sets: repetition does not matter
    assert not v02(["1", "2"], [1, 2])  # ... and "1" is not 1
    assert not v02([["x"], "y"], ["x", "y"])  # unhashable: wrong, as v0.2 counted it
    assert not v02([("x",)], ["x"])  # nothing is unwrapped


def test_both_rules_accept_every_dev_label_as_its_own_answer():
    for task in QUERIES:
        for rules in RULES:
            label = task.record["label"]
            assert score_record(task.record, None, json.dumps(label), rules).success, task.id


# --- choosing and naming the rules ----------------------------------------------------------


def test_the_score_and_the_version_name_the_rules():
    task = QUERIES[0]
    answer = json.dumps(task.record["label"])
    for name in RULES:
        env = DBBenchEnvironment(rules=name)
        assert env.score(task, Path("."), answer).detail["rules"] == name
        assert env.version == f"2+{name}"
    assert DBBenchEnvironment().version != DBBenchEnvironment(rules="v0.2").version
    with pytest.raises(ValueError, match="known: agentbench-fc, v0.2"):
        DBBenchEnvironment(rules="v0.3")
    assert get_rules("v0.2").source.startswith("AgentBench v0.2")


def _suite(tmp_path: Path, options: str) -> Path:
    folder = tmp_path / "suite"
    shutil.copytree(SUITE, folder)
    text = (folder / "suite.yaml").read_text(encoding="utf-8")
    (folder / "suite.yaml").write_text(text + options, encoding="utf-8")
    return folder


def test_a_suite_chooses_the_rules_with_env_options(tmp_path):
    default = load_suite(SUITE)
    chosen = load_suite(_suite(tmp_path / "a", "env_options: {rules: v0.2}\n"))
    assert default.environment.rules == "agentbench-fc"  # type: ignore[attr-defined]
    assert chosen.environment.rules == "v0.2"  # type: ignore[attr-defined]
    assert chosen.id != default.id  # the same tasks scored otherwise are another suite
    with pytest.raises(ConfigError) as err:
        load_suite(_suite(tmp_path / "b", "env_options: {rules: nope}\n"))
    assert err.value.where.endswith("env_options") and "unknown DBBench rules" in err.value.message
    with pytest.raises(ConfigError) as err:
        load_suite(_suite(tmp_path / "c", "env_options: {colour: red}\n"))
    assert err.value.where.endswith("env_options") and "colour" in err.value.message


def test_a_run_under_v02_says_so_in_its_trajectories(tmp_path, workspace):
    from harnessctl.harness import load_harness
    from harnessctl.policy import Policy
    from harnessctl.run.evaluate import EvalRequest, evaluate
    from harnessctl.workspace import load_workspace

    store = load_workspace(workspace).open_store()
    suite = load_suite(_suite(tmp_path, "env_options: {rules: v0.2}\n"))
    ids = ["dev-000", "dev-004", "dev-021"]  # two queries and an INSERT
    request = EvalRequest(
        load_harness(workspace / "harnesses" / "dbbench-base"),
        suite,
        "dev",
        Policy("replay/dbbench"),
        rollouts=1,
        task_ids=ids,
    )
    result = evaluate(request, store)
    assert {r.outcome for r in result.rows} == {"success"}
    for row in result.rows:
        score = store.trajectory(row).score
        assert score is not None and score.detail["rules"] == "v0.2"
