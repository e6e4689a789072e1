"""The engineer's reward cannot be gamed (issue #52, 6): a patch that edits outside its scope,
the manifest, start-up hooks or a module the runtime imports earns the invalid reward before
anything runs; a patch's code runs sandboxed, so reading the host's gold labels fails; and the
reward's pairs are seeds the prompt never showed (records whose reward would re-run shown
rollouts are refused for GRPO)."""

from __future__ import annotations

import json
import shutil

import pytest

from harnessctl.evolve.dataset import GRPORecord, export_edits
from harnessctl.evolve.directions import Direction
from harnessctl.evolve.engineer import PatchScorer
from harnessctl.evolve.guards import gaming_paths, reruns_shown_seeds, reward_pairs, shown_pairs
from harnessctl.evolve.patch import Block
from harnessctl.store import Store
from harnessctl.workspace import load_workspace
from tests.helpers.cli import cli
from tests.helpers.engineer import records

OPEN = Direction(name="open", brief="b", targets=["wrong_answer"], files=["*", "*/*"])


def block(path: str, search: str = "x\n", replace: str = "y\n") -> Block:
    return Block(path=path, search=search, replace=replace)


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("harness.yaml", "the manifest and start-up hooks"),
        ("prompts/../harness.yaml", "is not a path inside the harness"),
        ("/etc/passwd", "is not a path inside the harness"),
        ("sitecustomize.py", "start-up hooks"),
        ("evil.pth", "not source a harness may carry"),
        (".hidden/x.py", "a hidden or byte-code path"),
        ("__pycache__/harness.cpython-311.pyc", "a hidden or byte-code path"),
        ("sqlite3.py", "would shadow it"),
        ("harnessctl_runtime.py", "would shadow it"),
        ("hxenv_dbbench.py", "would shadow it"),
    ],
)
def test_patches_that_game_the_scorer_are_named(path, why):
    found = gaming_paths(OPEN, [block(path)], existing={"harness.py", "harness.yaml"})
    assert found is not None and why in found


def test_ordinary_patches_pass_the_guard():
    scoped = Direction(name="d", brief="b", targets=["wrong_answer"], files=["harness.py"])
    assert gaming_paths(OPEN, [block("harness.py"), block("prompts/x.md")], {"harness.py"}) is None
    assert gaming_paths(OPEN, [block("helpers.py")], {"harness.py"}) is None  # a new module
    outside = gaming_paths(scoped, [block("prompts/x.md")], {"harness.py"})
    assert outside is not None and "not in the direction's files (harness.py)" in outside


@pytest.fixture(scope="module")
def recorded(engineer_data, tmp_path_factory):
    """The world's GRPO records exported with their failure digests shown."""
    ws = load_workspace(engineer_data.ws)
    out = tmp_path_factory.mktemp("shown")
    store = ws.open_store()
    try:
        export_edits(store.edits(), out, test_fraction=0.0, store=store, workspace=ws)
    finally:
        store.close()
    return [GRPORecord.model_validate(r) for r in records(out / "grpo" / "train.jsonl")]


@pytest.mark.slow
def test_the_rewards_pairs_are_seeds_the_prompt_never_showed(recorded):
    for record in recorded:
        shown = shown_pairs(record.prompt)
        assert shown, "the prompt shows its failure digests"
        pairs = reward_pairs(record.reward)
        assert pairs and not shown & pairs
        assert reruns_shown_seeds(record.prompt, record.reward) == []
        same_batch = record.reward.model_copy(update={"gate": None, "kind": "same_batch_paired"})
        assert reruns_shown_seeds(record.prompt, same_batch)  # re-runs its own digests' pairs


@pytest.mark.slow
def test_grpo_refuses_records_whose_reward_reruns_shown_seeds(recorded, engineer_data, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(engineer_data.data, data)
    lines = []
    for record in recorded:
        same_batch = record.reward.model_copy(update={"gate": None, "kind": "same_batch_paired"})
        lines.append(record.model_copy(update={"reward": same_batch}).model_dump_json())
    (data / "grpo" / "train.jsonl").write_text("\n".join(lines) + "\n")
    result = cli(
        engineer_data.ws, "train-engineer", "--stage", "grpo", "--data", data, "--out",
        tmp_path / "eng", "--base", engineer_data.base, "--suite",
        engineer_data.ws / "examples" / "dbbench", code=2,
    )  # fmt: skip
    assert "every record's reward re-runs seeds its prompt shows" in result.output


@pytest.mark.slow
def test_a_patch_that_games_the_scorer_scores_invalid_and_runs_nothing(
    recorded, engineer_data, tmp_path
):
    record = recorded[0]
    permissive = record.reward.model_copy(
        update={"direction": {**record.reward.direction, "files": ["*", "*/*"]}}
    )
    record = record.model_copy(update={"reward": permissive})
    tree = {f.path: f.content for f in record.reward.parent_tree.files}
    manifest_patch = (
        "harness.yaml\n<<<<<<< SEARCH\n" + tree["harness.yaml"] + "=======\n"
        + tree["harness.yaml"].replace("max_rounds: 15", "max_rounds: 99") + ">>>>>>> REPLACE\n"
    )  # fmt: skip
    shadow = "sqlite3.py\n<<<<<<< SEARCH\n=======\nconnect = None\n>>>>>>> REPLACE\n"
    store = Store(f"sqlite:///{tmp_path / 's.db'}", tmp_path / "t")
    suites = [engineer_data.ws / "examples" / "dbbench"]  # a list: routed by the recipe's id
    with PatchScorer(suite=suites, store=store) as scorer:
        for patch in (manifest_patch, shadow):
            score = scorer.assess(record, patch)
            assert (score.status, score.reason) == ("rejected", "games_the_scorer")
            assert score.reward == record.reward.invalid_reward
    assert store.rollouts() == []  # refused before anything was built or run
    store.close()


@pytest.mark.slow
def test_a_patch_reading_the_hosts_gold_labels_fails_in_the_sandbox(
    recorded, engineer_data, tmp_path
):
    record = recorded[0]
    gold = sorted((engineer_data.ws / "examples" / "dbbench").rglob("*.json*"))[0].resolve()
    assert gold.is_file()  # on the host it is there to read
    first = next(f for f in record.reward.parent_tree.files if f.path == "harness.py")
    line = first.content.splitlines(keepends=True)[0]
    patch = (
        f"harness.py\n<<<<<<< SEARCH\n{line}=======\nGOLD = open({str(gold)!r}).read()\n"
        f"{line}>>>>>>> REPLACE\n"
    )
    store = Store(f"sqlite:///{tmp_path / 's.db'}", tmp_path / "t")
    with PatchScorer(suite=engineer_data.ws / "examples" / "dbbench", store=store) as scorer:
        score = scorer.assess(record, patch)
    assert (score.status, score.reason) == ("rejected", "smoke_failed")
    assert score.reward == record.reward.invalid_reward
    assert "No such file" in (score.verdict.detail or "") or "harness_error" in score.verdict.detail
    assert len(store.rollouts()) == 1  # the smoke rollout alone
    store.close()


def test_shown_pairs_reads_the_digest_headers():
    prompt = [
        {"role": "system", "content": "x"},
        {
            "role": "user",
            "content": "## Failure trajectories (2)\n\n### task dev-001 (select), seed 3: "
            "wrong_answer\ntask: ...\n\n### task dev-9 (a (b)), seed 0: timeout\n",
        },
    ]
    assert shown_pairs(prompt) == {("dev-001", 3), ("dev-9", 0)}
    assert json.dumps(sorted(shown_pairs([]))) == "[]"
