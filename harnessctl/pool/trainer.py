"""Trainer-side helpers: find all-fail rollout groups in a batch, rescue them through the
pool, and splice the replacements back in place. Framework-agnostic (plain dicts/objects),
so verl, SkyRL, rLLM or OpenRLHF adapters stay a few lines (see examples/trainers/).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .sampler import rescue_group


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
) -> BatchRescue:
    """Rescue every all-fail group of ``samples``.

    ``task_of(sample)`` gives the task (a harnessctl Task or a raw record); ``convert(output,
    original_sample)`` turns a pool RolloutOutput into the trainer's sample type."""
    groups = group_by_uid(samples, uid_key)
    replacements: dict[Any, list[Any]] = {}
    result = BatchRescue(samples=list(samples))
    for n, uid in enumerate(all_fail_uids(samples, uid_key=uid_key, reward_key=reward_key)):
        idx = groups[uid]
        first = samples[idx[0]]
        outcome = [{"success": False, "outcome": _maybe(samples[i], "outcome")} for i in idx]
        rescue = rescue_group(pool, task_of(first), outcome, policy, k=k, seed=seed + 1000 * n)
        result.tried_uids.append(uid)
        result.extra_rollouts += rescue.extra_rollouts
        if rescue.replaced:
            replacements[uid] = [
                convert(out, samples[i]) for out, i in zip(rescue.group, idx, strict=True)
            ]
            result.rescued_uids.append(uid)
    result.samples = splice(samples, replacements, uid_key=uid_key)
    return result


def _maybe(item: Any, key: str) -> Any:
    try:
        return _get(item, key)
    except (KeyError, AttributeError):
        return None
