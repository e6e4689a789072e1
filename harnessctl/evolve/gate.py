"""The acceptance gate: a sequential, anytime-valid paired test with error control over a run.

**Design** (docs/decisions.md, "The gate"). Tasks are *chosen* from the parent's evaluation
(``batch`` tasks it failed with an outcome the direction targets, ``control`` tasks it
solved), but the child is *judged* on fresh seeds, where parent and child both run: at every
look, one more fresh seed of every judged task. Neither side of a judged pair was selected
by its outcome, so under an edit that changes nothing the two results of a pair are
exchangeable and each discordant pair (exactly one side succeeds) is a fair coin. The
child's wins ``W`` and losses ``L`` over the discordant pairs give the e-value

    E(W, L) = integral over theta in [1/2, 1] of (2 theta)^W (2 (1 - theta))^L, uniform prior

a nonnegative supermartingale of mean <= 1 under "the child is no better" (each theta's
likelihood ratio is one, and a mixture of them is one too), so by Ville's inequality
``P(E ever reaches 1/level) <= level``: the test may look after every seed and stop at any
look with its level intact. It stops on a clear win (``E >= 1/level``), on a clear loss
(the mirrored e-value of the losses reaches 1/alpha), when the evidence has fallen so far
that a win is out of reach (``E < futility``, or no more wins than losses after
``min_looks`` looks), or after ``max_looks`` seeds.

**Multiplicity.** A run judges up to ``directions x rounds`` edits; each judgement gets a
level from :class:`ErrorControl`: ``fwer`` gives each ``alpha / m`` (Bonferroni: the chance
of any false acceptance in the run is at most alpha), ``fdr`` gives the t-th judgement
``alpha * (accepted so far + 1) / m`` (e-LOND, Xu & Ramdas 2024: the expected share of false
acceptances among the accepted is at most alpha, under any dependence between judgements,
because the tests are e-values), ``none`` gives each ``alpha``.

**Small budgets** (``design="fixed"``). Anytime validity costs power when a judgement may
only spend a few dozen pairs: below ``FIXED_BELOW_PAIRS`` pairs (``choose_design``) the
judgement runs every look it may and accepts by the exact one-sided sign test over the
discordant pairs at its level, stopping early only where no outcome of the remaining pairs
could still reach it (curtailment costs no power) or on a clear loss. ``1{p <= level} /
level`` is an e-value, so e-LOND over such judgements keeps its guarantee.

The split guard (:mod:`.guard`) and the exact power of a plan (:mod:`.power`) build on this.
Everything here is pure arithmetic: :mod:`.reward` drives it with rollouts, the benchmark
``benchmarks/gate.py`` with outcomes drawn from measured per-task success rates.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict

Control = Literal["fdr", "fwer", "none"]
CONTROLS: tuple[str, ...] = ("fdr", "fwer", "none")
Decision = Literal["accept", "worse", "futile", "exhausted", "continue"]
Design = Literal["sequential", "fixed"]
FIXED_BELOW_PAIRS = 180
"""A judgement that may spend fewer pairs than this runs the fixed-sample design: measured
by exact power (``benchmarks/gate_budget.py``, docs/decisions.md), the sign test at the
judgement's full budget has clearly more power there, and the sequential test's savings in
rollouts are small."""


@lru_cache(maxsize=512)
def _cumulative(n: int) -> tuple[int, ...]:
    """sum_{i <= k} C(n, i) for k = 0..n, exactly (one pass; the gate and the power
    calculation ask for many k at one n)."""
    out, c, total = [], 1, 0
    for i in range(n + 1):
        total += c
        out.append(total)
        c = c * (n - i) // (i + 1)
    return tuple(out)


def _binom_cdf_half(n: int, k: int) -> float:
    """P(Binomial(n, 1/2) <= k), exactly."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return _cumulative(n)[k] / 2**n


def sign_p(wins: int, losses: int) -> float:
    """The exact one-sided sign test: P(Binomial(W + L, 1/2) >= W)."""
    return 1.0 - _binom_cdf_half(wins + losses, wins - 1)


def choose_design(max_pairs: int) -> Design:
    """The design with more power at a judgement's budget of ``max_pairs`` pairs."""
    return "fixed" if max_pairs < FIXED_BELOW_PAIRS else "sequential"


def e_value(wins: int, losses: int) -> float:
    """The mixture e-value for "wins are no likelier than losses" (module docstring).

    Closed form: with n = W + L, the integral of theta^W (1 - theta)^L over [1/2, 1] is
    B(W+1, L+1) P(Binomial(n+1, 1/2) <= W), and the uniform density on [1/2, 1] is 2, so
    E = 2^(n+1) P(Bin(n+1, 1/2) <= W) / ((n+1) C(n, W)).
    """
    if wins < 0 or losses < 0:
        raise ValueError(f"wins {wins} and losses {losses} must be >= 0")
    n = wins + losses
    # in logs: 2^(n+1) overflows a float past ~1000 pairs
    log_e = (
        (n + 1) * math.log(2)
        + math.log(max(_binom_cdf_half(n + 1, wins), 1e-300))
        - math.log(n + 1)
        - math.log(math.comb(n, wins))
    )
    return math.exp(min(log_e, 700.0))


@dataclass(frozen=True)
class ErrorControl:
    """How a run's judgements share its ``alpha`` (module docstring, "Multiplicity")."""

    kind: Control
    alpha: float
    judgements: int
    """m: the most judgements the run can make (directions x rounds)."""
    weight: float = 1.0
    """The run's share of a longer sequence's budget (:mod:`.history`: judgements across the
    workspace's runs controlled together); 1 for a run on its own."""

    def __post_init__(self) -> None:
        if self.kind not in CONTROLS:
            raise ValueError(f"error control {self.kind!r} is not one of {', '.join(CONTROLS)}")
        if not 0 < self.alpha <= 1:
            raise ValueError(f"alpha {self.alpha} is not in (0, 1]")
        if self.judgements < 1:
            raise ValueError(f"judgements {self.judgements} must be >= 1")
        if not 0 < self.weight <= 1:
            raise ValueError(f"weight {self.weight} is not in (0, 1]")

    def level(self, accepted_before: int = 0) -> float:
        """The level of a judgement made after ``accepted_before`` acceptances in the run."""
        if self.kind == "none":
            return self.alpha
        share = self.alpha * self.weight / self.judgements
        if self.kind == "fwer":
            return share
        return min(self.alpha, share * (accepted_before + 1))

    def describe(self) -> str:
        """One line for evolve's output."""
        m, a, w = self.judgements, self.alpha, self.weight
        scope = "" if w == 1 else f" this run's share {w:.3g} of the workspace's"
        if self.kind == "fwer":
            return (
                f"family-wise error <= {a} over {m} judgements{scope} (each at level "
                f"{a * w / m:.4g}, Bonferroni)"
            )
        if self.kind == "fdr":
            weighted = f"{a}*{w:.3g}" if w != 1 else f"{a}"
            return (
                f"false discovery rate <= {a} over {m} judgements{scope} (e-LOND: level "
                f"{weighted}*(accepted before+1)/{m})"
            )
        return f"no multiplicity control: each of up to {m} judgements at level {a}"


@dataclass(frozen=True)
class GatePlan:
    """How one judgement spends rollouts: ``max_looks`` fresh seeds of every judged task,
    one seed per look. It stops as futile after two looks without a single win (an edit
    that changes no outcome stops there), and after ``min_looks`` looks when the e-value
    has fallen below ``futility`` or the child has no more wins than losses (a win has
    become unlikely): stopping early never raises the level, it only costs some power,
    which the benchmark measures with it."""

    max_looks: int = 30
    min_looks: int = 4
    futility: float = 0.2
    min_net: int = 1
    look_pairs: int = 12
    """Pairs per look at least: a look runs ``ceil(look_pairs / tasks)`` fresh seeds of every
    judged task, so a judgement with few tasks gets as many pairs as one with many."""
    design: Design = "sequential"
    """``sequential``: the anytime-valid e-value test; ``fixed``: the sign test after the last
    look (module docstring, "Small budgets")."""

    def seeds_per_look(self, tasks: int) -> int:
        return max(1, math.ceil(self.look_pairs / max(1, tasks)))

    def seeds_needed(self, tasks: int) -> int:
        """Fresh seeds the most looks use for ``tasks`` judged tasks."""
        return self.max_looks * self.seeds_per_look(tasks)


class Look(BaseModel):
    """The state of a judgement after one look."""

    model_config = ConfigDict(extra="forbid")
    look: int
    pairs: int
    wins: int
    losses: int
    e_value: float
    decision: Decision
    p_value: float | None = None
    """The fixed design's sign test at its last look (None: the sequential design)."""


def decide(
    wins: int,
    losses: int,
    look: int,
    level: float,
    alpha: float,
    plan: GatePlan,
    pairs_left: int = 0,
) -> tuple[float, Decision]:
    """The e-value after ``look`` looks with ``wins``/``losses`` so far, and what to do
    (``pairs_left``: the pairs the remaining looks would add, for the fixed design)."""
    e = e_value(wins, losses)
    if plan.design == "fixed":
        return e, _decide_fixed(wins, losses, look, level, alpha, plan, pairs_left)
    if e >= 1 / level and wins - losses >= plan.min_net:
        return e, "accept"
    if e_value(losses, wins) >= 1 / alpha:
        return e, "worse"
    if look >= plan.max_looks:
        return e, "exhausted"
    if look >= plan.min_looks and (e < plan.futility or wins <= losses):
        return e, "futile"
    if look >= 2 and wins == 0:  # two looks without one win: nothing the edit changed helps
        return e, "futile"
    return e, "continue"


def _decide_fixed(
    wins: int, losses: int, look: int, level: float, alpha: float, plan: GatePlan, left: int
) -> Decision:
    if look >= plan.max_looks:
        ok = sign_p(wins, losses) <= level and wins - losses >= plan.min_net
        return "accept" if ok else "exhausted"
    if e_value(losses, wins) >= 1 / alpha:
        return "worse"
    # curtailment: even if every remaining pair were a win the test could not pass
    if sign_p(wins + left, losses) > level or wins + left - losses < plan.min_net:
        return "futile"
    return "continue"


Outcomes = dict[tuple[str, int], bool]


def run_gate(
    tasks: Sequence[str],
    seeds: Sequence[int],
    observe: Callable[[list[tuple[str, int]]], tuple[Outcomes, Outcomes]],
    *,
    level: float,
    alpha: float,
    plan: GatePlan,
) -> list[Look]:
    """Look after look: ``observe(pairs)`` returns (parent's, child's) success per pair of
    that look's seeds (a missing pair counts as a failure); stops at the first decision
    other than ``continue``. ``seeds`` must hold ``plan.seeds_needed(len(tasks))`` fresh
    seeds, taken in order."""
    per_look = plan.seeds_per_look(len(tasks))
    if len(seeds) < plan.seeds_needed(len(tasks)):
        raise ValueError(f"{plan.max_looks} looks need {plan.seeds_needed(len(tasks))} seeds")
    looks: list[Look] = []
    wins = losses = pairs = 0
    for k in range(1, plan.max_looks + 1):
        chosen = [(t, s) for s in seeds[(k - 1) * per_look : k * per_look] for t in tasks]
        parent, child = observe(chosen)
        for p in chosen:
            before, after = bool(parent.get(p)), bool(child.get(p))
            wins += after and not before
            losses += before and not after
        pairs += len(chosen)
        left = (plan.max_looks - k) * len(chosen)
        e, decision = decide(wins, losses, k, level, alpha, plan, left)
        fixed_p = sign_p(wins, losses) if plan.design == "fixed" else None
        looks.append(
            Look(
                look=k, pairs=pairs, wins=wins, losses=losses, e_value=e, decision=decision,
                p_value=fixed_p,
            )
        )  # fmt: skip
        if decision != "continue":
            break
    return looks


def select_tasks(
    rows: Iterable, targets: Iterable[str], batch: int, control: int, salt: str
) -> tuple[list[str], list[str]]:
    """The judged tasks: up to ``batch`` tasks with a failure among ``rows`` whose outcome is
    in ``targets``, then up to ``control`` other tasks with a success, each in an order
    seeded by ``salt`` (so directions and runs draw different tasks). ``rows`` need
    ``task_id``, ``success`` and ``outcome``."""
    wanted = set(targets)
    seen: dict[str, list[int]] = {}  # task -> [targeted failures, successes, rows]
    for r in rows:
        counts = seen.setdefault(r.task_id, [0, 0, 0])
        counts[0] += (not r.success) and r.outcome in wanted
        counts[1] += bool(r.success)
        counts[2] += 1

    def order(task: str) -> str:
        return hashlib.sha256(f"{salt}:{task}".encode()).hexdigest()

    # the tasks failed most often first: where the parent rarely succeeds a repair's wins
    # stand out from the noise of resampling (a task it always fails has none)
    failed = [t for t, c in seen.items() if c[0]]
    chosen = sorted(failed, key=lambda t: (-seen[t][0] / seen[t][2], order(t)))[:batch]
    solved = [t for t, c in seen.items() if c[1] and t not in chosen]
    rest = sorted(solved, key=order)[:control]
    return chosen, rest
