"""The GRPO stage: TRL's ``GRPOTrainer`` on the GRPO records, rewarded by the realised effect
of the engineer's own patches.

Each step samples ``num_generations`` patches per prompt; each is scored by
:class:`harnessctl.evolve.engineer.PatchScorer` (the guard against patches that game the
scorer, validation, the child built, parent and child re-run in the sandbox on the record's
fresh seeds; the recipe's ``invalid_reward`` for an invalid patch). The realised reward
(``harness_engineer_reward``) and the shaping term (``patch_validity``, weight
``validity_weight``, 0 by default) are separate reward functions, so TRL logs each apart.

Only the engineer trains: the policy that runs the harness is the recipe's, frozen, and
records whose reward would re-run a (task, seed) the prompt shows are left out.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .config import TrainConfig
from .data import Loaded, corpus_manifest
from .trainer import (
    StageOutcome,
    StepLogger,
    callback,
    quiet_start,
    start,
    train,
    trainer_settings,
)


def run_grpo(config: TrainConfig, data: Loaded, out: Path, logger: StepLogger) -> StageOutcome:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from ..evolve.engineer import ValidityReward, make_trl_reward
    from ..evolve.guards import reruns_shown_seeds
    from ..evolve.reward import RewardRecipe

    rows, left_out = [], Counter[str]()
    for row in data.rows:
        if reruns_shown_seeds(row["prompt"], RewardRecipe.model_validate(row["reward"])):
            left_out["reward_reruns_shown_seeds"] += 1
            continue
        rows.append({"prompt": row["prompt"], "reward": row["reward"]})
    if not rows:
        raise ConfigError(
            str(Path(config.data) / "grpo" / "train.jsonl"),
            "every record's reward re-runs seeds its prompt shows (export edits judged by "
            "the sequential gate, which judges on fresh seeds)",
        )
    used = data.ref.model_copy(update={"records": len(rows), "left_out": dict(left_out)})
    began = start(config)  # the usual start: the SFT engineer, its adapter trainable
    model, tokenizer = began.model, began.tokenizer
    scoring: dict[str, Any] = dict(
        suite=suites(config) or None, workspace=config.workspace, sandbox=config.sandbox,
        workers=config.workers, timeout_s=config.score_timeout_s, cache="new",
    )  # fmt: skip
    if scoring["suite"] is None and scoring["workspace"] is None:
        why = "the reward needs the suites the records name (or --workspace)"
        raise ConfigError("--suite", why)
    realized = make_trl_reward(max_workers=config.score_workers, **scoring)
    validity = ValidityReward(
        realized.scorer, max_workers=config.score_workers, name="patch_validity"
    )
    args = GRPOConfig(
        **trainer_settings(config, out),
        per_device_train_batch_size=config.batch_size * config.num_generations,
        num_generations=config.num_generations,
        max_completion_length=config.max_completion_length,
        temperature=config.temperature,
        beta=config.beta,
        reward_weights=[1.0, config.validity_weight],
        log_completions=False,
        lr_scheduler_type="constant",
    )
    quiet_start()
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[realized, validity],
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=began.peft,
        callbacks=[callback(logger, out / "checkpoints" / "run.json")],
    )
    try:
        resumed_from = train(trainer, out, logger)
    finally:
        realized.close()
    return StageOutcome(
        trainer.model, tokenizer, began, trainer.state.global_step, resumed_from, used
    )


def suites(config: TrainConfig) -> list[Path]:
    """The suites the reward re-runs tasks from: ``--suite``, else the corpus's."""
    if config.suites:
        return [Path(s) for s in config.suites]
    corpus = corpus_manifest(config.data) or {}
    root = Path(config.data)
    return [(root / p).resolve() for p in corpus.get("suites", {}).values()]
