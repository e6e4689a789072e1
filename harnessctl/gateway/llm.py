"""The one module that imports litellm: a single model call with harnessctl's own retries.

One entry point, :func:`complete`, with two providers behind it: litellm for every real
model, and the offline test doubles (``sim/*``, ``replay/*``) answered directly by
:func:`harnessctl.policies.serve.offline_reply` (the function litellm's custom provider for
them wraps too), so an offline run never pays litellm's import (docs/decisions.md).
litellm takes ~4-7 s to import, so it is imported on first use and cached. Retries belong to
harnessctl, not to litellm or the openai SDK (both are switched off per call), so that the number
of upstream attempts is known, recorded and deterministic.

A server on this machine (a loopback ``api_base``: ``localhost``, 127.0.0.0/8, ``::1``) is
never sent a call again after it timed out: it may still be generating the first, and a
CPU-bound server would start the same generation over behind it (on a busy machine each
re-send at 120 s restarted a reply that needed longer, until the rollout gave up). Its call
gets a longer timeout instead when the run sets none (:func:`call_timeout`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import secrets
import threading
import time
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

from harnessctl.constants import DEFAULT_LOCAL_MODEL_TIMEOUT_S, DEFAULT_MODEL_TIMEOUT_S
from harnessctl.errors import HarnessctlError, InfraError

_litellm: ModuleType | None = None
_import_lock = threading.Lock()

# HTTP statuses worth another attempt: request timeout, rate limit, and any server-side failure.
_RETRYABLE_STATUS = frozenset({408, 409, 429})


class UpstreamError(InfraError):
    """The provider kept failing (429, 5xx, timeout, connection) after every retry."""

    def __init__(self, message: str, *, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


class ContextWindowError(HarnessctlError):
    """The request does not fit the model's context window (not retried)."""

    def __init__(self, message: str, *, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


class ModelRequestError(HarnessctlError):
    """The provider refused the request (bad request, auth, unknown model); not retried.

    ``status_code`` is the provider's HTTP status when known (401/403/404 mean the host's
    configuration is wrong, 400/422 that the request itself is).
    """

    def __init__(self, message: str, *, attempts: int, status_code: int | None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.status_code = status_code


@dataclass
class Completion:
    """One successful model call. ``latency_s`` covers all attempts and backoff waits;
    ``model`` is the model name the provider reported (its exact version when it says);
    ``tool_calls`` are the reply's function calls in the OpenAI dict shape (``{id, type:
    "function", function: {name, arguments}}``, arguments a JSON string)."""

    content: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency_s: float
    attempts: int
    finish_reason: str | None
    model: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    #: Token-level capture, when the request asked for it and the server returned it (see
    #: :func:`token_capture`): the prompt's and the completion's token ids and each
    #: completion token's logprob. None when not asked for or not returned.
    prompt_ids: list[int] | None = None
    completion_ids: list[int] | None = None
    logprobs: list[float] | None = None


def get_litellm() -> ModuleType:
    """Import litellm once, offline and quiet, with harnessctl's custom providers registered."""
    global _litellm
    if _litellm is not None:
        return _litellm
    with _import_lock:
        if _litellm is None:
            # Must be set before the import: otherwise litellm fetches its cost map from GitHub.
            os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
            import litellm

            litellm.telemetry = False
            litellm.set_verbose = False
            litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" prints
            litellm.num_retries = None  # never let a global setting re-enable its retries
            _register_providers(litellm)
            _litellm = litellm
    return _litellm


def _register_providers(litellm: ModuleType) -> None:
    try:
        from harnessctl.policies import register_providers
    except ImportError as exc:
        # Guard while harnessctl.policies is written in parallel: only a missing module or a
        # missing function is tolerated (errors inside the module still raise). The lead removes
        # this guard when wiring the packages together.
        if exc.name != "harnessctl.policies":
            raise
        return
    register_providers(litellm)


_PRICE_KEYS = ("input_cost_per_token", "output_cost_per_token")
"""USD per token given with a call's params: litellm's keys for a custom price."""


def complete(
    model: str,
    messages: list[dict[str, Any]],
    params: dict[str, Any],
    *,
    metadata: dict[str, Any] | None = None,
    timeout_s: float | None = None,
    retries: int = 3,
    backoff_s: float = 0.5,
) -> Completion:
    """Call ``model`` through litellm; retry 408/429/5xx/timeouts/connection errors.

    Attempt ``i`` (0-based) that fails retryably is followed by a ``backoff_s * 2**i`` wait, up to
    ``retries`` retries; then :class:`UpstreamError`. Each attempt may take ``timeout_s``
    (None: :func:`call_timeout`'s default for the endpoint); a loopback server's timed-out
    call is not retried (:class:`UpstreamError` at once). Context-window overflows raise
    :class:`ContextWindowError`, other 4xx :class:`ModelRequestError`, neither retried.
    ``params`` (sampling settings, ``tools``/``tool_choice``, ``api_base``, ``api_key``...)
    pass through to litellm;
    ``metadata`` reaches custom providers as ``litellm_params["metadata"]`` (litellm does not
    send it to OpenAI-style APIs). ``drop_params`` defaults to True: a sampling setting the
    provider does not support (say ``seed``) is dropped instead of failing the rollout.
    """
    from harnessctl.policies import is_offline

    if is_offline(model):
        return _complete_offline(model, messages, params, metadata)
    litellm = get_litellm()
    base = endpoint(model, params)
    local = is_loopback(base)
    timeout_s = call_timeout(model, params, timeout_s)
    kwargs: dict[str, Any] = {"drop_params": True, **params}
    kwargs.update(model=model, messages=messages, timeout=timeout_s, num_retries=0, max_retries=0)
    # a price given as params (a model litellm does not map): litellm's cost ignores it
    # unless told, and the call would be recorded at $0 (so --max-editor-cost never tripped)
    prices = {k: float(params[k]) for k in _PRICE_KEYS if params.get(k) is not None}
    started = time.monotonic()
    last: BaseException | None = None
    for attempt in range(1, retries + 2):
        if metadata is not None:  # a fresh dict per attempt: litellm adds its own keys to it
            kwargs["metadata"] = dict(metadata)
        try:
            response = litellm.completion(**kwargs)
        except Exception as exc:
            _raise_if_final(litellm, exc, attempt, model)
            if local and _timed_out(exc):
                raise UpstreamError(
                    f"{model}: the model server at {base} sent no reply in {timeout_s:g} s "
                    f"({type(exc).__name__}); not sent again: a server on this machine may "
                    "still be generating it and would start over (a longer --model-timeout, "
                    "more free cores or fewer slots)",
                    attempts=attempt,
                ) from exc
            last = exc
            if attempt <= retries:
                time.sleep(backoff_s * 2 ** (attempt - 1))
            continue
        done = _to_completion(litellm, response, model, messages, attempt, started, prices)
        if params.get("return_token_ids") and done.prompt_ids is None and params.get("api_base"):
            from .server_tokens import prompt_ids

            done.prompt_ids = prompt_ids(
                str(params["api_base"]),
                messages,
                params.get("tools"),
                done.prompt_tokens,
                timeout_s,
            )
        return done
    attempts = retries + 1
    raise UpstreamError(
        f"{model}: upstream failed {attempts} time(s); last error: {type(last).__name__}: {last}",
        attempts=attempts,
    ) from last


def endpoint(model: str, params: dict[str, Any]) -> str | None:
    """Where the call goes when the run says so: its ``api_base`` (or ``base_url``), or for
    Ollama, which litellm sends to ``localhost:11434`` unless told, that address."""
    base = params.get("api_base") or params.get("base_url")
    if base:
        return str(base)
    if model.partition("/")[0] in ("ollama", "ollama_chat"):
        return "http://localhost:11434"
    return None


def is_loopback(api_base: str | None) -> bool:
    """Whether ``api_base`` is a server on this machine: ``localhost`` (or a ``*.localhost``
    name, RFC 6761) or a loopback address (127.0.0.0/8, ``::1``). Decided from the URL
    alone: a name is never resolved (no lookup at call time, the same answer offline)."""
    if not api_base:
        return False
    host = urlsplit(api_base if "//" in api_base else f"//{api_base}").hostname
    if not host:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1
    return address.is_loopback or bool(mapped and mapped.is_loopback)


def call_timeout(model: str, params: dict[str, Any], timeout_s: float | None) -> float:
    """Seconds one attempt of a call may take: ``timeout_s`` when the run sets one, else
    :data:`~harnessctl.constants.DEFAULT_LOCAL_MODEL_TIMEOUT_S` for a loopback server (sent
    once, so it waits for a slow reply) and
    :data:`~harnessctl.constants.DEFAULT_MODEL_TIMEOUT_S` for a provider (re-sent on a
    timeout)."""
    if timeout_s is not None:
        return timeout_s
    local = is_loopback(endpoint(model, params))
    return DEFAULT_LOCAL_MODEL_TIMEOUT_S if local else DEFAULT_MODEL_TIMEOUT_S


def _timed_out(exc: BaseException) -> bool:
    """Whether a failed attempt ran out of time (litellm's ``Timeout`` is openai's)."""
    import openai

    return isinstance(exc, openai.APITimeoutError)


def _complete_offline(
    model: str,
    messages: list[dict[str, Any]],
    params: dict[str, Any],
    metadata: dict[str, Any] | None,
) -> Completion:
    """An offline test double's reply as a :class:`Completion` (free, one attempt); a
    request it cannot answer is a 400, as from a real provider."""
    from harnessctl.policies.serve import OfflineRequestError, offline_reply

    started = time.monotonic()
    try:
        reply = offline_reply(model, messages, params, metadata)
    except OfflineRequestError as exc:
        raise ModelRequestError(f"{model}: {exc}", attempts=1, status_code=400) from None
    return Completion(
        content=reply.content or "",
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        cost_usd=0.0,
        latency_s=time.monotonic() - started,
        attempts=1,
        finish_reason=reply.finish_reason,
        model=reply.model,
        tool_calls=reply.tool_calls,
    )


def _raise_if_final(litellm: ModuleType, exc: Exception, attempt: int, model: str) -> None:
    """Classify a failed attempt: return if it is worth retrying, raise otherwise."""
    import openai  # a litellm dependency, already imported by it

    if isinstance(exc, litellm.ContextWindowExceededError):
        raise ContextWindowError(f"{model}: {exc}", attempts=attempt) from exc
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and 400 <= status < 500 and status not in _RETRYABLE_STATUS:
        # the provider answered and refused the request: never retried, whatever class
        # litellm's exception mapping gives it
        raise ModelRequestError(f"{model}: {exc}", attempts=attempt, status_code=status) from exc
    if isinstance(exc, openai.APIConnectionError):  # includes timeouts
        return
    if not isinstance(exc, openai.APIError) or not isinstance(status, int):
        raise exc  # not a provider failure: a bug, surface it unchanged
    if status in _RETRYABLE_STATUS or status >= 500:
        return
    raise ModelRequestError(f"{model}: {exc}", attempts=attempt, status_code=status) from exc


def _to_completion(
    litellm: ModuleType,
    response: Any,
    model: str,
    messages: list[dict[str, Any]],
    attempts: int,
    started: float,
    prices: dict[str, float] | None = None,
) -> Completion:
    choice = response.choices[0]
    content = choice.message.content or ""
    tool_calls = tool_call_dicts(getattr(choice.message, "tool_calls", None))
    usage = getattr(response, "usage", None)
    prompt_tokens = getattr(usage, "prompt_tokens", None)
    completion_tokens = getattr(usage, "completion_tokens", None)
    # Budgets count tokens, so a provider that reports no usage is counted locally instead.
    if prompt_tokens is None:
        prompt_tokens = litellm.token_counter(model=model, messages=messages)
    if completion_tokens is None:
        said = content + "".join(
            c["function"]["name"] + c["function"]["arguments"] for c in tool_calls
        )
        completion_tokens = litellm.token_counter(model=model, text=said)
    try:
        cost = float(
            litellm.completion_cost(
                completion_response=response, custom_cost_per_token=prices or None
            )
            or 0.0
        )
    except Exception:  # unknown price (local or custom model): cost is unknown, not an error
        cost = 0.0
    prompt_ids, completion_ids, logprobs = token_capture(response)
    return Completion(
        content=content,
        prompt_tokens=int(prompt_tokens),
        completion_tokens=int(completion_tokens),
        cost_usd=cost,
        latency_s=time.monotonic() - started,
        attempts=attempts,
        finish_reason=getattr(choice, "finish_reason", None),
        model=str(getattr(response, "model", None) or model),
        tool_calls=tool_calls,
        prompt_ids=prompt_ids,
        completion_ids=completion_ids,
        logprobs=logprobs,
    )


def wants_tokens(params: dict[str, Any]) -> bool:
    """Whether the call asks the server for token-level output (``logprobs`` or vLLM's
    ``return_token_ids``)."""
    return bool(params.get("logprobs") or params.get("return_token_ids"))


def token_capture(response: Any) -> tuple[list[int] | None, list[int] | None, list[float] | None]:
    """``(prompt_ids, completion_ids, logprobs)`` of a chat completion, each None when the
    server did not return it.

    Servers differ: vLLM, asked with ``return_token_ids``, puts ``prompt_token_ids`` on the
    response and ``token_ids`` on the choice; with ``logprobs`` it gives each completion
    token's logprob (OpenAI's ``logprobs.content``). llama.cpp's server gives no prompt ids
    and no ``token_ids``, but each ``logprobs.content`` entry carries the token's ``id``: the
    completion ids are taken from there when every entry has one.
    """
    choice = response.choices[0]
    extra = _field(choice, "provider_specific_fields") or {}  # where older litellm puts them
    prompt_ids = _int_list(_field(response, "prompt_token_ids"))
    completion_ids = _int_list(_field(choice, "token_ids")) or _int_list(_field(extra, "token_ids"))
    logprobs = None
    content = _field(_field(choice, "logprobs"), "content")
    if isinstance(content, list) and content:
        values = [_field(entry, "logprob") for entry in content]
        if all(isinstance(v, int | float) for v in values):
            logprobs = [float(v) for v in values]
        if completion_ids is None:
            completion_ids = _int_list([_field(entry, "id") for entry in content])
        if completion_ids is None:  # vLLM's --return-tokens-as-token-ids: "token_id:<id>"
            completion_ids = _int_list([_token_id(_field(entry, "token")) for entry in content])
    return prompt_ids, completion_ids, logprobs


def _token_id(token: Any) -> int | None:
    if isinstance(token, str) and token.startswith("token_id:"):
        with contextlib.suppress(ValueError):
            return int(token[len("token_id:") :])
    return None


def _int_list(value: Any) -> list[int] | None:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        return None
    return list(value)


def tool_call_dicts(calls: Any) -> list[dict[str, Any]]:
    """A reply's tool calls (litellm objects or dicts) as plain OpenAI dicts.

    Providers differ at the edges: arguments given as an object are JSON-encoded, a missing
    id is made up (a tool message must be able to answer the call), a missing name is empty.
    """
    out = []
    for call in calls or []:
        fn = _field(call, "function")
        arguments = _field(fn, "arguments")
        if arguments is None:
            arguments = "{}"
        elif not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        out.append(
            {
                "id": str(_field(call, "id") or f"call_{secrets.token_hex(8)}"),
                "type": "function",
                "function": {"name": str(_field(fn, "name") or ""), "arguments": arguments},
            }
        )
    return out


def _field(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)
