"""``harnessctl train-engineer``: train a harness engineer (an editor model) on edit records."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .options import JsonOption, finite, one_of, positive

StageOption = Annotated[
    str,
    typer.Option(
        callback=one_of("sft", "grpo"),
        help="'sft': supervised on the accepted edits (prompt/completion); 'grpo': TRL's "
        "GRPOTrainer rewarded by the realised effect of the engineer's own patches (start it "
        "from the SFT engineer: --base DIR).",
    ),
]
DataOption = Annotated[
    Path, typer.Option(help="An export-edits directory (or a corpus of that layout).")
]
OutOption = Annotated[
    Path, typer.Option(help="The engineer directory to write; the same command again resumes.")
]
BaseOption = Annotated[
    str,
    typer.Option(
        help="The model trained: a local-model catalogue name (qwen2.5-coder-0.5b, ...; its "
        "GGUF file fetched and de-quantised), a model directory, an engineer directory (GRPO "
        "from SFT) or a Hugging Face id where the hub is reachable."
    ),
]
LoraOption = Annotated[bool, typer.Option(help="Train a LoRA adapter (else every weight).")]
RankOption = Annotated[int, typer.Option(min=1, help="The LoRA adapter's rank.")]
AlphaOption = Annotated[int, typer.Option(min=1, help="The LoRA adapter's alpha.")]
StepsOption = Annotated[int | None, typer.Option(min=1, help="Optimiser steps.")]
EpochsOption = Annotated[
    float, typer.Option(callback=positive, help="Epochs when --max-steps is not given.")
]
LrOption = Annotated[
    float | None, typer.Option(callback=positive, help="Default: 1e-4 SFT, 1e-5 GRPO (LoRA).")
]
BatchOption = Annotated[
    int, typer.Option(min=1, help="SFT: examples per pass; GRPO: prompts per step.")
]
AccumOption = Annotated[int, typer.Option(min=1, help="SFT: passes per optimiser step.")]
LengthOption = Annotated[
    int, typer.Option(min=64, help="Tokens per SFT example at most (longer: left out, not cut).")
]
SeedOption = Annotated[int, typer.Option(min=0, help="Seed of the data order and sampling.")]
SaveOption = Annotated[int, typer.Option(min=1, help="A checkpoint every N steps.")]
DtypeOption = Annotated[
    str,
    typer.Option(
        callback=one_of("auto", "float32", "bfloat16"), help="auto: bf16 on a GPU, else fp32."
    ),
]
CheckpointingOption = Annotated[
    bool, typer.Option(help="Recompute activations in the backward pass (less memory).")
]
HoldoutOption = Annotated[
    str | None,
    typer.Option(help="An environment the engineer must never see (a record of it: an error)."),
]
GenerationsOption = Annotated[int, typer.Option(min=2, help="GRPO: patches per prompt.")]
CompletionOption = Annotated[int, typer.Option(min=8, help="GRPO: tokens per sampled patch.")]
TemperatureOption = Annotated[
    float, typer.Option(callback=positive, help="GRPO: sampling temperature.")
]
BetaOption = Annotated[float, typer.Option(min=0.0, callback=finite, help="GRPO: KL penalty.")]
ValidityOption = Annotated[
    float,
    typer.Option(
        min=0.0,
        callback=finite,
        help="GRPO: weight of the shaping reward patch_validity (logged apart from the "
        "realised reward either way; 0: logged only).",
    ),
]
SuiteOption = Annotated[
    list[Path] | None,
    typer.Option(help="GRPO: a suite the rewards re-run (repeatable; default: the corpus's)."),
]
WorkspaceOption = Annotated[
    Path | None, typer.Option(help="GRPO: a workspace whose store the reward reuses.")
]
SandboxOption = Annotated[str | None, typer.Option(help="GRPO: the reward's sandbox backend.")]
WorkersOption = Annotated[
    int | None, typer.Option(min=1, help="GRPO: rollouts at a time per scoring.")
]
ScoreTimeoutOption = Annotated[
    float, typer.Option(callback=positive, help="GRPO: seconds one patch's scoring may take.")
]


def train_engineer_command(
    stage: StageOption,
    data: DataOption,
    out: OutOption,
    base: BaseOption = "qwen2.5-coder-0.5b",
    lora: LoraOption = True,
    lora_r: RankOption = 16,
    lora_alpha: AlphaOption = 32,
    max_steps: StepsOption = None,
    epochs: EpochsOption = 1.0,
    learning_rate: LrOption = None,
    batch_size: BatchOption = 1,
    grad_accum: AccumOption = 1,
    max_length: LengthOption = 8192,
    seed: SeedOption = 0,
    save_steps: SaveOption = 25,
    dtype: DtypeOption = "auto",
    gradient_checkpointing: CheckpointingOption = True,
    holdout_env: HoldoutOption = None,
    num_generations: GenerationsOption = 4,
    max_completion_length: CompletionOption = 1024,
    temperature: TemperatureOption = 1.0,
    beta: BetaOption = 0.0,
    validity_weight: ValidityOption = 0.0,
    suite: SuiteOption = None,
    workspace: WorkspaceOption = None,
    sandbox: SandboxOption = None,
    workers: WorkersOption = None,
    score_timeout: ScoreTimeoutOption = 1800.0,
    as_json: JsonOption = False,
) -> None:
    """Train a harness engineer (Harness-R1): --stage sft on the accepted edits, then --stage
    grpo from it, rewarded by fresh paired re-runs of its own patches. Writes an engineer
    directory that `evolve --editor engineer:DIR` runs."""
    settings = dict(locals())
    for flag in ("lora", "lora_r", "lora_alpha", "suite", "score_timeout", "as_json"):
        settings.pop(flag)
    settings |= {
        "lora": {"r": lora_r, "alpha": lora_alpha} if lora else None,
        "suites": suite or [],
        "score_timeout_s": score_timeout,
    }
    run(settings, as_json)


def run(settings: dict, as_json: bool) -> None:
    """Validate the settings (a usage error names the field), train, render."""
    from pydantic import ValidationError

    from ..engineer.config import TrainConfig
    from ..engineer.train import train_engineer
    from ..harness import format_validation_error
    from .render import err_console, print_result
    from .train_engineer_view import render_result, step_progress

    try:
        config = TrainConfig.model_validate(settings)
    except ValidationError as exc:
        raise format_validation_error("train-engineer", exc) from None
    with step_progress(err_console(), config.stage, events=as_json) as progress:
        result = train_engineer(config, progress)
    if as_json:
        print_result(result)
        return
    render_result(result)
