"""Preflight: one minimal model call before the first rollout of a real model, so that a
missing key, an unknown model or a server that is down stops a run in seconds (exit 2, the
cause named) instead of being retried as infrastructure on every rollout.

A real model only: offline test doubles (``sim/*``, ``replay/*``) make no call, and a run
whose rollouts are all in the store never gets here (the caller checks only when something
runs). A policy that passed is not checked again in the same process (evolve and profile
evaluate many times). What a run can cost is :mod:`harnessctl.gateway.estimate`'s.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from typing import Any

from ..errors import ConfigError

PREFLIGHT_TIMEOUT_S = 20.0
"""Seconds the one preflight call may take (a server that is down answers at once)."""
_PING = [{"role": "user", "content": "Reply with the word OK."}]
_passed: set[str] = set()
_lock = threading.Lock()
_log = logging.getLogger(__name__)


def _identity(model: str, params: dict[str, Any]) -> str:
    blob = json.dumps([model, params], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()  # credentials hashed, never kept


def _offline(model: str) -> bool:
    from ..policies import is_offline

    return is_offline(model)


#: Providers whose key variables are known here (any one of them will do), so that a missing
#: key is found without importing litellm (seconds under load); the table is checked against
#: litellm's own ``validate_environment`` in the tests. Others are asked of litellm.
PROVIDER_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    "groq": ("GROQ_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "cohere": ("COHERE_API_KEY",),
    "together_ai": ("TOGETHERAI_API_KEY",),
    "fireworks_ai": ("FIREWORKS_AI_API_KEY",),
}


def known_provider(model: str) -> str | None:
    """The provider of ``model`` when its key variables are in :data:`PROVIDER_KEYS`
    (``provider/model``, or a bare ``gpt-*``/``o1``-style OpenAI name)."""
    prefix, sep, _ = model.partition("/")
    if sep:
        return prefix if prefix in PROVIDER_KEYS else None
    return "openai" if model.startswith(("gpt-", "o1", "o3", "o4-")) else None


def missing_credentials(model: str, params: dict[str, Any]) -> list[str]:
    """The environment variables ``model`` needs and that are not set (from
    :data:`PROVIDER_KEYS` when its provider is there, else as litellm says); none when the
    call itself carries a key or goes to a server of its own (``api_base``)."""
    import os

    if any(k in params for k in ("api_key", "api_base", "base_url")):
        return []
    provider = known_provider(model)
    if provider is not None:
        names = PROVIDER_KEYS[provider]
        return [] if any(os.environ.get(n) for n in names) else list(names)
    from .llm import get_litellm

    try:
        found = get_litellm().validate_environment(model=model)
    except Exception:  # a provider litellm cannot check: the call itself will tell
        return []
    return [str(k) for k in found.get("missing_keys") or []]


def preflight(model: str, params: dict[str, Any], *, option: str = "--policy") -> None:
    """Check that ``model`` answers a one-token call with ``params`` (the run's own: sampling
    settings, ``api_base``, credentials). ``ConfigError`` naming ``option`` and the cause
    when the credentials are missing, the provider refuses (auth, unknown model) or the
    server cannot be reached; a rate limit or a server error lets the run go on (its
    rollouts retry those)."""
    if _offline(model):
        return
    key = _identity(model, params)
    with _lock:
        if key in _passed:
            return
    missing = missing_credentials(model, params)
    if missing:
        raise ConfigError(
            option,
            f"{model}: missing credentials: set {' and '.join(missing)} in the environment "
            "(or pass -p api_key=... for this run)",
        )
    base = params.get("api_base") or params.get("base_url")
    if base and _listed(model, str(base), params.get("api_key"), option):
        with _lock:
            _passed.add(key)
        return
    import openai

    from .llm import ContextWindowError, ModelRequestError, UpstreamError, complete

    where = f" at {params['api_base']}" if params.get("api_base") else ""
    try:
        complete(
            model,
            list(_PING),
            {**params, "max_tokens": 1},
            timeout_s=PREFLIGHT_TIMEOUT_S,
            retries=0,
        )
    except ContextWindowError:
        pass  # the model answered; the window is the run's business
    except ModelRequestError as exc:
        raise ConfigError(option, f"a one-token test call was refused{where}: {exc}") from None
    except UpstreamError as exc:
        cause = exc.__cause__
        if isinstance(cause, openai.APIConnectionError):  # refused, unresolvable, timed out
            raise ConfigError(
                option,
                f"{model}: cannot reach the model's server{where} "
                f"({type(cause).__name__}: {cause}); is it running?",
            ) from None
        _log.warning("preflight of %s: %s (the run goes on; its calls retry)", model, exc)
    except Exception as exc:  # litellm's own refusal before any request (bad model string)
        raise ConfigError(option, f"{model}: {type(exc).__name__}: {exc}") from None
    with _lock:
        _passed.add(key)


def _listed(model: str, base: str, api_key: Any, option: str) -> bool:
    """Check an OpenAI-compatible server of the run's own (``api_base``) by its model list
    (``GET /models``: no generation, nothing counted against anything): True when it
    answers, ``ConfigError`` when it cannot be reached or refuses the key, False when it has
    no model list (the one-token call decides then)."""
    import urllib.error
    import urllib.request

    url = base.rstrip("/") + "/models"
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=PREFLIGHT_TIMEOUT_S) as response:
            body = response.read(1_000_000)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise ConfigError(
                option, f"{model}: the server at {base} refused the credentials (HTTP {exc.code})"
            ) from None
        return False
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConfigError(
            option, f"{model}: cannot reach the model's server at {base} ({reason}); is it running?"
        ) from None
    try:
        served = {str(m.get("id")) for m in json.loads(body).get("data") or []}
    except (ValueError, AttributeError, TypeError):
        return True  # it answered; what it lists is not ours to judge
    name = model.split("/", 1)[1] if "/" in model else model
    if served and name not in served and model not in served:
        # llama.cpp's server answers any name with the one model it holds: a warning, no stop
        _log.warning(
            "%s: the server at %s lists %s, not %r", model, base, ", ".join(sorted(served)), name
        )
    return True
