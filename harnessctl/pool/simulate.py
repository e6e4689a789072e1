"""``harnessctl rescue-sim``: the rescue rule over a whole suite split."""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import Field

from ..records import Record
from .sampler import rescue_group

RESCUE_SIM_VERSION = 1


class TaskRescue(Record):
    """What the rescue rule did with one task's group."""

    task_id: str
    all_fail: bool
    """Every base attempt failed."""
    replaced: bool
    """The group was replaced by the siblings' rollouts (at least one succeeded)."""
    routed: list[str] = Field(default_factory=list)
    """The siblings the task was routed to (none unless all failed)."""
    reason: str


class RescueSimResult(Record):
    """``harnessctl rescue-sim --json``: one group per task under the base, the rescue rule
    applied to each."""

    kind: Literal["rescue-sim"] = "rescue-sim"
    version: int = RESCUE_SIM_VERSION
    groups: int
    all_fail: int
    """Groups every base attempt failed."""
    rescued: int
    """All-fail groups replaced by a group with a success."""
    extra_rollouts: int
    """Rollouts the siblings ran, kept or discarded."""
    by_harness: dict[str, int] = Field(default_factory=dict)
    """Successful rescue rollouts per sibling."""
    tasks: list[TaskRescue] = Field(default_factory=list)


class TaskCache:
    """Rescue-sim results per task, kept as files under the workspace's state directory
    (``.harnessctl/rescue-sim/``), so a rerun recomputes nothing and an interrupted one
    resumes where it stopped, as an eval does with its rollouts. An entry is one task's
    :class:`TaskRescue` and the counts behind it, under a key that hashes everything that
    can change them (:func:`task_key`); a file that does not parse is recomputed."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        try:
            data = json.loads(self._path(key).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and data.get("key") == key else None

    def put(self, key: str, entry: dict) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({**entry, "key": key}, sort_keys=True))
        os.replace(tmp, path)  # a reader never sees half a file


def task_key(pool, task, policy, *, group_size: int, k: int, seed: int) -> str:
    """Everything that can change one task's rescue-sim result: the rule's version, the
    pool's harnesses (names, roles, content hashes), the task's content, the policy (id and,
    for a test double, its code version) with the environment's runtime, and the settings."""
    from ..envs import get_environment
    from ..harness import rollout_version

    harnesses = sorted(
        (h.get("name"), h.get("role"), h.get("hash")) for h in pool.manifest["harnesses"]
    )
    runtime = rollout_version(get_environment(task.env), policy.model)
    blob = json.dumps(
        [RESCUE_SIM_VERSION, harnesses, task.content_hash, policy.id, runtime, group_size, k, seed]
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def simulate(
    pool,
    tasks: list,
    policy,
    *,
    group_size: int = 4,
    k: int = 2,
    seed: int = 0,
    cache: TaskCache | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> RescueSimResult:
    """One group of ``group_size`` base rollouts per task and the rescue rule on each;
    ``cache`` serves the tasks already simulated under the same key, ``progress(event, done,
    total)`` counts tasks."""
    groups = all_fail = rescued = extra = 0
    by_harness: Counter = Counter()
    per_task = []
    if progress:
        progress("start", 0, len(tasks))
    for i, task in enumerate(tasks):
        key = task_key(pool, task, policy, group_size=group_size, k=k, seed=seed)
        entry = cache.get(key) if cache is not None else None
        if entry is None:
            entry = _simulate_task(pool, task, policy, group_size=group_size, k=k, seed=seed)
            if cache is not None:
                cache.put(key, entry)
        done = TaskRescue.model_validate(entry["task"])
        groups += 1
        all_fail += done.all_fail
        rescued += done.replaced
        extra += int(entry["extra_rollouts"])
        by_harness.update({str(h): int(n) for h, n in entry["successes"].items()})
        per_task.append(done)
        if progress:
            progress("task", i + 1, len(tasks))
    return RescueSimResult(
        groups=groups,
        all_fail=all_fail,
        rescued=rescued,
        extra_rollouts=extra,
        by_harness=dict(by_harness),
        tasks=per_task,
    )


def _simulate_task(pool, task, policy, *, group_size: int, k: int, seed: int) -> dict:
    group = [pool.base.rollout(task, policy, seed=seed + i) for i in range(group_size)]
    # the rule as Harness-S states it (every row re-rolled): what the simulation measures
    # and caches is how often a sibling rescues an all-fail group, whatever the trainer's mix
    result = rescue_group(pool, task, group, policy, k=k, seed=seed + 1000, mix="replace")
    successes: Counter = Counter(r.harness for r in result.attempted if r.success)
    rescue = TaskRescue(
        task_id=task.id,
        all_fail=not any(r.success for r in group),
        replaced=result.replaced,
        routed=result.routed,
        reason=result.reason,
    )
    return {
        "task": rescue.model_dump(mode="json"),
        "extra_rollouts": result.extra_rollouts,
        "successes": dict(successes),
    }
