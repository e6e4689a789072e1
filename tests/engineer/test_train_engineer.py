"""``harnessctl train-engineer`` on a tiny corpus (DBBench's world's edits) and a tiny model:
both stages through the CLI as a user runs them, the engineer directory they write, resuming
an interrupted stage from its checkpoint, refusing to overwrite another run, the held-out
environment refused, and what each stage's progress and ``--json`` say."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harnessctl.engineer.config import TrainConfig
from harnessctl.engineer.records import EngineerManifest, StepLog
from harnessctl.engineer.train import train_engineer
from harnessctl.errors import ConfigError
from tests.helpers.cli import cli
from tests.helpers.engineer import records

pytestmark = pytest.mark.slow  # trains models: the slow tier (README, "Tests")


@pytest.fixture(scope="module")
def sft(engineer_data, tmp_path_factory):
    """Two SFT steps of a LoRA adapter on the tiny model (the CI run of the SFT stage)."""
    out = tmp_path_factory.mktemp("sft") / "eng"
    result = cli(
        engineer_data.ws, "train-engineer", "--stage", "sft", "--data", engineer_data.data,
        "--out", out, "--base", engineer_data.base, "--max-steps", 2, "--save-steps", 1,
        "--json",
    )  # fmt: skip
    return out, result


def test_sft_writes_an_engineer_directory(sft, engineer_data):
    out, result = sft
    printed = json.loads(result.stdout)  # stdout is the result alone: no trainer's prints
    manifest = EngineerManifest.load(out)
    assert printed["kind"] == "train-engineer" and printed["stage"] == "sft"
    assert printed["engineer_id"] == manifest.id and printed["steps"] == manifest.steps == 2
    assert (out / "adapter" / "adapter_model.safetensors").is_file()  # LoRA by default
    assert (out / "adapter" / "tokenizer.json").is_file()
    assert manifest.lora is not None and manifest.lora.r == 16 and manifest.weights == "adapter"
    assert manifest.base.kind == "directory" and manifest.base.name == str(engineer_data.base)
    used = records(engineer_data.data / "sft_prompt_completion" / "train.jsonl")
    assert manifest.data.records == len(used) and manifest.data.environments == {
        "dbbench": len(used)
    }
    assert manifest.data.max_digests == 0  # the prompt format the editor must keep
    assert [s.step for s in manifest.curve] == [1, 2]
    assert all(s.loss is not None and s.loss > 0 for s in manifest.curve)
    # --json: the progress of every step on stderr, one JSON object a line
    events = [json.loads(x) for x in result.stderr.splitlines() if x.startswith('{"kind"')]
    assert [(e["work"], e["done"], e["total"]) for e in events] == [
        ("train-engineer sft", 1, 2),
        ("train-engineer sft", 2, 2),
    ]


def test_the_same_command_again_trains_nothing(sft, engineer_data):
    out, first = sft
    before = (out / "engineer.json").read_text()
    again = cli(
        engineer_data.ws, "train-engineer", "--stage", "sft", "--data", engineer_data.data,
        "--out", out, "--base", engineer_data.base, "--max-steps", 2, "--save-steps", 1,
        "--json",
    )  # fmt: skip
    assert json.loads(again.stdout) == json.loads(first.stdout)
    assert (out / "engineer.json").read_text() == before


def test_other_settings_into_the_same_directory_are_refused(sft, engineer_data):
    out, _ = sft
    result = cli(
        engineer_data.ws, "train-engineer", "--stage", "sft", "--data", engineer_data.data,
        "--out", out, "--base", engineer_data.base, "--max-steps", 3, code=2,
    )  # fmt: skip
    assert f"--out {out}: holds an engineer trained with other settings" in result.output


def test_grpo_continues_the_sft_engineer_with_the_reward_logged_apart(sft, engineer_data):
    """One GRPO step from the SFT engineer (the CI run of the GRPO stage): the tiny model's
    samples are no patch, so each earns the recipe's invalid reward and none is valid; both
    reward functions are logged, apart, in the step's figures."""
    sft_dir, _ = sft
    out = sft_dir.parent / "grpo"
    result = cli(
        engineer_data.ws, "train-engineer", "--stage", "grpo", "--data", engineer_data.data,
        "--out", out, "--base", sft_dir, "--max-steps", 1, "--num-generations", 2,
        "--max-completion-length", 12, "--suite", engineer_data.ws / "examples" / "dbbench",
        "--validity-weight", 0.5,
    )  # fmt: skip
    manifest = EngineerManifest.load(out)
    assert manifest.stage == "grpo" and manifest.parent == EngineerManifest.load(sft_dir).id
    assert manifest.base == EngineerManifest.load(sft_dir).base
    [step] = manifest.curve
    assert step.realized == 0.0 and step.validity == 0.0 and step.reward == 0.0
    assert "realised +0.000, valid 0%" in result.output
    assert manifest.data.left_out == {}  # every record's reward is on fresh seeds
    # a group whose rewards are all equal carries no signal: the step leaves the weights as
    # they were, and the engineer's id (a hash of its weights) says so
    assert manifest.id == EngineerManifest.load(sft_dir).id


def test_an_interrupted_stage_resumes_from_its_last_checkpoint(engineer_data, tmp_path):
    out = tmp_path / "eng"
    config = TrainConfig(
        stage="sft", data=engineer_data.data, out=out, base=str(engineer_data.base),
        max_steps=3, save_steps=1,
    )  # fmt: skip
    seen: list[int] = []

    def stop_after_two(step: StepLog, total: int) -> None:
        seen.append(step.step)
        if step.step == 2:
            raise KeyboardInterrupt  # as Ctrl-C would, after step 2's checkpoint... or before

    with pytest.raises(KeyboardInterrupt):
        train_engineer(config, stop_after_two)
    assert not (out / "engineer.json").exists()
    checkpoints = sorted(p.name for p in (out / "checkpoints").glob("checkpoint-*"))
    assert checkpoints and checkpoints[-1] in ("checkpoint-1", "checkpoint-2")
    last = int(checkpoints[-1].rsplit("-", 1)[1])
    result = train_engineer(config, lambda step, total: seen.append(step.step))
    assert result.resumed_from == last and result.steps == 3
    manifest = EngineerManifest.load(out)
    assert [s.step for s in manifest.curve] == [1, 2, 3]  # no step logged twice
    assert seen == [1, 2, *range(last + 1, 4)]


def test_a_record_of_the_held_out_environment_is_an_error(engineer_data, tmp_path):
    result = cli(
        engineer_data.ws, "train-engineer", "--stage", "sft", "--data", engineer_data.data,
        "--out", tmp_path / "eng", "--base", engineer_data.base, "--holdout-env", "dbbench",
        code=2,
    )  # fmt: skip
    path = engineer_data.data / "sft_prompt_completion" / "train.jsonl"
    assert f"{path}:1: a record of the held-out environment 'dbbench'" in result.output
    assert not (tmp_path / "eng" / "engineer.json").exists()


def test_a_broken_record_names_its_file_line_and_field(engineer_data, tmp_path):
    data = shutil.copytree(engineer_data.data, tmp_path / "data")
    path = data / "sft_prompt_completion" / "train.jsonl"
    rows = records(path)
    del rows[1]["completion"]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ConfigError) as caught:
        train_engineer(
            TrainConfig(stage="sft", data=data, out=tmp_path / "eng", base=str(engineer_data.base))
        )
    assert str(caught.value).startswith(f"{path}:2: completion: Field required")


def test_a_base_that_is_no_model_is_a_usage_error(engineer_data, tmp_path):
    result = cli(
        engineer_data.ws, "train-engineer", "--stage", "sft", "--data", engineer_data.data,
        "--out", tmp_path / "eng", "--base", "no-such-model", code=2,
    )  # fmt: skip
    assert "'no-such-model' is not a catalogue model" in result.output


def test_help_starts_fast_without_the_training_libraries():
    import subprocess
    import sys

    code = (
        "import sys, time; t = time.perf_counter(); from typer.testing import CliRunner; "
        "from harnessctl.cli import app; r = CliRunner().invoke(app, ['train-engineer', "
        "'--help']); assert r.exit_code == 0, r.output; "
        "heavy = [m for m in ('torch', 'transformers', 'trl', 'peft', 'datasets') "
        "if m in sys.modules]; print(heavy)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_step_log_is_the_manifest_curve(sft):
    out, _ = sft
    lines = (out / "steps.jsonl").read_text().splitlines()
    assert [StepLog.model_validate_json(x) for x in lines] == EngineerManifest.load(out).curve
    assert isinstance(Path(EngineerManifest.load(out).data.path), Path)


def test_an_engineers_id_does_not_depend_on_the_order_peft_writes_its_modules(tmp_path):
    """peft writes ``target_modules`` from a set, in an order that changes with the process's
    hash seed: the same weights in two processes are one engineer (one id)."""
    from harnessctl.engineer.train import _weights_id

    ids = []
    for name, modules in (
        ("a", ["q_proj", "o_proj", "v_proj"]),
        ("b", ["v_proj", "q_proj", "o_proj"]),
    ):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "adapter_model.safetensors").write_bytes(b"same weights")
        (folder / "adapter_config.json").write_text(
            json.dumps({"target_modules": modules, "r": 16})
        )
        ids.append(_weights_id(folder))
    assert ids[0] == ids[1]
    (tmp_path / "b" / "adapter_model.safetensors").write_bytes(b"other weights")
    assert _weights_id(tmp_path / "b") != ids[0]
