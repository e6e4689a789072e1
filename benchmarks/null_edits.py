#!/usr/bin/env python3
"""False acceptance of evolve's rule, measured with edits that change nothing.

`harnessctl evolve --editor null` proposes, for every direction and round, an edit that
changes no behaviour (a comment, an unused name, trailing spaces on a prompt line). Each is
judged exactly as evolve judges any edit (the gate on fresh seeds, then the split guard, with
the same batch and control sizes, alpha, min-net and retries: evolve's defaults unless given;
`--no-guard` and `--gate same-batch` are passed through), so an accepted null edit is a false
acceptance. Runs on every environment with an offline policy.

The offline simulated policies are deterministic per (task, seed) and draw alike under any
harness: a null edit could never change an outcome and the test would be vacuous. So every
run passes the policy param `resample=K`: each harness then draws afresh from (seed, harness
hash, K), as a sampled model's run-to-run variation would, and K is varied across runs.

Prints one line per environment and, last, `false acceptance: A/N (rate, 95% CI)` (Wilson
interval) over all of them; exits 1 when the rate is above alpha. This is the end-to-end
check (real evolve runs, any `--gate`); `benchmarks/gate.py` measures level and power per
regime with the many more judgements they need.

usage:
  .venv/bin/python benchmarks/null_edits.py [--edits 200] [--confirm-seeds N] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from harnessctl.stats import wilson_interval as wilson

ROOT = Path(__file__).resolve().parent.parent
# (label, base harness, suite, split, policy params): every environment with an offline
# policy, and DBBench with a strong simulated agent (skill 0.9: base success ~0.85), where the
# same-batch test's selection bias is largest (docs/decisions.md, "Certified acceptance")
ENVIRONMENTS = [
    ("dbbench", "dbbench-base", "examples/dbbench", "train", []),
    ("dbbench-fc", "dbbench-fc", "examples/dbbench", "train", []),
    ("alfworld", "alfworld-base", "examples/alfworld", "train", []),
    ("dbbench-strong", "dbbench-base", "examples/dbbench", "train", ["skill=0.9"]),
]


def figure(accepted: int, n: int) -> str:
    lo, hi = wilson(accepted, n)
    return f"{accepted}/{n} ({accepted / max(1, n):.3f}, 95% CI {lo:.3f}-{hi:.3f})"


def evolve(ws: Path, env: tuple, resample: int, extra: list[str]) -> dict:
    _, base, suite, split, params = env
    args = [
        sys.executable, "-m", "harnessctl.cli", "evolve", base, "--suite", str(ROOT / suite),
        "--split", split, "--editor", "null", "-p", f"resample={resample}", "--json", *extra,
    ]  # fmt: skip
    for param in params:
        args += ["-p", param]
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(ws)}
    proc = subprocess.run(args, cwd=ws, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"evolve {base} (resample={resample}) failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout[proc.stdout.index("{") :])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=200, help="null edits in all (at least)")
    parser.add_argument(
        "--envs", default=",".join(e[0] for e in ENVIRONMENTS), help="comma-separated labels"
    )
    parser.add_argument("--alpha", type=float, default=0.1, help="evolve's --alpha")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2, help="evolve's --rounds")
    parser.add_argument("--gate", default="sequential", help="evolve's --gate")
    parser.add_argument("--max-looks", type=int, default=30, help="evolve's --max-looks")
    parser.add_argument("--no-guard", action="store_true", help="evolve's --no-guard")
    parser.add_argument(
        "--confirm-seeds", type=int, default=0, help="evolve's --confirm-seeds (0: none)"
    )
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args(argv)
    chosen = [e for e in ENVIRONMENTS if e[0] in args.envs.split(",")]
    if not chosen:
        raise SystemExit(f"--envs: none of {args.envs!r} is one of {[e[0] for e in ENVIRONMENTS]}")
    per_env = math.ceil(args.edits / len(chosen))
    extra = ["--alpha", str(args.alpha), "--workers", str(args.workers)]
    extra += ["--rounds", str(args.rounds), "--gate", args.gate]
    extra += ["--max-looks", str(args.max_looks), *(["--no-guard"] if args.no_guard else [])]
    if args.confirm_seeds:
        extra += ["--confirm-seeds", str(args.confirm_seeds)]
    ws = Path(tempfile.mkdtemp(prefix="hxbench-null-")) / "ws"
    subprocess.run(
        [sys.executable, "-m", "harnessctl.cli", "init", str(ws)], check=True, capture_output=True
    )
    print(
        "offline sims draw alike under any harness for a (task, seed): each run re-draws them "
        "per harness (policy param resample=K, K = 1, 2, ...) so null edits can change outcomes",
        flush=True,
    )
    results: dict[str, dict] = {}
    for env in chosen:
        label, base, _, split, params = env
        judged: list[dict] = []
        rejected = 0
        successes: list[float] = []
        resample = 0
        while len(judged) < per_env and resample < 50:
            resample += 1
            record = evolve(ws, env, resample, extra)
            rejected += sum(1 for e in record["edits"] if e["status"] == "rejected")
            successes.append(record["base_success"])
            judged += [
                {**e, "resample": resample} for e in record["edits"] if e["status"] != "rejected"
            ]
        accepted = sum(1 for e in judged if e["status"] == "accepted")
        results[label] = {
            "base": base,
            "split": split,
            "params": params,
            "base_success": successes,
            "runs": resample,
            "null_edits": len(judged),
            "accepted": accepted,
            "rejected_patches": rejected,  # a null patch that failed validation: none expected
            "edits": judged,
        }
        mean = sum(successes) / max(1, len(successes))
        said = f"{label} ({' '.join([base, *params])}, {split}, base success {mean:.2f}"
        said += f", {resample} runs)"
        print(f"{said}: {figure(accepted, len(judged))}", flush=True)
    total = sum(r["null_edits"] for r in results.values())
    wrong = sum(r["accepted"] for r in results.values())
    lo, hi = wilson(wrong, total)
    summary = {
        "alpha": args.alpha,
        "confirm_seeds": args.confirm_seeds,
        "accepted": wrong,
        "null_edits": total,
        "rate": wrong / max(1, total),
        "ci95": [lo, hi],
        "environments": results,
    }
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    verdict = "within" if wrong / max(1, total) <= args.alpha else "ABOVE"
    print(f"alpha {args.alpha}: the rate is {verdict} it")
    print(f"false acceptance: {figure(wrong, total)}")
    return summary


if __name__ == "__main__":
    figures = main()
    sys.exit(1 if figures["rate"] > figures["alpha"] else 0)
