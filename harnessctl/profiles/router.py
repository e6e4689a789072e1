"""The router: rank a pool of harnesses for a failed task.

Profile score. For each candidate, paired rescue evidence from its profile (base-failed
(task, seed) pairs that it turned into successes) is smoothed with a Beta prior of
``PRIOR`` pseudo-observations, hierarchically: the candidate's overall rescue rate is
shrunk toward the pool's pooled rate, and its rates for the task's category and for each failure
outcome of the given rollouts are shrunk toward that overall rate. The score is the mean
of the category rate and the mean outcome rate. Little evidence therefore means "about
as good as this harness usually is", never 0 or 1.

Votes. Optional LLM voters each return a ranking; rankings (the profile ranking
included) are combined by Borda count, the profile ranking weighted as much as all
valid voters together, ties broken by the profile score and then by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..records import Card, Profile, RescueCell
from .voting import Vote, Voter, collect_votes

if TYPE_CHECKING:
    from .evidence import ProfileEvidence

PRIOR = 4.0
_NONE = RescueCell(rescued=0, of=0)  # no evidence in a cell


@dataclass
class Candidate:
    """One ranked harness with its evidence."""

    name: str
    hash: str
    score: float  # Borda total (equals the profile Borda points without voters)
    profile_score: float
    votes: dict[str, int] = field(default_factory=dict)  # voter model -> rank (1 = best)
    reasons: list[str] = field(default_factory=list)


@dataclass
class RouteResult:
    task_id: str
    category: str
    failure_outcomes: list[str]
    k: int
    ranked: list[Candidate]
    votes: list[Vote]
    profile_splits: dict[str, str] = field(default_factory=dict)
    """Candidate name -> the split its profile was built on (the router's evidence)."""
    in_sample: bool = False
    """The task was in the evidence: some candidate's profile ran it (its rescue counts it)."""
    evidence: ProfileEvidence | None = None
    """Which profiles were read (split, harnesses, why), when the caller chose them from a
    store (:func:`harnessctl.profiles.evidence.read_evidence`)."""

    @property
    def top(self) -> list[Candidate]:
        return self.ranked[: self.k]

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "category": self.category,
            "failure_outcomes": self.failure_outcomes,
            "k": self.k,
            "top": [vars(c) for c in self.top],
            "ranked": [vars(c) for c in self.ranked],
            "voters": [
                {"model": v.model, "ok": v.ok, "ranking": v.ranking, "error": v.error}
                for v in self.votes
            ],
            "profile_splits": dict(self.profile_splits),
            "in_sample": self.in_sample,
            "evidence": None if self.evidence is None else self.evidence.model_dump(mode="json"),
        }


def _smooth(rescued: int, of: int, prior_mean: float, prior: float = PRIOR) -> float:
    return (rescued + prior * prior_mean) / (of + prior)


def _overall(profile: Profile) -> tuple[int, int]:
    ev = profile.rescue.evidence
    return (0, 0) if ev is None else (ev.rescued, ev.base_failures)


def profile_scores(
    profiles: dict[str, Profile], category: str, outcomes: list[str]
) -> dict[str, tuple[float, list[str]]]:
    """Smoothed rescue score and its reasons for every profile (see the module doc)."""
    counts = [_overall(p) for p in profiles.values()]
    seen = sum(n for _, n in counts)
    pool_mean = sum(r for r, _ in counts) / seen if seen else 0.0
    scores: dict[str, tuple[float, list[str]]] = {}
    for name, p in profiles.items():
        ev = p.rescue.evidence
        if ev is None:
            scores[name] = (0.0, ["base harness: re-running it rescues nothing by definition"])
            continue
        rescued, of = _overall(p)
        overall = _smooth(rescued, of, pool_mean)
        cell = ev.by_category.get(category, _NONE)
        cat = _smooth(cell.rescued, cell.of, overall)
        reasons = [
            f"overall {rescued}/{of} base failures rescued -> {overall:.2f}",
            f"{category}: {cell.rescued}/{cell.of} -> {cat:.2f}",
        ]
        out_rates = []
        for outcome in sorted(set(outcomes)):
            oc = ev.by_outcome.get(outcome, _NONE)
            rate = _smooth(oc.rescued, oc.of, overall)
            out_rates += [rate] * outcomes.count(outcome)
            reasons.append(f"{outcome}: {oc.rescued}/{oc.of} -> {rate:.2f}")
        score = (cat + sum(out_rates) / len(out_rates)) / 2 if out_rates else cat
        scores[name] = (score, reasons)
    return scores


def route(
    profiles: dict[str, Profile],
    *,
    task_id: str,
    category: str,
    failure_outcomes: list[str],
    k: int = 1,
    voters: list[Voter] | None = None,
    digests: list[str] | None = None,
) -> RouteResult:
    """Rank ``profiles`` (candidate name -> profile) for a failed task."""
    scored = profile_scores(profiles, category, failure_outcomes)
    order = sorted(scored, key=lambda n: (-scored[n][0], n))
    n = len(order)
    cards = {name: (profiles[name].card or Card()).text(name) for name in order}
    votes = collect_votes(voters or [], category, digests or [], cards)
    valid = [v for v in votes if v.ok]
    weight = max(1, len(valid))
    points = {name: weight * (n - 1 - i) for i, name in enumerate(order)}
    ranks: dict[str, dict[str, int]] = {name: {} for name in order}
    for vote in valid:
        for pos, name in enumerate(vote.ranking):
            points[name] += n - 1 - pos
            ranks[name][vote.model] = pos + 1
    candidates = []
    for name in order:
        score, reasons = scored[name]
        reasons = [f"profile score {score:.3f}", *reasons]
        if ranks[name]:
            reasons.append(
                "votes: " + ", ".join(f"{m} #{r}" for m, r in sorted(ranks[name].items()))
            )
        candidates.append(
            Candidate(
                name=name,
                hash=profiles[name].harness.hash,
                score=float(points[name]),
                profile_score=round(score, 4),
                votes=ranks[name],
                reasons=reasons,
            )
        )
    candidates.sort(key=lambda c: (-c.score, -c.profile_score, c.name))
    return RouteResult(
        task_id,
        category,
        sorted(failure_outcomes),
        k,
        candidates,
        votes,
        profile_splits={name: p.split for name, p in profiles.items()},
        in_sample=any(task_id in p.per_task for p in profiles.values()),
    )
