#!/usr/bin/env python3
"""GRPO in TRL (1.16) on harnessctl rollouts, with the pool's rescue, on a CPU.

The whole wiring of ``harnessctl.integrations.trl``: a small real model loaded from its GGUF
file (the model catalogue fetches and verifies it; transformers de-quantises it, with the
``gguf`` package of the ``trainers`` extra), a pool of the toy household game's base harness
and its evolved siblings (examples/toyenv: init, evolve and profile on the offline sim
policy, export-pool), and ``GRPOTrainer(rollout_func=HarnessRollouts(pool, rescue=...))``:
every prompt is a task, played by the model being trained under the pool's base harness,
and with ``--rescue`` each group whose attempts all failed is re-rolled under the Top-k
siblings (``mix``: ``keep-failures``).

usage: python examples/trainers/trl_rescue.py [--rescue] [--steps 2] [--model smollm2]
       [--suite toy|reach] [--pool DIR] [--out DIR]
(pip install -e '.[trainers]' -e examples/toyenv). benchmarks/trl_rescue.py runs both arms
and plots them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TOY = ROOT / "examples" / "toyenv"
BASE = "toy-base"
SUITE = "examples/toyenv"
#: A quick evolve: the dev split (6 games), one seed, small batches (about 30 s of CPU).
QUICK_EVOLVE = ("--split", "dev", "--rollouts", 1, "--batch", 4, "--control", 4, "--alpha", 1)
FULL_EVOLVE = ("--split", "train", "--rollouts", 1)


def _cli(ws: Path, *args: Any) -> str:
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}
    proc = subprocess.run(
        [sys.executable, "-m", "harnessctl.cli", *map(str, args)],
        cwd=ws, env=env, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    if proc.returncode:
        raise RuntimeError(f"harnessctl {args[0]} failed: {proc.stderr[-2000:]}")
    return proc.stdout


def toy_pool(root: Path, *, evolve: tuple = FULL_EVOLVE) -> Path:
    """A workspace of the toy game under ``root``, its base evolved and profiled on the sim
    policy (a test double), exported as a pool: the pool's directory."""
    from harnessctl.workspace import init_workspace

    ws = root / "ws"
    shutil.copytree(TOY / "harnesses" / BASE, ws / "harnesses" / BASE)
    shutil.copytree(TOY / "tasks", ws / SUITE / "tasks")
    shutil.copy(TOY / "suite.yaml", ws / SUITE / "suite.yaml")
    (ws / "harnessctl.yaml").write_text(
        f"sandbox: local\nworkers: 2\npolicy: sim/toy\nsuite: {SUITE}\n"
    )
    init_workspace(ws, examples=False)
    evolved = json.loads(_cli(ws, "evolve", BASE, "--rounds", 1, *evolve, "--json"))
    names = [BASE, *sorted(v["name"] for v in evolved["best"].values())]
    if len(names) < 2:
        raise RuntimeError(f"evolve accepted no sibling of {BASE}: {evolved.get('edits')}")
    _cli(ws, "profile", *names, "--split", "train", "--rollouts", 1)
    out = root / "toy-pool"
    # the sim's failures are drawn per seed, so its siblings' rescues rarely reproduce on fresh
    # seeds; the rescue wiring needs its siblings in the pool all the same
    keep = "--include-unreproduced"
    _cli(ws, "export-pool", *names, "--name", "toy-pool", "--out", out, "--base", BASE, keep)
    return out


#: The toy game's suites: ``toy`` (24 games from the middle of a room; a 135M-0.5B model
#: wins none) and ``reach`` (24 games within a small model's reach: the player starts at
#: the goal's place for two categories of three, so a group's rewards can vary).
SUITES = {"toy": TOY, "reach": TOY / "reach"}


def toy_tasks(split: str = "train", suite: str = "toy") -> list:
    """The tasks of one of the toy game's ``SUITES`` in ``split``."""
    from harnessctl.suite import load_suite

    return load_suite(SUITES[suite]).tasks(split).tasks


def load_policy(model: str = "smollm2", model_dir: Path | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` from a catalogue model's GGUF file (fetched and verified once,
    into ``model_dir``: default the catalogue's, ``harnessctl.localmodel.fetch.model_dir``),
    in float32. The chat template's end of turn is the end of sequence and the padding (the
    SmolLM2 file names ``<|im_start|>`` as its end of sequence)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harnessctl.localmodel.fetch import fetch_model

    path = fetch_model(model, model_dir)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    policy = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    )
    for end in ("<|im_end|>", "<end_of_turn>", "<|eot_id|>"):
        if end in tokenizer.get_vocab():
            tokenizer.eos_token = end
            policy.generation_config.eos_token_id = tokenizer.eos_token_id
            break
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return policy, tokenizer


def grpo_config(
    out: Path, *, steps: int, groups: int, size: int, seed: int, micro: int | None = None,
    **extra: Any,
):  # fmt: skip
    """A GRPO configuration for a CPU: ``groups`` tasks x ``size`` rollouts per step, one
    optimiser step per generation, no reference model (``beta`` 0), nothing saved. ``micro``:
    rows per forward pass (a divisor of ``groups * size``; default all of them), the rest made
    up by gradient accumulation: a 0.5B model's logits over its 151k-token vocabulary take
    gigabytes a row."""
    from trl import GRPOConfig

    batch = groups * size
    micro = micro or batch
    if batch % micro:
        raise ValueError(f"micro batch {micro} does not divide {groups} x {size} rollouts")
    settings: dict[str, Any] = dict(
        output_dir=str(out), max_steps=steps, per_device_train_batch_size=micro,
        num_generations=size, gradient_accumulation_steps=batch // micro, learning_rate=1e-5,
        beta=0.0,
        max_completion_length=256, logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=True, bf16=False, seed=seed, data_seed=seed, dataloader_num_workers=0,
        gradient_checkpointing=False,  # the activations of a 135M-0.5B model fit; faster
    )  # fmt: skip
    settings.update(extra)
    return GRPOConfig(**settings)


def train(
    pool_dir: Path,
    policy: Any,
    tokenizer: Any,
    tasks: list,
    *,
    rescue: bool,
    out: Path,
    steps: int = 2,
    groups: int = 2,
    size: int = 4,
    seed: int = 0,
    max_new_tokens: int = 32,
    max_calls: int | None = 4,
    **config: Any,
) -> dict[str, Any]:
    """``steps`` GRPO steps of ``policy`` on ``tasks`` (one arm): the rollout function's
    per-step records and TRL's log history. ``max_calls``: each rollout's model-call budget
    (a CPU generates a few tokens a second; the toy's own limit is 20 rounds)."""
    from datasets import Dataset
    from trl import GRPOTrainer

    from harnessctl.integrations.trl import HarnessRollouts, rollout_reward, task_rows
    from harnessctl.pool import Pool

    args = grpo_config(out, steps=steps, groups=groups, size=size, seed=seed, **config)
    with Pool.load(pool_dir, max_calls=max_calls) as pool:
        rollouts = HarnessRollouts(pool, rescue=rescue, max_new_tokens=max_new_tokens, seed=seed)
        trainer = GRPOTrainer(
            model=policy, processing_class=tokenizer, args=args, reward_funcs=rollout_reward,
            train_dataset=Dataset.from_list(task_rows(tasks)), rollout_func=rollouts,
        )  # fmt: skip
        try:
            trainer.train()
        finally:
            rollouts.close()
    return {
        "rescue": rescue,
        "steps": [r.as_dict() for r in rollouts.records],
        "log_history": trainer.state.log_history,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rescue", action="store_true", help="rescue all-fail groups")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--model", default="smollm2", help="a catalogue model (GGUF)")
    parser.add_argument("--suite", choices=sorted(SUITES), default="toy", help="the games")
    parser.add_argument("--pool", type=Path, help="an exported pool (default: build one)")
    parser.add_argument("--out", type=Path, default=Path("trl-rescue-out"))
    args = parser.parse_args(argv)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    pool = args.pool or toy_pool(args.out / "pool")
    policy, tokenizer = load_policy(args.model)
    result = train(
        pool, policy, tokenizer, toy_tasks(suite=args.suite), rescue=args.rescue,
        out=args.out / "trainer", steps=args.steps,
    )  # fmt: skip
    for step in result["steps"]:
        print(json.dumps({k: step[k] for k in ("step", "base_reward", "rescue", "unstitched")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
