"""The Harness-S rescue rule for one rollout group.

If and only if every attempt of the group under the base harness failed, route the task to
the Top-k siblings, generate fresh rollouts with the same policy under them (round-robin,
seeds ``seed``, ``seed + 1``, ...), and return the replacement group only when at least one
of them succeeded: an all-fail replacement carries no learning signal. Otherwise the
original group comes back unchanged. Deterministic given the seeds.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RescueResult:
    replaced: bool
    group: list  # the original results, or the RolloutOutputs that replace them
    reason: str
    routed: list[str] = field(default_factory=list)
    attempted: list = field(default_factory=list)  # fresh rollouts, kept even when discarded

    @property
    def extra_rollouts(self) -> int:
        return len(self.attempted)


def _success(result) -> bool:
    if hasattr(result, "success"):
        return bool(result.success)
    if isinstance(result, dict):
        return bool(result.get("success") or result.get("reward", 0) > 0)
    return bool(result)


def rescue_group(pool, task, group: list, policy, *, k: int = 2, seed: int = 0) -> RescueResult:
    """Apply the rule to ``group`` (the base harness's results for ``task``)."""
    if not group:
        return RescueResult(False, group, "empty group")
    if any(_success(r) for r in group):
        return RescueResult(False, group, "group has a success: kept")
    failures = [
        getattr(r, "outcome", None)
        or (r.get("outcome") if isinstance(r, dict) else None)
        or "wrong_answer"
        for r in group
    ]
    routed = pool.route(task, failures, k=k)
    if not routed:
        return RescueResult(False, group, "no sibling to route to")
    fresh = [
        pool.harness(routed[i % len(routed)]).rollout(task, policy, seed=seed + i)
        for i in range(len(group))
    ]
    if any(r.success for r in fresh):
        wins = sum(1 for r in fresh if r.success)
        return RescueResult(True, fresh, f"rescued: {wins}/{len(fresh)} succeeded", routed, fresh)
    return RescueResult(False, group, "replacement also all-fail: kept", routed, fresh)
