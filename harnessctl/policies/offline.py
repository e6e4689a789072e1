"""The litellm custom provider behind every offline TEST DOUBLE policy (``sim/*``, ``replay/*``).

Imported lazily by :func:`harnessctl.policies.register_providers` because it imports litellm.
The gateway calls ``litellm.completion(model="sim/dbbench", ...)`` exactly as for a real model;
this handler resolves the offline policy by name (:data:`harnessctl.policies.OFFLINE_POLICIES`),
looks up the view of the task its channel registered for the rollout id the gateway puts in
``metadata["harnessctl"]``, and answers with the policy's reply: text, or function calls when
the request carried ``tools``. Replies, usage and ids are deterministic; the cost is zero.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

from litellm import CustomLLM
from litellm.llms.custom_llm import CustomLLMError
from litellm.types.utils import (
    ChatCompletionMessageToolCall,
    Function,
    GenericStreamingChunk,
    ModelResponse,
    Usage,
)

from . import OfflineParamError, get_offline_policy, oracle
from .sim_signals import read_history, text_of

ZERO_PRICE = {
    "input_cost_per_token": 0.0,
    "output_cost_per_token": 0.0,
    "cache_creation_input_token_cost": 0.0,
    "cache_read_input_token_cost": 0.0,
    "mode": "chat",
    "max_tokens": 128_000,
    "max_input_tokens": 128_000,
    "max_output_tokens": 8_192,
}


def estimate_tokens(texts: list[str]) -> int:
    """ceil(chars / 4) + 4 per message: close enough to a real tokenizer for budgets."""
    return sum(math.ceil(len(t) / 4) + 4 for t in texts)


def _seed(tags: Mapping[str, Any], optional_params: Mapping[str, Any]) -> int:
    raw = tags.get("seed", optional_params.get("seed", 0))
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise CustomLLMError(status_code=400, message=f"seed {raw!r} is not an integer") from None


def _params(optional_params: Mapping[str, Any]) -> dict[str, Any]:
    """The call's parameters with ``extra_body`` merged in (where litellm puts unknown ones)."""
    params = dict(optional_params)
    extra = params.pop("extra_body", None)
    if isinstance(extra, Mapping):
        params.update(extra)
    return params


def tool_call_objects(calls: list[dict[str, Any]], digest: str) -> list[Any]:
    """OpenAI tool calls (``{"name", "arguments"}`` dicts) as litellm message objects."""
    out = []
    for i, call in enumerate(calls):
        arguments = call.get("arguments", {})
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        out.append(
            ChatCompletionMessageToolCall(
                id=call.get("id") or f"call_{digest[:12]}_{i}",
                type="function",
                function=Function(name=call["name"], arguments=text),
            )
        )
    return out


def respond(
    provider: str,
    model: str,
    messages: Any,
    model_response: ModelResponse,
    optional_params: Mapping[str, Any],
    litellm_params: Mapping[str, Any] | None,
) -> ModelResponse:
    """Fill ``model_response`` with the offline policy ``provider/model``'s reply."""
    name = f"{provider}/{model}"
    try:
        policy = get_offline_policy(name)
    except Exception as exc:  # unknown name: the request is wrong, say which exist
        raise CustomLLMError(status_code=400, message=str(exc)) from None
    metadata = (litellm_params or {}).get("metadata") or {}
    tags = metadata.get("harnessctl") if isinstance(metadata, Mapping) else None
    tags = tags if isinstance(tags, Mapping) else {}
    rollout_id = str(tags.get("rollout_id") or "")
    view = oracle.lookup(rollout_id) if rollout_id else None
    if view is None:
        raise CustomLLMError(
            status_code=400,
            message=(
                f"{name} is an oracle-backed test double and found no task view for rollout "
                f"{rollout_id or '(none)'}: run it through a rollout session (or register one "
                "with harnessctl.policies.offline_channel)"
            ),
        )
    params = _params(optional_params)
    tools = params.pop("tools", None) or []
    try:
        reply = policy.reply(view, messages, _seed(tags, optional_params), params, tools)
    except OfflineParamError as exc:
        raise CustomLLMError(status_code=400, message=f"{name}: {exc}") from None
    content, calls = (
        (reply, []) if isinstance(reply, str) else (reply.get("content"), reply["tool_calls"])
    )

    prompt_texts = [text_of(m.get("content") if isinstance(m, dict) else m) for m in messages or []]
    call_index = tags.get("call_index", read_history(messages).turn)
    digest = hashlib.sha256(f"{rollout_id}:{call_index}".encode()).hexdigest()[:24]
    message = model_response.choices[0].message
    message.content = content
    if calls:
        message.tool_calls = tool_call_objects(calls, digest)
    model_response.choices[0].finish_reason = "tool_calls" if calls else "stop"
    model_response.model = name
    model_response.id = f"simcmpl-{digest}"
    reply_text = (content or "") + "".join(json.dumps(c) for c in calls)
    prompt_tokens = estimate_tokens(prompt_texts)
    completion_tokens = estimate_tokens([reply_text])
    model_response.usage = Usage(  # type: ignore[attr-defined]
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=prompt_tokens + completion_tokens,
    )
    return model_response


class OfflineProvider(CustomLLM):
    """litellm handler for one offline provider prefix (``sim`` or ``replay``)."""

    def __init__(self, provider: str) -> None:
        super().__init__()
        self.provider = provider

    def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
        return respond(
            self.provider,
            model,
            messages,
            kwargs["model_response"],
            kwargs.get("optional_params") or {},
            kwargs.get("litellm_params"),
        )

    async def acompletion(
        self, model: str, messages: list, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        # Pure CPU work in microseconds: no reason to hop to a thread.
        return self.completion(model, messages, *args, **kwargs)

    # Streaming (stream=True) sends the whole reply as one chunk.
    def streaming(self, *args: Any, **kwargs: Any) -> Iterator[GenericStreamingChunk]:
        yield _as_chunk(self.completion(*args, **kwargs))

    async def astreaming(  # type: ignore[override]
        self, *args: Any, **kwargs: Any
    ) -> AsyncIterator[GenericStreamingChunk]:
        yield _as_chunk(self.completion(*args, **kwargs))


def _as_chunk(response: ModelResponse) -> GenericStreamingChunk:
    usage = response.usage  # type: ignore[attr-defined]
    return {
        "text": response.choices[0].message.content or "",
        "tool_use": None,
        "is_finished": True,
        "finish_reason": "stop",
        "usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
        },
        "index": 0,
    }


def model_info(names: list[str]) -> dict[str, dict[str, Any]]:
    """Zero prices for the offline models, so litellm's cost tracking reports 0."""
    return {n: {**ZERO_PRICE, "litellm_provider": n.split("/", 1)[0]} for n in names}


ReplyFn = Callable[..., Any]
