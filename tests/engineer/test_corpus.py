"""The engineer's corpus (issue #52, 3): edit records split by environment so one whole
environment is never seen in training, prompts shortened to a number of failure digests
without touching the reward, and the corpus builder (evolve every base, export, copy the
suites) on DBBench's world, whose evolve it resumes rather than re-runs."""

from __future__ import annotations

import json

import pytest

from harnessctl.engineer.corpus import build_corpus
from harnessctl.evolve.dataset import GRPORecord, export_edits
from harnessctl.evolve.guards import shown_pairs
from harnessctl.suite import load_suite
from harnessctl.workspace import load_workspace
from tests.helpers.engineer import records

pytestmark = pytest.mark.slow  # DBBench's world: the slow tier


@pytest.fixture(scope="module")
def edits(engineer_data):
    ws = load_workspace(engineer_data.ws)
    store = ws.open_store()
    yield ws, store, store.edits()
    store.close()


def grpo(out, side):
    path = out / "grpo" / f"{side}.jsonl"
    return [GRPORecord.model_validate(r) for r in records(path)] if path.is_file() else []


def test_the_held_out_environment_is_all_test_and_nothing_else_is(edits, tmp_path):
    ws, store, rows = edits
    held = export_edits(rows, tmp_path / "a", store=store, workspace=ws, holdout_env="dbbench")
    tested = grpo(tmp_path / "a", "test")
    assert tested and not grpo(tmp_path / "a", "train")
    assert {r.metadata.env for r in tested} == {"dbbench"}
    assert all(r.metadata.dataset_split == "test" and r.reward.dropped_pairs == 0 for r in tested)
    assert held.holdout_env == "dbbench" and held.environments == {"dbbench": len(tested)}
    why = "every edit record is of the held-out environment 'dbbench'"
    assert held.not_written["grpo/train"] == why
    other = export_edits(rows, tmp_path / "b", store=store, workspace=ws, holdout_env="tau2")
    assert len(grpo(tmp_path / "b", "train")) == len(tested) and not grpo(tmp_path / "b", "test")
    assert other.not_written["grpo/test"] == "no edit record of the held-out environment 'tau2'"
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["version"] == 6 and manifest["holdout_env"] == "tau2"


def test_max_digests_shortens_the_prompt_and_keeps_the_reward(edits, tmp_path):
    ws, store, rows = edits
    export_edits(rows, tmp_path / "all", test_fraction=0, store=store, workspace=ws)
    export_edits(rows, tmp_path / "one", test_fraction=0, store=store, workspace=ws, max_digests=1)
    full, short = grpo(tmp_path / "all", "train"), grpo(tmp_path / "one", "train")
    assert [r.reward for r in full] == [r.reward for r in short]
    assert max(len(shown_pairs(r.prompt)) for r in full) > 1
    assert all(len(shown_pairs(r.prompt)) == 1 for r in short)
    assert all(r.reference_reward == s.reference_reward for r, s in zip(full, short, strict=True))


def test_the_corpus_builder_evolves_exports_and_copies_the_suites(dbbench_world, tmp_path):
    ws = dbbench_world.copy(tmp_path / "ws")
    out = tmp_path / "corpus"
    with dbbench_world.read_through():  # the same evolve as the world's: it resumes
        corpus = build_corpus(
            ws, out, "dbbench", envs=["dbbench"], splits=("train",), rounds=2, rollouts=2,
            only=["dbbench-base"], max_digests=2, log=lambda line: None,
        )  # fmt: skip
    [run] = corpus.runs
    assert (run.env, run.base, run.split, run.editor, run.error) == (
        "dbbench", "dbbench-base", "train", "rules", None,
    )  # fmt: skip
    assert corpus.failed == [] and "dbbench-base" in corpus.environments["dbbench"]
    # every edit of the workspace's store is exported, on the held-out side
    assert corpus.counts["grpo/test"] >= len(dbbench_world.result["edits"])
    written = json.loads((out / "corpus.json").read_text())
    assert written["holdout_env"] == "dbbench" and written["max_digests"] == 2
    [(suite_id, where)] = written["suites"].items()
    assert load_suite(out / where).id == suite_id  # scores without the workspace
    assert corpus.counts["grpo/test"] == len(grpo(out, "test")) > 0
    assert all(len(shown_pairs(r.prompt)) <= 2 for r in grpo(out, "test"))
