"""The edit reward as a library function: an exported GRPO record's recipe executes, and on
the reference completion it reproduces the reward the evolve engine stored for that edit
(offline default: rule-based editor, sim policy), also on a fresh store where every
rollout re-runs. Scoring writes no edit record and makes no commit."""

from __future__ import annotations

import json

import git

from harnessctl.evaluate import EvalRequest
from harnessctl.evolve.dataset import GRPORecord, export_edits
from harnessctl.evolve.directions import catalogue
from harnessctl.evolve.editors import make_editor
from harnessctl.evolve.engine import Engine, EvolveRequest
from harnessctl.evolve.reward import REWARD_FUNCTION, judge_edit, reward_for_record
from harnessctl.harness import load_harness
from harnessctl.policy import Policy
from harnessctl.store import Store
from harnessctl.suite import load_suite
from harnessctl.workspace import load_workspace
from tests.evolve_helpers import committed_workspace_eval


def test_grpo_reward_recipe_reproduces_the_stored_reward(workspace, tmp_path):
    ws, base, evaluation = committed_workspace_eval(workspace, split="train", timeout_s=30)
    request = EvolveRequest(
        base=base,
        eval=evaluation,
        directions=[catalogue("dbbench")["execution-recovery"]],
        editor=make_editor("rules", family="dbbench"),
        rounds=1,
        batch_size=6,
        control_size=6,
    )
    store = ws.open_store()
    result = Engine(request, ws, store).run()
    evaluated = [e for e in result.edits if e.status != "rejected"]
    assert evaluated, [(e.status, e.reason) for e in result.edits]
    edit = evaluated[0]
    assert edit.rescues > 0, edit.reason  # a reward worth reproducing

    out = tmp_path / "data"
    export_edits(store.edits(), out, test_fraction=0.0)  # every task on train: no pair dropped
    lines = (out / "grpo" / "train.jsonl").read_text().splitlines()
    line = next(x for x in lines if json.loads(x)["metadata"]["edit_id"] == edit.id)
    record = GRPORecord.model_validate_json(line)
    recipe = record.reward
    assert recipe.function == REWARD_FUNCTION and recipe.dropped_pairs == 0
    assert (recipe.alpha, recipe.min_net, recipe.parent_hash) == (0.1, 1, base.hash)
    assert recipe.batch == [tuple(p) for p in json.loads(edit.metrics_json)["batch"]]
    assert record.reference_reward == edit.reward

    repo = git.Repo(workspace)
    head, edits_before = repo.head.commit.hexsha, len(store.edits())
    cached = reward_for_record(line, record.reference_response, workspace=workspace)
    fresh_store = Store(f"sqlite:///{tmp_path / 'fresh.db'}", tmp_path / "trajectories")
    rerun = reward_for_record(record, record.reference_response, workspace=ws, store=fresh_store)
    for verdict in (cached, rerun):
        assert verdict.status == "evaluated"
        assert verdict.reward == edit.reward
        assert (verdict.rescues, verdict.regressions) == (edit.rescues, edit.regressions)
        assert verdict.accepted == edit.accepted and verdict.child_hash == edit.child_hash
        assert len(verdict.pairs) == len(recipe.batch) + len(recipe.control)
    assert len(fresh_store.rollouts()) == len(recipe.batch) + len(recipe.control)  # re-ran
    fresh_store.close()

    invalid = reward_for_record(line, "I would rather not edit anything.", workspace=ws)
    assert (invalid.status, invalid.reason, invalid.reward) == ("rejected", "no_blocks", 0.0)
    assert invalid.reward == recipe.invalid_reward
    assert repo.head.commit.hexsha == head and len(store.edits()) == edits_before
    assert not repo.is_dirty(untracked_files=True)


def test_judge_edit_rejects_out_of_scope_patches_before_any_rollout(workspace):
    ws = load_workspace(workspace)
    base = load_harness(ws.harnesses_dir / "dbbench-base")
    evaluation = EvalRequest(
        harness=base,
        suite=load_suite(ws.root / "examples" / "dbbench"),
        split="train",
        policy=Policy("sim/dbbench"),
    )
    store = ws.open_store()
    patch = "harness.yaml\n<<<<<<< SEARCH\nname: dbbench-base\n=======\nname: x\n>>>>>>> REPLACE\n"
    verdict = judge_edit(
        base,
        catalogue("dbbench")["termination"],
        patch,
        batch=[("train-000", 0)],
        control=[],
        evaluation=evaluation,
        store=store,
    )
    assert (verdict.status, verdict.reason, verdict.reward) == ("rejected", "out_of_scope", 0.0)
    assert (verdict.batch_size, verdict.control_size, verdict.pairs) == (1, 0, [])
    assert store.rollouts() == [] and store.edits() == []
