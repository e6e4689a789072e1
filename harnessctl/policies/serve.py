"""The offline test doubles' replies, without litellm: one function that both providers of
the gateway use (:mod:`harnessctl.gateway.llm` calls it directly for ``sim/*`` and
``replay/*``; :mod:`.offline` wraps it as a litellm custom provider for code that calls
``litellm.completion`` itself). Replies, usage and ids are deterministic; the cost is zero.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import OfflineParamError, get_offline_policy, oracle
from .sim_signals import read_history, text_of


class OfflineRequestError(ValueError):
    """The request cannot be answered (unknown policy, no task view, a parameter the policy
    does not take): an HTTP 400 of a real provider."""

    status_code = 400


@dataclass
class OfflineReply:
    """One offline reply: text and/or OpenAI tool calls (dicts), usage and ids."""

    content: str | None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    id: str = ""
    model: str = ""

    @property
    def finish_reason(self) -> str:
        """``tool_calls`` when the reply calls tools, else ``stop``."""
        return "tool_calls" if self.tool_calls else "stop"


RESAMPLE = "resample"
"""Every offline policy's param: 0 (the default) keeps the draws paired, the same (task,
seed) drawing alike under any harness; N > 0 re-draws them per harness from (seed, harness
hash, N), as a sampled model's run-to-run variation would (benchmarks/null_edits.py)."""


def estimate_tokens(texts: list[str]) -> int:
    """ceil(chars / 4) + 4 per message: close enough to a real tokenizer for budgets."""
    return sum(math.ceil(len(t) / 4) + 4 for t in texts)


def valid_resample(value: Any) -> bool:
    """``resample`` is a non-negative integer (a bool is not one)."""
    return not isinstance(value, bool) and isinstance(value, int) and value >= 0


def _seed(tags: Mapping[str, Any], params: Mapping[str, Any]) -> int:
    raw = tags.get("seed", params.get("seed", 0))
    try:
        seed = int(raw)
    except (TypeError, ValueError):
        raise OfflineRequestError(f"seed {raw!r} is not an integer") from None
    resample = params.get(RESAMPLE, 0)
    if not valid_resample(resample):
        raise OfflineRequestError(f"{RESAMPLE} {resample!r} is not a non-negative integer")
    if resample == 0:
        return seed
    # a sampled model's run-to-run variation: each harness draws afresh for the same seed
    blob = f"{seed}|{tags.get('harness', '')}|{resample}"
    return int(hashlib.sha256(blob.encode()).hexdigest()[:12], 16)


def call_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The call's parameters with ``extra_body`` merged in (where litellm puts unknown ones)."""
    merged = dict(params)
    extra = merged.pop("extra_body", None)
    if isinstance(extra, Mapping):
        merged.update(extra)
    return merged


def tool_call_dicts(calls: list[dict[str, Any]], digest: str) -> list[dict[str, Any]]:
    """A policy's ``{"name", "arguments"}`` calls as OpenAI tool calls with stable ids."""
    out = []
    for i, call in enumerate(calls):
        arguments = call.get("arguments", {})
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        out.append(
            {
                "id": call.get("id") or f"call_{digest[:12]}_{i}",
                "type": "function",
                "function": {"name": call["name"], "arguments": text},
            }
        )
    return out


def offline_reply(
    name: str, messages: Any, params: Mapping[str, Any], metadata: Mapping[str, Any] | None
) -> OfflineReply:
    """The reply of the offline policy ``name`` to ``messages``: its task view is found by
    the rollout id in ``metadata["harnessctl"]`` (:mod:`.oracle`), ``params`` are the call's
    (``tools``, ``seed``, the policy's own such as ``skill``)."""
    try:
        policy = get_offline_policy(name)
    except Exception as exc:  # unknown name: the request is wrong, say which exist
        raise OfflineRequestError(str(exc)) from None
    tags = (metadata or {}).get("harnessctl") if isinstance(metadata, Mapping) else None
    tags = tags if isinstance(tags, Mapping) else {}
    rollout_id = str(tags.get("rollout_id") or "")
    view = oracle.lookup(rollout_id) if rollout_id else None
    if view is None:
        raise OfflineRequestError(
            f"{name} is an oracle-backed test double and found no task view for rollout "
            f"{rollout_id or '(none)'}: run it through a rollout session (or register one "
            "with harnessctl.policies.offline_channel)"
        )
    merged = call_params(params)
    tools = merged.pop("tools", None) or []
    seed = _seed(tags, merged)
    merged.pop(RESAMPLE, None)
    try:
        reply = policy.reply(view, messages, seed, merged, tools)
    except OfflineParamError as exc:
        raise OfflineRequestError(f"{name}: {exc}") from None
    content, calls = (
        (reply, []) if isinstance(reply, str) else (reply.get("content"), reply["tool_calls"])
    )
    prompt_texts = [text_of(m.get("content") if isinstance(m, dict) else m) for m in messages or []]
    call_index = tags.get("call_index", read_history(messages).turn)
    digest = hashlib.sha256(f"{rollout_id}:{call_index}".encode()).hexdigest()[:24]
    reply_text = (content or "") + "".join(json.dumps(c) for c in calls)
    return OfflineReply(
        content=content,
        tool_calls=tool_call_dicts(calls, digest),
        prompt_tokens=estimate_tokens(prompt_texts),
        completion_tokens=estimate_tokens([reply_text]),
        id=f"simcmpl-{digest}",
        model=name,
    )
