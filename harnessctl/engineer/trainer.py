"""What both training stages share: the trainer's settings, LoRA, the step log and progress,
checkpoints, and what a stage hands back to :func:`harnessctl.engineer.train.train_engineer`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import LoraSettings, TrainConfig
from .records import CHECKPOINTS, STEP_LOG, BaseRef, DataRef, StepLog

Progress = Callable[[StepLog, int], None]
"""Called after every logged step with the step's log and the total steps."""
RUN = "run.json"


class Start:
    """The model a stage starts from (:func:`start`) and what it trains of it."""

    def __init__(
        self, model: Any, tokenizer: Any, base: BaseRef, parent: str | None, peft: Any,
        lora: LoraSettings | None,
    ) -> None:  # fmt: skip
        self.model, self.tokenizer, self.base, self.parent = model, tokenizer, base, parent
        self.peft = peft
        """A peft config the trainer wraps the model in (None: it is wrapped already, or
        every weight trains)."""
        self.lora = lora
        """The adapter trained (None: every weight)."""


def start(config: TrainConfig) -> Start:
    """``config.base`` loaded for training: an engineer's adapter trains on; an engineer
    trained without LoRA is a base (a new adapter on it, or all its weights again); else a
    base model with a new adapter (or all its weights)."""
    from .base import is_engineer, load_base, load_engineer, resolve_base
    from .records import ADAPTER, MODEL

    new = lora_config(config) if config.lora else None
    if is_engineer(config.base):
        model, tokenizer, manifest = load_engineer(Path(config.base), config.dtype, trainable=True)
        if manifest.weights == ADAPTER:
            return Start(model, tokenizer, manifest.base, manifest.id, None, manifest.lora)
        whole = BaseRef(kind="directory", name=str((Path(config.base) / MODEL).resolve()))
        return Start(model, tokenizer, whole, manifest.id, new, config.lora)
    base = resolve_base(config.base)
    model, tokenizer = load_base(base, config.dtype)
    return Start(model, tokenizer, base, None, new, config.lora)


class StageOutcome:
    """What a stage's runner hands back: the trained model (adapter or whole), the
    tokenizer, where it started and the data it actually used."""

    def __init__(
        self, model: Any, tokenizer: Any, began: Start, steps: int, resumed_from: int | None,
        used: DataRef,
    ) -> None:  # fmt: skip
        self.model, self.tokenizer = model, tokenizer
        self.base, self.parent, self.lora = began.base, began.parent, began.lora
        self.steps, self.resumed_from, self.used = steps, resumed_from, used


class StepLogger:
    """Turns the trainer's logs into :class:`StepLog` lines (``steps.jsonl``) and progress."""

    def __init__(self, out: Path, progress: Progress | None, seconds: float) -> None:
        self.path = out / STEP_LOG
        self.progress = progress
        self.offset = seconds  # training time of the runs this one resumes
        self.started = time.monotonic()

    def resume_at(self, step: int) -> None:
        """Keep the lines of the steps a checkpoint holds; drop the ones after it."""
        kept = [s for s in self.read() if s.step <= step]
        self.path.write_text("".join(s.model_dump_json() + "\n" for s in kept))

    def read(self) -> list[StepLog]:
        if not self.path.is_file():
            return []
        return [StepLog.model_validate_json(line) for line in self.path.read_text().splitlines()]

    def __call__(self, step: int, total: int, logs: dict[str, Any]) -> None:
        def number(*keys: str) -> float | None:
            for key in keys:
                if isinstance(logs.get(key), int | float):
                    return float(logs[key])
            return None

        entry = StepLog(
            step=step,
            loss=number("loss", "train_loss"),
            learning_rate=number("learning_rate"),
            reward=number("reward"),
            reward_std=number("reward_std"),
            realized=number("rewards/harness_engineer_reward/mean"),
            validity=number("rewards/patch_validity/mean"),
            elapsed_s=round(self.offset + time.monotonic() - self.started, 1),
        )
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(entry.model_dump_json() + "\n")
        if self.progress is not None:
            self.progress(entry, total)

    def elapsed(self) -> float:
        return self.offset + time.monotonic() - self.started


def callback(logger: StepLogger, run_file: Path) -> Any:
    """A transformers ``TrainerCallback`` feeding ``logger`` and keeping ``run.json``'s
    training time at every checkpoint (so a resumed run adds to it)."""
    from transformers import TrainerCallback

    class _Callback(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and any(k in logs for k in ("loss", "reward")):
                logger(state.global_step, state.max_steps, logs)

        def on_save(self, args, state, control, **kwargs):
            data = json.loads(run_file.read_text())
            data["seconds"] = round(logger.elapsed(), 1)
            run_file.write_text(json.dumps(data))

    return _Callback()


def quiet_start() -> None:
    """No progress bars of the libraries (tokenising, loading): the step progress is ours."""
    import datasets
    import transformers

    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()


def quiet(trainer: Any) -> Any:
    """The trainer without its printer: it prints every log dict on stdout, where ``--json``
    writes the result (the progress callback shows the steps on stderr)."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    return trainer


def train(trainer: Any, out: Path, logger: StepLogger) -> int | None:
    """Run ``trainer`` quietly from the last checkpoint under ``out`` (if any), the step log
    told where it resumed; the step resumed from, None for a fresh start."""
    quiet(trainer)
    resume = last_checkpoint(out)
    resumed_from = int(resume.rsplit("-", 1)[1]) if resume else None
    if resumed_from is not None:
        logger.resume_at(resumed_from)
    trainer.train(resume_from_checkpoint=resume)
    return resumed_from


def last_checkpoint(out: Path) -> str | None:
    from transformers.trainer_utils import get_last_checkpoint

    folder = out / CHECKPOINTS
    return get_last_checkpoint(str(folder)) if folder.is_dir() else None


def trainer_settings(config: TrainConfig, out: Path) -> dict[str, Any]:
    """The ``TrainingArguments`` both stages share."""
    import torch

    from .base import torch_dtype

    cuda = torch.cuda.is_available()
    settings: dict[str, Any] = dict(
        output_dir=str(out / CHECKPOINTS), learning_rate=config.lr, logging_steps=1,
        save_strategy="steps", save_steps=config.save_steps, save_total_limit=2,
        report_to="none", use_cpu=not cuda, bf16=torch_dtype(config.dtype) == torch.bfloat16,
        seed=config.seed, data_seed=config.seed, dataloader_num_workers=0,
        gradient_checkpointing=config.gradient_checkpointing, disable_tqdm=True,
        num_train_epochs=config.epochs,
    )  # fmt: skip
    if config.max_steps is not None:
        settings["max_steps"] = config.max_steps
    return settings


def lora_config(config: TrainConfig) -> Any:
    from peft import LoraConfig

    assert config.lora is not None
    lora = config.lora
    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        task_type="CAUSAL_LM",
    )
