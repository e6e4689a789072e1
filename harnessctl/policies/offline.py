"""The litellm custom provider of the offline TEST DOUBLE policies (``sim/*``, ``replay/*``),
for code that calls ``litellm.completion(model="sim/dbbench", ...)`` itself.

Imported lazily by :func:`harnessctl.policies.register_providers` because it imports litellm.
The reply is :func:`.serve.offline_reply`'s, the same function the gateway calls directly
(without importing litellm, docs/decisions.md): it resolves the offline policy by name, looks
up the view of the task its channel registered for the rollout id in
``metadata["harnessctl"]``, and answers with the policy's reply: text, or function calls when
the request carried ``tools``. Replies, usage and ids are deterministic; the cost is zero.
"""

from __future__ import annotations

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

from .serve import OfflineRequestError, estimate_tokens, offline_reply

__all__ = ["ZERO_PRICE", "OfflineProvider", "estimate_tokens", "model_info", "respond"]

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


def respond(
    provider: str,
    model: str,
    messages: Any,
    model_response: ModelResponse,
    optional_params: Mapping[str, Any],
    litellm_params: Mapping[str, Any] | None,
) -> ModelResponse:
    """Fill ``model_response`` with the offline policy ``provider/model``'s reply
    (:func:`.serve.offline_reply`, the one implementation the gateway also calls directly)."""
    try:
        reply = offline_reply(
            f"{provider}/{model}",
            messages,
            optional_params,
            (litellm_params or {}).get("metadata") or {},
        )
    except OfflineRequestError as exc:
        raise CustomLLMError(status_code=400, message=str(exc)) from None
    message = model_response.choices[0].message
    message.content = reply.content
    if reply.tool_calls:
        message.tool_calls = [
            ChatCompletionMessageToolCall(
                id=c["id"], type="function", function=Function(**c["function"])
            )
            for c in reply.tool_calls
        ]
    model_response.choices[0].finish_reason = "tool_calls" if reply.tool_calls else "stop"
    model_response.model = reply.model
    model_response.id = reply.id
    model_response.usage = Usage(
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        total_tokens=reply.prompt_tokens + reply.completion_tokens,
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

    async def astreaming(self, *args: Any, **kwargs: Any) -> AsyncIterator[GenericStreamingChunk]:
        yield _as_chunk(self.completion(*args, **kwargs))


def _as_chunk(response: ModelResponse) -> GenericStreamingChunk:
    usage = response.usage
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
