"""Small, dependency-free statistics used in summaries and decision rules."""

from __future__ import annotations

import math


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (well behaved near 0 and 1)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile, ``q`` in [0, 100]; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(k), math.ceil(k)
    if lo == hi:
        return ordered[lo]
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def sign_flip_p(differences: list[int]) -> float:
    """Exact two-sided sign-flip (permutation) test of "no difference" over clusters.

    ``differences``: per cluster (a task), A's successes minus B's over its paired seeds.
    Pairs of one task share the task's difficulty, so they are not independent draws: the
    test keeps each task's pairs together and asks how often flipping the sign of whole tasks
    gives a total at least as far from zero. Exact, by the distribution of the signed sum
    (tasks with no difference contribute nothing)."""
    sizes = [abs(int(d)) for d in differences if d]
    if not sizes:
        return 1.0
    dist: dict[int, float] = {0: 1.0}
    for size in sizes:
        nxt: dict[int, float] = {}
        for total, p in dist.items():
            for step in (size, -size):
                nxt[total + step] = nxt.get(total + step, 0.0) + p / 2
        dist = nxt
    observed = abs(sum(int(d) for d in differences))
    return min(1.0, sum(p for total, p in dist.items() if abs(total) >= observed))


def holm(p_values: list[float | None]) -> list[float | None]:
    """Holm's step-down adjustment (family-wise error over the family of tests given; None
    entries are not tests and stay None): the adjusted p-value of the i-th smallest of m is
    the running maximum of (m - i + 1) p."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(tested)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out
