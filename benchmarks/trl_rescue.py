#!/usr/bin/env python3
"""GRPO in TRL with real weights, policy-only against with-rescue: the curves.

Both arms start from the same weights (a catalogue model's GGUF file, de-quantised by
transformers), see the same tasks in the same order and sample their base rollouts from the
same seeds (``harnessctl.integrations.trl.HarnessRollouts``); they differ only in the rescue:
policy-only trains on the base harness's rollouts as they are, with-rescue replaces part of
each all-fail group by rollouts under the pool's Top-k siblings (``keep-failures``). The
environment is the toy household game (examples/toyenv), the pool its base and the
siblings evolve grows on the sim policy (a test double; the model trained is real).

The games are the toy's ``reach`` suite by default: GRPO's advantage is zero in a group whose
rollouts all fail (or all win), so a policy learns only from tasks it sometimes solves. The
toy suite's games start in the middle of a room and neither CPU-sized model wins one (SmolLM2
never writes an ``Action:`` line; Qwen2.5-Coder-0.5B writes multi-command plans and repeats
them): every group is all-fail and both arms train on nothing. In ``reach`` the player starts
at the goal's place in two of three categories (``take-here``: one command; ``open-here``:
two; ``fetch``: the toy's own kind), where the 0.5B under the base harness won 4 of 12 train
games (temperature 1.0, one seed each, served by llama.cpp; 2026-12-07).

The curve is the reward under the base harness: each step's base rollouts, before any
rescue, i.e. the policy's own success where it will be deployed (the rescued rows' rewards
come from sibling harnesses and are not counted in it). Beside it: the groups that carry a
learning signal (rewards that vary, so GRPO's advantage is not zero) and what the rescue did.

A few CPU steps move nothing measurable: the table says what each arm trained on, and the
intervals (Wilson, 95%) say how little a few dozen rollouts can tell. Run it longer on a GPU
machine (--steps 200 --groups 8 --size 8) for a curve that can show learning.

usage: .venv/bin/python benchmarks/trl_rescue.py [--steps 3] [--model qwen2.5-coder-0.5b]
       [--suite reach|toy] [--groups 2] [--size 4] [--micro 1] [--max-new-tokens 32]
       [--max-calls 4]
       [--pool DIR] [--out benchmarks/results]
Writes OUT/trl_rescue.png, OUT/trl_rescue.md and OUT/trl_rescue.json; exits 1 when an arm
fails or a number is not finite (matplotlib draws the plot). The script is the same on a
GPU machine (README: the measured time of the defaults).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harnessctl.stats import wilson_interval as wilson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "trainers"))
import trl_rescue  # noqa: E402  (the example's wiring)

ARMS = {"policy-only": False, "with-rescue": True}


def _chunks(rewards: list[float], size: int) -> list[list[float]]:
    return [rewards[i : i + size] for i in range(0, len(rewards), size)]


def signal_groups(rewards: list[float], size: int) -> int:
    """Groups of ``size`` whose rewards vary: the ones GRPO's advantage does not zero."""
    return sum(len(set(chunk)) > 1 for chunk in _chunks(rewards, size))


def all_fail_groups(rewards: list[float], size: int) -> int:
    """Groups of ``size`` whose every reward is <= 0 (the rescue rule's trigger)."""
    return sum(all(r <= 0 for r in chunk) for chunk in _chunks(rewards, size))


def step_rows(result: dict[str, Any], size: int) -> list[dict[str, Any]]:
    """One row per training step: base successes, trained signal, rescue, TRL's loss."""
    logs = [entry for entry in result["log_history"] if "loss" in entry]
    rows = []
    for i, step in enumerate(result["steps"]):
        base = step["base_rewards"]
        wins = sum(r > 0 for r in base)
        rescue = step["rescue"]
        rows.append(
            {
                "step": i + 1,
                "base_reward": step["base_reward"],
                "base_successes": wins,
                "base_rollouts": len(base),
                "interval": wilson(wins, len(base)),
                "trained_reward": sum(step["trained_rewards"]) / len(step["trained_rewards"]),
                "signal_groups": signal_groups(step["trained_rewards"], size),
                "groups": len(base) // size,
                "all_fail": all_fail_groups(base, size),
                "rescued": int(rescue.get("harnessctl/rescue_rescued", 0)),
                "unstitched": step["unstitched"],
                "loss": logs[i].get("loss") if i < len(logs) else None,
                "grad_norm": logs[i].get("grad_norm") if i < len(logs) else None,
            }
        )
    return rows


def _tally(steps: list[dict[str, Any]], key: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for step in steps:
        for outcome, count in step[key].items():
            out[outcome] = out.get(outcome, 0) + count
    return dict(sorted(out.items()))


def summary(rows: list[dict[str, Any]], steps: list[dict[str, Any]]) -> dict[str, Any]:
    wins = sum(r["base_successes"] for r in rows)
    n = sum(r["base_rollouts"] for r in rows)
    return {
        "base_outcomes": _tally(steps, "base_outcomes"),
        "sibling_outcomes": _tally(steps, "sibling_outcomes"),
        "base_successes": wins,
        "base_rollouts": n,
        "base_rate": wins / n if n else 0.0,
        "interval": wilson(wins, n),
        "signal_groups": sum(r["signal_groups"] for r in rows),
        "groups": sum(r["groups"] for r in rows),
        "rescued": sum(r["rescued"] for r in rows),
        "all_fail": sum(r["all_fail"] for r in rows),
    }


def finite(value: Any) -> bool:
    if isinstance(value, dict):
        return all(finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(finite(v) for v in value)
    return not isinstance(value, float) or math.isfinite(value)


def markdown(report: dict[str, Any]) -> str:
    setup = report["setup"]
    lines = [
        f"TRL GRPO, {setup['model']}, toy game ({setup.get('suite', 'toy')} suite), "
        f"{setup['steps']} steps x {setup['groups']} "
        f"tasks x {setup['size']} rollouts, max {setup['max_new_tokens']} tokens a reply, "
        f"{setup['max_calls']} calls a rollout ({setup['seconds']:.0f} s in all)",
        "",
        "| arm | step | base reward (successes/rollouts, 95% CI) | groups with signal "
        "| all-fail | rescued | loss |",
        "|---|---|---|---|---|---|---|",
    ]
    for arm, data in report["arms"].items():
        for r in data["rows"]:
            lo, hi = r["interval"]
            loss = "n/a" if r["loss"] is None else f"{r['loss']:.4f}"
            lines.append(
                f"| {arm} | {r['step']} | {r['base_reward']:.2f} ({r['base_successes']}/"
                f"{r['base_rollouts']}, {lo:.2f}-{hi:.2f}) | {r['signal_groups']}/{r['groups']} "
                f"| {r['all_fail']} | {r['rescued']} | {loss} |"
            )
    lines += ["", "| arm | base successes | rate (95% CI) | groups with signal | rescued |"]
    lines.append("|---|---|---|---|---|")
    for arm, data in report["arms"].items():
        s = data["summary"]
        lo, hi = s["interval"]
        lines.append(
            f"| {arm} | {s['base_successes']}/{s['base_rollouts']} | {s['base_rate']:.2f} "
            f"({lo:.2f}-{hi:.2f}) | {s['signal_groups']}/{s['groups']} "
            f"| {s['rescued']}/{s['all_fail']} all-fail |"
        )
    lines += ["", "| arm | base rollouts' outcomes | sibling rollouts' outcomes (rescue) |"]
    lines.append("|---|---|---|")
    for arm, data in report["arms"].items():
        s = data["summary"]
        said = [", ".join(f"{k} {v}" for k, v in s[key].items()) or "none" for key in
                ("base_outcomes", "sibling_outcomes")]  # fmt: skip
        lines.append(f"| {arm} | {said[0]} | {said[1]} |")
    return "\n".join(lines) + "\n"


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for arm, data in report["arms"].items():
        steps = [r["step"] for r in data["rows"]]
        rewards = [r["base_reward"] for r in data["rows"]]
        low = [r["interval"][0] for r in data["rows"]]
        high = [r["interval"][1] for r in data["rows"]]
        left.plot(steps, rewards, marker="o", label=arm)
        left.fill_between(steps, low, high, alpha=0.15)
        right.plot(steps, [r["signal_groups"] for r in data["rows"]], marker="o", label=arm)
    groups = report["setup"]["groups"]
    left.set(xlabel="GRPO step", ylabel="reward under the base harness", ylim=(-0.05, 1.05))
    left.set_title("policy's success under the base (95% Wilson band)")
    right.set(xlabel="GRPO step", ylabel="groups whose rewards vary", ylim=(-0.1, groups + 0.1))
    right.set_title("groups with a GRPO learning signal")
    for ax in (left, right):
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend()
        ax.grid(alpha=0.3)
    setup = report["setup"]
    fig.suptitle(
        f"TRL GRPO on the toy game ({setup.get('suite', 'toy')} suite), {setup['model']} "
        "(CPU, few steps)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="trl-rescue-"))
    pool = args.pool or trl_rescue.toy_pool(work / "pool", evolve=trl_rescue.QUICK_EVOLVE)
    tasks = trl_rescue.toy_tasks("train", args.suite)
    arms = {}
    for arm, rescue in ARMS.items():
        print(f"{arm}: {args.steps} steps", file=sys.stderr, flush=True)
        # the same weights for each arm, loaded afresh (de-quantising is deterministic): one
        # model, its gradients and optimiser state in memory at a time
        policy, tokenizer = trl_rescue.load_policy(args.model)
        result = trl_rescue.train(
            pool, policy, tokenizer, tasks, rescue=rescue, out=work / arm,
            steps=args.steps, groups=args.groups, size=args.size, seed=args.seed,
            max_new_tokens=args.max_new_tokens, max_calls=args.max_calls, micro=args.micro,
        )  # fmt: skip
        del policy
        gc.collect()
        rows = step_rows(result, args.size)
        arms[arm] = {
            "rows": rows,
            "summary": summary(rows, result["steps"]),
            "raw": result["steps"],
        }
    setup = {k: getattr(args, k) for k in ("model", "suite", "steps", "groups", "size", "seed")}
    setup.update(max_new_tokens=args.max_new_tokens, max_calls=args.max_calls, micro=args.micro)
    setup["seconds"] = time.monotonic() - started
    return {"setup": setup, "arms": arms}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="a catalogue model (GGUF)")
    parser.add_argument(
        "--suite", choices=sorted(trl_rescue.SUITES), default="reach",
        help="the toy game's games: reach (within a small model's reach) or toy",
    )  # fmt: skip
    parser.add_argument("--groups", type=int, default=2, help="tasks per step")
    parser.add_argument("--size", type=int, default=4, help="rollouts per task (a group)")
    parser.add_argument(
        "--micro", type=int, default=1,
        help="rows per forward pass (gradient accumulation makes up the rest of a step)",
    )  # fmt: skip
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--max-calls", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pool", type=Path, help="an exported toy pool (default: build one)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    report = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "trl_rescue.json").write_text(json.dumps(report, indent=1) + "\n")
    table = markdown(report)
    (args.out / "trl_rescue.md").write_text(table)
    plot(report, args.out / "trl_rescue.png")
    print(table)
    if not finite({arm: data["rows"] for arm, data in report["arms"].items()}):
        print("a number is not finite", file=sys.stderr)
        return 1
    if any(len(data["rows"]) != args.steps for data in report["arms"].values()):
        print("an arm did not run every step", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
