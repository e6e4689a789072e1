"""Compact trajectories for the report's in-page view: the last call's messages, every
turn's reply, action error and feedback, the result and the score, each text clipped, so
that a report with a few hundred embedded rollouts stays a few megabytes at most."""

from __future__ import annotations

import json
from typing import Any

from ..errors import HarnessctlError

TEXT_LIMIT = 700  # characters per message, reply, observation or feedback


def clip(text: Any, limit: int = TEXT_LIMIT) -> str:
    """``text`` as a string of at most ``limit`` characters plus a note of what was cut."""
    s = "" if text is None else text if isinstance(text, str) else json.dumps(text, default=str)
    return s if len(s) <= limit else f"{s[:limit]}... [{len(s) - limit} more chars]"


def compact(row: Any, trajectory: dict[str, Any] | None) -> dict[str, Any]:
    """The embedded form of one rollout (``trajectory`` None: the file could not be read)."""
    out: dict[str, Any] = {
        "id": row.id,
        "harness": row.harness_name,
        "hash": row.harness_hash[:12],
        "task": row.task_id,
        "category": row.category,
        "seed": row.seed,
        "outcome": row.outcome,
        "success": bool(row.success),
        "steps": row.steps,
        "calls": row.model_calls,
        "tokens": [row.prompt_tokens, row.completion_tokens],
        "cost": row.cost_usd,
        "error": clip(row.error) if row.error else None,
    }
    if trajectory is None:
        out["missing"] = True
        return out
    calls = trajectory.get("calls") or []
    last = calls[-1] if calls else {}
    out["messages"] = [
        {"role": str(m.get("role", "?")), "content": clip(m.get("content"))}
        for m in last.get("messages") or []
    ]
    out["last_reply"] = clip(last.get("reply") or last.get("error"))
    out["turns"] = [
        {
            "round": e.get("round"),
            "kind": e.get("kind"),
            "reply": clip(e.get("reply")),
            "action_error": clip((e.get("action") or {}).get("error")) or None,
            "observation": clip(_text(e.get("observation")), 400) or None,
            "feedback": clip(e.get("feedback")) or None,
        }
        for e in trajectory.get("events") or []
        if e.get("event") == "turn"
    ]
    result = trajectory.get("result") or {}
    out["result"] = {
        "status": result.get("status"),
        "answer": clip(result.get("answer"), 300),
        "traceback": clip(result.get("traceback"), 1500) or None,
    }
    score = trajectory.get("score") or {}
    out["score"] = {"success": score.get("success"), "detail": clip(score.get("detail"), 500)}
    return out


def _text(value: Any) -> Any:
    """An observation's text when it is the usual ``{"text": ...}`` object."""
    if isinstance(value, dict) and isinstance(value.get("text"), str) and len(value) == 1:
        return value["text"]
    return value


def embed(store: Any, rows: list[Any]) -> dict[str, dict[str, Any]]:
    """Compact trajectories of ``rows`` by rollout id (a missing file is marked, not fatal)."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.id in out:
            continue
        try:
            trajectory = store.trajectory(row)
        except HarnessctlError:
            trajectory = None  # the report still links the row; the view says it is missing
        out[row.id] = compact(row, trajectory)
    return out
