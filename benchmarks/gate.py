#!/usr/bin/env python3
"""Level, trade-offs and power of evolve's acceptance rule, per environment and base strength.

For every environment with an offline policy, at a weak base (success ~0.3), a strong one
(~0.85) and a very strong one (>= 0.93), in two steps:

1. **The world, measured.** The base harness is evaluated on the split by the real engine
   (the simulated policy with `resample=1`, every rollout drawing afresh as a sampled model's
   would) at `--seeds` seeds per task: each task's rollouts are the world judgements draw from.
2. **The rule, run on it** (`benchmarks/gate_sim.py`): simulated evolve runs, each one
   judgement per direction x round with evolve's own code (`select_tasks`, `run_gate`, the
   split guard, `ErrorControl` for the gate and the guard), the parent's fresh results shared
   within a run as evolve's rollout cache shares them.

Per regime it measures, and prints with 95% intervals:

* **null runs** (`--runs`): every edit changes nothing. `level`: null edits accepted per
  judgement (interval widened for the clustering of a run's judgements; the README quotes it
  against alpha / m, the first judgement's level); `false discovery`:
  runs that commit any null edit (in an all-null run the false discovery proportion is 1
  whenever anything is accepted, so this is the run-level false discovery rate).
* **trade-off runs** (`--runs`, per `--trade-offs`): every edit gains `--trade-off-gain` on
  the judged tasks the parent failed and loses on every other task so that the split's
  success moves by 0 (or -2) points: accepted per judgement, and runs that commit one.
* **power** (`--power-runs` edits per effect): an edit that raises the split's success by d
  **split points** (min(1, p + delta) on every task), judged at a run's first level (the
  lowest); an effect beyond the split's headroom is `n/a`. Beside it, the power of the gate
  alone (without the split guard): the difference is what the guard costs. Child rollouts
  per judgement (the gate's and the guard's). **Targeted** (`--targeted`): a repair of that
  many points on the judged tasks the parent failed and nothing elsewhere, where the guard
  costs most (the split gains only that share of it).

Exits 1 when a claim fails: run-level false discovery above `--alpha`; the per-judgement level
above the first judgement's level (alpha / m, what the README quotes); trade-off runs that
commit one above `--alpha`; power at `--power-effect` split points (15; on a base with less
headroom, the largest measured effect within it, down to `--min-checked-effect`, 10: a very
strong base's power is reported, not checked) below `--min-power`. `--rule` swaps the
rule to check the benchmark itself: `no-guard` (the gate without the split guard),
`always`, `never` and `--error-control none` each fail it; `same-batch` is the earlier
design.

usage:
  .venv/bin/python benchmarks/gate.py [--runs 50] [--power-runs 200] [--envs dbbench,...]
      [--regimes weak,strong,very-strong] [--rule sequential] [--error-control fdr]
      [--worlds DIR] [--json out.json] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from gate_sim import RULES, Rule, World, directions_of, judge_one, world_rows  # noqa: E402

from harnessctl.stats import wilson_interval  # noqa: E402

# (label, base harness, suite, split, {regime: skill}); skills chosen by measurement so that
# the base's success lands near 0.3 (weak), 0.85 (strong) and at 0.93 or more (very strong)
ENVIRONMENTS = [
    ("dbbench", "dbbench-base", "examples/dbbench", "train",
     {"weak": 0.4, "strong": 0.9, "very-strong": 0.97}),
    ("dbbench-fc", "dbbench-fc", "examples/dbbench", "train",
     {"weak": 0.4, "strong": 0.9, "very-strong": 0.97}),
    ("alfworld", "alfworld-base", "examples/alfworld", "train",
     {"weak": 0.5, "strong": 0.9, "very-strong": 0.97}),
    ("os", "os-base", "examples/os_interaction", "train",
     {"weak": 0.1, "strong": 0.9, "very-strong": 0.99}),
    ("tau2", "tau2-base", "examples/tau2", "train",
     {"weak": 0.6, "strong": 0.93, "very-strong": 0.99}),
]  # fmt: skip
EFFECTS = (0.05, 0.10, 0.15, 0.20)
"""Split points."""


def clustered(counts: list[tuple[int, int]]) -> tuple[int, int, float, float]:
    """(accepted, n, lo, hi): a 95% Wilson interval on the effective sample size, the
    judgements of a run (``counts``: (accepted, judged) per run) being one cluster."""
    a = sum(c[0] for c in counts)
    n = sum(c[1] for c in counts)
    k = len(counts)
    if n == 0:
        return 0, 0, 0.0, 1.0
    rate, mean_size = a / n, n / k
    if 0 < rate < 1 and k > 1:
        between = sum((ai - rate * ni) ** 2 for ai, ni in counts) / (k - 1)
        var = between / (k * mean_size**2)
        deff = min(mean_size, max(1.0, var / (rate * (1 - rate) / n)))
    else:  # no events to estimate it from: assume the worst, a run is one draw
        deff = mean_size
    n_eff = n / deff
    lo, hi = wilson_interval(round(rate * n_eff), max(1, round(n_eff)))
    return a, n, lo, hi


def runs_of(world: World, directions, rule: Rule, args, rng, rates_for) -> dict:
    """``args.runs`` simulated runs whose every edit's child draws from ``rates_for(batch)``."""
    m = len(directions) * args.rounds
    gate, guard = rule.controls(m)
    runs: list[tuple[int, int]] = []
    gate_only = spent = judged_total = 0
    for r in range(args.runs):
        parent_rows = world.parent_rows(rng, args.rollouts)
        fresh: dict = {}
        accepted = judged = 0
        for i in range(m):
            levels = (gate.level(accepted), guard.level(accepted))
            out = judge_one(
                world, rng, parent_rows, fresh, directions[i // args.rounds], f"{r}:{i}",
                rates_for, levels, rule,
            )  # fmt: skip
            if out.judged:
                accepted += out.accepted
                judged += 1
                gate_only += out.gate_accepted
                spent += out.child_rollouts
                judged_total += 1
        runs.append((accepted, judged))
    a, n, lo, hi = clustered(runs)
    hit = sum(1 for c in runs if c[0])
    rlo, rhi = wilson_interval(hit, len(runs))
    return {
        "per_judgement": {"accepted": a, "judged": n, "rate": a / max(1, n), "ci95": [lo, hi]},
        "runs": {
            "with_acceptance": hit,
            "runs": len(runs),
            "rate": hit / max(1, len(runs)),
            "ci95": [rlo, rhi],
        },  # fmt: skip
        "gate_only_rate": gate_only / max(1, judged_total),
        "child_rollouts_per_judgement": spent / max(1, judged_total),
        "quoted_level": rule.alpha / m,
    }


def power_of(
    world: World, directions, rule: Rule, args, rng, d: float, targeted: bool = False
) -> dict | None:
    """Power against a split gain of ``d`` points, or (``targeted``) a gain of ``d`` on the
    judged tasks the parent failed and none elsewhere."""
    if targeted:
        rates_for = lambda batch: world.trade_off(batch, d, 0.0, absorb=False)  # noqa: E731
    else:
        rates = world.split_gain(d)
        if rates is None:
            return None
        rates_for = lambda batch: rates  # noqa: E731
    gate, guard = rule.controls(len(directions) * args.rounds)
    hits = spent = done = tries = gate_hits = 0
    while done < args.power_runs and tries < 20 * args.power_runs:
        tries += 1
        parent_rows = world.parent_rows(rng, args.rollouts)
        out = judge_one(
            world, rng, parent_rows, {}, directions[tries % len(directions)], f"p{tries}",
            rates_for, (gate.level(0), guard.level(0)), rule,
        )  # fmt: skip
        if out.judged:  # a draw with a targeted failure: evolve would judge an edit
            done += 1
            hits += out.accepted
            gate_hits += out.gate_accepted
            spent += out.child_rollouts
    lo, hi = wilson_interval(hits, done)
    return {"accepted": hits, "edits": done, "rate": hits / max(1, done), "ci95": [lo, hi],
            "gate_alone_rate": gate_hits / max(1, done),
            "rollouts_per_judgement": spent / max(1, done)}  # fmt: skip


def regime_figures(world: World, directions, rule: Rule, args, rng) -> dict:
    out: dict = {"null": runs_of(world, directions, rule, args, rng, lambda b: world.p)}
    out["trade_offs"] = {}
    for change in args.trade_offs:

        def rates(batch, change=change):
            return world.trade_off(batch, args.trade_off_gain, change / 100)

        out["trade_offs"][f"{change:+g}"] = runs_of(world, directions, rule, args, rng, rates)
    out["power"] = {
        f"+{round(d * 100)}": power_of(world, directions, rule, args, rng, d) for d in args.effects
    }
    out["targeted"] = {
        f"+{round(g * 100)}": power_of(world, directions, rule, args, rng, g, targeted=True)
        for g in args.targeted
    }
    out["headroom_points"] = 100 * (1 - world.success)
    return out


def checks(label: str, f: dict, args) -> list[str]:
    """The claims the README makes of this regime, each that fails in words."""
    failed = []
    null = f["null"]
    if null["runs"]["rate"] > args.alpha:
        failed.append(
            f"{label}: run-level false discovery {null['runs']['rate']:.3f} > {args.alpha}"
        )
    if null["per_judgement"]["rate"] > null["quoted_level"]:
        failed.append(
            f"{label}: level {null['per_judgement']['rate']:.4f} per judgement > "
            f"{null['quoted_level']:.4g} (alpha / m)"
        )
    for change, t in f["trade_offs"].items():
        if t["runs"]["rate"] > args.alpha:
            failed.append(
                f"{label}: trade-off ({change} split points) committed in "
                f"{t['runs']['rate']:.3f} of runs > {args.alpha}"
            )
    effect = checked_effect(f, args)
    checked = f["power"].get(f"+{effect}") if effect is not None else None
    if checked is not None and checked["rate"] < args.min_power:
        failed.append(
            f"{label}: power@+{effect} split points {checked['rate']:.3f} < {args.min_power}"
        )
    return failed


def checked_effect(f: dict, args) -> int | None:
    """The effect whose power is checked: ``--power-effect``, or on a base without that much
    headroom the largest measured effect within it, down to ``--min-checked-effect`` (a split
    with less to gain than that has its power reported, not checked)."""
    reachable = [round(d * 100) for d in args.effects if f["power"].get(f"+{round(d * 100)}")]
    within = [e for e in reachable if args.min_checked_effect <= e <= args.power_effect]
    return max(within) if within else None


def fig(a: int, n: int, lo: float, hi: float, digits: int = 3) -> str:
    return f"{a}/{n} ({a / max(1, n):.{digits}f}, 95% CI {lo:.{digits}f}-{hi:.{digits}f})"


def line(label: str, f: dict) -> str:
    null, said = f["null"], []
    pj, runs = null["per_judgement"], null["runs"]
    said.append(
        f"{label} (skill {f['skill']}, base success {f['base_success']:.2f}, {f['tasks']} tasks)"
    )
    said.append(f"level: {fig(pj['accepted'], pj['judged'], *pj['ci95'])}")
    said.append(
        f"false discovery (runs): {fig(runs['with_acceptance'], runs['runs'], *runs['ci95'], 2)}"
    )
    for change, t in f["trade_offs"].items():
        tr, tj = t["runs"], t["per_judgement"]
        said.append(
            f"trade-off {change}: {fig(tj['accepted'], tj['judged'], *tj['ci95'])} per judgement, "
            f"runs {tr['with_acceptance']}/{tr['runs']} (gate alone {t['gate_only_rate']:.2f})"
        )
    for name, p in f["power"].items():
        if p is None:
            said.append(f"power@{name}pts: n/a (headroom +{f['headroom_points']:.0f})")
        else:
            said.append(
                f"power@{name}pts: {fig(p['accepted'], p['edits'], *p['ci95'])} (gate alone "
                f"{p['gate_alone_rate']:.2f})"
            )
    for name, p in f["targeted"].items():
        said.append(
            f"targeted {name} on judged tasks: {fig(p['accepted'], p['edits'], *p['ci95'])} "
            f"(gate alone {p['gate_alone_rate']:.2f})"
        )
    costs = [f"null {null['child_rollouts_per_judgement']:.0f}"]
    costs += [f"{n} {p['rollouts_per_judgement']:.0f}" for n, p in f["power"].items() if p]
    said.append("child rollouts per judgement: " + ", ".join(costs))
    return " | ".join(said)


def markdown(results: dict) -> str:
    """The README's per-regime table."""
    head = ("| regime | base success | level per judgement | runs with a false discovery | "
            "trade-off runs committed (0 / -2 split points) | power@+3 / +5 / +10 / +15 split "
            "points (gate alone) | targeted +20 on judged tasks (gate alone) | child rollouts: "
            "null / +10 |")  # fmt: skip
    rows = [head, "|" + "---|" * 8]
    for label, f in results.items():
        n, t = f["null"], f["trade_offs"]
        offs = " / ".join(f"{v['runs']['with_acceptance']}/{v['runs']['runs']}" for v in t.values())
        pw = " / ".join(
            "n/a" if f["power"].get(k) is None
            else f"{f['power'][k]['rate']:.2f} ({f['power'][k]['gate_alone_rate']:.2f})"
            for k in ("+3", "+5", "+10", "+15")
        )  # fmt: skip
        ten = f["power"].get("+10")
        aimed = f["targeted"].get("+20")
        aimed_cell = "-" if aimed is None else (
            f"{aimed['rate']:.2f} ({aimed['gate_alone_rate']:.2f})"
        )  # fmt: skip
        rows.append(
            f"| {label} | {f['base_success']:.2f} | {n['per_judgement']['accepted']}/"
            f"{n['per_judgement']['judged']} | {n['runs']['with_acceptance']}/{n['runs']['runs']} "
            f"| {offs} | {pw} | {aimed_cell} | {n['child_rollouts_per_judgement']:.0f} / "
            f"{'-' if ten is None else round(ten['rollouts_per_judgement'])} |"
        )
    return "\n".join(rows)


def parse(argv: list[str] | None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", default=",".join(e[0] for e in ENVIRONMENTS))
    parser.add_argument("--regimes", default="weak,strong,very-strong")
    parser.add_argument("--seeds", type=int, default=10, help="measured rollouts per task")
    parser.add_argument("--runs", type=int, default=50, help="simulated evolve runs per regime")
    parser.add_argument("--power-runs", type=int, default=200, help="edits per effect size")
    parser.add_argument("--rule", default="sequential", choices=RULES)
    parser.add_argument("--error-control", default="fdr", choices=["fdr", "fwer", "none"])
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--guard-alpha", type=float, default=None, help="default: --alpha")
    parser.add_argument("--min-power", type=float, default=0.8)
    parser.add_argument(
        "--power-effect", type=float, default=15, help="split points (less where no headroom)"
    )
    parser.add_argument("--trade-offs", default="0,-2", help="split points, comma-separated")
    parser.add_argument("--trade-off-gain", type=float, default=0.2, help="on the judged tasks")
    parser.add_argument("--effects", default="3,5,10,15,20", help="split points")
    parser.add_argument(
        "--min-checked-effect", type=float, default=10, help="split points (see checked_effect)"
    )
    parser.add_argument(
        "--targeted", default="20", help="points on the judged failed tasks only (the guard's cost)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="evolve's --rounds")
    parser.add_argument("--rollouts", type=int, default=2, help="evolve's --rollouts")
    parser.add_argument("--batch", type=int, default=None, help="evolve's --batch")
    parser.add_argument("--control", type=int, default=None, help="evolve's --control")
    parser.add_argument("--max-looks", type=int, default=30, help="evolve's --max-looks")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0, help="of the simulation's draws")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    parser.add_argument("--markdown", action="store_true", help="print the README's table")
    parser.add_argument(
        "--worlds", type=Path, help="keep measured worlds here and reuse them on a rerun"
    )
    args = parser.parse_args(argv)
    args.effects = [float(x) / 100 for x in args.effects.split(",") if x.strip()]
    args.trade_offs = [float(x) for x in args.trade_offs.split(",") if x.strip()]
    args.targeted = [float(x) / 100 for x in args.targeted.split(",") if x.strip()]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    chosen = [e for e in ENVIRONMENTS if e[0] in args.envs.split(",")]
    if not chosen:
        raise SystemExit(f"--envs: none of {args.envs!r} is one of {[e[0] for e in ENVIRONMENTS]}")
    rule = Rule(args.rule, args.alpha, args.error_control, args.guard_alpha, args.batch,
                args.control, args.max_looks)  # fmt: skip
    rng = random.Random(args.seed)
    scratch = Path(tempfile.mkdtemp(prefix="hxbench-gate-"))
    results: dict[str, dict] = {}
    failed: list[str] = []
    started = time.monotonic()
    print(
        f"rule {args.rule}, error control {args.error_control}, alpha {args.alpha}, design "
        f"{rule.plan().design} ({args.max_looks} looks); worlds measured at {args.seeds} seeds "
        "per task (sim policies, resample=1); effects in split points",
        flush=True,
    )
    try:
        for env in chosen:
            for regime in args.regimes.split(","):
                label = f"{env[0]}-{regime}"
                world = World(world_rows(env, regime, args, scratch))
                figures = regime_figures(world, directions_of(env[1]), rule, args, rng)
                figures |= {"skill": env[4][regime], "base_success": world.success,
                            "tasks": len(world.p)}  # fmt: skip
                results[label] = figures
                print(line(label, figures), flush=True)
                failed += checks(label, figures, args)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    summary = {"rule": args.rule, "error_control": args.error_control, "alpha": args.alpha,
               "min_power": args.min_power, "power_effect": args.power_effect,
               "regimes": results, "failed": failed,
               "wall_s": time.monotonic() - started}  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    if args.markdown:
        print(markdown(results))
    for reason in failed:
        print(f"FAILED {reason}")
    print(f"{'FAILED' if failed else 'passed'} in {summary['wall_s']:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
