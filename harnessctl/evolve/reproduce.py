"""Claimed rescues re-tested: does an accepted edit's rescue hold beyond the pairs it was
judged on?

For an accepted child, each task it rescued is tried again where the parent fails afresh:

* **fresh seeds**: the same task at seeds no evaluation of the split used (the first
  ``FRESH_TRIES`` after the split's), taking the first seed where the parent fails;
* **held out**: tasks of the same categories outside the split the edit was judged on,
  where the parent fails (as many as the category's claimed rescues).

A rescue reproduces where the child succeeds on such a pair. Its **null baseline** is the
parent itself tried again on each re-tested pair's task at another fresh seed
(``NULL_OFFSET`` further): how often a harness no better than the parent would "reproduce" a
rescue by chance, to read the fraction against. The fraction over both is
stored with the edit (``metrics["reproduction"]``) and shown by ``evolve``, ``profile``, the
report and the exported edit records. Every rollout goes through
:func:`harnessctl.run.evaluate` (cached, stored like any evaluation).

**The verdict** (:func:`verdict_of`): a sibling whose claimed rescues reproduce at a rate no
higher than the null baseline's is ``unreproduced``: it did no better where its parent failed
afresh than the parent did by trying again, so nothing shows its rescues were more than
resampling. ``export-pool`` leaves such siblings out unless asked (``--include-unreproduced``),
and profiles and the report mark them. ``untested``: no claimed rescue could be re-tested (the
parent never failed afresh), so there is no evidence either way; those stay in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ..harness import HarnessSpec
from ..run.evaluate import EvalRequest, evaluate
from .reward import fresh_seeds

Verdict = Literal["reproduced", "unreproduced", "untested"]
FRESH_TRIES = 3
"""Fresh seeds tried per rescued task for one where the parent fails."""
NULL_OFFSET = 100_000
"""How far from a re-tested pair's seed the parent's null-baseline retry draws."""


class ReproducedPair(BaseModel):
    """One re-test: a pair the parent failed, and whether the child solved it."""

    model_config = ConfigDict(extra="forbid")
    task_id: str
    seed: int
    kind: Literal["fresh_seed", "held_out"]
    split: str
    """The split the pair was evaluated under."""
    success: bool
    """The child solved it: the rescue reproduced."""


class Reproduction(BaseModel):
    """How many of an accepted edit's claimed rescues reproduce (stored with the edit)."""

    model_config = ConfigDict(extra="forbid")
    claimed: int
    """The rescues the edit was accepted on."""
    fresh_tested: int = 0
    fresh_reproduced: int = 0
    held_out_tested: int = 0
    held_out_reproduced: int = 0
    held_out_split: str | None = None
    """The split the held-out tasks were evaluated under (None: the suite has no task of
    those categories outside the judged split)."""
    pairs: list[ReproducedPair] = []
    null_tested: int = 0
    """Re-tested pairs the parent was tried on again (the null baseline)."""
    null_reproduced: int = 0
    """...and solved: "reproductions" by chance."""

    @property
    def tested(self) -> int:
        return self.fresh_tested + self.held_out_tested

    @property
    def reproduced(self) -> int:
        return self.fresh_reproduced + self.held_out_reproduced

    @property
    def fraction(self) -> float | None:
        """Reproduced / tested; None when no pair could be tested (the parent never failed
        afresh)."""
        return self.reproduced / self.tested if self.tested else None

    def text(self) -> str:
        """``a/n reproduce (fresh seeds f/g, held out h/i)``, for terminals and commits."""
        if not self.tested:
            return f"none of {self.claimed} rescues re-testable"
        return (
            f"{self.reproduced}/{self.tested} reproduce (fresh seeds "
            f"{self.fresh_reproduced}/{self.fresh_tested}, held out "
            f"{self.held_out_reproduced}/{self.held_out_tested}; the parent alone, tried "
            f"again: {self.null_reproduced}/{self.null_tested})"
        )

    def summary(self) -> dict[str, Any]:
        """The figures without the pairs: what records and reports carry."""
        out = {
            "claimed": self.claimed,
            "tested": self.tested,
            "reproduced": self.reproduced,
            "fraction": self.fraction,
            "fresh_seeds": [self.fresh_reproduced, self.fresh_tested],
            "held_out": [self.held_out_reproduced, self.held_out_tested],
            "null": [self.null_reproduced, self.null_tested],
        }
        return out | {"verdict": verdict_of(out)}


def verdict_of(summary: dict[str, Any] | None) -> Verdict | None:
    """The verdict on a reproduction summary (module docstring), from its figures, so a
    summary stored before verdicts existed gets one too; None for no summary."""
    if not summary:
        return None
    tested, reproduced = int(summary.get("tested") or 0), int(summary.get("reproduced") or 0)
    if tested == 0:
        return "untested"
    null = summary.get("null") or [0, 0]
    null_rate = null[0] / null[1] if null[1] else 0.0
    return "reproduced" if reproduced / tested > null_rate else "unreproduced"


def read_reproduction(metrics: dict[str, Any]) -> Reproduction | None:
    """The reproduction an edit's metrics hold, if any."""
    raw = metrics.get("reproduction")
    return Reproduction.model_validate(raw) if isinstance(raw, dict) else None


def reproduce(
    parent: HarnessSpec,
    child: HarnessSpec,
    rescued: Sequence[tuple[str, int]],
    evaluation: EvalRequest,
    store: Any,
    *,
    salt: str = "",
    progress: Any = None,
    skip: int = 0,
) -> Reproduction:
    """Re-test ``rescued`` (the child's claimed rescues) on fresh seeds (after ``skip``
    fresh seeds the confirmation used) and held-out tasks."""
    suite, split = evaluation.suite, evaluation.split
    judged = {t.id: t for t in suite.tasks(split).tasks}
    tasks = sorted({t for t, _ in rescued if t in judged})
    fresh = [(t, s) for t in tasks for s in fresh_seeds(evaluation, FRESH_TRIES, skip)]
    parent_fresh = _outcomes(evaluation, parent, split, fresh, store, progress)
    fresh_pairs = []
    for task in tasks:
        seeds = [s for t, s in fresh if t == task and parent_fresh.get((t, s)) is False]
        if seeds:
            fresh_pairs.append((task, seeds[0]))
    child_fresh = _outcomes(evaluation, child, split, fresh_pairs, store, progress)
    pairs = [
        ReproducedPair(
            task_id=t, seed=s, kind="fresh_seed", split=split, success=bool(child_fresh.get((t, s)))
        )
        for t, s in fresh_pairs
    ]
    held_split, held_pairs = _held_out(suite, split, judged, rescued, salt, evaluation.seed)
    if held_split is not None and held_pairs:
        parent_held = _outcomes(evaluation, parent, held_split, held_pairs, store, progress)
        wanted: dict[str, int] = {}
        for t, _ in rescued:
            if t in judged:
                wanted[judged[t].category] = wanted.get(judged[t].category, 0) + 1
        by_id = suite.all_tasks.tasks
        category = {t.id: t.category for t in by_id}
        failing = []
        for t, s in held_pairs:
            if parent_held.get((t, s)) is False and wanted.get(category[t], 0) > 0:
                wanted[category[t]] -= 1
                failing.append((t, s))
        child_held = _outcomes(evaluation, child, held_split, failing, store, progress)
        pairs += [
            ReproducedPair(
                task_id=t,
                seed=s,
                kind="held_out",
                split=held_split,
                success=bool(child_held.get((t, s))),
            )
            for t, s in failing
        ]
    null = {}
    for where in sorted({p.split for p in pairs}):
        retry = [(p.task_id, p.seed + NULL_OFFSET) for p in pairs if p.split == where]
        null.update(_outcomes(evaluation, parent, where, retry, store, progress))
    fresh_done = [p for p in pairs if p.kind == "fresh_seed"]
    held_done = [p for p in pairs if p.kind == "held_out"]
    return Reproduction(
        claimed=len(rescued),
        fresh_tested=len(fresh_done),
        fresh_reproduced=sum(p.success for p in fresh_done),
        held_out_tested=len(held_done),
        held_out_reproduced=sum(p.success for p in held_done),
        held_out_split=held_split,
        pairs=pairs,
        null_tested=len(null),
        null_reproduced=sum(null.values()),
    )


def _held_out(
    suite, split, judged, rescued, salt, seed=0
) -> tuple[str | None, list[tuple[str, int]]]:
    """Candidate held-out pairs: tasks of the rescued categories outside ``split`` (at
    most twice as many per category as its rescues, in a seeded order), and the smallest
    split that holds them all."""
    categories: dict[str, int] = {}
    for t, _ in rescued:
        if t in judged:
            categories[judged[t].category] = categories.get(judged[t].category, 0) + 1
    outside = [t for t in suite.all_tasks.tasks if t.id not in judged and t.category in categories]
    if not outside:
        return None, []

    def order(task) -> str:
        return hashlib.sha256(f"{salt}:{task.id}".encode()).hexdigest()

    chosen = []
    for cat, count in sorted(categories.items()):
        mine = sorted((t for t in outside if t.category == cat), key=order)
        chosen += [t.id for t in mine[: 2 * count]]
    if not chosen:
        return None, []
    holders = []
    for name in suite.split_names:
        ids = {t.id for t in suite.tasks(name).tasks}
        if set(chosen) <= ids:
            holders.append((len(ids), name))
    if not holders:
        return None, []
    return min(holders)[1], [(t, seed) for t in chosen]


def _outcomes(evaluation, harness, split, pairs, store, progress) -> dict[tuple[str, int], bool]:
    """Success per pair (pairs that got no result are left out)."""
    if not pairs:
        return {}
    request = replace(
        evaluation, harness=harness, split=split, pairs=list(pairs), command="reproduce"
    )
    rows = evaluate(request, store, progress=progress).complete(harness.name).rows
    return {(r.task_id, r.seed): bool(r.success) for r in rows}
