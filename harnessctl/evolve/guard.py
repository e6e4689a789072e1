"""The split guard: an edit is committed only if the child is also better on the whole split.

The gate (:mod:`.gate`) judges an edit on the tasks the parent failed most, so by itself it
answers "better on those tasks", not "better on the split": an edit that gains there and
loses as much elsewhere (a **trade-off**) passes it. Once the gate accepts, the guard runs
parent and child on every task of the split at the same fresh seeds, one block per look
(block k: the seeds of the gate's look k, so the judged tasks' pairs are the gate's own,
served by the rollout cache), and accepts when the mixture e-value of its wins and losses
reaches 1 / its level.

**Why it holds its level on a split of unequal tasks.** For a block of one pair per task and
any bet ``lambda`` in [0, 1], the factors ``(1 + lambda d_t)`` (d_t = +1, -1, 0: a win, a
loss, a tie) are independent with means ``1 + lambda Delta_t``, so their product has mean
``prod_t (1 + lambda Delta_t) <= (1 + lambda mean_t Delta_t)^N <= 1`` (concavity of the log)
whenever the child is no better on the split on average (``mean_t Delta_t <= 0``), however the
tasks differ. The product over blocks is then a nonnegative supermartingale at block ends,
and so is its mixture over ``lambda``: that mixture is exactly :func:`.gate.e_value` of the
pooled wins and losses (``lambda = 2 theta - 1``). Ville's inequality bounds the chance it
ever reaches 1 / level by the level, so a trade-off edit passes the guard at most at its
level; with its own error control over the run (e-LOND at ``alpha``, every judgement of the
run sharing it), runs whose edits are all trade-offs commit one at most at ``alpha``. A split
larger than ``max_tasks`` gets blocks of ``max_tasks`` uniform draws of its tasks instead
(each pair then has mean ``mean_t Delta_t`` on its own: the same bound, pair by pair).

The guard stops early as the gate does (a clear loss on the split, futility), and under the
fixed-sample design (small budgets) it runs every block and accepts by the sign test.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .gate import GatePlan, Look, Outcomes, decide, sign_p

Pair = tuple[str, int]
MAX_TASKS = 64
"""Splits up to this many tasks are run whole each look; larger ones are sampled."""


@dataclass(frozen=True)
class GuardPlan:
    """The guard's settings."""

    alpha: float
    """Its own error budget over the run (shared out as the gate's is)."""
    max_tasks: int = MAX_TASKS


def guard_blocks(
    split_tasks: Sequence[str],
    seeds: Sequence[int],
    per_look: int,
    looks: int,
    *,
    max_tasks: int = MAX_TASKS,
    salt: str = "",
) -> list[list[Pair]]:
    """The guard's pairs, block by block: every task of the split at the ``per_look`` seeds
    of each look (the gate's), or ``max_tasks * per_look`` uniform draws of the split's tasks
    per block when it has more tasks than ``max_tasks`` (a task's j-th draw at ``seeds[j]``)."""
    tasks = list(dict.fromkeys(split_tasks))
    if not tasks:
        raise ValueError("the split guard needs at least one task")
    if len(tasks) <= max_tasks:
        if len(seeds) < looks * per_look:
            raise ValueError(f"{looks} guard looks need {looks * per_look} seeds")
        return [
            [(t, s) for s in seeds[k * per_look : (k + 1) * per_look] for t in tasks]
            for k in range(looks)
        ]
    rng = random.Random(hashlib.sha256(f"guard:{salt}".encode()).digest())
    used: Counter[str] = Counter()
    blocks = []
    for _ in range(looks):
        block = []
        for _ in range(max_tasks * per_look):
            task = rng.choice(tasks)
            if used[task] >= len(seeds):
                raise ValueError(f"the guard drew {task} more often than its {len(seeds)} seeds")
            block.append((task, seeds[used[task]]))
            used[task] += 1
        blocks.append(block)
    return blocks


def run_guard(
    blocks: Sequence[list[Pair]],
    observe: Callable[[list[Pair]], tuple[Outcomes, Outcomes]],
    *,
    level: float,
    alpha: float,
    plan: GatePlan,
) -> list[Look]:
    """Block after block: ``observe(pairs)`` returns (parent's, child's) success per pair (a
    missing pair counts as a failure); the gate's rules (:func:`.gate.decide`) on the pooled
    wins and losses, up to ``len(blocks)`` looks. Stops at the first decision other than
    ``continue``."""
    plan = replace(plan, max_looks=len(blocks))
    looks: list[Look] = []
    wins = losses = pairs = 0
    for k, block in enumerate(blocks, 1):
        parent, child = observe(list(block))
        for p in block:
            before, after = bool(parent.get(p)), bool(child.get(p))
            wins += after and not before
            losses += before and not after
        pairs += len(block)
        left = sum(len(b) for b in blocks[k:])
        e, decision = decide(wins, losses, k, level, alpha, plan, left)
        looks.append(
            Look(
                look=k, pairs=pairs, wins=wins, losses=losses, e_value=e, decision=decision,
                p_value=sign_p(wins, losses) if plan.design == "fixed" else None,
            )
        )  # fmt: skip
        if decision != "continue":
            break
    return looks


def describe(looks: Sequence[Look], level: float) -> str:
    """One clause for the edit's reason: what the guard found."""
    last = looks[-1]
    said = {
        "accept": "better on the split",
        "worse": "worse on the split",
        "futile": "no gain on the split in reach",
        "exhausted": "not shown better on the split",
        "continue": "undecided",
    }[last.decision]
    test = (
        f"sign test p={last.p_value:.3g}"
        if last.p_value is not None
        else f"e={last.e_value:.3g}, needs {1 / level:.4g}"
    )
    return (
        f"split guard: {said} at look {last.look} ({last.wins} wins, {last.losses} losses over "
        f"{last.pairs} pairs, {test})"
    )


def guard_edit(
    parent: Any,
    child: Any,
    verdict: Any,
    evaluation: Any,
    store: Any,
    *,
    plan: GatePlan,
    level: float,
    alpha: float,
    guard_alpha: float,
    salt: str,
    progress: Any = None,
) -> tuple[Any, dict]:
    """Run the guard on a child the gate accepted (``verdict``, an ``EditVerdict`` of the
    sequential design): parent and child through :func:`harnessctl.run.evaluate` (cached:
    the gate's pairs and the parent's other pairs cost nothing again). Returns the verdict
    with the guard's finding (accepted only if the guard accepts too) and its record."""
    from ..run.evaluate import evaluate
    from .reward import fresh_seeds

    judged = verdict.batch_size + verdict.control_size
    # the gate's own seeds first; as many as a task could be drawn where the split is sampled
    # (reproduction re-tests after all of these: its skip is seeds_needed(1))
    seeds = fresh_seeds(evaluation, plan.seeds_needed(1))
    split_tasks = [t.id for t in evaluation.suite.tasks(evaluation.split).tasks]
    blocks = guard_blocks(
        split_tasks, seeds, plan.seeds_per_look(judged), plan.max_looks, salt=salt
    )

    def observe(pairs: list[Pair]) -> tuple[Outcomes, Outcomes]:
        found = []
        for harness in (parent, child):
            request = replace(evaluation, harness=harness, pairs=pairs)
            rows = evaluate(request, store, progress=progress).complete(harness.name).rows
            found.append({(r.task_id, r.seed): bool(r.success) for r in rows})
        return found[0], found[1]

    looks = run_guard(blocks, observe, level=level, alpha=alpha, plan=plan)
    record = {
        "level": level,
        "alpha": guard_alpha,
        "tasks": len(split_tasks),
        "decision": looks[-1].decision,
        "looks": [look.model_dump() for look in looks],
    }
    passed = verdict.accepted and looks[-1].decision == "accept"
    said = describe(looks, level)
    reason = f"{verdict.reason}; {said}" if passed else f"{said}; the gate alone: {verdict.reason}"
    update = {"accepted": passed, "reason": reason}
    return verdict.model_copy(update=update), record
