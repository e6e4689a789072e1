"""Comparing editors on held-out edit contexts: validity, gate acceptance, realised effect.

A *context* is a GRPO record of the held-out side (an environment the engineers never saw):
the prompt an editor got for one (parent, direction), and the recipe that re-runs a patch's
child against its parent on fresh seeds. Every arm (an engineer, a base model, the rule-based
editor's recorded patch) makes the same number of proposals per context; each is scored by
:class:`harnessctl.evolve.engineer.PatchScorer`:

- valid: the patch passed validation (and the guard) and its child was re-run;
- accepted: the sequential gate's verdict at the recipe's seeds and level;
- realised effect: (wins - losses) / pairs on those seeds, the recipe's invalid reward for
  an invalid patch.

Proposals of one context share its difficulty, so every interval resamples whole contexts
(a percentile bootstrap) and the paired comparison of two arms is a one-sided sign-flip
test over the per-context differences (exact up to 16 contexts with a difference, Monte
Carlo beyond): under "arm A is no better than arm B", flipping the sign of a context's
difference is as likely as not, whatever the contexts' difficulties.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..records import Record

METRICS = ("valid", "accepted", "effect")


def held_out_contexts(data: Path, limit: int | None = None) -> list[Any]:
    """The test side's first attempt per (parent, direction): what an editor is asked once
    per context, in a stable order (``limit``: the first that many)."""
    from ..evolve.dataset import GRPORecord
    from .data import read_records

    path = Path(data) / "grpo" / "test.jsonl"
    records = read_records(path, GRPORecord) if path.is_file() else []
    seen, chosen = set(), []
    for record in sorted(records, key=lambda r: (r.metadata.parent_name, r.metadata.direction)):
        key = (record.metadata.parent_hash, record.metadata.direction)
        if record.metadata.attempt == 0 and key not in seen:
            seen.add(key)
            chosen.append(record)
    return chosen[:limit] if limit else chosen


@dataclass
class Scored:
    """One proposal's verdict."""

    valid: bool
    accepted: bool
    effect: float
    reason: str


@dataclass
class Arm:
    name: str
    scores: list[list[Scored]] = field(default_factory=list)
    """Per context, its proposals' verdicts."""
    seconds: float = 0.0

    def per_context(self, metric: str) -> list[float]:
        return [sum(float(getattr(s, metric)) for s in ss) / max(1, len(ss)) for ss in self.scores]


class Interval(Record):
    mean: float
    low: float
    high: float


class ArmSummary(Record):
    name: str
    contexts: int
    proposals: int
    valid: Interval
    accepted: Interval
    effect: Interval
    seconds: float
    reasons: dict[str, int]
    """Why proposals were rejected, by code (and how many were evaluated)."""


class PairedTest(Record):
    a: str
    b: str
    metric: str
    difference: Interval
    """Mean per-context difference a - b, with its bootstrap interval."""
    p_value: float
    """One-sided: a is no better than b."""


def score_arm(name: str, contexts: list[Any], proposals: list[list[str]], scorer: Any) -> Arm:
    """Score ``proposals[i]`` (the arm's patches for context i) with ``scorer``."""
    arm = Arm(name)
    for record, texts in zip(contexts, proposals, strict=True):
        verdicts = scorer.assess_many([record] * len(texts), texts, max_workers=2)
        arm.scores.append(
            [
                Scored(
                    valid=v.status == "evaluated",
                    accepted=bool(v.verdict is not None and v.verdict.accepted),
                    effect=v.reward,
                    reason=v.reason if v.status != "evaluated" else "evaluated",
                )
                for v in verdicts
            ]
        )
    return arm


def bootstrap(values: Sequence[float], draws: int = 4000, seed: int = 0) -> Interval:
    """The mean of per-context values and its 95% percentile bootstrap over contexts."""
    from ..stats import percentile

    if not values:
        return Interval(mean=0.0, low=0.0, high=0.0)
    rng = random.Random(seed)
    n = len(values)
    means = [sum(rng.choice(values) for _ in range(n)) / n for _ in range(draws)]
    mean = sum(values) / n
    return Interval(mean=mean, low=percentile(means, 2.5), high=percentile(means, 97.5))


def summarise(arm: Arm) -> ArmSummary:
    from collections import Counter

    reasons = Counter(s.reason.split(":")[0] for ss in arm.scores for s in ss)
    return ArmSummary(
        name=arm.name,
        contexts=len(arm.scores),
        proposals=sum(len(ss) for ss in arm.scores),
        valid=bootstrap(arm.per_context("valid")),
        accepted=bootstrap(arm.per_context("accepted")),
        effect=bootstrap(arm.per_context("effect")),
        seconds=round(arm.seconds, 1),
        reasons=dict(reasons),
    )


def sign_flip_greater(differences: Sequence[float], draws: int = 100_000, seed: int = 0) -> float:
    """P(sum of sign-flipped differences >= the observed sum): one-sided, exact over every
    flip of the non-zero differences when there are at most 16, else Monte Carlo (with the
    observed flip counted, so the p-value is never 0)."""
    nonzero = [d for d in differences if abs(d) > 1e-12]
    if not nonzero:
        return 1.0
    observed = sum(nonzero) - 1e-9  # ties count as at least as extreme
    if len(nonzero) <= 16:
        flips = itertools.product((1, -1), repeat=len(nonzero))
        totals = (sum(s * d for s, d in zip(signs, nonzero, strict=True)) for signs in flips)
        hits = sum(1 for total in totals if total >= observed)
        return hits / 2 ** len(nonzero)
    rng = random.Random(seed)
    hits = sum(
        1 for _ in range(draws) if sum(d if rng.random() < 0.5 else -d for d in nonzero) >= observed
    )
    return (hits + 1) / (draws + 1)


def paired(a: Arm, b: Arm, metric: str) -> PairedTest:
    diffs = [x - y for x, y in zip(a.per_context(metric), b.per_context(metric), strict=True)]
    return PairedTest(
        a=a.name, b=b.name, metric=metric, difference=bootstrap(diffs),
        p_value=sign_flip_greater(diffs),
    )  # fmt: skip


def claim_holds(tests: Sequence[PairedTest], arm: str, alpha: float) -> bool:
    """The benchmark's claim: ``arm`` beats its starting model on validity and on realised
    effect, each one-sided test at ``alpha`` (both needed: an intersection-union test, whose
    level is at most ``alpha``)."""
    found = {t.metric: t for t in tests if t.a == arm}
    return all(
        m in found and found[m].p_value <= alpha and found[m].difference.mean > 0
        for m in ("valid", "effect")
    )


def operating(
    contexts: int, proposals: int, base_rate: float, trained_rate: float, *, alpha: float = 0.05,
    sims: int = 2000, seed: int = 0,
) -> float:  # fmt: skip
    """The share of simulated benchmarks in which the validity test rejects, when each of
    ``contexts`` contexts draws its own difficulty and the two arms' ``proposals`` proposals
    are valid at ``base_rate`` and ``trained_rate`` shifted by it: the test's level when
    the rates are equal, its power otherwise."""
    rng = random.Random(seed)
    rejected = 0
    for _ in range(sims):
        diffs = []
        for _ in range(contexts):
            shift = rng.uniform(-0.3, 0.3)  # a context's difficulty, shared by both arms
            a = min(1.0, max(0.0, trained_rate + shift))
            b = min(1.0, max(0.0, base_rate + shift))
            valid_a = sum(rng.random() < a for _ in range(proposals))
            valid_b = sum(rng.random() < b for _ in range(proposals))
            diffs.append((valid_a - valid_b) / proposals)
        rejected += sign_flip_greater(diffs, draws=2000, seed=rng.randrange(1 << 30)) <= alpha
    return rejected / sims
