"""What a trainer's policy server accepts of an OpenAI chat request, checked before the model
sees any of it (stdlib only: the checks import no trainer).

The request comes from a harness, through the gateway: its sampling values are the harness's
choice. A value the model cannot take (a seed past 64 bits overflows ``torch.manual_seed``;
a NaN ``top_p`` fails in ``generate``) used to raise inside the server and drop the
connection, which the gateway can only read as the host failing (``infra_error``: retried,
left out of the score). Checked here, it is a 400 naming the field, which the gateway hands
back to the harness as its own request's error. The ranges are OpenAI's, which vLLM (the
other trainers' server) enforces too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1
"""A seed is a signed 64-bit integer (OpenAI's API; vLLM refuses others with a 400)."""
TEMPERATURE_MAX = 2.0
_TORCH_SEEDS = 2**64  # torch.manual_seed takes [-2**63, 2**64): any residue below 2**64


class BadRequest(ValueError):
    """The request cannot be served as sent: a 400 whose message names the field."""


@dataclass(frozen=True)
class ChatRequest:
    """A checked chat request: what the server's model is asked to do."""

    messages: list[dict[str, Any]]
    max_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int = 0


def _number(body: dict, name: str, low: float, high: float, default: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRequest(f"{name} must be a number")
    if not (math.isfinite(value) and low <= value <= high):
        raise BadRequest(f"{name} must be between {low:g} and {high:g}, not {value!r}")
    return float(value)


def _integer(body: dict, name: str, low: int, high: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{name} must be an integer")
    if not low <= value <= high:
        shown = str(value) if value.bit_length() <= 64 else f"a {value.bit_length()}-bit integer"
        raise BadRequest(f"{name} must be between {low} and {high}, not {shown}")
    return value


def check_chat_request(body: Any) -> ChatRequest:
    """``body`` (a parsed JSON request) as a :class:`ChatRequest`; :class:`BadRequest` when a
    field is missing, of the wrong type or out of range."""
    if not isinstance(body, dict):
        raise BadRequest("the request must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest(f"messages[{i}] must be an object with a string role")
        if not isinstance(message.get("content"), str | list | type(None)):
            raise BadRequest(f"messages[{i}].content must be a string, a list or null")
    return ChatRequest(
        messages=messages,
        max_tokens=_integer(body, "max_tokens", 1, 2**31 - 1),
        temperature=_number(body, "temperature", 0.0, TEMPERATURE_MAX, 1.0),
        top_p=_number(body, "top_p", 0.0, 1.0, 1.0),
        seed=_integer(body, "seed", SEED_MIN, SEED_MAX) or 0,
    )


def torch_seed(seed: int, salt: int) -> int:
    """The generator seed of one call: the request's seed mixed with ``salt`` (the prompt's
    length, so each call of a rollout samples its own stream), reduced into the range
    ``torch.manual_seed`` takes. Unchanged for the non-negative seeds rollouts use."""
    return (seed * 7919 + salt) % _TORCH_SEEDS
