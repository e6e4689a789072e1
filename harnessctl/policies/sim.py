"""The ``sim`` litellm custom provider: offline TEST DOUBLE policies (``sim/dbbench``).

Imported lazily by :func:`harnessctl.policies.register_providers` because it imports litellm.
The gateway calls ``litellm.completion(model="sim/dbbench", messages=..., metadata=...)`` exactly
as for a real model; this handler looks the task's oracle up by the rollout id the gateway puts
in ``metadata["harnessctl"]`` and answers like a (flawed) agent would. Replies, usage and ids are
deterministic; the cost is zero.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

from litellm import CustomLLM
from litellm.llms.custom_llm import CustomLLMError
from litellm.types.utils import GenericStreamingChunk, ModelResponse, Usage

from . import dbbench_sim, oracle
from .sim_signals import read_history, text_of

ReplyFn = Callable[[Mapping[str, Any], Any, int, Mapping[str, float]], str]
MODELS: dict[str, ReplyFn] = {"dbbench": dbbench_sim.next_reply}

_ZERO_PRICE = {
    "input_cost_per_token": 0.0,
    "output_cost_per_token": 0.0,
    "cache_creation_input_token_cost": 0.0,
    "cache_read_input_token_cost": 0.0,
    "litellm_provider": "sim",
    "mode": "chat",
    "max_tokens": 128_000,
    "max_input_tokens": 128_000,
    "max_output_tokens": 8_192,
}
MODEL_INFO: dict[str, dict[str, Any]] = {f"sim/{name}": dict(_ZERO_PRICE) for name in MODELS}


def _bad_request(message: str) -> CustomLLMError:
    return CustomLLMError(status_code=400, message=message)


def estimate_tokens(texts: list[str]) -> int:
    """ceil(chars / 4) + 4 per message: close enough to a real tokenizer for budgets."""
    return sum(math.ceil(len(t) / 4) + 4 for t in texts)


def _unit_float(params: Mapping[str, Any], key: str, default: float) -> float:
    raw = params.get(key, default)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise _bad_request(f"sim: param {key}={raw!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise _bad_request(f"sim: param {key}={value} must be between 0 and 1")
    return value


def read_params(optional_params: Mapping[str, Any]) -> tuple[float, dict[str, float]]:
    """(skill, per-mode rate overrides) from the call params; ``extra_body`` is merged in."""
    params = dict(optional_params)
    extra = params.pop("extra_body", None)
    if isinstance(extra, Mapping):
        params.update(extra)
    skill = _unit_float(params, "skill", dbbench_sim.DEFAULT_SKILL)
    overrides: dict[str, float] = {}
    for key in params:
        if not key.startswith("rate_"):
            continue
        mode = key.removeprefix("rate_")
        if mode not in dbbench_sim.MODES:
            known = ", ".join(dbbench_sim.MODES)
            raise _bad_request(f"sim: unknown param {key}; failure modes are: {known}")
        overrides[mode] = _unit_float(params, key, 0.0)
    return skill, overrides


def _seed(tags: Mapping[str, Any], optional_params: Mapping[str, Any]) -> int:
    raw = tags.get("seed", optional_params.get("seed", 0))
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise _bad_request(f"sim: seed {raw!r} is not an integer") from None


def respond(
    model: str,
    messages: Any,
    model_response: ModelResponse,
    optional_params: Mapping[str, Any],
    litellm_params: Mapping[str, Any] | None,
) -> ModelResponse:
    """Fill ``model_response`` with the sim's reply to ``messages``."""
    reply_fn = MODELS.get(model)
    if reply_fn is None:
        known = ", ".join(f"sim/{m}" for m in MODELS)
        raise _bad_request(f"unknown offline model sim/{model}; known: {known}")
    metadata = (litellm_params or {}).get("metadata") or {}
    tags = metadata.get("harnessctl") if isinstance(metadata, Mapping) else None
    tags = tags if isinstance(tags, Mapping) else {}
    rollout_id = str(tags.get("rollout_id") or "")
    task_oracle = oracle.lookup(rollout_id) if rollout_id else None
    if task_oracle is None:
        raise _bad_request(
            f"sim/{model} is an oracle-backed test double and found no oracle for rollout "
            f"{rollout_id or '(none)'}: pass metadata={{'harnessctl': {{'rollout_id': ...}}}} "
            "and call harnessctl.policies.oracle.register() before the rollout"
        )
    skill, overrides = read_params(optional_params)
    rates = dbbench_sim.effective_rates(skill, overrides)
    reply = reply_fn(task_oracle, messages, _seed(tags, optional_params), rates)

    prompt_texts = [text_of(m.get("content") if isinstance(m, dict) else m) for m in messages or []]
    call_index = tags.get("call_index", read_history(messages).turn)
    digest = hashlib.sha256(f"{rollout_id}:{call_index}".encode()).hexdigest()[:24]

    model_response.choices[0].message.content = reply
    model_response.choices[0].finish_reason = "stop"
    model_response.model = f"sim/{model}"
    model_response.id = f"simcmpl-{digest}"
    prompt_tokens = estimate_tokens(prompt_texts)
    completion_tokens = estimate_tokens([reply])
    model_response.usage = Usage(  # type: ignore[attr-defined]
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=prompt_tokens + completion_tokens,
    )
    return model_response


class SimProvider(CustomLLM):
    """litellm handler for ``sim/<name>`` models (offline test doubles)."""

    def completion(
        self,
        model: str,
        messages: list,
        api_base: str,
        custom_prompt_dict: dict,
        model_response: ModelResponse,
        print_verbose: Callable,
        encoding: Any,
        api_key: Any,
        logging_obj: Any,
        optional_params: dict,
        acompletion: Any = None,
        litellm_params: Any = None,
        logger_fn: Any = None,
        headers: Any = None,
        timeout: Any = None,
        client: Any = None,
    ) -> ModelResponse:
        return respond(model, messages, model_response, optional_params, litellm_params)

    async def acompletion(
        self,
        model: str,
        messages: list,
        api_base: str,
        custom_prompt_dict: dict,
        model_response: ModelResponse,
        print_verbose: Callable,
        encoding: Any,
        api_key: Any,
        logging_obj: Any,
        optional_params: dict,
        acompletion: Any = None,
        litellm_params: Any = None,
        logger_fn: Any = None,
        headers: Any = None,
        timeout: Any = None,
        client: Any = None,
    ) -> ModelResponse:
        # Pure CPU work in microseconds: no reason to hop to a thread.
        return respond(model, messages, model_response, optional_params, litellm_params)

    # Streaming (stream=True) sends the whole reply as one chunk; litellm calls these with the
    # same keyword arguments as ``completion``.
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
