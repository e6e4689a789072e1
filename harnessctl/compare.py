"""Two runs side by side, paired by (task, seed).

Evolution judges an edit on paired reruns (``evolve.reward``): the same task and seed under
parent and child, a *rescue* where A failed and B succeeded, a *regression* the other way.
``compare`` applies the same pairing to any two runs (or the latest runs of two harnesses on
one selection): the outcome changes, the rescues and regressions with their rollout ids, the
exact sign test on the discordant pairs (McNemar's exact test), per-category deltas, and the
tokens and cost of each side on the paired rollouts. Pairs present on one side only are
counted, not compared.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

from pydantic import Field

from .records import Record, Result
from .runs import RunItem, run_item, run_rollouts
from .stats import sign_flip_p

COMPARE_RESULT_VERSION = 1


class PairChange(Record):
    """One (task, seed) whose outcome differs between A and B."""

    task: str
    seed: int
    category: str
    a_outcome: str
    b_outcome: str
    a_rollout: str
    b_rollout: str
    change: Literal["rescue", "regression", "outcome"]
    """``rescue``: A failed, B succeeded; ``regression``: the reverse; ``outcome``: both
    failed (or both succeeded) with different outcomes."""


class CategoryDelta(Record):
    pairs: int
    a_successes: int
    b_successes: int
    delta: float
    """B's success rate minus A's, on this category's pairs."""
    rescues: int
    regressions: int


class SideUsage(Record):
    """What one side spent on the paired rollouts."""

    rollouts: int
    successes: int
    success_rate: float
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


class CompareResult(Result):
    """``harnessctl compare A B --json``."""

    kind: Literal["compare"] = "compare"
    version: int = COMPARE_RESULT_VERSION
    a: RunItem
    b: RunItem
    pairs: int
    """(task, seed) pairs both sides have: everything below is on these."""
    only_a: int
    only_b: int
    a_usage: SideUsage
    b_usage: SideUsage
    delta: float
    """B's success rate minus A's on the pairs."""
    rescues: int
    regressions: int
    p_b_better: float
    """One-sided exact sign test on the discordant pairs: P(at least this many rescues)
    if B were no better than A."""
    p_two_sided: float
    outcome_changes: dict[str, int] = Field(default_factory=dict)
    """``"A outcome -> B outcome"`` -> pairs, for pairs whose outcome differs."""
    categories: dict[str, CategoryDelta] = Field(default_factory=dict)
    changes: list[PairChange] = Field(default_factory=list)
    """Every pair whose outcome differs, rescues and regressions first."""
    same_selection: bool
    """Both runs have the same suite, split and policy (else the pairing is across them:
    say so when reading the numbers)."""
    tasks: int = 0
    """Tasks the pairs come from."""
    p_two_sided_tasks: float = 1.0
    """The exact sign-flip test at the task level (:func:`harnessctl.stats.sign_flip_p`): the
    seeds of a task share its difficulty, so its pairs count as one cluster. With several
    seeds per task, read this rather than the pair-level p."""


def compare_runs(
    store: Any, run_a: Any, run_b: Any, task_ids: tuple[set[str] | None, set[str] | None]
) -> CompareResult:
    """Compare two stored runs (``store.RunRow``); ``task_ids`` are each run's split tasks
    when known (``runs.split_task_ids``)."""
    from .evolve.reward import sign_test

    rows_a = run_rollouts(store, run_a, task_ids[0])
    rows_b = run_rollouts(store, run_b, task_ids[1])
    both = sorted(set(rows_a) & set(rows_b))
    changes: list[PairChange] = []
    per_cat: dict[str, list[tuple[bool, bool]]] = {}
    moves: Counter[str] = Counter()
    for key in both:
        a, b = rows_a[key], rows_b[key]
        per_cat.setdefault(a.category or b.category, []).append((a.success, b.success))
        if a.outcome == b.outcome:
            continue
        moves[f"{a.outcome} -> {b.outcome}"] += 1
        kind: Literal["rescue", "regression", "outcome"] = "outcome"
        if b.success and not a.success:
            kind = "rescue"
        elif a.success and not b.success:
            kind = "regression"
        changes.append(
            PairChange(
                task=key[0],
                seed=key[1],
                category=a.category,
                a_outcome=a.outcome,
                b_outcome=b.outcome,
                a_rollout=a.id,
                b_rollout=b.id,
                change=kind,
            )
        )
    order = {"rescue": 0, "regression": 1, "outcome": 2}
    changes.sort(key=lambda c: (order[c.change], c.task, c.seed))
    rescues = sum(1 for c in changes if c.change == "rescue")
    regressions = sum(1 for c in changes if c.change == "regression")
    net: dict[str, int] = {}
    for key in both:
        net[key[0]] = net.get(key[0], 0) + int(rows_b[key].success) - int(rows_a[key].success)
    usage_a = _usage([rows_a[k] for k in both])
    usage_b = _usage([rows_b[k] for k in both])
    return CompareResult(
        a=run_item(store, run_a),
        b=run_item(store, run_b),
        pairs=len(both),
        only_a=len(set(rows_a) - set(rows_b)),
        only_b=len(set(rows_b) - set(rows_a)),
        a_usage=usage_a,
        b_usage=usage_b,
        delta=(usage_b.successes - usage_a.successes) / len(both) if both else 0.0,
        rescues=rescues,
        regressions=regressions,
        p_b_better=sign_test(rescues, regressions),
        p_two_sided=min(
            1.0, 2 * min(sign_test(rescues, regressions), sign_test(regressions, rescues))
        ),
        outcome_changes=dict(sorted(moves.items())),
        categories={cat: _category(per_cat[cat]) for cat in sorted(per_cat)},
        changes=changes,
        same_selection=(run_a.suite, run_a.split, run_a.policy_id)
        == (run_b.suite, run_b.split, run_b.policy_id),
        tasks=len(net),
        p_two_sided_tasks=sign_flip_p(list(net.values())),
    )


def _category(pairs: list[tuple[bool, bool]]) -> CategoryDelta:
    n = len(pairs)
    a_ok = sum(1 for a, _ in pairs if a)
    b_ok = sum(1 for _, b in pairs if b)
    return CategoryDelta(
        pairs=n,
        a_successes=a_ok,
        b_successes=b_ok,
        delta=(b_ok - a_ok) / n if n else 0.0,
        rescues=sum(1 for a, b in pairs if b and not a),
        regressions=sum(1 for a, b in pairs if a and not b),
    )


def _usage(rows: list) -> SideUsage:
    n = len(rows)
    wins = sum(1 for r in rows if r.success)
    return SideUsage(
        rollouts=n,
        successes=wins,
        success_rate=wins / n if n else 0.0,
        model_calls=sum(r.model_calls for r in rows),
        prompt_tokens=sum(r.prompt_tokens for r in rows),
        completion_tokens=sum(r.completion_tokens for r in rows),
        cost_usd=sum(r.cost_usd for r in rows),
    )
