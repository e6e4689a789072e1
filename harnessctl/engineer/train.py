"""``train-engineer``: one stage of training, resumable, into an engineer directory.

What a stage leaves in ``out``::

    engineer.json        EngineerManifest: base, stage, data (with hashes), config, curve
    adapter/             the LoRA adapter and the tokenizer (``model/`` without LoRA)
    steps.jsonl          one StepLog a logged step (loss; GRPO: reward, realised, validity)
    checkpoints/         the trainer's checkpoints and run.json (the config's identity)

A rerun with the same settings resumes from the last checkpoint (or, when the stage is done,
returns its result without training); a rerun with other settings into the same ``out`` is
refused, naming the directory, so no run overwrites another's weights.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .config import TrainConfig
from .records import (
    ADAPTER,
    CHECKPOINTS,
    MANIFEST,
    MODEL,
    DataRef,
    EngineerManifest,
    TrainEngineerResult,
)
from .trainer import RUN, Progress, StageOutcome, StepLogger


def train_engineer(config: TrainConfig, progress: Progress | None = None) -> TrainEngineerResult:
    """Train one stage (:class:`TrainConfig`) and write the engineer directory."""
    out = Path(config.out)
    run = _claim(out, config)
    if (out / MANIFEST).is_file():  # this very stage, finished: nothing to train
        manifest = EngineerManifest.load(out)
        return _result(out, manifest, None)
    from .data import load_stage

    data = load_stage(config.data, config.stage, config.holdout_env)
    if config.stage == "sft":
        from .sft import run_sft as run_stage
    else:
        from .grpo import run_grpo as run_stage
    started = time.monotonic()
    outcome = run_stage(config, data, out, StepLogger(out, progress, run.get("seconds", 0.0)))
    seconds = run.get("seconds", 0.0) + time.monotonic() - started
    manifest = _write(out, config, data.ref, outcome, seconds)
    return _result(out, manifest, outcome.resumed_from)


def _claim(out: Path, config: TrainConfig) -> dict[str, Any]:
    """``out``'s run record for ``config``: new, or the same settings' (to resume)."""
    run_file = out / CHECKPOINTS / RUN
    wanted = config.identity()
    if run_file.is_file():
        run = json.loads(run_file.read_text())
        if run.get("config_id") != wanted:
            raise ConfigError(
                f"--out {out}",
                "holds an engineer trained with other settings (its checkpoints/run.json): "
                "choose another --out, or remove this one to retrain",
            )
        return run
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out {out}", "exists and is not an engineer directory of this run")
    run_file.parent.mkdir(parents=True, exist_ok=True)
    run = {"config_id": wanted, "stage": config.stage, "seconds": 0.0}
    run_file.write_text(json.dumps(run))
    return run


def _weights_id(folder: Path) -> str:
    """A hash of the weights and their configuration. A configuration is hashed in canonical
    form: peft writes ``target_modules`` from a set, in an order that changes with the
    process's hash seed, so the same weights would otherwise get another id per process."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.suffix in (".safetensors", ".bin"):
            body = path.read_bytes()
        elif path.name.endswith("config.json"):
            canonical = _canonical(json.loads(path.read_text(encoding="utf-8")))
            body = json.dumps(canonical, sort_keys=True).encode()
        else:
            continue
        digest.update(path.relative_to(folder).as_posix().encode())
        digest.update(body)
    return digest.hexdigest()[:16]


def _canonical(value: Any) -> Any:
    """``value`` with every list of names sorted (sets written as lists) and keys sorted."""
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_canonical(v) for v in value]
        return sorted(items) if all(isinstance(v, str) for v in items) else items
    return value


def _write(
    out: Path, config: TrainConfig, ref: DataRef, outcome: StageOutcome, seconds: float
) -> EngineerManifest:
    from importlib.metadata import PackageNotFoundError, version

    folder = out / (ADAPTER if outcome.lora else MODEL)
    outcome.model.save_pretrained(str(folder))
    outcome.tokenizer.save_pretrained(str(folder))
    try:
        hx_version = version("harnessctl")
    except PackageNotFoundError:
        hx_version = "unknown"
    manifest = EngineerManifest(
        id=_weights_id(folder),
        stage=config.stage,
        base=outcome.base,
        parent=outcome.parent,
        lora=outcome.lora,
        weights=folder.name,
        config=config.model_dump(mode="json"),
        config_id=config.identity(),
        data=outcome.used,
        steps=outcome.steps,
        seconds=round(seconds, 1),
        curve=StepLogger(out, None, 0).read(),
        harnessctl_version=hx_version,
        created_at=time.time(),
    )
    partial = out / (MANIFEST + ".partial")  # written last: its presence means "done"
    partial.write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
    partial.rename(out / MANIFEST)
    return manifest


def _result(out: Path, manifest: EngineerManifest, resumed: int | None) -> TrainEngineerResult:
    return TrainEngineerResult(
        out=str(out),
        stage=manifest.stage,
        engineer_id=manifest.id,
        steps=manifest.steps,
        resumed_from=resumed,
        records=manifest.data.records,
        seconds=manifest.seconds,
        final=manifest.curve[-1] if manifest.curve else None,
    )
