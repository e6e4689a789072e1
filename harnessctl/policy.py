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
    def offline(self) -> bool:
        return self.model.split("/", 1)[0] == "sim"


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
