"""Helpers shared by the store tests (SQLite-only and both-backend files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harnessctl.store import RolloutRow


def make_rollout(key: str, **fields: Any) -> RolloutRow:
    values: dict[str, Any] = {
        "cache_key": key,
        "run_id": "run1",
        "harness_hash": "h1",
        "task_id": f"task-{key}",
        "policy_id": "sim/dbbench",
        "outcome": "success",
        "success": True,
        "reward": 1.0,
        "seed": 7,
    }
    values.update(fields)
    return RolloutRow(**values)


def trajectory_files(workspace: Path) -> list[Path]:
    return sorted((workspace / ".harnessctl" / "trajectories").rglob("*.json.gz"))
