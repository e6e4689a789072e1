"""Simulated evolve judgements for ``benchmarks/gate.py``: evolve's own gate code on outcomes
drawn from a measured world.

A :class:`World` is the base harness's measured rollouts per task of the split. One
judgement draws the parent's evaluation from it, chooses the judged tasks with
``select_tasks``, looks seed by seed with ``run_gate`` and, when the gate accepts, runs the
split guard (``guard_blocks``, ``run_guard``), with the parent's fresh results shared by the
judgements of a run as evolve's rollout cache shares them. The child draws from its own
per-task rates: the parent's for a null edit, a **split gain** of d points (min(1, p + delta)
on every task, delta chosen so the split's mean rises by d), or a **trade-off** (a gain on
the judged tasks the parent failed, a loss on every other task, the split's mean changed by
a given amount).
"""

from __future__ import annotations

import json
import random
import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harnessctl.evolve.gate import ErrorControl, GatePlan, run_gate, select_tasks
from harnessctl.evolve.guard import guard_blocks, run_guard
from harnessctl.evolve.power import plan_for
from harnessctl.evolve.reward import judge

RULES = ("sequential", "no-guard", "same-batch", "always", "never")
ROOT = Path(__file__).resolve().parent.parent


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

    def split_gain(self, d: float) -> dict[str, float] | None:
        """Per-task rates whose split mean is ``d`` above the parent's (min(1, p + delta));
        None when the split's headroom is less than ``d``."""
        if d <= 0:
            return dict(self.p)
        if statistics.fmean(1 - p for p in self.p.values()) < d - 1e-9:
            return None
        delta = _solve(lambda x: statistics.fmean(min(1.0, p + x) - p for p in self.p.values()), d)
        return {t: min(1.0, p + delta) for t, p in self.p.items()}

    def trade_off(
        self, gained: list[str], gain: float, change: float, absorb: bool = True
    ) -> dict[str, float]:
        """``gain`` points on the ``gained`` tasks, an equal loss on every other task, chosen
        so that the split's mean moves by ``change``; where the other tasks cannot lose that
        much (a small split), the gain is cut until they can. Without ``absorb``, no loss: a
        repair of those tasks alone."""
        rest = [t for t in self.p if t not in set(gained)]
        if not absorb:
            return {**self.p, **{t: min(1.0, self.p[t] + gain) for t in gained}}

        def up_by(g: float) -> float:  # the gained tasks' total gain at g
            return sum(min(1.0, self.p[t] + g) - self.p[t] for t in gained)

        floor = -sum(self.p[t] for t in rest)  # the most the others can lose, in total
        target = change * len(self.p)
        if up_by(gain) + floor > target:  # the others cannot absorb it: gain less
            gain = _solve(up_by, max(0.0, target - floor))
        lost = target - up_by(gain)  # <= 0: what the others lose in total

        def moved(x: float) -> float:
            return sum(self.p[t] - max(0.0, self.p[t] - x) for t in rest)

        loss = _solve(moved, -lost) if rest and lost < 0 else 0.0
        up = {t: min(1.0, self.p[t] + gain) for t in gained}
        return {**up, **{t: max(0.0, self.p[t] - loss) for t in rest}}


def _solve(f: Callable[[float], float], target: float) -> float:
    """x in [0, 1] with f(x) = target, f nondecreasing (bisection; 1 if out of reach)."""
    lo, hi = 0.0, 1.0
    if f(hi) <= target:
        return hi
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return hi


@dataclass(frozen=True)
class Rule:
    """The acceptance rule simulated and its settings (evolve's flags)."""

    name: str = "sequential"
    alpha: float = 0.1
    error_control: str = "fdr"
    guard_alpha: float | None = None
    batch: int | None = None
    control: int | None = None
    max_looks: int = 30
    design: str = "auto"

    @property
    def guarded(self) -> bool:
        return self.name == "sequential"

    def controls(self, m: int) -> tuple[ErrorControl, ErrorControl]:
        """The gate's and the guard's error control over a run of ``m`` judgements."""
        kind = self.error_control if self.name in ("sequential", "no-guard") else "none"
        gate = ErrorControl(kind, self.alpha, m)  # type: ignore[arg-type]
        guard_alpha = self.guard_alpha if self.guard_alpha is not None else self.alpha
        return gate, ErrorControl(kind, guard_alpha, m)  # type: ignore[arg-type]

    def plan(self) -> GatePlan:
        return plan_for(self.max_looks, design=self.design)


@dataclass
class Judged:
    accepted: bool
    child_rollouts: int
    parent_rollouts: int = 0
    judged: bool = True
    """False when the parent's evaluation had no failure the direction targets: evolve
    proposes no edit then, so there is nothing to judge."""
    gate_accepted: bool = False
    """The judged-task test accepted (before the guard)."""


ChildRates = Callable[[list[str]], dict[str, float]]
"""The child's per-task rates, given the judged batch tasks (a trade-off gains on those)."""


def judge_one(
    world: World,
    rng: random.Random,
    parent_rows: list[Row],
    parent_fresh: dict,
    targets: list[str],
    salt: str,
    child_rates: ChildRates,
    levels: tuple[float, float],
    rule: Rule,
) -> Judged:
    """One judgement of an edit whose child draws from ``child_rates(batch)`` by ``rule``;
    ``levels``: the gate's and the guard's."""
    if rule.name in ("always", "never"):
        return Judged(rule.name == "always", 0, gate_accepted=rule.name == "always")
    if rule.name == "same-batch":  # the child re-run on the parent's selected pairs
        failed = [r for r in parent_rows if not r.success and r.outcome in targets]
        solved = [r for r in parent_rows if r.success]
        rng.shuffle(failed)
        rng.shuffle(solved)
        batch, control = failed[: rule.batch or 12], solved[: rule.batch or 12]
        if not batch:
            return Judged(False, 0, judged=False)
        child_p = child_rates(list(dict.fromkeys(r.task_id for r in batch)))
        rescues = sum(rng.random() < child_p[r.task_id] for r in batch)
        regressions = sum(rng.random() >= child_p[r.task_id] for r in control)
        verdict = judge(rescues, regressions, len(batch), len(control), alpha=rule.alpha)
        return Judged(verdict.accepted, len(batch) + len(control), 0, True, verdict.accepted)
    batch, control = select_tasks(parent_rows, targets, rule.batch or 8, rule.control or 4, salt)
    if not batch:
        return Judged(False, 0, judged=False)
    child_p = child_rates(batch)
    plan = rule.plan()
    child_fresh: dict = {}
    parent_new = 0

    def observe(pairs):
        nonlocal parent_new
        for p in pairs:
            if p not in parent_fresh:
                parent_fresh[p] = rng.random() < world.p[p[0]]
                parent_new += 1
            if p not in child_fresh:
                child_fresh[p] = rng.random() < child_p[p[0]]
        return parent_fresh, child_fresh

    tasks = batch + control
    seeds = list(range(1000, 1000 + plan.seeds_needed(len(tasks))))
    looks = run_gate(tasks, seeds, observe, level=levels[0], alpha=rule.alpha, plan=plan)
    accepted = looks[-1].decision == "accept"
    gate_accepted = accepted
    if accepted and rule.guarded:
        per_look = plan.seeds_per_look(len(tasks))
        blocks = guard_blocks(sorted(world.p), seeds, per_look, plan.max_looks, salt=salt)
        guard = run_guard(blocks, observe, level=levels[1], alpha=rule.alpha, plan=plan)
        accepted = guard[-1].decision == "accept"
    return Judged(accepted, len(child_fresh), parent_new, True, gate_accepted)
