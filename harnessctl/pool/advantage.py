"""What a batch's rescue did for the learning signal: counts and the advantage of its rows.

A rescued group trains the policy only if its rewards vary: a group-relative advantage
(GRPO's ``(r - mean) / (std + eps)`` over the group, as verl's
``compute_grpo_outcome_advantage`` computes it) is 0 on every row of a group whose rewards
are all equal, such as a group replaced by sibling rollouts that all succeeded.
:class:`RescueMetrics` counts such groups and reports the mean |advantage| of the rescued
rows, so a run shows how much of its rescue is gradient and how much is cost.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

#: verl's default ``epsilon`` in ``compute_grpo_outcome_advantage``
EPSILON = 1e-6


def group_advantages(rewards: Sequence[float], *, epsilon: float = EPSILON) -> list[float]:
    """GRPO's outcome advantage of each row of one group: ``(r - mean) / (std + epsilon)``
    with the sample standard deviation; a group of one row keeps its reward (mean 0, std 1),
    as verl does."""
    values = [float(r) for r in rewards]
    if len(values) < 2:
        return [v / (1.0 + epsilon) for v in values]
    mean, std = statistics.fmean(values), statistics.stdev(values)
    return [(v - mean) / (std + epsilon) for v in values]


@dataclass(frozen=True)
class RescueMetrics:
    """One batch's rescue, for a trainer's logs (``as_dict``)."""

    groups: int = 0
    """Groups in the batch."""
    all_fail: int = 0
    """Groups whose every row failed: the ones the rule tries to rescue."""
    rescued: int = 0
    """All-fail groups replaced (wholly or in part) by sibling rollouts."""
    rescued_zero_variance: int = 0
    """Rescued groups whose rewards are all equal: GRPO gives each of their rows advantage 0."""
    rescued_rows: int = 0
    """Rows that hold a sibling rollout."""
    rescued_mean_abs_advantage: float = 0.0
    """Mean |GRPO advantage| (:func:`group_advantages`) of those rows; 0.0 when none."""

    def as_dict(self, prefix: str = "harnessctl/rescue_") -> dict[str, float]:
        return {f"{prefix}{name}": value for name, value in asdict(self).items()}


def rescue_metrics(
    groups: int, all_fail: int, rescued: Iterable[tuple[Sequence[float], Sequence[int]]]
) -> RescueMetrics:
    """The metrics of a batch of ``groups`` groups, ``all_fail`` of them all-fail, and per
    rescued group its final rewards (every row, in order) and the rows holding sibling
    rollouts."""
    count = zero = 0
    advantages: list[float] = []
    for rewards, rows in rescued:
        count += 1
        zero += len(set(map(float, rewards))) <= 1
        per_row = group_advantages(rewards)
        advantages += [abs(per_row[i]) for i in rows]
    mean = statistics.fmean(advantages) if advantages else 0.0
    return RescueMetrics(groups, all_fail, count, zero, len(advantages), mean)
