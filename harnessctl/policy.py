"""The policy a rollout runs under: a litellm model string plus sampling parameters.

Credentials given as params (``api_key``, ``aws_secret_access_key``, anything named like a
key, token, secret or password: :func:`harnessctl.gateway.protocol.is_secret`) are split off
into :attr:`Policy.secrets` when the policy is made. ``params`` therefore never holds one, and
everything that stores, hashes or prints a policy (cache identity, run and rollout rows,
trajectories, profiles, pools, reports) sees only the rest; the gateway alone gets
:attr:`Policy.call_params`, params and secrets together, to forward upstream.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from .errors import ConfigError


@dataclass(frozen=True)
class Policy:
    model: str
    params: dict = field(default_factory=dict)
    #: Credentials split off ``params``: never stored, hashed, printed or compared.
    secrets: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        from .gateway.protocol import is_secret

        params, secrets = {}, dict(self.secrets)
        for key, value in dict(self.params).items():
            if is_secret(key, value):
                secrets[key] = value
            else:
                params[key] = value
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "secrets", secrets)

    @property
    def id(self) -> str:
        """Stable identity used in cache keys: model + canonical params, credentials left out
        (a new key neither changes the identity nor can be recovered from it)."""
        if not self.params:
            return self.model
        blob = json.dumps(self.params, sort_keys=True, separators=(",", ":"))
        return f"{self.model}#{hashlib.sha256(blob.encode()).hexdigest()[:10]}"

    @property
    def call_params(self) -> dict:
        """What the gateway forwards upstream: params and credentials."""
        return {**self.params, **self.secrets}

    @property
    def label(self) -> str:
        """The policy as a person reads it: ``sim/dbbench skill=0.8`` (:func:`policy_label`)."""
        return policy_label(self.model, self.params)

    @property
    def offline(self) -> bool:
        return self.model.split("/", 1)[0] == "sim"


SETTING_PREFIX = "harnessctl:"
"""Keys of a run row's params that are the run's settings, not the policy's (the model-call
timeout, ``harnessctl.run.evaluate.MODEL_TIMEOUT_KEY``): no litellm parameter has a colon."""
_LABEL_VALUE_CHARS = 40


def shown_params(params: dict) -> dict:
    """A stored run's params as they are shown: the policy's alone (the run's own settings
    left out), credentials redacted. A run recorded before credentials were split off its
    policy (or by another tool) shows ``api_key=***``, never the key."""
    from .gateway.protocol import redact

    return redact({k: v for k, v in params.items() if not str(k).startswith(SETTING_PREFIX)})


def policy_label(model: str, params: dict) -> str:
    """``model key=value ...``, keys sorted, as ``runs`` and ``show`` print a policy: the
    identity (``model#hash``) names the parameters but cannot be read back into them. A long
    value (a JSON schema, say) is cut to 40 characters; secrets are redacted."""
    parts = [model]
    for key, value in sorted(shown_params(params).items()):
        shown = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        if isinstance(value, str) and (not value or any(c in value for c in ' \t\n"=')):
            shown = json.dumps(value)
        if len(shown) > _LABEL_VALUE_CHARS:
            shown = shown[: _LABEL_VALUE_CHARS - 3] + "..."
        parts.append(f"{key}={shown}")
    return " ".join(parts)


def parse_params(pairs: list[str]) -> dict:
    """``key=value`` pairs; values parsed as JSON where they parse (numbers, bools)."""
    params: dict = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError("--param", f"expected key=value, got {pair!r}")
        try:
            params[key] = json.loads(raw)
        except json.JSONDecodeError:
            params[key] = raw
    return params
