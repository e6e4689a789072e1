#!/usr/bin/env python3
"""Level and power of evolve's acceptance gate, per environment and base strength.

For every environment with an offline policy, at a weak base (success ~0.3) and a strong
one (~0.85), in two steps:

1. **The world, measured.** The base harness is evaluated on the split by the real engine
   (`harnessctl.run.evaluate`, the simulated policy with `resample=1`, so every rollout
   draws afresh as a sampled model's would) at `--seeds` seeds per task: each task's
   rollouts, with their outcomes, are the world its judgements draw from.
2. **The rule, run on it.** Each simulated evolve run draws the parent's evaluation (evolve's
   `--rollouts` seeds per task, resampled from that task's measured rollouts), then judges
   one edit per direction x round of the environment's catalogue with evolve's own code:
   `select_tasks` chooses the judged tasks, `run_gate` looks seed by seed and `ErrorControl`
   gives each judgement its level. The parent's fresh-seed results are drawn once per run
   and shared by its judgements (as evolve's rollout cache shares them); each child draws
   its own. A **null edit**'s child draws from the parent's per-task rates; an edit of known
   effect **+d** draws from min(1, p_task + d) on every task (d points more on each task the
   base does not always solve). Power is for a judgement with no acceptance before it in its
   run (the lowest level error control gives).

Prints, per regime, `level: A/N (rate, 95% CI)` over null edits (the interval widened for
the clustering of judgements in runs: Wilson on the effective sample size n / design
effect), the runs with any false acceptance, `power@+d: a/n (rate, 95% CI)` and the mean
child rollouts per judgement. Exits 1 when a regime's level exceeds `--alpha` or its power
at +15 points is below `--min-power`.

`--rule` replaces the gate to check the benchmark itself: `always` (accept every edit) and
`never` must fail it; `same-batch` is the earlier design (the child re-run on the parent's
own failure and success pairs, a sign test at alpha per judgement) for comparison.

usage:
  .venv/bin/python benchmarks/gate.py [--runs 50] [--power-runs 200] [--envs dbbench,...]
      [--rule sequential] [--error-control fdr] [--worlds DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harnessctl.evolve.gate import ErrorControl, GatePlan, run_gate, select_tasks  # noqa: E402
from harnessctl.evolve.reward import judge  # noqa: E402
from harnessctl.stats import wilson_interval  # noqa: E402

# (label, base harness, suite, split, {regime: skill}); skills chosen so that the measured
# base success is near 0.3 (weak) and 0.85 (strong); the benchmark prints what it measured
ENVIRONMENTS = [
    ("dbbench", "dbbench-base", "examples/dbbench", "train", {"weak": 0.4, "strong": 0.9}),
    ("dbbench-fc", "dbbench-fc", "examples/dbbench", "train", {"weak": 0.4, "strong": 0.9}),
    ("alfworld", "alfworld-base", "examples/alfworld", "train", {"weak": 0.5, "strong": 0.9}),
    ("os", "os-base", "examples/os_interaction", "train", {"weak": 0.1, "strong": 0.9}),
    ("tau2", "tau2-base", "examples/tau2", "train", {"weak": 0.6, "strong": 0.93}),
]
EFFECTS = (0.05, 0.10, 0.15, 0.20)


@dataclass
class Row:
    """One rollout of the measured world: what ``select_tasks`` reads."""

    task_id: str
    seed: int
    success: bool
    outcome: str


def measure(env: tuple, regime: str, seeds: int, workers: int, scratch: Path) -> list[Row]:
    """The base harness's rollouts on the split, ``seeds`` per task, drawn afresh."""
    from harnessctl.harness import load_harness
    from harnessctl.policy import Policy
    from harnessctl.run.evaluate import EvalRequest, evaluate
    from harnessctl.store import Store
    from harnessctl.suite import load_suite

    label, base, suite, split, skills = env
    store = Store(f"sqlite:///{scratch / f'{label}-{regime}.db'}", scratch / "trajectories")
    try:
        policy = Policy(f"sim/{_family(base)}", {"resample": 1, "skill": skills[regime]})
        request = EvalRequest(
            harness=load_harness(ROOT / "harnesses" / base),
            suite=load_suite(ROOT / suite),
            split=split,
            policy=policy,
            rollouts=seeds,
            workers=workers,
            command="bench",
        )
        rows = evaluate(request, store).complete(base).rows
        return [Row(r.task_id, r.seed, bool(r.success), r.outcome) for r in rows]
    finally:
        store.close()


def world_rows(env: tuple, regime: str, args, scratch: Path) -> list[Row]:
    """The measured world, from ``--worlds DIR`` when it holds this one (same environment,
    skill and seeds), else measured (and saved there)."""
    saved = None
    if args.worlds is not None:
        args.worlds.mkdir(parents=True, exist_ok=True)
        saved = args.worlds / f"{env[0]}-{regime}-skill{env[4][regime]}-seeds{args.seeds}.json"
        if saved.is_file():
            return [Row(**r) for r in json.loads(saved.read_text())]
    rows = measure(env, regime, args.seeds, args.workers, scratch)
    if saved is not None:
        saved.write_text(json.dumps([vars(r) for r in rows]))
    return rows


def _family(base: str) -> str:
    from harnessctl.harness import load_harness

    return load_harness(ROOT / "harnesses" / base).manifest.env


def directions_of(base: str) -> list[list[str]]:
    """The targets of each direction of the base's environment (what ``select_tasks`` uses)."""
    from harnessctl.evolve.directions import catalogue

    return [list(d.targets) for d in catalogue(_family(base), ROOT).values()]


class World:
    """Per-task measured rollouts, and draws from them."""

    def __init__(self, rows: list[Row]) -> None:
        self.by_task: dict[str, list[Row]] = defaultdict(list)
        for r in rows:
            self.by_task[r.task_id].append(r)
        self.p = {t: sum(r.success for r in rs) / len(rs) for t, rs in self.by_task.items()}

    @property
    def success(self) -> float:
        return statistics.fmean(self.p.values())

    def parent_rows(self, rng: random.Random, rollouts: int) -> list[Row]:
        """An evaluation of the parent: ``rollouts`` measured rollouts per task, resampled."""
        return [
            Row(t, s, (r := rng.choice(rs)).success, r.outcome)
            for t, rs in self.by_task.items()
            for s in range(rollouts)
        ]


@dataclass
class Judged:
    accepted: bool
    child_rollouts: int
    judged: bool = True
    """False when the parent's evaluation had no failure the direction targets: evolve
    proposes no edit then, so there is nothing to judge."""


def judge_one(
    world: World,
    rng: random.Random,
    parent_rows: list[Row],
    parent_fresh: dict,
    targets: list[str],
    salt: str,
    effect: float,
    level: float,
    args,
) -> Judged:
    """One judgement of an edit of true effect ``effect`` by the rule ``args.rule``."""
    if args.rule in ("always", "never"):
        return Judged(args.rule == "always", 0)
    child_p = {t: min(1.0, p + effect) for t, p in world.p.items()}
    if args.rule == "same-batch":  # the child re-run on the parent's selected pairs
        failed = [r for r in parent_rows if not r.success and r.outcome in targets]
        solved = [r for r in parent_rows if r.success]
        rng.shuffle(failed)
        rng.shuffle(solved)
        batch, control = failed[: args.batch or 12], solved[: args.control or 12]
        if not batch:
            return Judged(False, 0, judged=False)
        rescues = sum(rng.random() < child_p[r.task_id] for r in batch)
        regressions = sum(rng.random() >= child_p[r.task_id] for r in control)
        verdict = judge(rescues, regressions, len(batch), len(control), alpha=args.alpha)
        return Judged(verdict.accepted, len(batch) + len(control))
    batch, control = select_tasks(parent_rows, targets, args.batch or 8, args.control or 4, salt)
    if not batch:
        return Judged(False, 0, judged=False)
    plan = GatePlan(max_looks=args.max_looks)

    def observe(pairs):
        parent = {}
        for p in pairs:
            if p not in parent_fresh:
                parent_fresh[p] = rng.random() < world.p[p[0]]
            parent[p] = parent_fresh[p]
        return parent, {p: rng.random() < child_p[p[0]] for p in pairs}

    seeds = list(range(1000, 1000 + plan.seeds_needed(len(batch + control))))
    looks = run_gate(batch + control, seeds, observe, level=level, alpha=args.alpha, plan=plan)
    return Judged(looks[-1].decision == "accept", looks[-1].pairs)


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


def fig(a: int, n: int, lo: float, hi: float) -> str:
    return f"{a}/{n} ({a / max(1, n):.3f}, 95% CI {lo:.3f}-{hi:.3f})"


def regime_figures(world: World, directions: list[list[str]], args, rng) -> dict:
    """Level over ``args.runs`` simulated runs of null edits; power per effect size."""
    rounds = args.rounds
    m = len(directions) * rounds
    control = ErrorControl(
        args.error_control if args.rule == "sequential" else "none", args.alpha, m
    )
    runs: list[tuple[int, int]] = []
    null_spent: list[int] = []
    for r in range(args.runs):
        parent_rows = world.parent_rows(rng, args.rollouts)
        fresh: dict = {}
        accepted = judged = 0
        for i in range(m):
            targets = directions[i // rounds]
            level = control.level(accepted)
            out = judge_one(world, rng, parent_rows, fresh, targets, f"{r}:{i}", 0.0, level, args)
            if out.judged:
                accepted += out.accepted
                judged += 1
                null_spent.append(out.child_rollouts)
        runs.append((accepted, judged))
    a, n, lo, hi = clustered(runs)
    result = {
        "level": {"accepted": a, "null_edits": n, "rate": a / max(1, n), "ci95": [lo, hi]},
        "runs_with_false_acceptance": [sum(1 for c in runs if c[0]), len(runs)],
        "null_rollouts_per_judgement": statistics.fmean(null_spent) if null_spent else 0.0,
        "power": {},
    }
    for effect in args.effects:
        hits = spent = done = tries = 0
        while done < args.power_runs and tries < 20 * args.power_runs:
            tries += 1
            parent_rows = world.parent_rows(rng, args.rollouts)
            targets = directions[tries % len(directions)]
            out = judge_one(
                world, rng, parent_rows, {}, targets, f"p{tries}", effect, control.level(0), args
            )
            if out.judged:  # a draw with a targeted failure: evolve would judge an edit
                done += 1
                hits += out.accepted
                spent += out.child_rollouts
        lo, hi = wilson_interval(hits, done)
        result["power"][f"+{round(effect * 100)}"] = {
            "accepted": hits,
            "edits": done,
            "rate": hits / max(1, done),
            "ci95": [lo, hi],
            "rollouts_per_judgement": spent / max(1, done),
        }
    return result


def parse(argv: list[str] | None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", default=",".join(e[0] for e in ENVIRONMENTS))
    parser.add_argument("--regimes", default="weak,strong")
    parser.add_argument("--seeds", type=int, default=10, help="measured rollouts per task")
    parser.add_argument("--runs", type=int, default=50, help="simulated evolve runs per regime")
    parser.add_argument("--power-runs", type=int, default=200, help="edits per effect size")
    rules = ["sequential", "same-batch", "always", "never"]
    parser.add_argument("--rule", default="sequential", choices=rules)
    parser.add_argument("--error-control", default="fdr", choices=["fdr", "fwer", "none"])
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--min-power", type=float, default=0.8, help="at +15 points")
    parser.add_argument("--rounds", type=int, default=2, help="evolve's --rounds")
    parser.add_argument("--rollouts", type=int, default=2, help="evolve's --rollouts")
    parser.add_argument("--batch", type=int, default=None, help="evolve's --batch")
    parser.add_argument("--control", type=int, default=None, help="evolve's --control")
    parser.add_argument("--max-looks", type=int, default=30, help="evolve's --max-looks")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0, help="of the simulation's draws")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    parser.add_argument(
        "--worlds", type=Path, help="keep measured worlds here and reuse them on a rerun"
    )
    args = parser.parse_args(argv)
    args.effects = EFFECTS
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    chosen = [e for e in ENVIRONMENTS if e[0] in args.envs.split(",")]
    if not chosen:
        raise SystemExit(f"--envs: none of {args.envs!r} is one of {[e[0] for e in ENVIRONMENTS]}")
    rng = random.Random(args.seed)
    scratch = Path(tempfile.mkdtemp(prefix="hxbench-gate-"))
    results: dict[str, dict] = {}
    failed: list[str] = []
    started = time.monotonic()
    print(
        f"gate {args.rule}, error control {args.error_control}, alpha {args.alpha}; worlds "
        f"measured at {args.seeds} seeds per task (sim policies, resample=1)",
        flush=True,
    )
    try:
        for env in chosen:
            for regime in args.regimes.split(","):
                label = f"{env[0]}-{regime}"
                rows = world_rows(env, regime, args, scratch)
                world = World(rows)
                figures = regime_figures(world, directions_of(env[1]), args, rng)
                figures |= {"skill": env[4][regime], "base_success": world.success}
                figures["tasks"], figures["measured_rollouts"] = len(world.p), len(rows)
                results[label] = figures
                print(line(label, figures), flush=True)
                if figures["level"]["rate"] > args.alpha:
                    failed.append(f"{label}: level {figures['level']['rate']:.3f} > {args.alpha}")
                if figures["power"]["+15"]["rate"] < args.min_power:
                    failed.append(
                        f"{label}: power@+15 {figures['power']['+15']['rate']:.3f} < "
                        f"{args.min_power}"
                    )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    summary = {
        "rule": args.rule,
        "error_control": args.error_control,
        "alpha": args.alpha,
        "min_power": args.min_power,
        "regimes": results,
        "failed": failed,
        "wall_s": time.monotonic() - started,
    }
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    for reason in failed:
        print(f"FAILED {reason}")
    print(f"{'FAILED' if failed else 'passed'} in {summary['wall_s']:.0f} s")
    return 1 if failed else 0


def line(label: str, f: dict) -> str:
    lv = f["level"]
    said = [
        f"{label} (skill {f['skill']}, base success {f['base_success']:.2f}, {f['tasks']} tasks)",
        f"level: {fig(lv['accepted'], lv['null_edits'], *lv['ci95'])}",
        f"runs with a false acceptance {f['runs_with_false_acceptance'][0]}/"
        f"{f['runs_with_false_acceptance'][1]}",
    ]
    for name, p in f["power"].items():
        said.append(f"power@{name}: {fig(p['accepted'], p['edits'], *p['ci95'])}")
    said.append(
        f"child rollouts per judgement: null {f['null_rollouts_per_judgement']:.0f}, "
        f"+15 {f['power']['+15']['rollouts_per_judgement']:.0f}"
    )
    return " | ".join(said)


if __name__ == "__main__":
    sys.exit(main())
