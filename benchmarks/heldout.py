#!/usr/bin/env python3
"""Evolve and Rank-1 routing figures measured on held-out tasks, beside the in-sample ones.

The offline default end to end, through the CLI with --json: `harnessctl init` a fresh
workspace, `evolve dbbench-base` on the train split (rule-based editor, sim/dbbench, two
seeds), `profile` the best sibling of each direction on train (the router's evidence), then:

* pair rescues vs the base: the (task, seed) pairs the base failed and a sibling solved,
  per sibling and their union, on train (in-sample: the edits were judged there) and on
  test (held out: no edit, profile or routing decision saw a test task);
* Rank-1 routed eval (`eval --router` over the profiled siblings, routed before any rollout
  and, as a verifier arm, after the base's failures) on test (out-of-sample)
  and on dev (the whole suite, which holds train: in-sample), base against routed;
* `harnessctl bench dbbench-base`: the equal-budget arms on test (README's table).

The figures depend on the seeded simulator and catalogue only, not on the machine.

usage:
  .venv/bin/python benchmarks/heldout.py [--rollouts 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def cli(ws: Path, *args: str) -> dict:
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}
    proc = subprocess.run(
        [sys.executable, "-m", "harnessctl.cli", *args, "--json"],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"harnessctl {' '.join(args)} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout[proc.stdout.index("{") :])


def pair_rescues(ws: Path, split: str, rollouts: int, siblings: list[str]) -> dict:
    """Pairs the base failed and each sibling solved on ``split``, and their union."""

    def results(harness: str) -> dict[tuple[str, int], bool]:
        from harnessctl.workspace import load_workspace

        cli(ws, "eval", harness, "--split", split, "--rollouts", str(rollouts))
        store = load_workspace(ws).open_store()
        rows = [r for r in store.rollouts() if r.harness_name == harness and r.split == split]
        return {(r.task_id, r.seed): r.success for r in rows if r.seed < rollouts}

    base = results("dbbench-base")
    per = {}
    for name in siblings:
        mine = results(name)
        per[name] = sorted(p for p, ok in mine.items() if ok and not base.get(p, True))
    union = {p for pairs in per.values() for p in pairs}
    return {
        "split": split,
        "pairs": len(base),
        "base_failures": sum(1 for ok in base.values() if not ok),
        "per_sibling": {n: len(p) for n, p in per.items()},
        "union": len(union),
        "largest_single": max((len(p) for p in per.values()), default=0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=2, help="seeds per task")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args()
    ws = Path(tempfile.mkdtemp(prefix="hxbench-heldout-")) / "ws"
    subprocess.run(
        [sys.executable, "-m", "harnessctl.cli", "init", str(ws)], check=True, capture_output=True
    )
    evolved = cli(ws, "evolve", "dbbench-base", "--rollouts", str(args.rollouts))
    siblings = sorted(v["name"] for v in evolved["best"].values())
    cli(ws, "profile", *siblings, "--split", "train", "--rollouts", str(args.rollouts))
    figures = {
        "evolve": {
            "accepted_directions": sorted(evolved["best"]),
            "in_sample": pair_rescues(ws, "train", args.rollouts, siblings),
            "held_out": pair_rescues(ws, "test", args.rollouts, siblings),
        },
        "rank1": {},
    }
    for split, when in [(s, w) for s in ("test", "dev") for w in ("before", "failed")]:
        routed = cli(
            ws, "eval", "dbbench-base", "--split", split, "--rollouts", str(args.rollouts),
            "--router", ",".join(siblings),  # the profiled siblings (not a round-1 parent)
            "--route-when", when,
        )  # fmt: skip
        figures["rank1"][f"{split} ({when})"] = {
            "tasks": routed["tasks"],
            "in_sample_tasks": len(routed["in_sample_tasks"]),
            "base": routed["base"]["success_rate"],
            "routed": routed["routed"]["success_rate"],
            "delta": routed["delta"],
            "extra_rollouts": routed["extra_rollouts"],
            "verifier": routed["verifier"],
            "routed_side_rollouts": routed["routed_side_rollouts"],
        }
    bench = cli(ws, "bench", "dbbench-base", "--rollouts", str(args.rollouts))
    figures["bench"] = {
        "pairs": bench["pairs"],
        "best_sibling": bench["best_sibling"],
        "combined": {"holds": bench["combined_siblings"], "left_out": bench["combined_left_out"]},
        "arms": [
            {k: a[k] for k in ("name", "verifier", "successes", "success_rate", "ci95",
                               "rollouts", "model_calls", "vs_best_p", "vs_base_p")}
            for a in bench["arms"]
        ],
    }  # fmt: skip
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
