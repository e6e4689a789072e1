"""The OpenAI chat-completions wire format, as much of it as the gateway accepts and answers.

Function calling is OpenAI's, in both directions: a request may carry ``tools`` (function
specs), ``tool_choice`` and ``parallel_tool_calls``; assistant messages may carry ``tool_calls``
and ``tool`` messages answer them by ``tool_call_id``; a reply may carry ``tool_calls``.
Message content is a string; a list of text parts (``[{"type": "text", "text": ...}]``) is
accepted and joined with newlines into one string, since only text reaches the model here.
"""

from __future__ import annotations

import re
import secrets
import time
from typing import Any

from ..bounds import loads_untrusted

# Sampling parameters a harness may set; the rollout's policy params override them.
HARNESS_PARAMS = ("temperature", "top_p", "max_tokens", "stop", "seed")
# Function-calling fields passed upstream as they are (after validation).
TOOL_PARAMS = ("tools", "tool_choice", "parallel_tool_calls")
ROLES = ("system", "user", "assistant", "tool")
TOOL_CHOICES = ("auto", "none", "required")
# Credentials, by name: a name with one of these segments (split on ``_``, ``-``, ``.`` and
# camelCase), as litellm's SensitiveDataMasker matches them, plus its credential params
# (``litellm.types.router.CredentialLiteLLMParams``: every one that carries a secret has such
# a segment, which tests/sandbox/test_hostile_local.py checks), and some spellings run together.
SECRET_SEGMENTS = frozenset(
    {
        "password", "passwd", "secret", "key", "token", "auth", "authorization", "cookie",
        "credential", "credentials", "access", "private", "certificate", "fingerprint",
        "tenancy", "headers", "bearer", "apikey", "signature", "session",
    }
)  # fmt: skip
_SECRET_SUBSTRING = re.compile(r"apikey|api_key|secret|passw|credential|bearer|auth", re.I)
_NOT_SECRET = frozenset(
    {"max_tokens", "max_completion_tokens", "input_cost_per_token", "output_cost_per_token"}
)
# Values that are credentials whatever their name: provider keys, bearer strings, JWTs.
_SECRET_VALUE = re.compile(
    r"^\s*(?:bearer\s+\S|(?:sk|pk|rk|ak|hf|gh[pousr]|xox[abp])[-_][A-Za-z0-9_\-]{8,}"
    r"|eyJ[A-Za-z0-9_\-]{10,}\.)",
    re.I,
)
REDACTED = "***"


class RequestError(ValueError):
    """The harness sent a request the gateway does not accept (answered 400 bad_request)."""


def parse_chat_request(raw: bytes) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Validate a chat-completions body; return (messages, harness params).

    The params are the sampling settings and, when given, ``tools`` / ``tool_choice`` /
    ``parallel_tool_calls``. ``model`` is ignored (the rollout's policy decides), other unknown
    OpenAI fields are ignored, ``stream: true`` and ``n > 1`` are refused: the gateway answers
    one complete message.
    """
    try:
        body = loads_untrusted(raw)
    except ValueError as exc:
        raise RequestError(f"body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise RequestError("body must be a JSON object")
    if body.get("stream"):
        raise RequestError("stream=true is not supported by the harnessctl gateway")
    if body.get("n") not in (None, 1):
        raise RequestError("n must be 1")
    return _messages(body.get("messages")), {**_params(body), **_tool_params(body)}


def _text(value: Any, where: str, *, nullable: bool = False) -> str | None:
    """Message content as a string: a string as is, text parts joined with newlines."""
    if isinstance(value, str) or (value is None and nullable):
        return value
    if isinstance(value, list) and value:
        parts = []
        for j, part in enumerate(value):
            if not (
                isinstance(part, dict)
                and part.get("type") == "text"
                and isinstance(part.get("text"), str)
            ):
                raise RequestError(f"{where}[{j}] must be a text part {{type: text, text: str}}")
            parts.append(part["text"])
        return "\n".join(parts)
    raise RequestError(f"{where} must be a string or a list of text parts")


def _messages(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise RequestError("messages must be a non-empty list")
    messages: list[dict[str, Any]] = []
    call_ids: set[str] = set()  # tool calls made so far: what a tool message may answer
    for i, m in enumerate(value):
        where = f"messages[{i}]"
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise RequestError(f"{where} needs a role in {ROLES}")
        role = m["role"]
        if role == "assistant" and m.get("tool_calls"):
            calls = _tool_calls(m["tool_calls"], f"{where}.tool_calls")
            call_ids.update(c["id"] for c in calls)
            content = _text(m.get("content"), f"{where}.content", nullable=True)
            messages.append({"role": role, "content": content, "tool_calls": calls})
            continue
        message = {"role": role, "content": _text(m.get("content"), f"{where}.content")}
        if role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise RequestError(f"{where} (role tool) needs a tool_call_id string")
            if call_id not in call_ids:
                raise RequestError(
                    f"{where}.tool_call_id {call_id!r} answers no earlier assistant tool call"
                )
            message["tool_call_id"] = call_id
        messages.append(message)
    return messages


def _tool_calls(value: Any, where: str) -> list[dict[str, Any]]:
    """Assistant ``tool_calls`` in the OpenAI shape, arguments a (JSON) string."""
    if not isinstance(value, list):
        raise RequestError(f"{where} must be a list")
    calls = []
    for j, call in enumerate(value):
        fn = call.get("function") if isinstance(call, dict) else None
        if (
            not isinstance(fn, dict)
            or call.get("type", "function") != "function"
            or not isinstance(call.get("id"), str)
            or not call["id"]
            or not isinstance(fn.get("name"), str)
            or not isinstance(fn.get("arguments"), str)
        ):
            raise RequestError(
                f"{where}[{j}] must be {{id: str, type: function, "
                "function: {name: str, arguments: str}}"
            )
        calls.append(
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": fn["name"], "arguments": fn["arguments"]},
            }
        )
    return calls


def _tool_params(body: dict[str, Any]) -> dict[str, Any]:
    """``tools``, ``tool_choice``, ``parallel_tool_calls``, validated.

    An empty ``tools`` list counts as none (some SDKs send one); without tools, ``tool_choice``
    ``auto``/``none`` and ``parallel_tool_calls`` are dropped, a required or named choice is
    refused: there is nothing it could call.
    """
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise RequestError("tools must be a list of function tool specs")
    names: list[str] = []
    for j, spec in enumerate(tools or []):
        fn = spec.get("function") if isinstance(spec, dict) else None
        if not isinstance(fn, dict) or spec.get("type") != "function":
            raise RequestError(f"tools[{j}] must be {{type: function, function: {{name: ...}}}}")
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise RequestError(f"tools[{j}].function.name must be a non-empty string")
        if name in names:
            raise RequestError(f"tools[{j}]: a second function named {name!r}")
        if "parameters" in fn and not isinstance(fn["parameters"], dict):
            raise RequestError(f"tools[{j}].function.parameters must be a JSON schema object")
        if "description" in fn and not isinstance(fn["description"], str):
            raise RequestError(f"tools[{j}].function.description must be a string")
        names.append(name)
    choice = body.get("tool_choice")
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise RequestError("parallel_tool_calls must be true or false")
    if choice is not None and choice not in TOOL_CHOICES:
        fn = choice.get("function") if isinstance(choice, dict) else None
        if (
            not isinstance(fn, dict)
            or choice.get("type") != "function"
            or not isinstance(fn.get("name"), str)
        ):
            raise RequestError(
                f"tool_choice must be one of {TOOL_CHOICES} or "
                "{type: function, function: {name: str}}"
            )
        if fn["name"] not in names:
            raise RequestError(f"tool_choice names {fn['name']!r}, which is not in tools")
    if not names:
        if choice not in (None, "auto", "none"):
            raise RequestError("tool_choice requires tools")
        return {}
    params: dict[str, Any] = {"tools": tools}
    if choice is not None:
        params["tool_choice"] = choice
    if parallel is not None:
        params["parallel_tool_calls"] = parallel
    return params


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
    if not -(2**63) <= params.get("seed", 0) < 2**63:  # no policy server takes more (issue 53)
        raise RequestError("seed must be a signed 64-bit integer")
    stop = params.get("stop")
    if stop is not None and not (
        isinstance(stop, str) or (isinstance(stop, list) and all(isinstance(s, str) for s in stop))
    ):
        raise RequestError("stop must be a string or a list of strings")
    return params


def is_secret(name: str, value: Any = None) -> bool:
    """Whether a parameter is a credential: by its name (:data:`SECRET_SEGMENTS`, litellm's
    convention) or by its value (a provider key such as ``sk-...``, a bearer string)."""
    key = str(name)
    if key.lower() in _NOT_SECRET:
        return False
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", key)
    segments = {s for s in re.split(r"[_\-.\s]+", spaced.lower()) if s}
    if segments & SECRET_SEGMENTS or _SECRET_SUBSTRING.search(key):
        return True
    return isinstance(value, str) and bool(_SECRET_VALUE.match(value))


def redact(params: dict[str, Any]) -> dict[str, Any]:
    """Params as recorded anywhere: credentials (:func:`is_secret`) replaced by ``***``,
    nested mappings and lists redacted the same way."""
    return {k: REDACTED if is_secret(k, v) else _redact_value(v) for k, v in params.items()}


def _redact_value(value: Any) -> Any:
    if isinstance(value, dict):
        return redact(value)
    if isinstance(value, list):
        return [_redact_value(v) for v in value]
    if isinstance(value, str) and _SECRET_VALUE.match(value):
        return REDACTED
    return value


def completion_body(
    *,
    model: str,
    content: str,
    finish_reason: str | None,
    prompt_tokens: int,
    completion_tokens: int,
    tool_calls: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A non-streaming OpenAI ``chat.completion`` object.

    With ``tool_calls`` the message carries them (``content`` null when there is no text) and
    the finish reason is ``tool_calls`` unless the provider reported one other than ``stop``
    (``length``: the calls may be cut short).
    """
    message: dict[str, Any] = {"role": "assistant", "content": content}
    reason = finish_reason or "stop"
    if tool_calls:
        message["content"] = content or None
        message["tool_calls"] = tool_calls
        if reason == "stop":
            reason = "tool_calls"
    return {
        "id": f"chatcmpl-hx{secrets.token_hex(8)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": reason}],
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
