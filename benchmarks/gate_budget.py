#!/usr/bin/env python3
"""Which test a judgement's budget should run: the sequential e-value test or the fixed-sample
sign test, measured by exact power (harnessctl/evolve/power.py).

For budgets of 2 to 30 looks of 12 pairs (24 to 360 pairs), judged tasks at parent success
p0 in `--p0` and a repair of +`--effect` on them, at the first judgement's level (alpha / m),
it prints per design the power, the expected pairs of a dud (an edit that changes nothing)
and of the repair, and the **pairs per detected repair** when a share `--duds` of the edits
judged are duds: (duds x dud pairs + repairs x repair pairs) / (repairs x power), the
rollouts a run spends per repair it finds. The design `choose_design` picks must be the
cheaper one at every budget at least `--margin` away from its threshold, averaged over the
p0 values; the benchmark exits 1 otherwise.

usage:
  .venv/bin/python benchmarks/gate_budget.py [--p0 0.1,0.2,0.3] [--effect 0.15] [--duds 0.5]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harnessctl.evolve.gate import FIXED_BELOW_PAIRS, GatePlan, choose_design  # noqa: E402
from harnessctl.evolve.power import judgement_power  # noqa: E402


def cost(plan: GatePlan, level: float, alpha: float, p0: float, effect: float, duds: float):
    dud = judgement_power(plan, level, alpha, 12, p0, p0)
    fix = judgement_power(plan, level, alpha, 12, p0, min(1.0, p0 + effect))
    spent = duds * dud.mean_pairs + (1 - duds) * fix.mean_pairs
    per_repair = spent / ((1 - duds) * fix.power) if fix.power else float("inf")
    return fix.power, dud.mean_pairs, fix.mean_pairs, per_repair


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--p0", default="0.1,0.2,0.3")
    parser.add_argument("--effect", type=float, default=0.15)
    parser.add_argument("--duds", type=float, default=0.5)
    parser.add_argument("--level", type=float, default=0.01)
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--looks", default="2,4,8,10,12,14,16,20,24,30")
    parser.add_argument("--margin", type=int, default=24, help="pairs around the threshold")
    args = parser.parse_args(argv)
    started = time.monotonic()
    p0s = [float(x) for x in args.p0.split(",")]
    failed = []
    heads = [f"p0 {p}: power seq / fixed, pairs per repair seq / fixed" for p in p0s]
    print("| pairs | design chosen | " + " | ".join(heads) + " |")
    print("|---|---|" + "---|" * len(p0s))
    for looks in (int(x) for x in args.looks.split(",")):
        pairs = looks * 12
        cells, seq_total, fixed_total = [], 0.0, 0.0
        for p0 in p0s:
            seq = cost(GatePlan(max_looks=looks), args.level, args.alpha, p0, args.effect,
                       args.duds)  # fmt: skip
            fixed = cost(GatePlan(max_looks=looks, design="fixed"), args.level, args.alpha, p0,
                         args.effect, args.duds)  # fmt: skip
            seq_total += seq[3]
            fixed_total += fixed[3]
            cells.append(f"{seq[0]:.2f} / {fixed[0]:.2f}, {seq[3]:.0f} / {fixed[3]:.0f}")
        cheaper = "fixed" if fixed_total < seq_total else "sequential"
        chosen = choose_design(pairs)
        print(f"| {pairs} | {chosen} | " + " | ".join(cells) + " |", flush=True)
        if chosen != cheaper and abs(pairs - FIXED_BELOW_PAIRS) >= args.margin:
            failed.append(f"{pairs} pairs: {chosen} chosen, {cheaper} costs fewer pairs per repair")
    for reason in failed:
        print(f"FAILED {reason}")
    wall = time.monotonic() - started
    print(f"{'FAILED' if failed else 'passed'} in {wall:.0f} s (threshold {FIXED_BELOW_PAIRS})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
