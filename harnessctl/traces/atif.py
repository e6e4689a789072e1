"""A rollout as a Harbor ATIF trajectory (Agent Trajectory Interchange Format,
:data:`ATIF_VERSION`; Harbor's RFC 0001 and its pydantic models in
``harbor.models.trajectories``).

Steps: the system prompt (``system``), the task as the harness first put it (``user``),
then one ``agent`` step per model call (``llm_call_count`` 1): the reply, the model, the
call's tokens, cost and token-level capture as ``metrics``, its tool calls (the reply's
function calls, or the tool action the harness parsed from a text reply, named
``call-<index>``) and what came back as the ``observation`` (the runtime's ``turn`` events,
matched to the answered calls in order). A host-served environment's recorded steps, the
outcome and the reward are in ``extra.harnessctl``; the checker's detail is not exported (it
may hold gold answers).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from ..gateway.protocol import redact
from .names import clean_name

ATIF_VERSION = "ATIF-v1.7"


def to_atif(row: Any, t: Any) -> dict[str, Any]:
    """One rollout (store row and ``records.Trajectory``) as an ATIF document."""
    steps: list[dict[str, Any]] = []
    first = t.calls[0].messages if t.calls else []
    system = next((m for m in first if m.get("role") == "system"), None)
    if system is not None:
        steps.append({"source": "system", "message": _text(system.get("content"))})
    steps.append({"source": "user", "message": t.task_text()})
    turns = iter(t.turns())
    when = datetime.fromtimestamp(row.created_at, tz=UTC).isoformat()
    for call in t.calls:
        turn = next(turns, None) if call.status == "ok" else None
        steps.append(_agent_step(call, turn))
    for n, step in enumerate(steps, start=1):
        step["step_id"] = n
    steps[-1]["timestamp"] = when
    return {
        "schema_version": ATIF_VERSION,
        "session_id": t.rollout_id,
        "agent": {
            "name": clean_name(t.harness.name),
            "version": t.harness.hash[:12],
            "model_name": clean_name(t.policy.model),
            "extra": {"harness_hash": t.harness.hash, "policy_params": redact(t.policy.params)},
        },
        "steps": [_ordered(s) for s in steps],
        "final_metrics": {
            "total_prompt_tokens": sum(c.prompt_tokens for c in t.calls),
            "total_completion_tokens": sum(c.completion_tokens for c in t.calls),
            "total_cost_usd": sum(c.cost_usd for c in t.calls),
            "total_steps": len(steps),
        },
        "extra": {"harnessctl": _extra(row, t)},
    }


def _agent_step(call: Any, turn: dict[str, Any] | None) -> dict[str, Any]:
    metrics: dict[str, Any] = {
        "prompt_tokens": call.prompt_tokens,
        "completion_tokens": call.completion_tokens,
        "cost_usd": call.cost_usd,
    }
    for ours, theirs in (
        ("prompt_ids", "prompt_token_ids"),
        ("completion_ids", "completion_token_ids"),
        ("logprobs", "logprobs"),
    ):
        if getattr(call, ours) is not None:
            metrics[theirs] = getattr(call, ours)
    step: dict[str, Any] = {
        "source": "agent",
        "model_name": clean_name(call.model),
        "message": call.reply or "",
        "llm_call_count": 1,
        "metrics": metrics,
        "extra": {
            "call_index": call.index,
            "status": call.status,
            "finish_reason": call.finish_reason,
            "error": call.error,
        },
    }
    tool_calls = [_tool_call(tc, call.index, n) for n, tc in enumerate(call.tool_calls)]
    action = (turn or {}).get("action")
    if not tool_calls and isinstance(action, dict) and action.get("kind") == "tool":
        arguments = action.get("arguments")
        tool_calls = [
            {
                "tool_call_id": f"call-{call.index}",
                "function_name": clean_name(action.get("tool") or "tool"),
                "arguments": arguments
                if isinstance(arguments, dict)
                else {"argument": str(action.get("argument") or "")},
            }
        ]
    if tool_calls:
        step["tool_calls"] = tool_calls
    if turn is not None and turn.get("observation") is not None:
        observation = turn["observation"]
        text = observation.get("text") if isinstance(observation, dict) else observation
        result: dict[str, Any] = {"content": _text(text)}
        if tool_calls:
            result["source_call_id"] = tool_calls[0]["tool_call_id"]
        step["observation"] = {"results": [result]}
    return step


def _tool_call(tc: dict[str, Any], index: int, n: int) -> dict[str, Any]:
    fn = tc.get("function") or {}
    raw = fn.get("arguments")
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        arguments = {"input": raw if isinstance(raw, str) else json.dumps(raw)}
    return {
        "tool_call_id": clean_name(tc.get("id") or f"call-{index}-{n}"),
        "function_name": clean_name(fn.get("name") or "tool"),
        "arguments": arguments,
    }


def _extra(row: Any, t: Any) -> dict[str, Any]:
    return {
        "task_id": t.task_id,
        "seed": t.seed,
        "env": t.env,
        "outcome": t.outcome,
        "success": bool(row.success),
        "reward": float(row.reward),
        "env_steps": [
            {
                "index": s.index,
                "kind": s.kind,
                "tool": s.tool,
                "arguments": s.arguments if s.arguments is not None else s.argument,
                "observation": s.observation,
                "status": s.status,
            }
            for s in t.steps
        ],
    }


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _ordered(step: dict[str, Any]) -> dict[str, Any]:
    return {"step_id": step.pop("step_id"), **step}
