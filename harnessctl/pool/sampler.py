"""The Harness-S rescue rule for one rollout group.

If and only if every attempt of the group under the base harness failed, route the task to
the Top-k siblings, generate fresh rollouts with the same policy under them (round-robin,
seeds ``seed``, ``seed + 1``, ...), and return the rescued group only when at least one
of them succeeded: an all-fail replacement carries no learning signal. Otherwise the
original group comes back unchanged. Deterministic given the seeds (each slot's harness and
seed are fixed before anything runs, so concurrency changes only the wall clock).

How the rescued group is formed is the ``mix`` (:data:`MIXES`):

- ``"keep-failures"`` (the default): the first ``n - n // 2`` rows get fresh sibling
  rollouts, the last ``n // 2`` keep the base harness's failed attempts. A rescued group
  then always holds a success and a failure: its rewards vary, so a group-relative
  advantage (GRPO, RLOO) pushes the rescued successes up and the base failures beside them
  down (with 0/1 rewards every row's advantage is non-zero). It costs half the fresh
  rollouts, and a group is rescued a little less often (fewer tries at a success).
- ``"replace"``: every row gets a fresh rollout (Harness-S as written). When every sibling
  rollout succeeds the group is all ones, its rewards have no variance, and GRPO gives
  every row advantage 0: the rescue cost rollouts and trains nothing. Only a group with
  both outcomes among its fresh rollouts carries a gradient.

A group of one row is replaced under either mix (nothing to keep beside it).

The policy is one policy for every fresh rollout, or a function of the :class:`RescueSlot`
(a per-rollout session endpoint, as rLLM's and OpenRLHF's token-capturing proxies give
one). Fresh rollouts run on up to ``max_workers`` threads (rollout sessions are
thread-safe); :func:`arescue_group` is the asyncio form, for trainers whose generation loop
is a coroutine.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

#: How a rescued group is formed (module doc).
RescueMix = Literal["keep-failures", "replace"]
MIXES: tuple[str, ...] = get_args(RescueMix)
DEFAULT_MIX: RescueMix = "keep-failures"


def check_mix(mix: str) -> RescueMix:
    """``mix`` if it is one of :data:`MIXES`; ``ValueError`` naming them otherwise."""
    if mix not in MIXES:
        raise ValueError(f"rescue mix must be one of {', '.join(MIXES)}, got {mix!r}")
    return mix  # type: ignore[return-value]


def fresh_rows(size: int, mix: str = DEFAULT_MIX) -> list[int]:
    """The rows of a group of ``size`` that get fresh rollouts under ``mix``; the others
    keep the base harness's attempts."""
    kept = size // 2 if check_mix(mix) == "keep-failures" else 0
    return list(range(size - kept))


@dataclass(frozen=True)
class RescueSlot:
    """One fresh rollout of a rescue: the group (``uid``), the row of the group it would
    replace, the sibling it runs under and its seed."""

    uid: Any
    row: int
    harness: str
    seed: int


#: A policy (``Policy`` or ``EndpointPolicy``) or a function of the slot giving one.
PolicySource = Any


@dataclass
class RescueResult:
    """The rule's verdict on one group. When ``replaced``, ``group`` is the rescued group:
    the fresh RolloutOutputs at ``rows`` and the original results elsewhere (the base
    failures a ``keep-failures`` mix keeps); otherwise the original group."""

    replaced: bool
    group: list
    reason: str
    routed: list[str] = field(default_factory=list)
    attempted: list = field(default_factory=list)  # fresh rollouts, kept even when discarded
    #: The rows of ``group`` holding fresh rollouts (empty unless ``replaced``).
    rows: list[int] = field(default_factory=list)

    @property
    def extra_rollouts(self) -> int:
        return len(self.attempted)


def _success(result) -> bool:
    """Whether one of a group's results succeeded: its ``success``, else its ``reward`` > 0
    (attribute or key), else a bare number or bool. Anything else is refused: a trainer's
    object that is merely truthy must never count as a success."""
    if isinstance(result, dict):
        return bool(result.get("success") or float(result.get("reward") or 0) > 0)
    if hasattr(result, "success"):
        return bool(result.success)
    if hasattr(result, "reward"):
        return float(result.reward or 0) > 0
    if isinstance(result, bool | int | float):
        return result > 0
    raise TypeError(
        f"cannot tell whether a {type(result).__name__} succeeded: give the group's results "
        "as objects or dicts with 'success' or 'reward'"
    )


def _outcome(result) -> str:
    return (
        getattr(result, "outcome", None)
        or (result.get("outcome") if isinstance(result, dict) else None)
        or "wrong_answer"
    )


def plan_group(
    pool,
    task,
    group: Sequence,
    *,
    k: int = 2,
    seed: int = 0,
    uid: Any = None,
    mix: str = DEFAULT_MIX,
) -> RescueResult | list[RescueSlot]:
    """The fresh rollouts the rule asks for (one slot per row that ``mix`` gives a fresh
    rollout, see :func:`fresh_rows`), or the result when it asks for none (a success in the
    group, no sibling to route to)."""
    rows = fresh_rows(len(group), mix)
    if not group:
        return RescueResult(False, list(group), "empty group")
    if any(_success(r) for r in group):
        return RescueResult(False, list(group), "group has a success: kept")
    routed = pool.route(task, [_outcome(r) for r in group], k=k)
    if not routed:
        return RescueResult(False, list(group), "no sibling to route to")
    return [RescueSlot(uid, i, routed[i % len(routed)], seed + i) for i in rows]


def decide(group: Sequence, slots: list[RescueSlot], fresh: list) -> RescueResult:
    """The rule's verdict once the slots' rollouts are in: each slot's rollout at its row,
    the other rows as they were, when one of them succeeded."""
    routed = list(dict.fromkeys(s.harness for s in slots))
    wins = sum(1 for r in fresh if r.success)
    if not wins:
        return RescueResult(False, list(group), "replacement also all-fail: kept", routed, fresh)
    rescued = list(group)
    for slot, out in zip(slots, fresh, strict=True):
        rescued[slot.row] = out
    reason = f"rescued: {wins}/{len(fresh)} succeeded"
    if len(fresh) < len(group):
        reason += f", {len(group) - len(fresh)} base failure(s) kept"
    rows = [s.row for s in slots]
    return RescueResult(True, rescued, reason, routed, fresh, rows)


def policy_of(policy: PolicySource, slot: RescueSlot):
    return policy(slot) if callable(policy) else policy


def run_slots(pool, tasks: list, slots: list[RescueSlot], policy, max_workers: int = 1) -> list:
    """Each slot's rollout (``tasks[i]`` for ``slots[i]``), in slot order, on up to
    ``max_workers`` threads. The first failure (an infrastructure error) is raised once
    every started rollout has finished."""

    def one(i: int):
        slot = slots[i]
        return pool.harness(slot.harness).rollout(tasks[i], policy_of(policy, slot), seed=slot.seed)

    if max_workers <= 1 or len(slots) <= 1:
        return [one(i) for i in range(len(slots))]
    with ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="rescue") as ex:
        futures = [ex.submit(one, i) for i in range(len(slots))]
        return [f.result() for f in futures]


async def arun_slots(
    pool, tasks: list, slots: list[RescueSlot], policy, limit: asyncio.Semaphore
) -> list:
    """:func:`run_slots` as a coroutine: each rollout on a worker thread, at most
    ``limit``'s value at a time."""

    async def one(i: int):
        slot = slots[i]
        async with limit:
            return await asyncio.to_thread(
                pool.harness(slot.harness).rollout,
                tasks[i],
                policy_of(policy, slot),
                seed=slot.seed,
            )

    return list(await asyncio.gather(*(one(i) for i in range(len(slots)))))


def rescue_group(
    pool,
    task,
    group: list,
    policy: PolicySource,
    *,
    k: int = 2,
    seed: int = 0,
    max_workers: int = 1,
    uid: Any = None,
    mix: str = DEFAULT_MIX,
) -> RescueResult:
    """Apply the rule to ``group`` (the base harness's results for ``task``); ``mix`` says
    how a rescued group is formed (module doc)."""
    plan = plan_group(pool, task, group, k=k, seed=seed, uid=uid, mix=mix)
    if isinstance(plan, RescueResult):
        return plan
    fresh = run_slots(pool, [task] * len(plan), plan, policy, max_workers)
    return decide(group, plan, fresh)


async def arescue_group(
    pool,
    task,
    group: list,
    policy: PolicySource,
    *,
    k: int = 2,
    seed: int = 0,
    max_concurrency: int = 4,
    uid: Any = None,
    mix: str = DEFAULT_MIX,
) -> RescueResult:
    """:func:`rescue_group` as a coroutine; at most ``max_concurrency`` rollouts at a time."""
    plan = await asyncio.to_thread(plan_group, pool, task, group, k=k, seed=seed, uid=uid, mix=mix)
    if isinstance(plan, RescueResult):
        return plan
    limit = asyncio.Semaphore(max(1, max_concurrency))
    fresh = await arun_slots(pool, [task] * len(plan), plan, policy, limit)
    return decide(group, plan, fresh)
