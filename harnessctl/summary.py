"""Summaries of a set of rollouts: what ``eval`` prints and what profiles build on."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

from .outcomes import ALL_OUTCOMES
from .stats import percentile, wilson_interval


@dataclass
class Summary:
    rollouts: int = 0
    successes: int = 0
    success_rate: float = 0.0
    ci95: tuple[float, float] = (0.0, 1.0)
    outcomes: dict[str, int] = field(default_factory=dict)
    categories: dict[str, dict] = field(default_factory=dict)
    tasks: int = 0
    mean_steps: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    wall_p50_s: float = 0.0
    wall_p95_s: float = 0.0

    def to_dict(self) -> dict:
        data = asdict(self)
        data["ci95"] = list(self.ci95)
        return data


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
        categories[cat] = {"rollouts": len(group), "successes": ok, "success_rate": ok / len(group)}
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
