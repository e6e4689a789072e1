"""The policy a rollout runs under: a litellm model string plus sampling parameters."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from .errors import ConfigError


@dataclass(frozen=True)
class Policy:
    model: str
    params: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        """Stable identity used in cache keys: model + canonical params."""
        if not self.params:
            return self.model
        blob = json.dumps(self.params, sort_keys=True, separators=(",", ":"))
        return f"{self.model}#{hashlib.sha256(blob.encode()).hexdigest()[:10]}"

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
