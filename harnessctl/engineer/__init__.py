"""Training a harness engineer (Harness-R1): an editor model post-trained on edit records.

``harnessctl export-edits`` writes the data (SFT prompt/completion pairs of accepted edits,
GRPO prompts with an executable reward recipe); this package trains a model on it and runs
the result as an editor:

- :func:`train_engineer` (``harnessctl train-engineer``): ``stage="sft"`` fine-tunes a base
  model (LoRA by default) on the accepted edits, in exactly the prompt the LLM editor sends
  and the SEARCH/REPLACE blocks it reads back; ``stage="grpo"`` continues with TRL's
  ``GRPOTrainer``, rewarded by :mod:`harnessctl.evolve.engineer` (validate the patch, build
  the child, re-run parent and child on fresh seeds the prompt never showed). Either writes an
  *engineer directory* (``engineer.json``, the adapter, the tokenizer, checkpoints, a step log).
- :class:`EngineerEditor` (``harnessctl evolve --editor engineer:DIR``): the trained model
  proposes patches that go through the same validation, gate and edit records as any editor's.
- :mod:`.corpus`: edit records over every environment, with one environment held out.

Heavy libraries (torch, transformers, peft, trl) are imported inside the functions that
need them: importing this package costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import LoraSettings, TrainConfig
    from .editor import EngineerEditor
    from .records import EngineerManifest, TrainEngineerResult
    from .train import train_engineer

__all__ = [
    "EngineerEditor",
    "EngineerManifest",
    "LoraSettings",
    "TrainConfig",
    "TrainEngineerResult",
    "train_engineer",
]

_WHERE = {
    "EngineerEditor": ".editor",
    "EngineerManifest": ".records",
    "LoraSettings": ".config",
    "TrainConfig": ".config",
    "TrainEngineerResult": ".records",
    "train_engineer": ".train",
}


def __getattr__(name: str) -> Any:  # the public names, imported when first used
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(_WHERE[name], __name__), name)
