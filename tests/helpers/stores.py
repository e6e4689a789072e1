"""Helpers shared by the store tests (SQLite-only and both-backend files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harnessctl.store import EditRow, ProfileRow, RolloutRow


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


def make_edit(key: str = "e1", **fields: Any) -> EditRow:
    values: dict[str, Any] = {
        "edit_key": key,
        "evolve_id": "ev",
        "parent_hash": "h1",
        "parent_name": "base",
        "direction": "d",
        "round": 1,
        "attempt": 0,
        "editor": "rules",
        "prompt": "p",
        "response": "r",
        "status": "evaluated",
    }
    values.update(fields)
    return EditRow(**values)


def make_profile(**fields: Any) -> ProfileRow:
    values: dict[str, Any] = {
        "harness_hash": "h1",
        "harness_name": "base",
        "policy_id": "p",
        "suite": "s",
        "split": "dev",
    }
    values.update(fields)
    return ProfileRow(**values)


def trajectory_files(workspace: Path) -> list[Path]:
    return sorted((workspace / ".harnessctl" / "trajectories").rglob("*.json.gz"))
