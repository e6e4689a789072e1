"""Which harnesses a failed task may be routed to, and the routing of one failed task
(``harnessctl route``): the failed rollouts, the candidate pool, their profiles (read as
``eval --router`` reads them: :mod:`harnessctl.profiles.evidence`), the ranking."""

from __future__ import annotations

from pathlib import Path

from ..errors import HarnessctlError
from ..harness import HarnessSpec, lineage_root, load_harness
from ..workspace import Workspace, harness_dirs
from .evidence import read_evidence
from .router import RouteResult, route
from .voting import Voter


def pool_specs(
    ws: Workspace, pool: Path | list[str], *, lineage_of: HarnessSpec | None = None
) -> list[HarnessSpec]:
    """A pool given as a directory of harness directories, or as names/directories. With
    ``lineage_of``, a directory contributes only the harnesses of that harness's lineage (its
    root and the root's descendants): another base there is not one of its repairs."""
    if isinstance(pool, Path):
        specs = [load_harness(p) for p in harness_dirs(pool)]
        if lineage_of is None:
            return specs
        root = lineage_root(lineage_of, ws.harnesses_dir).name
        return [s for s in specs if _root_name(s, pool) == root]
    return [ws.load_harness(name) for name in pool]


def _root_name(spec: HarnessSpec, harnesses_dir: Path) -> str | None:
    """The lineage root's name, None when the parent chain cannot be followed there (then
    the harness is not shown to belong to any lineage)."""
    try:
        return lineage_root(spec, harnesses_dir).name
    except HarnessctlError:
        return None


def profiled_specs(ws: Workspace, store, *, policy_id: str, suite: str) -> list[HarnessSpec]:
    """The workspace harnesses whose current tree has a profile under ``policy_id``."""
    by_hash = {p.harness_hash: p for p in store.profiles(policy_id=policy_id, suite=suite)}
    specs = []
    for h, p in sorted(by_hash.items(), key=lambda kv: kv[1].harness_name):
        path = ws.harness_dir(p.harness_name)
        if path is not None:
            spec = load_harness(path)
            if spec.hash == h:
                specs.append(spec)
    return specs


def failed_rollouts(store, task_id: str, rollout_ids: list[str]) -> list:
    """The rollouts ``rollout_ids`` names (ids or unique prefixes): failures of ``task_id``."""
    rows = [store.rollout(i) for i in rollout_ids]
    for row in rows:
        if row.task_id != task_id:
            raise HarnessctlError(f"rollout {row.id} is of task {row.task_id}, not {task_id}")
        if row.success:
            raise HarnessctlError(f"rollout {row.id} succeeded: route failed rollouts only")
    return rows


def route_failures(
    ws: Workspace,
    store,
    task_id: str,
    rollout_ids: list[str],
    *,
    pool: Path | list[str] | None = None,
    k: int = 3,
    voters: list[Voter] | None = None,
    split: str | None = None,
) -> RouteResult:
    """Rank the candidates for a task whose rollouts ``rollout_ids`` failed: ``pool``, else
    every harness with a current profile under the rollouts' policy on the profiles' split
    (the others are named in the result's ``evidence``); never a harness that produced one
    of the failures. The profiles are of ``split``, else of the split ``eval --router``
    would read for tasks of the failures' split (:func:`read_evidence`)."""
    from ..evolve.digest import digest
    from .voting import record_vote_calls

    rows = failed_rollouts(store, task_id, rollout_ids)
    policy_id, suite = rows[0].policy_id, rows[0].suite
    failed_hashes = {r.harness_hash for r in rows}
    if pool is not None:
        specs = pool_specs(ws, pool)
    else:
        specs = profiled_specs(ws, store, policy_id=policy_id, suite=suite)
    specs = [s for s in specs if s.hash not in failed_hashes]
    if not specs:
        raise HarnessctlError(f"no candidate harness with a profile under {policy_id}")
    profiles, evidence = read_evidence(
        store, specs, policy_id=policy_id, suite=suite, judged_split=rows[0].split,
        split=split, drop_missing=pool is None,
    )  # fmt: skip
    result = route(
        profiles,
        task_id=task_id,
        category=rows[0].category,
        failure_outcomes=[r.outcome for r in rows],
        k=k,
        voters=voters,
        digests=[digest(r, store.trajectory(r)).render() for r in rows],
    )
    record_vote_calls(store, result.votes)  # the voters' calls belong in the call log
    result.evidence = evidence
    return result
