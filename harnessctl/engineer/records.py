"""The engineer's records: ``engineer.json`` (what was trained, from what, how it went), the
per-step log, and ``train-engineer --json``. Typed and versioned like every record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from ..errors import ConfigError
from ..records import Record, Result
from .config import LoraSettings, Stage

MANIFEST = "engineer.json"
ADAPTER = "adapter"
"""The LoRA adapter's directory in an engineer directory (the tokenizer is saved there too)."""
MODEL = "model"
"""The whole model's directory, when trained without LoRA."""
CHECKPOINTS = "checkpoints"
STEP_LOG = "steps.jsonl"
ENGINEER_VERSION = 1


class BaseRef(Record):
    """The model an engineer started from, as found again by :func:`.base.load_base`."""

    kind: Literal["catalogue", "directory", "hub"]
    name: str
    """The catalogue name, the directory (absolute) or the hub id."""
    sha256: str | None = None
    """A catalogue model's pinned file hash (the bytes trained on)."""
    upstream: str | None = None
    """The Hugging Face model a catalogue file quantises."""


class DataRef(Record):
    """The records a stage trained on."""

    path: str
    files: dict[str, str]
    """File (relative to ``path``) -> its SHA-256: the exact data."""
    records: int
    """Records used."""
    left_out: dict[str, int] = Field(default_factory=dict)
    """Records not used, by reason (``too_long``...)."""
    environments: dict[str, int] = Field(default_factory=dict)
    """Records used per environment."""
    holdout_env: str | None = None
    """The environment the data's corpus held out (and training refused)."""
    max_digests: int | None = None
    """Failure digests shown per prompt at most (the prompt format the editor must keep)."""


class StepLog(Record):
    """One logged optimiser step."""

    step: int
    loss: float | None = None
    learning_rate: float | None = None
    reward: float | None = None
    """GRPO: the mean total reward of the step's completions (realised + weighted shaping)."""
    reward_std: float | None = None
    realized: float | None = None
    """GRPO: the mean realised reward (``harness_engineer_reward``): rescues minus
    regressions over pairs on fresh seeds, or the recipe's invalid reward."""
    validity: float | None = None
    """GRPO: the share of completions whose patch passed validation (the shaping term)."""
    elapsed_s: float = 0.0


class EngineerManifest(Record):
    """``engineer.json``: a trained engineer."""

    kind: Literal["engineer"] = "engineer"
    version: int = ENGINEER_VERSION
    id: str
    """A hash of the trained weights' files: an editor's identity (a retrained engineer is
    a new evolve run)."""
    stage: Stage
    base: BaseRef
    parent: str | None = None
    """The engineer (its id) this one continued from: a GRPO engineer's SFT one."""
    lora: LoraSettings | None
    weights: str
    """The directory of the trained weights: ``adapter`` (LoRA) or ``model``."""
    config: dict[str, Any]
    """The :class:`~harnessctl.engineer.config.TrainConfig` of this stage."""
    config_id: str
    data: DataRef
    edit_format: Literal["blocks"] = "blocks"
    """What it answers in: SEARCH/REPLACE blocks after the LLM editor's system prompt."""
    steps: int
    seconds: float
    """Training time of this stage (the runs that resumed it added up)."""
    curve: list[StepLog] = Field(default_factory=list)
    harnessctl_version: str = "unknown"
    created_at: float

    @classmethod
    def load(cls, directory: Path) -> EngineerManifest:
        """The manifest of the engineer directory ``directory``; ``ConfigError`` naming the
        file and the field when it is not one."""
        path = Path(directory) / MANIFEST
        if not path.is_file():
            raise ConfigError(str(path), "no engineer here (train one: harnessctl train-engineer)")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(str(path), f"unreadable: {exc}") from None
        if isinstance(data, dict) and data.get("version", 0) > ENGINEER_VERSION:
            newer = f"{data['version']} is newer than this harnessctl reads"
            raise ConfigError(f"{path}: version", newer)
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            from ..harness import format_validation_error

            raise format_validation_error(str(path), exc) from None


class TrainEngineerResult(Result):
    """``train-engineer --json``."""

    kind: Literal["train-engineer"] = "train-engineer"
    version: int = 1
    out: str
    stage: Stage
    engineer_id: str
    steps: int
    resumed_from: int | None = None
    """The checkpoint's step a resumed run started from (None: from the start)."""
    records: int
    seconds: float
    final: StepLog | None = None
    """The last logged step."""
