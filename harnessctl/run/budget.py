"""A rollout's budgets, resolved in one place for every command and the library.

The gateway enforces three per-rollout budgets: model calls, prompt+completion tokens and
(host-served environments) environment steps. A value given explicitly (a flag, a request
field, ``Pool.load(max_calls=...)``, an edit recipe) wins; otherwise the environment's own
(:class:`harnessctl.envs.Environment` fields, whose defaults are harnessctl's). eval, evolve,
profile, pools, rescue and the edit reward all call :func:`resolve_budgets`, so a pool's
rollouts run on exactly the budgets ``eval`` would use.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..envs import Environment
from ..errors import ConfigError


@dataclass(frozen=True)
class Budgets:
    """The gateway's per-rollout caps."""

    max_calls: int
    """Model calls per rollout."""
    max_tokens: int
    """Prompt + completion tokens per rollout."""
    max_steps: int
    """Environment steps per rollout (host-served environments; resets are not steps)."""


def resolve_budgets(
    env: Environment,
    *,
    max_calls: int | None = None,
    max_tokens: int | None = None,
    max_steps: int | None = None,
) -> Budgets:
    """The budgets of a rollout in ``env``: each given value (not None, not 0), else the
    environment's. ``ConfigError`` for a negative value."""
    chosen = {
        "max_calls": max_calls or env.max_calls,
        "max_tokens": max_tokens or env.max_tokens,
        "max_steps": max_steps or env.max_steps,
    }
    for name, value in chosen.items():
        if value < 0:
            raise ConfigError(f"--{name.replace('_', '-')}", f"must be >= 0, got {value}")
    return Budgets(**chosen)
