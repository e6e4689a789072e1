"""What ``eval`` reports: the summary of a set of rollouts (profiles build on it too) and
the typed, versioned results ``eval --json`` and ``eval --router --json`` print."""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

from pydantic import Field

from .outcomes import ALL_OUTCOMES
from .records import Record
from .stats import percentile, wilson_interval

EVAL_RESULT_VERSION = 1


class CategorySummary(Record):
    """Success within one task category."""

    rollouts: int
    successes: int
    success_rate: float


class Summary(Record):
    """Success with its 95% Wilson interval, outcomes, categories, tokens, cost and wall time
    of a set of rollouts."""

    rollouts: int = 0
    successes: int = 0
    success_rate: float = 0.0
    ci95: tuple[float, float] = (0.0, 1.0)
    outcomes: dict[str, int] = Field(default_factory=dict)
    """Rollouts per outcome; outcomes that never happened are left out."""
    categories: dict[str, CategorySummary] = Field(default_factory=dict)
    tasks: int = 0
    mean_steps: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    wall_p50_s: float = 0.0
    wall_p95_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The plain-data form (what a run row stores)."""
        return self.model_dump(mode="json")


class SkippedTask(Record):
    """A task record that could not be loaded (``envs.TaskProblem``)."""

    file: str
    line: int
    message: str
    """Names the field path at fault."""


class EvalRecord(Record):
    """``harnessctl eval --json``: one harness on a suite split
    (``EvalResult.record(request)``)."""

    kind: Literal["eval"] = "eval"
    version: int = EVAL_RESULT_VERSION
    run_id: str
    harness: str
    harness_hash: str
    policy: str
    """The policy id."""
    cached: int
    """Rollouts served from the store."""
    executed: int
    """Rollouts run now."""
    infra_failed: int
    """Rollouts that failed on infrastructure after retries (not counted in the summary)."""
    problems: list[SkippedTask] = Field(default_factory=list)
    summary: Summary


ROUTED_RESULT_VERSION = 3  # 2: tasks, in_sample_tasks, ...; 3: route_when, verifier


class RoutedEvalRecord(Record):
    """``harnessctl eval HARNESS --router POOL --json``: the base against its Rank-1 routed
    counterpart (see ``profiles.routed``: equal rollouts when routed before any rollout)."""

    kind: Literal["eval-routed"] = "eval-routed"
    version: int = ROUTED_RESULT_VERSION
    harness: str
    """The base harness."""
    policy: str
    rollouts_per_task: int
    base: Summary
    routed: Summary
    delta: float
    """Routed minus base success rate."""
    routed_tasks: int
    choices: dict[str, str] = Field(default_factory=dict)
    """Task id -> the harness it was routed to (routed tasks only)."""
    chosen_counts: dict[str, int] = Field(default_factory=dict)
    extra_rollouts: int
    """Rollouts the routed harnesses ran (cached or not)."""
    route_when: str = "before"
    """``before``: every task routed from its category before any rollout (no verifier);
    ``failed``: only tasks the base failed, from its failure outcomes (verifier access)."""
    verifier: bool = False
    """True when routing read the scorer's verdicts on the base's rollouts."""
    routed_side_rollouts: int = 0
    """Rollouts the routed side spent: the base's plus the re-runs with a verifier."""
    profile_splits: dict[str, str] = Field(default_factory=dict)
    """Harness -> the split its profile (the router's evidence) was built on."""
    tasks: int
    """Tasks judged."""
    in_sample_tasks: list[str] = Field(default_factory=list)
    """Judged tasks that informed what is compared (a profile's or an accepted edit's
    split holds them): the comparison is in-sample on these."""
    out_of_sample: bool
    """No judged task informed the router's profiles or the siblings' edits."""
    informed_by: dict[str, list[str]] = Field(default_factory=dict)
    """``profiles`` / ``edits``: the splits that informed the router and the siblings."""

    @classmethod
    def of(cls, harness: str, policy: str, routed: Any) -> RoutedEvalRecord:
        """From ``profiles.routed.RoutedResult`` (its ``to_dict()``)."""
        return cls.model_validate({"harness": harness, "policy": policy, **routed.to_dict()})


def summarize(rows: list) -> Summary:
    """Aggregate rollout rows (anything with the RolloutRow attributes)."""
    n = len(rows)
    if n == 0:
        return Summary()
    wins = sum(1 for r in rows if r.success)
    counts = Counter(r.outcome for r in rows)
    per_cat: dict[str, list] = {}
    for r in rows:
        per_cat.setdefault(r.category, []).append(r)
    categories = {}
    for cat in sorted(per_cat):
        group = per_cat[cat]
        ok = sum(1 for r in group if r.success)
        categories[cat] = CategorySummary(
            rollouts=len(group), successes=ok, success_rate=ok / len(group)
        )
    walls = [r.wall_s for r in rows]
    return Summary(
        rollouts=n,
        successes=wins,
        success_rate=wins / n,
        ci95=wilson_interval(wins, n),
        outcomes={o: counts[o] for o in ALL_OUTCOMES if counts.get(o)},
        categories=categories,
        tasks=len({r.task_id for r in rows}),
        mean_steps=sum(r.steps for r in rows) / n,
        prompt_tokens=sum(r.prompt_tokens for r in rows),
        completion_tokens=sum(r.completion_tokens for r in rows),
        cost_usd=sum(r.cost_usd for r in rows),
        wall_p50_s=percentile(walls, 50),
        wall_p95_s=percentile(walls, 95),
    )


class RolloutItem(Record):
    """One stored rollout as ``harnessctl rollouts --json`` lists it."""

    id: str
    run_id: str
    harness: str
    harness_hash: str
    task: str
    seed: int
    policy: str
    outcome: str
    success: bool
    steps: int
    created_at: float
    origin: str = ""
    """'' when it ran against this store; else the read-through cache it was copied from."""


class AttemptItem(Record):
    """One infra-failed attempt (retried, never a task outcome)."""

    id: str
    run_id: str
    cache_key: str
    outcome: str
    error: str
    created_at: float


class RolloutListRecord(Record):
    """``harnessctl rollouts --json``: stored rollouts (or, with ``--attempts``, the
    infra-failed attempts), newest first."""

    kind: Literal["rollouts"] = "rollouts"
    version: int = 1
    rollouts: list[RolloutItem] = Field(default_factory=list)
    attempts: list[AttemptItem] = Field(default_factory=list)
