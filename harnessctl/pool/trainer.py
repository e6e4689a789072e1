"""Trainer-side helpers: find all-fail rollout groups in a batch, rescue them through the
pool, and splice the replacements back in place. Framework-agnostic (plain dicts/objects),
so verl, SkyRL, rLLM or OpenRLHF adapters stay a few lines (see examples/trainers/).

``mix`` chooses how a rescued group is formed (:mod:`.sampler`: ``"keep-failures"`` by
default, keeping half of the base failures beside the rescues so the group's GRPO
advantage is not zero; ``"replace"``); :class:`BatchRescue` carries the batch's
:class:`~.advantage.RescueMetrics`.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .advantage import RescueMetrics, rescue_metrics
from .sampler import DEFAULT_MIX, RescueResult, arun_slots, check_mix, decide, plan_group, run_slots


def _get(item: Any, key: str) -> Any:
    return item[key] if isinstance(item, dict) else getattr(item, key)


def group_by_uid(samples: Sequence[Any], uid_key: str = "uid") -> OrderedDict[Any, list[int]]:
    """Sample indices per group uid, in first-seen order."""
    groups: OrderedDict[Any, list[int]] = OrderedDict()
    for i, sample in enumerate(samples):
        groups.setdefault(_get(sample, uid_key), []).append(i)
    return groups


def all_fail_uids(
    samples: Sequence[Any], *, uid_key: str = "uid", reward_key: str = "reward"
) -> list[Any]:
    """uids whose every sample has reward <= 0 (no learning signal in GRPO)."""
    return [
        uid
        for uid, idx in group_by_uid(samples, uid_key).items()
        if all(float(_get(samples[i], reward_key)) <= 0 for i in idx)
    ]


def splice(
    samples: Sequence[Any], replacements: dict[Any, list[Any]], *, uid_key: str = "uid"
) -> list[Any]:
    """Put each uid's replacement samples where its originals were (same group size)."""
    out = list(samples)
    for uid, idx in group_by_uid(samples, uid_key).items():
        new = replacements.get(uid)
        if new is None:
            continue
        if len(new) != len(idx):
            raise ValueError(f"group {uid!r}: {len(new)} replacements for {len(idx)} samples")
        for i, sample in zip(idx, new, strict=True):
            out[i] = sample
    return out


@dataclass
class BatchRescue:
    samples: list
    rescued_uids: list = field(default_factory=list)
    tried_uids: list = field(default_factory=list)
    extra_rollouts: int = 0
    #: The rule's result per tried group (its fresh rollouts, kept or not, are in it).
    results: dict = field(default_factory=dict)
    #: Groups, all-fail groups, rescued ones, those without reward variance, mean |advantage|.
    metrics: RescueMetrics = field(default_factory=RescueMetrics)


@dataclass
class _Batch:
    """The rule applied to a batch, before any fresh rollout runs."""

    groups: OrderedDict
    decided: dict  # uid -> RescueResult that needed no rollout
    planned: dict  # uid -> its slots
    tasks: dict  # uid -> its task


def _plan(pool, samples, task_of, uid_key, reward_key, k, seed, mix) -> _Batch:
    groups = group_by_uid(samples, uid_key)
    batch = _Batch(groups, {}, {}, {})
    for n, uid in enumerate(all_fail_uids(samples, uid_key=uid_key, reward_key=reward_key)):
        idx = groups[uid]
        task = task_of(samples[idx[0]])
        outcome = [{"success": False, "outcome": _maybe(samples[i], "outcome")} for i in idx]
        plan = plan_group(pool, task, outcome, k=k, seed=seed + 1000 * n, uid=uid, mix=mix)
        batch.tasks[uid] = task
        if isinstance(plan, RescueResult):
            batch.decided[uid] = plan
        else:
            batch.planned[uid] = plan
    return batch


def _flat(batch: _Batch) -> tuple[list, list]:
    slots = [s for plan in batch.planned.values() for s in plan]
    return [batch.tasks[s.uid] for s in slots], slots


def _finish(samples, batch: _Batch, fresh: list, convert, uid_key, reward_key) -> BatchRescue:
    results = dict(batch.decided)
    at = 0
    for uid, plan in batch.planned.items():
        outs, at = fresh[at : at + len(plan)], at + len(plan)
        results[uid] = decide([samples[i] for i in batch.groups[uid]], plan, outs)
    result = BatchRescue(samples=list(samples))
    replacements: dict[Any, list[Any]] = {}
    rescued: list[tuple[list[float], list[int]]] = []
    for uid in batch.groups:
        if uid not in results:
            continue
        rescue = results[uid]
        result.tried_uids.append(uid)
        result.results[uid] = rescue
        result.extra_rollouts += rescue.extra_rollouts
        if rescue.replaced:
            idx = batch.groups[uid]
            fresh_rows = set(rescue.rows)
            replacements[uid] = [
                convert(out, samples[i]) if row in fresh_rows else samples[i]
                for row, (out, i) in enumerate(zip(rescue.group, idx, strict=True))
            ]
            result.rescued_uids.append(uid)
            rewards = [
                float(out.reward) if row in fresh_rows else float(_get(samples[i], reward_key))
                for row, (out, i) in enumerate(zip(rescue.group, idx, strict=True))
            ]
            rescued.append((rewards, rescue.rows))
    result.samples = splice(samples, replacements, uid_key=uid_key)
    result.metrics = rescue_metrics(len(batch.groups), len(result.tried_uids), rescued)
    return result


def rescue_batch(
    pool,
    samples: Sequence[Any],
    policy,
    *,
    task_of: Callable[[Any], Any],
    convert: Callable[[Any, Any], Any],
    uid_key: str = "uid",
    reward_key: str = "reward",
    k: int = 2,
    seed: int = 0,
    max_workers: int = 1,
    mix: str = DEFAULT_MIX,
) -> BatchRescue:
    """Rescue every all-fail group of ``samples``.

    ``task_of(sample)`` gives the task (a harnessctl Task or a raw record); ``convert(output,
    original_sample)`` turns a pool RolloutOutput into the trainer's sample type: every
    per-row field (tokens, masks, logprobs, reward) must come from ``output``, the one
    sibling rollout that replaces the row (``output.row()`` has them all). ``mix`` says
    which rows of a rescued group get sibling rollouts (:mod:`.sampler`); the others keep
    their sample as it was (the ``keep-failures`` mix keeps the last half). ``policy`` is a
    policy or a function of the :class:`RescueSlot` (per-rollout sessions). The fresh
    rollouts of every group run on up to ``max_workers`` threads together; group ``n`` uses
    seeds from ``seed + 1000 * n``, so the result does not depend on ``max_workers``."""
    batch = _plan(pool, samples, task_of, uid_key, reward_key, k, seed, check_mix(mix))
    tasks, slots = _flat(batch)
    fresh = run_slots(pool, tasks, slots, policy, max_workers)
    return _finish(samples, batch, fresh, convert, uid_key, reward_key)


async def arescue_batch(
    pool,
    samples: Sequence[Any],
    policy,
    *,
    task_of: Callable[[Any], Any],
    convert: Callable[[Any, Any], Any],
    uid_key: str = "uid",
    reward_key: str = "reward",
    k: int = 2,
    seed: int = 0,
    max_concurrency: int = 4,
    mix: str = DEFAULT_MIX,
) -> BatchRescue:
    """:func:`rescue_batch` as a coroutine (for a trainer's async generation loop): at most
    ``max_concurrency`` fresh rollouts at a time, each on a worker thread, so the event loop
    (and the inference server it drives) keeps serving meanwhile."""
    batch = await asyncio.to_thread(
        _plan, pool, samples, task_of, uid_key, reward_key, k, seed, check_mix(mix)
    )
    tasks, slots = _flat(batch)
    limit = asyncio.Semaphore(max(1, max_concurrency))
    fresh = await arun_slots(pool, tasks, slots, policy, limit)
    return _finish(samples, batch, fresh, convert, uid_key, reward_key)


def _maybe(item: Any, key: str) -> Any:
    try:
        return _get(item, key)
    except (KeyError, AttributeError):
        return None
