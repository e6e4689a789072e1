"""Equal-budget baselines: is the evolved pool better than simpler ways to spend the calls?

On held-out tasks (a split no edit, profile or routing decision saw), every arm answers each
(task, seed) pair with at most ``attempts`` rollouts, all drawn from the same stored
evaluations, so arms are paired pair by pair:

- **without a verifier** (one rollout per pair, nothing learns whether it succeeded): the
  base; each sibling alone; the single best sibling by training evidence (success on the
  evidence split); the router's Rank-1 made *before* any rollout of the task (its profile
  score from the task's category alone: no failure, no verdict); a random sibling per pair;
  all repairs combined (every sibling's change merged into one harness,
  :mod:`harnessctl.evolve.combine`; siblings whose changes conflict are left out and named);
  any extra harness given;
- **with the same verifier** (the scorer's verdict decides whether to try again; named
  ``verifier`` in the table): best-of-``attempts`` of the base and of the best sibling (fresh
  seeds), the base then the router's ranking (``eval --router``'s pattern), the router's
  Top-``attempts`` in rank order.

An arm's rollouts are counted with their model calls and tokens; every arm is compared with
the best one and with the base **at the task level**: the seeds of one task share its
difficulty, so its pairs are one cluster, and the exact sign-flip test over the tasks' net
differences (:func:`harnessctl.stats.sign_flip_p`) asks how often flipping whole tasks gives
a difference as large. Each family of comparisons (against the base; against the best) is
adjusted for the number of arms by Holm's step-down method (``*_holm``): read those when
asking whether *some* arm beats the base. The result is what it is: the table says which
arm wins.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import Field

from .records import Record, Result
from .stats import holm, sign_flip_p, wilson_interval

BASELINES_RESULT_VERSION = 2
"""2: p-values at the task level (clustered pairs) with Holm-adjusted ones beside them."""
Pair = tuple[str, int]


class Arm(Record):
    """One way of spending the budget, and what it scored on the held-out pairs."""

    name: str
    verifier: bool
    """True when the arm reads the scorer's verdict to decide whether to try again."""
    pairs: int
    successes: int
    success_rate: float
    ci95: tuple[float, float]
    rollouts: int
    model_calls: int
    tokens: int
    vs_best_p: float | None = None
    """Exact two-sided task-level sign-flip test against the best arm (None for the best arm
    itself)."""
    vs_base_p: float | None = None
    """Exact two-sided task-level sign-flip test against the base (None for the base)."""
    vs_best_holm: float | None = None
    """``vs_best_p`` adjusted by Holm over every arm compared with the best."""
    vs_base_holm: float | None = None
    """``vs_base_p`` adjusted by Holm over every arm compared with the base."""
    tasks: int = 0
    """Tasks the pairs come from (the clusters of the tests)."""


class BaselinesResult(Result):
    """``harnessctl bench --json``: the arms on one held-out split."""

    kind: Literal["baselines"] = "baselines"
    version: int = BASELINES_RESULT_VERSION
    base: str
    siblings: list[str]
    evidence_split: str
    heldout_split: str
    policy: str
    attempts: int
    best_sibling: str | None
    """The sibling with the highest success on the evidence split."""
    pairs: int
    arms: list[Arm] = Field(default_factory=list)
    """Best first."""
    best: str
    combined: str | None = None
    """The all-repairs-combined harness (under ``.harnessctl/combined/``), when built."""
    combined_siblings: list[str] = Field(default_factory=list)
    """The siblings whose changes it holds."""
    combined_left_out: dict[str, str] = Field(default_factory=dict)
    """Siblings left out of it, each with the reason (a conflicting or uncompilable merge)."""


@dataclass(frozen=True)
class Outcome:
    success: bool
    model_calls: int
    tokens: int


Table = dict[str, dict[tuple[str, int], Outcome]]  # harness -> (task, seed) -> outcome


def task_level_p(pairs: list[Pair], a: dict[Pair, bool], b: dict[Pair, bool]) -> float:
    """A against B, task by task: the exact sign-flip test over each task's net difference
    (its pairs where A succeeds minus those where B does)."""
    net: dict[str, int] = {}
    for p in pairs:
        net[p[0]] = net.get(p[0], 0) + int(a[p]) - int(b[p])
    return sign_flip_p(list(net.values()))


def arm_figures(
    name: str, verifier: bool, results: dict[Pair, list[Outcome]]
) -> tuple[Arm, dict[Pair, bool]]:
    """An arm from the rollouts it spent on each pair (success: any of them succeeded)."""
    solved = {p: any(o.success for o in outs) for p, outs in results.items()}
    n, wins = len(solved), sum(solved.values())
    lo, hi = wilson_interval(wins, n)
    arm = Arm(
        name=name,
        verifier=verifier,
        pairs=n,
        successes=wins,
        success_rate=wins / max(1, n),
        ci95=(lo, hi),
        rollouts=sum(len(outs) for outs in results.values()),
        model_calls=sum(o.model_calls for outs in results.values() for o in outs),
        tokens=sum(o.tokens for outs in results.values() for o in outs),
    )
    return arm, solved


def play(
    pairs: list[Pair],
    table: Table,
    attempts: int,
    rollouts: int,
    order: Callable[[Pair], list[str]],
) -> dict[Pair, list[Outcome]]:
    """A verifier arm: for each pair, harnesses in ``order(pair)``, attempt j at the seed
    ``seed + j * rollouts`` (fresh), stopping at the first success or after ``attempts``."""
    spent: dict[Pair, list[Outcome]] = {}
    for task, seed in pairs:
        outs: list[Outcome] = []
        for j, name in enumerate(order((task, seed))[:attempts]):
            outcome = table[name][task, seed + j * rollouts]
            outs.append(outcome)
            if outcome.success:
                break
        spent[task, seed] = outs
    return spent


def compare_arms(
    *,
    base: str,
    siblings: list[str],
    extra: list[str],
    table: Table,
    pairs: list[Pair],
    attempts: int,
    rollouts: int,
    evidence: dict[str, float],
    rank: Callable[[str], list[str]],
    salt: str,
    combined: str | None = None,
) -> tuple[list[Arm], str | None]:
    """Every arm of the module docstring over ``pairs`` (attempt 1 at each pair's seed).

    ``table`` holds every harness's outcome at each pair's seed and, for the verifier arms,
    at ``seed + j * rollouts`` for j < ``attempts``; ``evidence``: each sibling's success on
    the evidence split; ``rank(task)``: the router's ranking of the siblings for a task,
    made before any rollout of it; ``combined``: the all-repairs-combined harness."""
    arms: list[tuple[Arm, dict[Pair, bool]]] = []

    def one(name: str, pick: Callable[[Pair], str]) -> None:
        arms.append(arm_figures(name, False, {p: [table[pick(p)][p]] for p in pairs}))

    def fixed(harness: str) -> Callable[[Pair], str]:
        return lambda p: harness

    best = max(siblings, key=lambda s: (evidence.get(s, 0.0), s)) if siblings else None
    one(f"base ({base})", fixed(base))
    for name in siblings:
        one(name, fixed(name))
    if combined is not None:
        one(f"all repairs combined ({combined})", fixed(combined))
    for name in extra:
        one(f"{name} (extra)", fixed(name))
    if best is not None:
        one(f"best sibling by evidence ({best})", fixed(best))
        one("router Rank-1, before any rollout", lambda p: rank(p[0])[0])

        def random_pick(p: Pair) -> str:
            digest = hashlib.sha256(f"{salt}:{p[0]}:{p[1]}".encode()).digest()
            return siblings[digest[0] % len(siblings)]

        one("random sibling", random_pick)
    if attempts > 1:
        verified = [
            (f"verifier: base best-of-{attempts}", lambda p: [base] * attempts),
            (f"verifier: base, then router (top-{attempts - 1})", lambda p: [base, *rank(p[0])]),
        ]
        if best is not None:
            verified += [
                (f"verifier: best sibling best-of-{attempts}", lambda p: [best] * attempts),
                (f"verifier: router top-{attempts}", lambda p: rank(p[0])),
            ]
        for label, order in verified:
            arms.append(arm_figures(label, True, play(pairs, table, attempts, rollouts, order)))
    top_arm, top = max(arms, key=lambda a: (a[0].success_rate, -a[0].model_calls))
    base_solved = arms[0][1]
    for arm, solved in arms:
        arm.tasks = len({p[0] for p in pairs})
        if arm is not top_arm:
            arm.vs_best_p = task_level_p(pairs, top, solved)
        if arm is not arms[0][0]:
            arm.vs_base_p = task_level_p(pairs, solved, base_solved)
    for field in ("vs_best", "vs_base"):
        adjusted = holm([getattr(a, f"{field}_p") for a, _ in arms])
        for (arm, _), value in zip(arms, adjusted, strict=True):
            setattr(arm, f"{field}_holm", value)
    ordered = sorted((a for a, _ in arms), key=lambda a: (-a.success_rate, a.model_calls))
    return ordered, best


def run_baselines(
    store: Any,
    template: Any,
    *,
    base: Any,
    siblings: list[Any],
    extra: list[Any],
    evidence_split: str,
    heldout_split: str,
    attempts: int,
    combined_dir: Any = None,
    progress: Any = None,
) -> BaselinesResult:
    """Evaluate everything the arms need (cached rollouts are reused) and compare them.

    ``template``: an ``EvalRequest`` (suite, policy, seeds, limits); the evidence split's
    profiles are built with it (:func:`harnessctl.profiles.runner.profile_pool`). With
    ``combined_dir``, the all-repairs-combined harness is built there and run as an arm."""
    from .evolve.combine import combine
    from .profiles.router import route
    from .profiles.runner import profile_pool
    from .run.evaluate import evaluate
    from .run.group import run_group

    if heldout_split == evidence_split:
        raise ValueError(f"the held-out split is the evidence split ({heldout_split})")
    names = [s.name for s in siblings]
    combined = combine(base, siblings, combined_dir) if combined_dir is not None else None
    held = replace(template, split=heldout_split, rollouts=template.rollouts * attempts)
    table: Table = {}
    categories: dict[str, str] = {}
    with run_group(store, held, "bench", base) as group:  # one run, the rest under it
        evidence_req = replace(template, split=evidence_split, parent_run=group.id)
        train = profile_pool(siblings, base, evidence_req, store, progress=progress)
        for spec in [base, *siblings, *([combined.spec] if combined else []), *extra]:
            request = group.child(replace(held, harness=spec))
            rows = evaluate(request, store, progress=progress).complete(spec.name).rows
            if spec is base:
                group.stand_on(rows)
            table[spec.name] = {
                (r.task_id, r.seed): Outcome(
                    bool(r.success), r.model_calls, r.prompt_tokens + r.completion_tokens
                )
                for r in rows
            }
            categories.update({r.task_id: r.category for r in rows})
    profiles = {n: train.profiles[n] for n in names}
    evidence = {n: profiles[n].success.rate for n in names}
    first = range(template.seed, template.seed + template.rollouts)
    pairs = sorted((t, s) for t in categories for s in first)
    cache: dict[str, list[str]] = {}

    def rank(task: str) -> list[str]:
        if task not in cache:
            ranked = route(profiles, task_id=task, category=categories[task], failure_outcomes=[])
            cache[task] = [c.name for c in ranked.ranked]
        return cache[task]

    arms, best = compare_arms(
        base=base.name,
        siblings=names,
        extra=[s.name for s in extra],
        table=table,
        pairs=pairs,
        attempts=attempts,
        rollouts=template.rollouts,
        evidence=evidence,
        rank=rank,
        salt=f"{base.hash}:{heldout_split}",
        combined=combined.spec.name if combined else None,
    )
    return BaselinesResult(
        base=base.name,
        siblings=names,
        evidence_split=evidence_split,
        heldout_split=heldout_split,
        policy=template.policy.id,
        attempts=attempts,
        best_sibling=best,
        pairs=len(pairs),
        arms=arms,
        best=arms[0].name,
        combined=combined.spec.name if combined else None,
        combined_siblings=combined.merged if combined else [],
        combined_left_out=combined.left_out if combined else {},
    )
