"""The SFT stage: TRL's ``SFTTrainer`` on the accepted edits, prompt/completion form.

The prompt is what the LLM editor sends (its system prompt, the direction brief, the files in
scope, the failure digests, any retry turns) and the completion the accepted patch in
SEARCH/REPLACE blocks, so the loss is on the patch alone (TRL's default for this form) and
the engineer learns to answer the editor's own prompt in the format the editor reads back.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .config import TrainConfig
from .data import Loaded
from .trainer import (
    StageOutcome,
    StepLogger,
    callback,
    quiet_start,
    start,
    train,
    trainer_settings,
)


def run_sft(config: TrainConfig, data: Loaded, out: Path, logger: StepLogger) -> StageOutcome:
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    began = start(config)
    model, tokenizer = began.model, began.tokenizer
    rows, too_long = fitting(data.rows, tokenizer, config.max_length)
    if not rows:
        raise ConfigError(
            f"--max-length {config.max_length}",
            f"every one of the {len(data.rows)} SFT records is longer (raise it)",
        )
    used = data.ref.model_copy(
        update={
            "records": len(rows),
            "left_out": {"too_long": too_long} if too_long else {},
            "environments": dict(Counter(r["env"] or "unknown" for r in rows)),
        }
    )
    args = SFTConfig(
        **trainer_settings(config, out),
        per_device_train_batch_size=config.batch_size,
        gradient_accumulation_steps=config.grad_accum,
        max_length=None,  # every example fits (too long ones are left out, never cut)
        completion_only_loss=True,
        packing=False,
        lr_scheduler_type="constant",
    )
    pairs = [{"prompt": r["prompt"], "completion": r["completion"]} for r in rows]
    dataset = Dataset.from_list(pairs)
    quiet_start()
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=began.peft,
        callbacks=[callback(logger, out / "checkpoints" / "run.json")],
    )
    resumed_from = train(trainer, out, logger)
    return StageOutcome(
        trainer.model, tokenizer, began, trainer.state.global_step, resumed_from, used
    )


def fitting(rows: list[dict[str, Any]], tokenizer: Any, max_length: int):
    """The rows whose prompt and completion, templated, take at most ``max_length`` tokens,
    and how many do not."""
    kept, too_long = [], 0
    for row in rows:
        ids = tokenizer.apply_chat_template(row["prompt"] + row["completion"], tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):  # a BatchEncoding
            ids = ids["input_ids"]
        if len(ids) <= max_length:
            kept.append(row)
        else:
            too_long += 1
    return kept, too_long
