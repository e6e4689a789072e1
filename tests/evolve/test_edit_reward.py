"""The edit reward as a library function: an exported GRPO record's recipe executes, and on
the reference completion it reproduces the reward the evolve engine stored for that edit
(offline default: rule-based editor, sim policy), also on a fresh store where every
rollout re-runs. Scoring writes no edit record and makes no commit. Records of schema 2 still
load; a record's harness tree rebuilds its parent anywhere."""

from __future__ import annotations

import json
import shutil

import git
import pytest

from harnessctl.errors import HarnessctlError
from harnessctl.evolve.dataset import GRPORecord, SFTRecord, export_edits
from harnessctl.evolve.directions import catalogue
from harnessctl.evolve.editors import make_editor
from harnessctl.evolve.engine import Engine, EvolveRequest
from harnessctl.evolve.engineer import completion_text
from harnessctl.evolve.reward import (
    REWARD_FUNCTION,
    HarnessTree,
    RewardRecipe,
    judge_edit,
    load_recipe,
    recipe_verdict,
    reward_for_record,
)
from harnessctl.harness import load_harness
from harnessctl.policy import Policy
from harnessctl.run.evaluate import EvalRequest
from harnessctl.store import Store
from harnessctl.suite import load_suite
from harnessctl.workspace import load_workspace
from tests.helpers import BASE_HARNESS
from tests.helpers.evolve import committed_workspace_eval


@pytest.mark.slow
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
        # the sequential gate, replayed: the same tasks at the same fresh seeds, the same looks
        assert (
            recipe.kind == "fresh_paired" and recipe.seeds and recipe.gate and recipe.level == 0.1
        )
        assert (
            len(verdict.pairs)
            == verdict.looks[-1].pairs
            == len(json.loads(edit.metrics_json)["pairs"])
        )
        tasks = {t for t, _ in recipe.batch + recipe.control}
        assert {p.task_id for p in verdict.pairs} == tasks
        assert min(p.seed for p in verdict.pairs) >= recipe.seed + (recipe.rollouts or 0)
    # re-ran: the smoke pair, then parent and child on every judged pair
    assert len(fresh_store.rollouts()) == 1 + 2 * rerun.looks[-1].pairs
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


def test_a_schema_2_recipe_still_loads_and_pairs_are_written_as_objects():
    """Schema 2 held pairs as ``[task, seed]`` (a list Arrow refuses: str and int mixed);
    schema 3 writes objects. Either loads to tuples; a recipe read back through Arrow
    (every key any row had, None where absent) keeps only the policy's own parameters."""
    old = {
        "parent_hash": "p" * 64,
        "suite": "s@1",
        "split": "train",
        "policy_id": "sim/dbbench",
        "batch": [["t1", 0], ["t2", 1]],
        "control": [["t3", 0]],
        "policy_params": {"skill": 0.5, "temperature": None},
    }
    recipe = RewardRecipe.model_validate(old)
    assert recipe.batch == [("t1", 0), ("t2", 1)] and recipe.control == [("t3", 0)]
    assert recipe.policy_params == {"skill": 0.5}
    dumped = recipe.model_dump(mode="json")
    assert dumped["batch"] == [{"task_id": "t1", "seed": 0}, {"task_id": "t2", "seed": 1}]
    assert RewardRecipe.model_validate(dumped) == recipe
    record = {"prompt": [], "reward": dumped}
    assert load_recipe(record) == load_recipe(json.dumps(record)) == load_recipe(dumped) == recipe
    verdict = recipe_verdict(recipe, {("t1", 0): True, ("t3", 0): False})  # t2: no result
    assert (verdict.rescues, verdict.regressions, verdict.reward) == (1, 1, 0.0)
    assert recipe_verdict(recipe, {("t1", 0): True, ("t3", 0): True}).reward == 1 / 3


def test_a_harness_tree_rebuilds_its_harness_anywhere(tmp_path):
    """Text as text, other bytes as base64, the executable bit kept: the same content hash;
    a tree that does not hash to its recorded hash, or escapes its directory, is refused."""
    src = shutil.copytree(BASE_HARNESS, tmp_path / "src" / "dbbench-base")
    (src / "blob.bin").write_bytes(b"\xff\xfe\x00binary")
    (src / "tool.sh").write_text("#!/bin/sh\r\necho hi\r\n")
    (src / "tool.sh").chmod(0o755)
    spec = load_harness(src)
    tree = HarnessTree.of(spec)
    by_path = {f.path: f for f in tree.files}
    assert by_path["blob.bin"].encoding == "base64" and by_path["tool.sh"].executable
    again = HarnessTree.model_validate_json(tree.model_dump_json())
    rebuilt = again.materialize(tmp_path / "elsewhere")
    assert rebuilt.hash == spec.hash and rebuilt.path == tmp_path / "elsewhere" / "dbbench-base"
    assert (rebuilt.path / "blob.bin").read_bytes() == b"\xff\xfe\x00binary"
    tampered = tree.model_copy(update={"files": tree.files[:-1]})
    with pytest.raises(HarnessctlError, match="hash to"):
        tampered.materialize(tmp_path / "t")
    escaping = tree.model_copy(
        update={
            "files": [*tree.files, by_path["tool.sh"].model_copy(update={"path": "../outside.sh"})]
        }
    )
    with pytest.raises(HarnessctlError, match="not inside it"):
        escaping.materialize(tmp_path / "e")
    assert not (tmp_path / "e" / "outside.sh").exists()


def test_completion_text_takes_what_trainers_pass():
    assert completion_text("patch") == "patch"
    assert completion_text([{"role": "assistant", "content": "patch"}]) == "patch"
    assert completion_text({"role": "assistant", "content": "patch"}) == "patch"
    parts = [{"role": "assistant", "content": [{"type": "text", "text": "pa"}, {"text": "tch"}]}]
    assert completion_text(parts) == "patch"
    assert completion_text([{"role": "tool", "content": "x"}, {"content": None}]) == ""


def test_exported_records_of_schema_2_still_load():
    """Lines of an export of schema 2 (no retry turns, the judged reward under ``reward``,
    pairs as lists) validate as the current models."""
    meta = {
        "edit_id": "e1",
        "evolve_id": "v1",
        "parent_hash": "p" * 64,
        "child_hash": "c" * 64,
        "direction": "termination",
        "editor": "rules",
        "accepted": True,
        "reward": 0.25,
        "rescues": 1,
        "regressions": 0,
        "p_value": 0.5,
        "suite": "s@1",
        "source_split": "train",
        "policy_id": "sim/dbbench",
        "dataset_split": "train",
        "tasks": ["t1"],
    }
    messages = [{"role": r, "content": r} for r in ("system", "user", "assistant")]
    sft = SFTRecord.model_validate({"schema_version": 2, "messages": messages, "metadata": meta})
    assert [m.weight for m in sft.messages] == [0, 0, 1]
    assert sft.version == 2 and "schema_version" not in sft.model_dump()  # the one name
    assert list(SFTRecord(messages=sft.messages, metadata=sft.metadata).model_dump())[0] == (
        "version"
    )
    assert (sft.metadata.judged_reward, sft.metadata.status, sft.metadata.judged_pairs) == (
        0.25,
        "accepted",
        None,
    )
    recipe = {"parent_hash": "p" * 64, "suite": "s@1", "split": "train"}
    recipe |= {"policy_id": "sim/dbbench", "batch": [["t1", 0]], "control": []}
    line = {"schema_version": 2, "prompt": messages[:2], "reward": recipe}
    line |= {"reference_response": "x", "reference_reward": 0.25, "metadata": meta}
    record = GRPORecord.model_validate_json(json.dumps(line))
    assert record.reward.batch == [("t1", 0)] and record.metadata.judged_rescues == 1
