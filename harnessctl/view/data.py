"""What the viewer's JSON API returns, read from the store (nothing here writes)."""

from __future__ import annotations

import json
from typing import Any

from ..errors import ConfigError, HarnessctlError
from ..outcomes import ALL_OUTCOMES
from ..runs import find_run, list_runs, run_rollouts, split_task_ids

MAX_ROLLOUTS = 500


def runs(store: Any) -> dict[str, Any]:
    return list_runs(store, limit=200).model_dump(mode="json")


def rollouts(store: Any, query: dict[str, str]) -> dict[str, Any]:
    """Rollouts newest first, filtered by ``harness``, ``task``, ``outcome``, ``run`` (the
    rollouts it stands on), ``since`` (created after this epoch time: what a poll asks)."""
    outcome = query.get("outcome") or None
    if outcome is not None and outcome not in ALL_OUTCOMES:
        raise ConfigError("outcome", f"{outcome!r} is not one of {', '.join(ALL_OUTCOMES)}")
    try:
        since = float(query.get("since") or 0)
        limit = min(int(query.get("limit") or 200), MAX_ROLLOUTS)
    except ValueError as exc:
        raise ConfigError("since/limit", f"not a number: {exc}") from None
    task, harness = query.get("task") or None, query.get("harness") or None
    if query.get("run"):
        rows = list(run_rollouts(store, find_run(store, query["run"])).values())
    else:
        rows = store.rollouts(task_id=task)
    rows = [
        r
        for r in rows
        if r.created_at > since
        and (harness is None or r.harness_name == harness)
        and (task is None or r.task_id == task)
        and (outcome is None or r.outcome == outcome)
    ]
    rows.sort(key=lambda r: (r.created_at, r.id), reverse=True)
    return {"rollouts": [_item(r) for r in rows[:limit]], "total": len(rows)}


def _item(r: Any) -> dict[str, Any]:
    return {
        "id": r.id,
        "run_id": r.run_id,
        "harness": r.harness_name,
        "task": r.task_id,
        "category": r.category,
        "seed": r.seed,
        "policy": r.policy_id,
        "split": r.split,
        "outcome": r.outcome,
        "success": r.success,
        "steps": r.steps,
        "model_calls": r.model_calls,
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "cost_usd": r.cost_usd,
        "wall_s": r.wall_s,
        "created_at": r.created_at,
    }


def rollout(store: Any, rollout_id: str) -> dict[str, Any]:
    row = store.rollout(rollout_id)
    try:
        trajectory = store.trajectory(row).model_dump(mode="json")
    except HarnessctlError as exc:  # the row is there, its file is not (another machine)
        trajectory = None
        return {"rollout": _item(row), "trajectory": trajectory, "error": str(exc)}
    return {"rollout": _item(row), "trajectory": trajectory, "error": None}


def lineage(store: Any) -> dict[str, Any]:
    """Every edit, oldest first: parent, direction, child, status, reward, paired counts."""
    edits = sorted(store.edits(), key=lambda e: e.created_at)
    return {
        "edits": [
            {
                "id": e.id,
                "evolve_id": e.evolve_id,
                "round": e.round,
                "parent": e.parent_name,
                "direction": e.direction,
                "editor": e.editor,
                "status": e.status,
                "accepted": e.accepted,
                "child": e.child_name,
                "reward": e.reward,
                "rescues": e.rescues,
                "regressions": e.regressions,
                "p_value": e.p_value,
                "reason": e.reason,
                "cost_usd": e.cost_usd,
            }
            for e in edits
        ]
    }


def profiles(store: Any) -> dict[str, Any]:
    out = []
    for p in store.profiles():
        data = json.loads(p.data_json or "{}")
        success = data.get("success") if isinstance(data, dict) else None
        out.append(
            {
                "id": p.id,
                "harness": p.harness_name,
                "policy": p.policy_id,
                "suite": p.suite,
                "split": p.split,
                "kind": p.kind,
                "success": success,
                "categories": data.get("categories") if isinstance(data, dict) else None,
                "card": data.get("card") if isinstance(data, dict) else None,
                "created_at": p.created_at,
            }
        )
    return {"profiles": out}


def compare(store: Any, workspace: Any, query: dict[str, str]) -> dict[str, Any]:
    """``harnessctl compare A B`` for two run ids (``a``, ``b``), as JSON."""
    from ..compare import compare_runs

    if not query.get("a") or not query.get("b"):
        raise ConfigError("a/b", "give two run ids: ?a=RUN&b=RUN")
    run_a, run_b = find_run(store, query["a"]), find_run(store, query["b"])
    ids: tuple[set[str] | None, set[str] | None] = (None, None)
    if workspace is not None:
        ids = (split_task_ids(workspace, run_a), split_task_ids(workspace, run_b))
    return compare_runs(store, run_a, run_b, ids).model_dump(mode="json")
