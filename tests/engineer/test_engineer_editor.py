"""A trained engineer is an editor (issue #52, 2): ``evolve --editor engineer:DIR`` runs a
tiny engineer trained here by ``train-engineer`` (it learnt to write one patch), and its
proposals go the way of any editor's: validation (out of scope: rejected, the rejection fed
back as a retry turn it answers), the gate on fresh seeds, edit records and the call log."""

from __future__ import annotations

import json
import shutil

import pytest

from harnessctl.engineer.editor import EngineerEditor
from harnessctl.engineer.records import EngineerManifest
from harnessctl.errors import ConfigError
from harnessctl.evolve.editors import make_editor
from harnessctl.evolve.patch import parse_patch, render_blocks
from harnessctl.workspace import load_workspace
from tests.helpers.cli import cli
from tests.helpers.engineer import NOTE_PATCH, records, with_completion

pytestmark = pytest.mark.slow  # trains a model and evolves: the slow tier

MEMO_STEPS = 80
MEMO_LR = 3e-3


@pytest.fixture(scope="module")
def engineer(engineer_data, tmp_path_factory):
    """A tiny engineer that learnt NOTE_PATCH (every prompt's answer in its SFT data)."""
    root = tmp_path_factory.mktemp("memo")
    data = with_completion(engineer_data.data, root / "data", NOTE_PATCH)
    out = root / "eng"
    cli(
        engineer_data.ws, "train-engineer", "--stage", "sft", "--data", data, "--out", out,
        "--base", engineer_data.base, "--no-lora", "--max-steps", MEMO_STEPS,
        "--learning-rate", MEMO_LR, "--save-steps", MEMO_STEPS, "--no-gradient-checkpointing",
    )  # fmt: skip
    return out


def test_the_trained_engineer_writes_what_it_learnt(engineer, engineer_data):
    row = records(engineer_data.data / "sft_prompt_completion" / "train.jsonl")[0]
    editor = EngineerEditor(str(engineer), {"max_new_tokens": 64})
    text, prompt_tokens, completion_tokens = editor.generate(row["prompt"])
    assert parse_patch(text) == parse_patch(NOTE_PATCH)  # what follows its block is no block
    assert text.startswith(NOTE_PATCH.strip())
    assert prompt_tokens > 500 and 0 < completion_tokens <= 64


def test_evolve_runs_the_engineer_through_validation_gate_and_records(
    engineer, engineer_data, dbbench_world, tmp_path
):
    ws = dbbench_world.copy(tmp_path / "ws")
    with dbbench_world.read_through():  # the base's rollouts; the child's run here
        out = json.loads(
            cli(
                ws, "evolve", "dbbench-base", "--split", "train", "--rollouts", 2,
                "--rounds", 1, "--directions", "format-validation,termination",
                "--editor", f"engineer:{engineer}", "--editor-retries", 1,
                "--batch", 2, "--control", 1, "--max-looks", 2, "--json",
            ).stdout
        )  # fmt: skip
    manifest = EngineerManifest.load(engineer)
    store = load_workspace(ws).open_store()
    edits = [e for e in store.edits(evolve_id=out["evolve_id"])]
    by_direction = {d: [e for e in edits if e.direction == d] for d in ("format-validation",
                                                                       "termination")}  # fmt: skip
    [judged] = by_direction["format-validation"]
    assert judged.editor == f"engineer:{manifest.id}"
    assert judged.response.startswith(NOTE_PATCH.strip())
    assert judged.patch == render_blocks(parse_patch(NOTE_PATCH)).rstrip("\n")
    assert judged.status == "evaluated" and not judged.accepted  # a no-op: the gate says so
    assert json.loads(judged.metrics_json)["looks"], "judged on fresh seeds, look by look"
    rejected = sorted(by_direction["termination"], key=lambda e: e.attempt)
    assert [(e.attempt, e.status) for e in rejected] == [(0, "rejected"), (1, "rejected")]
    assert rejected[0].reason == "out_of_scope"  # prompts/* is not termination's to edit
    # the retry: the rejection fed back as a user turn (a turn it never trained on: its
    # answer is whatever it makes of it, judged like any other)
    assert "[user]\nYour patch was rejected: out_of_scope" in rejected[1].prompt
    calls = store.calls(purpose="editor")
    assert len(calls) == 3 and {c.model for c in calls} == {f"engineer:{manifest.id}"}
    assert all(c.prompt_tokens > 500 and c.completion_tokens > 0 for c in calls)
    store.close()


def test_engineer_specs_resolve_through_the_registry(engineer, tmp_path):
    editor = make_editor(f"engineer:{engineer}", family="dbbench")
    assert isinstance(editor, EngineerEditor)
    assert editor.name == f"engineer:{EngineerManifest.load(engineer).id}"
    assert editor.max_digests == 0  # the prompt format it was trained on
    same = make_editor("engineer", family="dbbench", params={"model": str(engineer)})
    assert same.identity == editor.identity
    other = make_editor(f"engineer:{engineer}", family="dbbench", params={"temperature": "0.7"})
    assert other.identity != editor.identity  # other decoding: another evolve run
    with pytest.raises(ConfigError, match="unknown engineer parameter"):
        make_editor(f"engineer:{engineer}", family="dbbench", params={"tempreature": "1"})
    with pytest.raises(ConfigError, match="is not a catalogue model"):
        make_editor(f"engineer:{tmp_path / 'nothing'}", family="dbbench")


def test_grpo_rewards_the_engineers_valid_patches_by_rerunning_them(
    engineer, engineer_data, tmp_path
):
    """One GRPO step from the engineer (trained without LoRA: a new adapter on its weights)
    on one record cut to one task at one fresh seed: its samples are its patch, so each is
    valid, built and re-run against the parent (a no-op: no effect), and the step logs the
    validity and the realised reward apart."""
    data = shutil.copytree(engineer_data.data, tmp_path / "data")
    path = data / "grpo" / "train.jsonl"
    row = records(path)[0]
    recipe = row["reward"]
    recipe |= {"batch": recipe["batch"][:1], "control": [], "seeds": recipe["seeds"][:1]}
    path.write_text(json.dumps(row) + "\n")
    out = tmp_path / "grpo"
    cli(
        engineer_data.ws, "train-engineer", "--stage", "grpo", "--data", data, "--out", out,
        "--base", engineer, "--max-steps", 1, "--num-generations", 2,
        "--max-completion-length", 32, "--temperature", 0.2,
        "--suite", engineer_data.ws / "examples" / "dbbench",
    )  # fmt: skip
    manifest = EngineerManifest.load(out)
    [step] = manifest.curve
    assert step.validity == 1.0 and step.realized == 0.0
    assert manifest.weights == "adapter" and manifest.base.name.endswith("/eng/model")
    assert manifest.parent == EngineerManifest.load(engineer).id
