"""A rollout as an OpenTelemetry trace in OTLP/JSON, following the GenAI semantic
conventions of :data:`SEMCONV_VERSION` (``gen_ai.*`` attributes; the message content
attributes ``gen_ai.input.messages`` / ``gen_ai.output.messages`` are opt-in there and
included here: the export is asked for explicitly).

One trace per rollout (trace id: the rollout id), spans:

- ``invoke_agent {harness}``: the rollout (``gen_ai.operation.name = invoke_agent``, the
  harness as the agent, the rollout id as the conversation), with harnessctl's own
  ``harnessctl.*`` attributes (task, seed, outcome, success, reward);
- ``chat {model}``: one per model call, child of the rollout: request and response model,
  sampling parameters, token usage, finish reason, the messages and the reply,
  ``error.type`` when the gateway refused or the provider failed;
- ``execute_tool {tool}``: one per environment step of a host-served environment, and one
  per tool call the harness reported (``turn`` events) for in-sandbox environments.

Timing: the gateway records each call's latency, not its start; calls are laid out one
after another from the rollout's start, so durations are exact and start times
approximate. Environment steps carry their own start times.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from ..gateway.protocol import redact
from .names import clean_name

SEMCONV_VERSION = "1.44.0"
SEMCONV_SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
SCOPE = "harnessctl.traces"
_SAMPLING = {
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "max_tokens": "gen_ai.request.max_tokens",
    "seed": "gen_ai.request.seed",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
}
NAME_ATTRIBUTES = frozenset(
    {
        "gen_ai.agent.name",
        "gen_ai.agent.id",
        "gen_ai.provider.name",
        "gen_ai.request.model",
        "gen_ai.response.model",
        "gen_ai.tool.name",
        "gen_ai.tool.call.id",
        "harnessctl.env",
        "harnessctl.task.id",
    }
)
"""Attributes whose values are names (viewers list them as such): cleaned as span names are
(:func:`names.clean_name`); every other value is content and kept as recorded."""
SPAN_KIND_INTERNAL, SPAN_KIND_CLIENT = 1, 3
STATUS_ERROR = 2
_ERROR_OUTCOMES = {"harness_error", "infra_error", "timeout"}
"""Outcomes where the rollout itself failed (a wrong answer is a result, not an error)."""


def to_otlp(pairs: list, spans: list | None = None) -> dict[str, Any]:
    """``(rollout row, Trajectory)`` pairs as one OTLP/JSON ``ExportTraceServiceRequest``
    (``spans``: already built, e.g. rollout by rollout with bad ones left out)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        ours = version("harnessctl")
    except PackageNotFoundError:
        ours = "unknown"
    if spans is None:
        spans = [span for row, t in pairs for span in rollout_spans(row, t)]
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": _attrs({"service.name": "harnessctl", "service.version": ours})
                },
                "scopeSpans": [
                    {
                        "scope": {"name": SCOPE, "version": ours},
                        "spans": spans,
                        "schemaUrl": SEMCONV_SCHEMA_URL,
                    }
                ],
                "schemaUrl": SEMCONV_SCHEMA_URL,
            }
        ]
    }


def rollout_spans(row: Any, t: Any, warnings: list[str] | None = None) -> list[dict[str, Any]]:
    """The spans of one rollout. A time the sandbox reported (untrusted: a runtime event's
    ``t``) that is not a finite number within the rollout is clamped into it, and said in
    ``warnings``."""
    trace_id = _hex(row.id, 32)
    root_id = _span_id(row.id, "rollout")
    end = row.created_at
    start = end - max(row.wall_s, sum(c.latency_s for c in t.calls))
    root_attrs = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": t.harness.name,
        "gen_ai.agent.id": t.harness.hash,
        "gen_ai.conversation.id": t.rollout_id,
        "gen_ai.request.model": t.policy.model,
        "harnessctl.task.id": t.task_id,
        "harnessctl.seed": t.seed,
        "harnessctl.env": t.env,
        "harnessctl.outcome": t.outcome,
        "harnessctl.success": bool(row.success),
        "harnessctl.reward": float(row.reward),
        "harnessctl.policy.params": json.dumps(redact(t.policy.params), sort_keys=True),
    }
    spans = [
        _span(
            trace_id,
            root_id,
            None,
            f"invoke_agent {t.harness.name}",
            start,
            end,
            root_attrs,
            SPAN_KIND_INTERNAL,
            t.outcome if t.outcome in _ERROR_OUTCOMES else None,
        )
    ]
    clock = start
    for call in t.calls:
        spans.append(_call_span(trace_id, root_id, row.id, call, clock))
        clock += call.latency_s
    for step in t.steps:
        begin = step.started_at or clock
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": step.tool or step.kind,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.arguments": json.dumps(step.arguments)
            if step.arguments is not None
            else step.argument,
            "gen_ai.tool.call.result": step.observation,
            "harnessctl.step.index": step.index,
            "harnessctl.step.kind": step.kind,
            "harnessctl.step.status": step.status,
        }
        error = None if step.status == "ok" else (step.error or step.status)
        spans.append(
            _span(
                trace_id,
                _span_id(row.id, f"step{step.index}"),
                root_id,
                f"execute_tool {step.tool or step.kind}",
                begin,
                begin + step.latency_s,
                attrs,
                SPAN_KIND_INTERNAL,
                error,
            )
        )
    if not t.steps:
        spans.extend(_turn_tool_spans(trace_id, root_id, row.id, t, (start, end), warnings))
    return spans


def _when(value: Any, window: tuple[float, float]) -> float | None:
    """``value`` as a time within ``window``; None when it is not a finite number there."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or not window[0] <= value <= window[1]:
        return None
    return float(value)


def _call_span(trace_id: str, parent: str, rollout: str, call: Any, start: float) -> dict:
    params = redact(call.params)
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": call.model.split("/", 1)[0] if "/" in call.model else "unknown",
        "gen_ai.request.model": call.model,
        "gen_ai.response.model": call.model,
        "gen_ai.usage.input_tokens": call.prompt_tokens,
        "gen_ai.usage.output_tokens": call.completion_tokens,
        "gen_ai.input.messages": json.dumps(_input_messages(call.messages)),
        "gen_ai.output.messages": json.dumps(_output_messages(call)),
        "harnessctl.call.index": call.index,
        "harnessctl.call.status": call.status,
        "harnessctl.call.cost_usd": call.cost_usd,
        "harnessctl.call.attempts": call.attempts,
    }
    if call.finish_reason:
        attrs["gen_ai.response.finish_reasons"] = [call.finish_reason]
    if call.tools:
        attrs["gen_ai.tool.definitions"] = json.dumps(call.tools)
    for key, name in _SAMPLING.items():
        if isinstance(params.get(key), (int, float)) and not isinstance(params[key], bool):
            attrs[name] = params[key]
    error = None
    if call.status != "ok":
        attrs["error.type"] = call.status
        error = call.error or call.status
    return _span(
        trace_id,
        _span_id(rollout, f"call{call.index}"),
        parent,
        f"chat {call.model}",
        start,
        start + call.latency_s,
        attrs,
        SPAN_KIND_CLIENT,
        error,
    )


def _turn_tool_spans(
    trace_id: str,
    parent: str,
    rollout: str,
    t: Any,
    window: tuple[float, float],
    warnings: list[str] | None,
) -> list:
    """Tool calls the runtime reported (in-sandbox environments: the harness ran them)."""
    spans = []
    for n, turn in enumerate(t.turns()):
        action = turn.get("action") or {}
        if not isinstance(action, dict) or action.get("kind") != "tool":
            continue
        at = _when(turn.get("t"), window)
        if at is None:
            at = window[0]
            if warnings is not None and turn.get("t") is not None:
                shown = repr(turn.get("t"))[:40]
                warnings.append(f"{rollout}: turn {n}'s time {shown} is not within the rollout")
        observation = turn.get("observation") or {}
        text = observation.get("text", "") if isinstance(observation, dict) else str(observation)
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": str(action.get("tool") or "tool"),
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.arguments": str(action.get("argument") or ""),
            "gen_ai.tool.call.result": str(text),
            "harnessctl.source": "runtime",
        }
        if action.get("call_id"):
            attrs["gen_ai.tool.call.id"] = str(action["call_id"])
        failed = isinstance(observation, dict) and observation.get("ok") is False
        spans.append(
            _span(
                trace_id,
                _span_id(rollout, f"turn{n}"),
                parent,
                f"execute_tool {attrs['gen_ai.tool.name']}",
                at,
                at,
                attrs,
                SPAN_KIND_INTERNAL,
                "tool_error" if failed else None,
            )
        )
    return spans


def _input_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        content = m.get("content")
        parts: list[dict[str, Any]] = (
            [
                {
                    "type": "text",
                    "content": content if isinstance(content, str) else json.dumps(content),
                }
            ]
            if content is not None
            else []
        )
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function") or {}
            parts.append(
                {
                    "type": "tool_call",
                    "id": tc.get("id"),
                    "name": fn.get("name"),
                    "arguments": fn.get("arguments"),
                }
            )
        out.append({"role": str(m.get("role", "user")), "parts": parts})
    return out


def _output_messages(call: Any) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if call.reply:
        parts.append({"type": "text", "content": call.reply})
    for tc in call.tool_calls:
        fn = tc.get("function") or {}
        parts.append(
            {
                "type": "tool_call",
                "id": tc.get("id"),
                "name": fn.get("name"),
                "arguments": fn.get("arguments"),
            }
        )
    if not parts:
        return []
    return [
        {
            "role": "assistant",
            "parts": parts,
            "finish_reason": call.finish_reason or ("error" if call.status != "ok" else "stop"),
        }
    ]


def _span(
    trace_id: str,
    span_id: str,
    parent: str | None,
    name: str,
    start: float,
    end: float,
    attrs: dict[str, Any],
    kind: int,
    error: str | None,
) -> dict[str, Any]:
    """A span; ``error``: the span failed, with this message (else the status is unset)."""
    span: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": clean_name(name),
        "kind": kind,
        "startTimeUnixNano": str(int(start * 1e9)),
        "endTimeUnixNano": str(int(max(end, start) * 1e9)),
        "attributes": _attrs(attrs),
        "status": {} if error is None else {"code": STATUS_ERROR, "message": error},
    }
    if parent:
        span["parentSpanId"] = parent
    return span


def _attrs(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"key": clean_name(k), "value": _any(clean_name(v) if k in NAME_ATTRIBUTES else v)}
        for k, v in values.items()
        if v is not None
    ]


def _any(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [_any(v) for v in value]}}
    return {"stringValue": str(value)}


def _hex(text: str, width: int) -> str:
    """``text`` when it is already ``width`` hex digits (a rollout id), else a hash of it."""
    if len(text) == width and all(c in "0123456789abcdef" for c in text):
        return text
    return hashlib.sha256(text.encode()).hexdigest()[:width]


def _span_id(rollout: str, what: str) -> str:
    return hashlib.sha256(f"{rollout}:{what}".encode()).hexdigest()[:16]
