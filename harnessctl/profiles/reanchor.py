"""Re-anchoring profiles when the policy changes.

A documented sample is re-run under the new policy: per task category, the first
``per_category`` task ids of the split ordered by ``sha256(f"{sample_seed}:{task id}")``
(every task of a smaller category), with the same seeds as before. The anchor rollouts
(the old policy on the same sample) come from the store's cache. Drift per harness is the
difference in success and in paired rescue rate (new minus old) with a 95% Newcombe
interval; a harness has drifted when either interval excludes 0. The new profiles are
recorded under the new policy id with kind ``reanchor``; the old policy's profiles are
left untouched and stay current for their policy.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import HarnessctlError
from ..harness import HarnessSpec
from ..policy import Policy
from ..records import Profile, ReanchorInfo
from ..run.evaluate import EvalRequest, Progress, evaluate
from ..stats import wilson_interval
from .build import rescue_evidence, rnd
from .runner import PoolProfiles, profile_pool, stored_profile


def stratified_sample(tasks: list, per_category: int, seed: int) -> list[str]:
    """The re-anchoring sample: ``per_category`` seeded task ids per category, sorted."""
    by_cat: dict[str, list[str]] = {}
    for task in tasks:
        by_cat.setdefault(task.category, []).append(task.id)
    chosen: list[str] = []
    for ids in by_cat.values():
        ids.sort(key=lambda i: hashlib.sha256(f"{seed}:{i}".encode()).hexdigest())
        chosen += ids[:per_category]
    return sorted(chosen)


def newcombe(s1: int, n1: int, s2: int, n2: int) -> tuple[float, float, float]:
    """p1 - p2 and its 95% interval (Newcombe's hybrid score method, no continuity)."""
    if not n1 or not n2:
        return 0.0, -1.0, 1.0
    p1, p2 = s1 / n1, s2 / n2
    l1, u1 = wilson_interval(s1, n1)
    l2, u2 = wilson_interval(s2, n2)
    d = p1 - p2
    return (
        d,
        d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2),
        d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2),
    )


@dataclass
class Drift:
    harness: str
    success_old: tuple[int, int]
    success_new: tuple[int, int]
    success_delta: tuple[float, float, float]  # delta, low, high
    rescue_old: tuple[int, int] | None
    rescue_new: tuple[int, int] | None
    rescue_delta: tuple[float, float, float] | None

    @property
    def drifted(self) -> bool:
        deltas = [self.success_delta] + ([self.rescue_delta] if self.rescue_delta else [])
        return any(lo > 0 or hi < 0 for _, lo, hi in deltas)

    def to_dict(self) -> dict[str, Any]:
        def tri(t):
            return None if t is None else {"delta": rnd(t[0]), "ci95": [rnd(t[1]), rnd(t[2])]}

        return {
            "harness": self.harness,
            "success_old": list(self.success_old),
            "success_new": list(self.success_new),
            "success_delta": tri(self.success_delta),
            "rescue_old": None if self.rescue_old is None else list(self.rescue_old),
            "rescue_new": None if self.rescue_new is None else list(self.rescue_new),
            "rescue_delta": tri(self.rescue_delta),
            "drifted": self.drifted,
        }


@dataclass
class ReanchorResult:
    anchor_policy: str
    policy: str
    sample: list[str]
    drift: list[Drift]
    profiles: PoolProfiles


def find_anchor(store, base: HarnessSpec, suite: str, split: str, new_policy: str) -> Profile:
    """The newest current profile of ``base`` on this suite split under another policy."""
    rows = [
        r
        for r in store.profiles(harness_hash=base.hash, suite=suite, split=split)
        if r.policy_id != new_policy
    ]
    if not rows:
        raise HarnessctlError(
            f"no profile of {base.name} on {suite}/{split} under a policy other than "
            f"{new_policy} to re-anchor from: profile under the old policy first"
        )
    return stored_profile(max(rows, key=lambda r: r.created_at))


def reanchor(
    harnesses: list[HarnessSpec],
    base: HarnessSpec,
    template: EvalRequest,
    store,
    *,
    anchor_policy: Policy | None = None,
    per_category: int = 2,
    sample_seed: int = 0,
    out_dir: Path | None = None,
    progress: Progress | None = None,
) -> ReanchorResult:
    """Re-run the sample under ``template.policy``, measure drift against the anchor policy
    (default: the policy of the newest other profile of ``base``) and refresh the profiles."""
    suite, split = template.suite.name, template.split
    if anchor_policy is None:
        anchor = find_anchor(store, base, suite, split, template.policy.id).policy
        anchor_policy = Policy(anchor.model, dict(anchor.params))
    if anchor_policy.id == template.policy.id:
        raise HarnessctlError("re-anchoring needs a policy different from the anchor's")
    sample = stratified_sample(template.suite.tasks(split).tasks, per_category, sample_seed)
    sampled = replace(template, task_ids=sample)
    anchor_req = replace(sampled, policy=anchor_policy, command="reanchor-anchor")
    old_rows = {
        s.name: evaluate(replace(anchor_req, harness=s), store, progress).complete(s.name).rows
        for s in [base, *harnesses]
    }
    pool = profile_pool(
        harnesses,
        base,
        sampled,
        store,
        out_dir=out_dir,
        reanchor=ReanchorInfo(anchor_policy=anchor_policy.id, sample=sample),
        progress=progress,
    )
    drift = []
    for name in pool.profiles:
        new, old = pool.rows[name], old_rows[name]
        s_new = (sum(r.success for r in new), len(new))
        s_old = (sum(r.success for r in old), len(old))
        r_old = r_new = r_delta = None
        if name != base.name:
            ev_old = rescue_evidence(old, old_rows[base.name])
            ev_new = rescue_evidence(new, pool.rows[base.name])
            r_old = (ev_old.rescued, ev_old.base_failures)
            r_new = (ev_new.rescued, ev_new.base_failures)
            r_delta = newcombe(*r_new, *r_old)
        drift.append(Drift(name, s_old, s_new, newcombe(*s_new, *s_old), r_old, r_new, r_delta))
    return ReanchorResult(anchor_policy.id, template.policy.id, sample, drift, pool)
