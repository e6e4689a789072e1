"""The OpenAI chat-completions wire format, as much of it as the gateway accepts and answers."""

from __future__ import annotations

import json
import re
import secrets
import time
from typing import Any

# Sampling parameters a harness may set; the rollout's policy params override them.
HARNESS_PARAMS = ("temperature", "top_p", "max_tokens", "stop", "seed")
ROLES = ("system", "user", "assistant")
_SECRET_KEY = re.compile(r"key|secret|password|credential|authorization|headers|_token$", re.I)
_NOT_SECRET = frozenset({"max_tokens", "max_completion_tokens"})


class RequestError(ValueError):
    """The harness sent a request the gateway does not accept (answered 400 bad_request)."""


def parse_chat_request(raw: bytes) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Validate a chat-completions body; return (messages, harness params).

    ``model`` is ignored (the rollout's policy decides), other unknown OpenAI fields are ignored,
    ``stream: true`` and ``n > 1`` are refused: the gateway answers one complete message.
    """
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RequestError(f"body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise RequestError("body must be a JSON object")
    if body.get("stream"):
        raise RequestError("stream=true is not supported by the harnessctl gateway")
    if body.get("n") not in (None, 1):
        raise RequestError("n must be 1")
    return _messages(body.get("messages")), _params(body)


def _messages(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise RequestError("messages must be a non-empty list")
    messages = []
    for i, m in enumerate(value):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise RequestError(f"messages[{i}] needs a role in {ROLES}")
        if not isinstance(m.get("content"), str):
            raise RequestError(f"messages[{i}].content must be a string")
        messages.append({"role": m["role"], "content": m["content"]})
    return messages


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _params(body: dict[str, Any]) -> dict[str, Any]:
    params = {k: body[k] for k in HARNESS_PARAMS if body.get(k) is not None}
    for k in ("temperature", "top_p"):
        if k in params and not _is_number(params[k]):
            raise RequestError(f"{k} must be a number")
    for k in ("max_tokens", "seed"):
        if k in params and (not isinstance(params[k], int) or isinstance(params[k], bool)):
            raise RequestError(f"{k} must be an integer")
    if params.get("max_tokens", 1) < 1:
        raise RequestError("max_tokens must be >= 1")
    stop = params.get("stop")
    if stop is not None and not (
        isinstance(stop, str) or (isinstance(stop, list) and all(isinstance(s, str) for s in stop))
    ):
        raise RequestError("stop must be a string or a list of strings")
    return params


def redact(params: dict[str, Any]) -> dict[str, Any]:
    """Params as recorded in the ledger: secrets (api keys, tokens) replaced by ``***``."""
    return {
        k: "***" if _SECRET_KEY.search(k) and k not in _NOT_SECRET else v for k, v in params.items()
    }


def completion_body(
    *,
    model: str,
    content: str,
    finish_reason: str | None,
    prompt_tokens: int,
    completion_tokens: int,
) -> dict[str, Any]:
    """A non-streaming OpenAI ``chat.completion`` object."""
    return {
        "id": f"chatcmpl-hx{secrets.token_hex(8)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason or "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def error_body(type_: str, code: str, message: str) -> dict[str, Any]:
    """An OpenAI-style error object; ``code`` is what the runtime client dispatches on."""
    return {"error": {"type": type_, "code": code, "message": message}}


def models_body(model: str) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [{"id": model, "object": "model", "created": 0, "owned_by": "harnessctl"}],
    }
