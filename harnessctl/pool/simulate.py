"""``harnessctl rescue-sim``: the rescue rule over a whole suite split."""

from __future__ import annotations

from collections import Counter

from .sampler import rescue_group


def simulate(pool, tasks: list, policy, *, group_size: int = 4, k: int = 2, seed: int = 0) -> dict:
    base = pool.base
    groups = all_fail = rescued = extra = 0
    by_harness: Counter = Counter()
    per_task = []
    for task in tasks:
        group = [base.rollout(task, policy, seed=seed + i) for i in range(group_size)]
        groups += 1
        result = rescue_group(pool, task, group, policy, k=k, seed=seed + 1000)
        failed = not any(r.success for r in group)
        all_fail += failed
        rescued += result.replaced
        extra += result.extra_rollouts
        for r in result.attempted:
            if r.success:
                by_harness[r.harness] += 1
        per_task.append(
            {
                "task_id": task.id,
                "all_fail": failed,
                "replaced": result.replaced,
                "routed": result.routed,
                "reason": result.reason,
            }
        )
    return {
        "groups": groups,
        "all_fail": all_fail,
        "rescued": rescued,
        "extra_rollouts": extra,
        "by_harness": dict(by_harness),
        "tasks": per_task,
    }
