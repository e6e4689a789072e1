"""Compact trajectories for the report's in-page view: the last call's messages and tool
calls, every turn's reply, action error and feedback, a host-served environment's steps, the
result and the score, each text clipped, so that a report with a few hundred embedded
rollouts stays a few megabytes at most."""

from __future__ import annotations

from typing import Any

from ..errors import HarnessctlError
from ..records import Trajectory
from ..records import clip as clip_text

TEXT_LIMIT = 700  # characters per message, reply, observation or feedback


def clip(text: Any, limit: int = TEXT_LIMIT) -> str:
    """``text`` as a string of at most ``limit`` characters plus a note of what was cut."""
    return clip_text(text, limit)


def compact(row: Any, trajectory: Trajectory | None) -> dict[str, Any]:
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
    last = trajectory.calls[-1] if trajectory.calls else None
    out["messages"] = [
        {"role": str(m.get("role", "?")), "content": clip(m.get("content"))}
        for m in (last.messages if last else [])
    ]
    out["last_reply"] = clip((last.reply or last.error) if last else None)
    out["tool_calls"] = [clip(c.get("function"), 400) for c in (last.tool_calls if last else [])]
    out["turns"] = [
        {
            "round": e.get("round"),
            "kind": e.get("kind"),
            "reply": clip(e.get("reply")),
            "action_error": clip((e.get("action") or {}).get("error")) or None,
            "observation": clip(_text(e.get("observation")), 400) or None,
            "feedback": clip(e.get("feedback")) or None,
        }
        for e in trajectory.turns()
    ]
    out["env_steps"] = [
        {
            "kind": st.kind,
            "action": clip(st.argument or st.arguments, 300),
            "observation": clip(st.observation, 400),
            "status": st.status,
            "done": st.done,
        }
        for st in trajectory.steps
    ]
    result = trajectory.result
    out["result"] = {
        "status": result.status if result else None,
        "answer": clip(result.answer if result else None, 300),
        "traceback": clip(result.traceback if result else None, 1500) or None,
    }
    score = trajectory.score
    out["score"] = {
        "success": score.success if score else None,
        "detail": clip(score.detail if score else None, 500),
    }
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
