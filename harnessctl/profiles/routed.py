"""Rank-1 routed evaluation: each task runs under the router's first choice.

The base harness runs every (task, seed) for the comparison. Two ways to route:

- ``when="before"`` (no verifier): every task is routed from its category alone, before any
  rollout of it, and the chosen harness runs its seeds. The routed side spends exactly the
  base's rollouts: an equal-budget comparison of two ways to answer each task once.
- ``when="failed"`` (verifier access): a task the base solved every time keeps the base's
  rollouts; a task with failures is routed from the base's failure outcomes and category,
  and the chosen harness re-runs the same seeds, its rollouts replacing the base's. The
  routed side read the scorer's verdicts and spent the base's rollouts *plus*
  ``extra_rollouts``: it is a retry with a verifier, not an equal-budget arm.

Both sides report ``rollouts`` rollouts per task, paired on (task, seed). The evidence is
the candidates' profiles of one split, chosen as ``harnessctl route`` chooses it
(:func:`harnessctl.profiles.evidence.read_evidence`: another split than the judged one when
every candidate has one), never the judged rollouts.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import HarnessctlError
from ..harness import HarnessSpec
from ..run.evaluate import EvalRequest, Progress, evaluate
from ..summary import Summary, summarize
from .evidence import ProfileEvidence, read_evidence
from .router import route
from .runner import edit_splits
from .voting import Voter, record_vote_calls


@dataclass
class RoutedResult:
    base: Summary
    routed: Summary
    rollouts: int
    choices: dict[str, str]  # task id -> chosen harness (routed tasks only)
    extra_rollouts: int  # rollouts the routed harnesses ran (cached or not)
    when: str = "before"
    """``before``: routed before any rollout (no verifier); ``failed``: after the base's
    failures (the router read the scorer's verdicts)."""
    profile_splits: dict[str, str] = field(default_factory=dict)
    tasks: int = 0
    in_sample_tasks: list[str] = field(default_factory=list)
    """Judged tasks that informed what is compared: in the split a candidate's profile (the
    router's evidence) or its accepted edits were built on."""
    informed_by: dict[str, list[str]] = field(default_factory=dict)
    """``profiles`` and ``edits``: the splits that informed the router and the siblings."""
    evidence: ProfileEvidence | None = None
    """Which profiles the router read (split, harnesses, why); printed, not in ``to_dict``
    (``profile_splits`` and ``informed_by`` carry it in the JSON)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "rollouts_per_task": self.rollouts,
            "base": self.base.to_dict(),
            "routed": self.routed.to_dict(),
            "delta": self.routed.success_rate - self.base.success_rate,
            "routed_tasks": len(self.choices),
            "choices": dict(sorted(self.choices.items())),
            "chosen_counts": dict(sorted(Counter(self.choices.values()).items())),
            "extra_rollouts": self.extra_rollouts,
            "route_when": self.when,
            "verifier": self.when == "failed",
            "routed_side_rollouts": self.routed.rollouts
            + (self.extra_rollouts if self.when == "failed" else 0),
            "profile_splits": self.profile_splits,
            "tasks": self.tasks,
            "in_sample_tasks": sorted(self.in_sample_tasks),
            "out_of_sample": not self.in_sample_tasks,
            "informed_by": self.informed_by,
        }


def routed_eval(
    request: EvalRequest,
    pool: list[HarnessSpec],
    store,
    *,
    voters: list[Voter] | None = None,
    progress: Progress | None = None,
    when: str = "before",
) -> RoutedResult:
    """Evaluate ``request.harness`` (the base) and its Rank-1 routed counterpart, routed
    ``when`` (``before``/``failed``, the module docstring)."""
    if when not in ("before", "failed"):
        raise ValueError(f"when must be 'before' or 'failed', not {when!r}")
    base = request.harness
    candidates = [s for s in pool if s.hash != base.hash]
    profiles, evidence = read_evidence(
        store,
        candidates,
        policy_id=request.policy.id,
        suite=request.suite.name,
        judged_split=request.split,
    )
    evaluated = evaluate(request, store, progress).complete(request.harness.name)
    base_rows, base_run = evaluated.rows, evaluated.run_id
    per_task: dict[str, list] = defaultdict(list)
    for row in base_rows:
        per_task[row.task_id].append(row)
    choices: dict[str, str] = {}
    pairs: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for task_id, rows in per_task.items():
        failed = [r for r in rows if not r.success] if when == "failed" else []
        if when == "failed" and not failed:
            continue
        result = route(
            profiles,
            task_id=task_id,
            category=rows[0].category,
            failure_outcomes=[r.outcome for r in failed],
            k=1,
            voters=voters,
        )
        record_vote_calls(store, result.votes, run_id=base_run)
        choices[task_id] = result.top[0].name
        pairs[result.top[0].name] += [(r.task_id, r.seed) for r in rows]
    by_name = {s.name: s for s in candidates}
    replaced: dict[tuple[str, int], Any] = {}
    for name, wanted in sorted(pairs.items()):
        sub = replace(  # runs under the eval's own (issue #41: one row in `runs`)
            request,
            harness=by_name[name],
            pairs=wanted,
            command="eval-routed",
            parent_run=base_run,
        )
        for row in evaluate(sub, store, progress).complete(sub.harness.name).rows:
            replaced[(row.task_id, row.seed)] = row
    routed_rows = [replaced.get((r.task_id, r.seed), r) for r in base_rows]
    informed = {
        "profiles": sorted({p.split for p in profiles.values()}),
        "edits": sorted({x for xs in edit_splits(store, candidates).values() for x in xs}),
    }
    judged = {r.task_id for r in base_rows}
    seen: set[str] = set()
    for split in {*informed["profiles"], *informed["edits"]}:
        seen |= _split_task_ids(request, split)
    return RoutedResult(
        base=summarize(base_rows),
        routed=summarize(routed_rows),
        rollouts=request.rollouts,
        choices=choices,
        extra_rollouts=len(replaced),
        when=when,
        profile_splits={n: p.split for n, p in sorted(profiles.items())},
        tasks=len(judged),
        in_sample_tasks=sorted(judged & seen),
        informed_by=informed,
        evidence=evidence,
    )


def _split_task_ids(request: EvalRequest, split: str) -> set[str]:
    """The task ids of ``split`` in the request's suite (none when the suite lacks it)."""
    try:
        return {t.id for t in request.suite.tasks(split).tasks}
    except HarnessctlError:  # a split of another suite: no task of this one in it
        return set()
