"""``harnessctl rescue-sim``: the rescue rule over a whole suite split."""

from __future__ import annotations

from collections import Counter
from typing import Literal

from pydantic import Field

from ..records import Record
from .sampler import rescue_group

RESCUE_SIM_VERSION = 1



class TaskRescue(Record):
    """What the rescue rule did with one task's group."""

    task_id: str
    all_fail: bool
    """Every base attempt failed."""
    replaced: bool
    """The group was replaced by the siblings' rollouts (at least one succeeded)."""
    routed: list[str] = Field(default_factory=list)
    """The siblings the task was routed to (none unless all failed)."""
    reason: str


class RescueSimResult(Record):
    """``harnessctl rescue-sim --json``: one group per task under the base, the rescue rule
    applied to each."""

    kind: Literal["rescue-sim"] = "rescue-sim"
    version: int = RESCUE_SIM_VERSION
    groups: int
    all_fail: int
    """Groups every base attempt failed."""
    rescued: int
    """All-fail groups replaced by a group with a success."""
    extra_rollouts: int
    """Rollouts the siblings ran, kept or discarded."""
    by_harness: dict[str, int] = Field(default_factory=dict)
    """Successful rescue rollouts per sibling."""
    tasks: list[TaskRescue] = Field(default_factory=list)


def simulate(
    pool, tasks: list, policy, *, group_size: int = 4, k: int = 2, seed: int = 0
) -> RescueSimResult:
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
            TaskRescue(
                task_id=task.id,
                all_fail=failed,
                replaced=result.replaced,
                routed=result.routed,
                reason=result.reason,
            )
        )
    return RescueSimResult(
        groups=groups,
        all_fail=all_fail,
        rescued=rescued,
        extra_rollouts=extra,
        by_harness=dict(by_harness),
        tasks=per_task,
    )
