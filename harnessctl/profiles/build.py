"""Behavior profiles from rollout rows: pure functions, no store, no sandbox.

A profile describes one harness under one policy on one suite split. Rescue evidence is
*paired*: a rollout of the harness is compared with the base harness's rollout on the same
(task, seed), which the seeded policies make meaningful (the same draws under any harness).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from ..outcomes import ALL_OUTCOMES
from ..records import (
    HarnessRef,
    Profile,
    ProfileHarness,
    ProfilePolicy,
    Rate,
    ReanchorInfo,
    Rescue,
    RescueCell,
    RescuedTask,
    RescueEvidence,
    RescueMatrix,
    Spread,
    SuiteRef,
)
from ..stats import percentile, wilson_interval

ROUND = 4


def rnd(x: float) -> float:
    """Round floats so YAML diffs read well."""
    return round(float(x), ROUND)


def _rate(successes: int, n: int) -> Rate:
    lo, hi = wilson_interval(successes, n)
    return Rate(
        successes=successes,
        rollouts=n,
        rate=rnd(successes / n) if n else 0.0,
        ci95=[rnd(lo), rnd(hi)],
    )


def _spread(values: list[float]) -> Spread:
    return Spread(
        mean=rnd(sum(values) / len(values)) if values else 0.0,
        p50=rnd(percentile(values, 50)),
        p90=rnd(percentile(values, 90)),
        max=rnd(max(values)) if values else 0.0,
    )


def _per_task(rows: list) -> dict[str, list[int]]:
    """[successes, rollouts] per task: what regression tests compare task by task."""
    out: dict[str, list[int]] = {}
    for r in rows:
        cell = out.setdefault(r.task_id, [0, 0])
        cell[0] += int(bool(r.success))
        cell[1] += 1
    return dict(sorted(out.items()))


def by_pair(rows: list) -> dict[tuple[str, int], Any]:
    """Rows keyed by (task id, seed)."""
    return {(r.task_id, r.seed): r for r in rows}


def all_fail_tasks(base_rows: list) -> set[str]:
    """Tasks where every base attempt failed (the rescue opportunities)."""
    wins: dict[str, bool] = {}
    for r in base_rows:
        wins[r.task_id] = wins.get(r.task_id, False) or bool(r.success)
    return {t for t, won in wins.items() if not won}


def rescue_evidence(rows: list, base_rows: list) -> RescueEvidence:
    """Paired evidence over every base-failed (task, seed): success here by category and by
    the base's failure outcome. This is what the router smooths and scores."""
    mine = by_pair(rows)
    overall = [0, 0]
    by_cat: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    by_out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for b in base_rows:
        if b.success:
            continue
        r = mine.get((b.task_id, b.seed))
        if r is None:
            continue
        won = int(bool(r.success))
        for cell in (overall, by_cat[b.category], by_out[b.outcome]):
            cell[0] += won
            cell[1] += 1
    return RescueEvidence(
        base_failures=overall[1],
        rescued=overall[0],
        by_category={c: RescueCell(rescued=v[0], of=v[1]) for c, v in sorted(by_cat.items())},
        by_outcome={o: RescueCell(rescued=v[0], of=v[1]) for o, v in sorted(by_out.items())},
    )


def rescue_set(rows: list, base_rows: list) -> list[RescuedTask]:
    """Tasks where every base attempt failed and this harness succeeded at least once."""
    opportunities = all_fail_tasks(base_rows)
    per_task: dict[str, list] = defaultdict(list)
    for r in rows:
        if r.task_id in opportunities:
            per_task[r.task_id].append(r)
    found = []
    for task in sorted(per_task):
        group = per_task[task]
        wins = sum(1 for r in group if r.success)
        if wins:
            found.append(
                RescuedTask(
                    task=task,
                    category=group[0].category,
                    successes=wins,
                    rollouts=len(group),
                    rate=rnd(wins / len(group)),
                )
            )
    return found


def regressed_tasks(rows: list, base_rows: list) -> list[str]:
    """Tasks the base solved on every attempt that this harness failed at least once."""
    base_ok: dict[str, bool] = {}
    for b in base_rows:
        base_ok[b.task_id] = base_ok.get(b.task_id, True) and bool(b.success)
    return sorted({r.task_id for r in rows if not r.success and base_ok.get(r.task_id)})


def build_profile(
    rows: list,
    base_rows: list,
    *,
    harness: ProfileHarness,
    base: HarnessRef,
    policy: ProfilePolicy,
    suite: SuiteRef,
    split: str,
    reanchor: ReanchorInfo | None = None,
) -> Profile:
    """The profile of one harness (``rows``) against the base (``base_rows``), without its
    card (:func:`harnessctl.profiles.card.behavior_card` needs the base's profile).
    ``reanchor``: the sample a re-anchoring profile was built on (kind ``reanchor``)."""
    n = len(rows)
    wins = sum(1 for r in rows if r.success)
    counts = Counter(r.outcome for r in rows)
    cats: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        cats[r.category][0] += int(bool(r.success))
        cats[r.category][1] += 1
    is_base = harness.hash == base.hash
    rescues = [] if is_base else rescue_set(rows, base_rows)
    opportunities = len(all_fail_tasks(base_rows))
    return Profile(
        kind="full" if reanchor is None else "reanchor",
        harness=harness,
        base=base,
        policy=policy,
        suite=suite,
        split=split,
        tasks=len({r.task_id for r in rows}),
        seeds=sorted({r.seed for r in rows}),
        success=_rate(wins, n),
        categories={c: _rate(v[0], v[1]) for c, v in sorted(cats.items())},
        outcomes={o: counts[o] for o in ALL_OUTCOMES if counts.get(o)},
        steps=_spread([float(r.steps) for r in rows]),
        tokens=_spread([float(r.prompt_tokens + r.completion_tokens) for r in rows]),
        cost_usd=_spread([float(r.cost_usd) for r in rows]),
        latency_s=_spread([float(r.latency_s) for r in rows]),
        rescue=Rescue(
            opportunities=opportunities,
            count=len(rescues),
            rate=rnd(len(rescues) / opportunities) if opportunities else 0.0,
            tasks=rescues,
            evidence=None if is_base else rescue_evidence(rows, base_rows),
        ),
        regressed_tasks=[] if is_base else regressed_tasks(rows, base_rows),
        per_task=_per_task(rows),
        reanchor=reanchor,
    )


def rescue_matrix(profiles: list[Profile]) -> RescueMatrix:
    """Pairwise overlap of rescue sets across the pool, each harness's unique rescues and
    the union: complementarity shows as a union larger than any single set."""
    sets = {p.name: {t.task for t in p.rescue.tasks} for p in profiles if not p.is_base}
    names = sorted(sets)
    union: set[str] = set().union(*sets.values()) if sets else set()
    unique = {n: sorted(sets[n] - set().union(*(sets[m] for m in names if m != n))) for n in names}
    return RescueMatrix(
        harnesses=names,
        overlap={a: {b: len(sets[a] & sets[b]) for b in names} for a in names},
        unique=unique,
        union=sorted(union),
        union_size=len(union),
        largest_single=max((len(s) for s in sets.values()), default=0),
    )
