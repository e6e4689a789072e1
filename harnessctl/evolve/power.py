"""What a gate's budget buys: the exact power of a judgement, and the smallest effect it detects.

A judgement's pairs are modelled as independent draws: the child wins a pair (it succeeds,
the parent fails) with probability ``p1 (1 - p0)`` and loses one with ``p0 (1 - p1)``,
``p0`` and ``p1`` the parent's and the child's success on the judged tasks. The
distribution of (wins, losses) is carried look by look through :func:`.gate.decide`'s own
rules, so the power is the plan's exactly (up to probabilities below ``PRUNE``), not a
normal approximation. ``evolve`` prints it before its first edit (:func:`budget`) and
refuses a budget that cannot detect any effect; ``benchmarks/gate_budget.py`` uses it to
compare the sequential and the fixed-sample design at a budget.

The figures are a model, and say so: real tasks differ in their rates, and the judged
tasks' parent rate (``p0``) is measured on the parent's evaluation, the tasks it failed most.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pydantic import BaseModel, ConfigDict

from .gate import GatePlan, choose_design, decide

PRUNE = 1e-10
"""States less likely than this are dropped (the power is then exact to about 1e-9)."""
TARGET_POWER = 0.8
EFFECTS = tuple(round(0.05 * i, 2) for i in range(1, 21))
"""The effects the smallest detectable one is searched among (5 to 100 points)."""
SIMULATED_REPS = 400
WARN_ABOVE = 0.2
"""evolve warns when the smallest effect its budget detects is above this (20 points)."""


@dataclass(frozen=True)
class Power:
    """One plan against one effect."""

    power: float
    """P(accept)."""
    mean_pairs: float
    """Expected pairs the judgement runs (each pair: one parent and one child rollout)."""


Rows = dict[int, tuple[int, list[float]]]
"""n = wins + losses -> (the first wins count held, P(wins) from it on): the judgements still
running. For one n the running ones are a band of wins (the rules stop high and low ones)."""


def _add(rows: Rows, n: int, first: int, values: list[float]) -> None:
    held = rows.get(n)
    if held is None:
        rows[n] = (first, values)
        return
    start, old = held
    lo, hi = min(start, first), max(start + len(old), first + len(values))
    merged = [0.0] * (hi - lo)
    for offset, vals in ((start - lo, old), (first - lo, values)):
        merged[offset : offset + len(vals)] = [
            a + b for a, b in zip(merged[offset : offset + len(vals)], vals, strict=True)
        ]
    rows[n] = (lo, merged)


def judgement_power(
    plan: GatePlan, level: float, alpha: float, tasks: int, p0: float, p1: float
) -> Power:
    """The exact power of ``plan`` at ``level`` over ``tasks`` judged tasks, the parent at
    ``p0`` and the child at ``p1`` on every pair."""
    per_look = plan.seeds_per_look(tasks) * tasks
    win, loss = p1 * (1 - p0), p0 * (1 - p1)
    tie = max(0.0, 1.0 - win - loss)
    rows: Rows = {0: (0, [1.0])}
    memo: dict[tuple[int, int, object], str] = {}
    accepted = pairs = 0.0
    for look in range(1, plan.max_looks + 1):
        pairs += sum(sum(v) for _, v in rows.values()) * per_look
        for _ in range(per_look):  # one pair: a tie keeps n, a win or a loss adds one
            nxt: Rows = {}
            for n, (first, vals) in rows.items():
                if tie:
                    _add(nxt, n, first, [tie * v for v in vals])
                _add(nxt, n + 1, first + 1, [win * v for v in vals])
                _add(nxt, n + 1, first, [loss * v for v in vals])
            rows = nxt
        left = (plan.max_looks - look) * per_look
        # the sequential rules depend on the look only through these; the fixed ones on it
        key: object = (
            look if plan.design == "fixed" else
            (look >= plan.max_looks, look >= plan.min_looks, look >= 2)
        )  # fmt: skip
        kept: Rows = {}
        for n, (first, vals) in rows.items():
            for i, p in enumerate(vals):
                if p == 0.0:
                    continue
                w = first + i
                decision = memo.get((w, n, key))
                if decision is None:
                    decision = decide(w, n - w, look, level, alpha, plan, left)[1]
                    memo[w, n, key] = decision
                if decision == "accept":
                    accepted += p
                if decision != "continue" or p < PRUNE:
                    vals[i] = 0.0
            live = [i for i, p in enumerate(vals) if p]
            if live:
                kept[n] = (first + live[0], vals[live[0] : live[-1] + 1])
        rows = kept
        if not rows:
            break
    return Power(power=accepted, mean_pairs=pairs)


def simulated_power(
    plan: GatePlan,
    level: float,
    alpha: float,
    tasks: int,
    p0: float,
    p1: float,
    *,
    reps: int = SIMULATED_REPS,
    seed: int = 0,
) -> Power:
    """:func:`judgement_power` by seeded simulation, for looks too large for the exact
    recursion (the split guard's: every task of the split a look); within about 0.02 of it
    at 400 draws."""
    import random

    rng = random.Random(seed)
    per_look = plan.seeds_per_look(tasks) * tasks
    win, loss = p1 * (1 - p0), p0 * (1 - p1)
    accepted = pairs = 0
    for _ in range(reps):
        w = ls = 0
        for look in range(1, plan.max_looks + 1):
            for _ in range(per_look):
                u = rng.random()
                w, ls = (w + 1, ls) if u < win else (w, ls + 1) if u < win + loss else (w, ls)
            pairs += per_look
            left = (plan.max_looks - look) * per_look
            decision = decide(w, ls, look, level, alpha, plan, left)[1]
            if decision != "continue":
                accepted += decision == "accept"
                break
    return Power(power=accepted / reps, mean_pairs=pairs / reps)


def smallest_effect(
    plan: GatePlan,
    level: float,
    alpha: float,
    tasks: int,
    p0: float,
    power: float = TARGET_POWER,
    *,
    simulate: bool = False,
) -> tuple[float | None, Power | None]:
    """The smallest effect of :data:`EFFECTS` (child at ``p0 + d``) detected with at least
    ``power``, with its figures; (None, None) when none up to the ceiling is. ``simulate``:
    by :func:`simulated_power` (large looks)."""
    measure = simulated_power if simulate else judgement_power
    for d in EFFECTS:
        if p0 + d > 1 + 1e-9:
            break
        found = measure(plan, level, alpha, tasks, p0, min(1.0, p0 + d))
        if found.power >= power:
            return d, found
    return None, None


class Budget(BaseModel):
    """What an evolve run's budget buys, printed before its first edit (``evolve --json``:
    ``budget``)."""

    model_config = ConfigDict(extra="forbid")
    judgements: int
    """Directions x rounds: the most edits the run judges."""
    level: float
    """The first judgement's level (the lowest the error control gives)."""
    design: str
    """``sequential`` or ``fixed`` (:func:`.gate.choose_design`)."""
    tasks: int
    """Tasks one judgement runs (batch + control)."""
    pairs_per_look: int
    max_pairs: int
    """The most pairs one judgement runs (parent and child one rollout each per pair)."""
    parent_success: float
    """The judged tasks' parent success the figures assume."""
    detectable: float | None
    """The smallest gain on the judged tasks (success points, 0-1) accepted with power
    0.8 by the judged-task test; None: none up to the ceiling."""
    mean_pairs: float | None = None
    """Expected pairs at that effect."""
    guard_tasks: int | None = None
    """Tasks the split guard runs per look (None: no guard)."""
    guard_detectable: float | None = None
    """The smallest gain on the whole split (points, 0-1) the guard accepts with power 0.8
    (simulated: 400 draws)."""
    warning: str | None = None

    def text(self) -> str:
        said = (
            f"budget: {self.judgements} judgements at level {self.level:.4g} or more, "
            f"{self.design} design, up to {self.max_pairs} pairs each ({self.pairs_per_look} "
            f"per look over {self.tasks} tasks); "
        )
        if self.detectable is None:
            said += "no gain on the judged tasks is detected with power 0.8"
        else:
            said += (
                f"detects +{self.detectable * 100:.0f} points on the judged tasks with power "
                f"0.8 (parent at {self.parent_success:.2f} there, about "
                f"{self.mean_pairs or 0:.0f} pairs)"
            )
        if self.guard_tasks is not None:
            gd = self.guard_detectable
            said += (
                f"; the split guard ({self.guard_tasks} tasks a look) detects "
                + (f"+{gd * 100:.0f} split points" if gd is not None else "no split gain")
                + " with power 0.8"
            )
        return said


def budget(
    plan: GatePlan,
    *,
    judgements: int,
    level: float,
    alpha: float,
    tasks: int,
    parent_success: float,
    guard_tasks: int | None = None,
    split_success: float | None = None,
) -> Budget:
    """The :class:`Budget` of a run whose judgements follow ``plan``, the first at ``level``;
    with ``guard_tasks`` (tasks per guard look) and ``split_success`` (the parent's success
    on the split), the guard's detectable split gain too."""
    tasks = max(1, tasks)
    per_look = plan.seeds_per_look(tasks) * tasks
    p0 = min(max(parent_success, 0.0), 1.0)
    d, found = smallest_effect(plan, level, alpha, tasks, p0)
    guard_d = None
    if guard_tasks:
        s0 = min(max(split_success if split_success is not None else p0, 0.0), 1.0)
        guard_plan = replace(plan, look_pairs=guard_tasks)
        guard_d, _ = smallest_effect(guard_plan, level, alpha, guard_tasks, s0, simulate=True)
    warning = None
    if d is None:
        warning = "this budget detects no gain on the judged tasks with power 0.8"
    elif d > WARN_ABOVE:
        warning = (
            f"this budget detects only gains above {d * 100:.0f} points with power 0.8: "
            "raise --max-looks (or --alpha) for a gate that finds ordinary repairs"
        )
    return Budget(
        judgements=judgements,
        level=level,
        design=plan.design,
        tasks=tasks,
        pairs_per_look=per_look,
        max_pairs=per_look * plan.max_looks,
        parent_success=p0,
        detectable=d,
        mean_pairs=None if found is None else found.mean_pairs,
        guard_tasks=guard_tasks,
        guard_detectable=guard_d,
        warning=warning,
    )


def plan_for(max_looks: int, min_net: int = 1, design: str = "auto") -> GatePlan:
    """The gate's plan for a budget of ``max_looks`` looks: ``design`` ``auto`` takes the
    design with more power at that budget (:func:`.gate.choose_design`)."""
    plan = GatePlan(max_looks=max_looks, min_net=min_net)
    chosen = choose_design(plan.max_looks * plan.look_pairs) if design == "auto" else design
    if chosen not in ("sequential", "fixed"):
        raise ValueError(f"design {design!r} is not one of auto, sequential, fixed")
    return replace(plan, design=chosen)  # type: ignore[arg-type]
