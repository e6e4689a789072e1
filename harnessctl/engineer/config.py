"""What ``train-engineer`` is told: one pydantic model per stage's settings, a docstring under
each field, unknown fields refused (``harnessctl train-engineer --help`` shows the flags)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from ..records import Record

Stage = Literal["sft", "grpo"]
DEFAULT_BASE = "qwen2.5-coder-0.5b"
"""The catalogue's Qwen2.5-Coder-0.5B-Instruct (harnessctl.localmodel), de-quantised."""


class LoraSettings(Record):
    """The LoRA adapter trained in place of the base's weights (peft's ``LoraConfig``)."""

    r: Annotated[int, Field(ge=1)] = 16
    """The adapter's rank."""
    alpha: Annotated[int, Field(ge=1)] = 32
    """Its scaling numerator (the update is scaled by alpha / r)."""
    dropout: Annotated[float, Field(ge=0.0, lt=1.0)] = 0.05
    target_modules: str | list[str] = "all-linear"
    """Module names the adapter wraps; ``all-linear``: every linear layer but the output."""


class TrainConfig(Record):
    """One stage of training a harness engineer."""

    stage: Stage
    """``sft``: supervised on the accepted edits; ``grpo``: TRL's GRPOTrainer rewarded by the
    realised effect of the engineer's own patches."""
    data: Path
    """An ``export-edits`` directory (or a corpus of the same layout): ``sft`` reads
    ``sft_prompt_completion/train.jsonl``, ``grpo`` reads ``grpo/train.jsonl``."""
    out: Path
    """The engineer directory written (``engineer.json``, ``adapter/``, ``checkpoints/``)."""
    base: str = DEFAULT_BASE
    """The model trained: a catalogue name (its GGUF file, fetched, verified and
    de-quantised), a local model directory, an engineer directory (``grpo`` continues the
    ``sft`` engineer there) or a Hugging Face model id where the hub is reachable."""
    lora: LoraSettings | None = LoraSettings()
    """The adapter trained; None: every weight of the base (full fine-tuning)."""
    max_steps: Annotated[int | None, Field(ge=1)] = None
    """Optimiser steps; None: ``epochs`` over the data."""
    epochs: Annotated[float, Field(gt=0)] = 1.0
    learning_rate: Annotated[float | None, Field(gt=0)] = None
    """None: 1e-4 for SFT, 1e-5 for GRPO (2e-5 and 1e-6 without LoRA)."""
    batch_size: Annotated[int, Field(ge=1)] = 1
    """SFT: examples per forward pass; GRPO: prompts per step (each sampled
    ``num_generations`` times)."""
    grad_accum: Annotated[int, Field(ge=1)] = 1
    """SFT: forward passes per optimiser step."""
    max_length: Annotated[int, Field(ge=64)] = 8192
    """Tokens of prompt plus completion at most: longer examples are left out (counted in
    ``engineer.json``), never cut: a truncated patch would teach a broken one."""
    seed: int = 0
    save_steps: Annotated[int, Field(ge=1)] = 25
    """A checkpoint every this many steps (and at the end): a rerun of the same command
    resumes from the last one."""
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """``auto``: bfloat16 on a GPU, float32 on a CPU."""
    gradient_checkpointing: bool = True
    """Recompute activations in the backward pass: a 0.5B model's 8k-token example fits in a
    few GB instead of tens."""
    holdout_env: str | None = None
    """An environment the engineer must never see: a training record of it is an error."""
    # --- GRPO -----------------------------------------------------------------------------
    num_generations: Annotated[int, Field(ge=2)] = 4
    """Completions sampled per prompt (GRPO's group)."""
    max_completion_length: Annotated[int, Field(ge=8)] = 1024
    temperature: Annotated[float, Field(gt=0)] = 1.0
    beta: Annotated[float, Field(ge=0)] = 0.0
    """The KL penalty towards the starting model (0: none, no reference model kept)."""
    validity_weight: Annotated[float, Field(ge=0)] = 0.0
    """Weight of the shaping reward ``patch_validity`` (1 for a patch that passes validation,
    else 0) added to the realised reward; both are logged apart."""
    suites: list[Path] = []
    """Suite directories the reward re-runs tasks from (each record names its suite by id);
    empty: the data's ``corpus.json`` suites, else the workspace's."""
    workspace: Path | None = None
    """A workspace whose store and harnesses the reward may reuse."""
    sandbox: str | None = None
    workers: Annotated[int | None, Field(ge=1)] = None
    """Rollouts at a time per scoring."""
    score_workers: Annotated[int, Field(ge=1)] = 2
    """Completions scored at a time."""
    score_timeout_s: Annotated[float, Field(gt=0)] = 1800.0
    """A completion's scoring taking longer earns the recipe's invalid reward."""

    @model_validator(mode="after")
    def _checked(self) -> TrainConfig:
        if self.stage == "sft" and self.validity_weight:
            raise ValueError("validity_weight is a GRPO setting")
        return self

    @property
    def lr(self) -> float:
        if self.learning_rate is not None:
            return self.learning_rate
        if self.stage == "sft":
            return 1e-4 if self.lora else 2e-5
        return 1e-5 if self.lora else 1e-6

    def identity(self) -> str:
        """What decides the trained weights (not where the output goes, not how often it is
        checkpointed, not how scoring is parallelised): a rerun with the same identity
        resumes, another refuses to write into the same directory."""
        skip = {"out", "save_steps", "score_workers", "workers", "sandbox", "workspace"}
        data = self.model_dump(mode="json", exclude=skip)
        data["data"] = str(Path(self.data).resolve())
        data["suites"] = sorted(str(Path(s).resolve()) for s in self.suites)
        blob = json.dumps(data, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]
