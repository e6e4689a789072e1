"""What a run can cost, said before it runs: each paid model's share (the agent's rollouts,
an LLM editor's calls), an upper bound from the budgets and, where earlier rollouts of the
same policy are in the store, what the rollouts that surely run cost at their measured mean.

Prices come from the run's own parameters (``input_cost_per_token`` and
``output_cost_per_token``, as litellm takes them) or else from litellm's cost map (read
offline, never fetched); a model with neither is "price unknown", which is said and never
blocks. Offline test doubles are free and have no share. Nothing here prints: the CLI
renders a :class:`CostEstimate` and asks (``harnessctl.cli.preflight_view``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

PRICE_PARAMS = ("input_cost_per_token", "output_cost_per_token")
"""The parameters that set a model's price (USD per token), litellm's own names."""


@dataclass(frozen=True)
class Price:
    """USD per input and per output token, and where they came from."""

    input: float
    output: float
    source: str
    """``params`` (the run's), ``litellm`` (its cost map) or ``offline`` (a test double)."""

    def per_million(self) -> str:
        return f"${1e6 * self.input:.2f}/${1e6 * self.output:.2f} per 1M input/output tokens"


@dataclass(frozen=True)
class Window:
    """A model's context window and reply cap in tokens, as litellm's map has them."""

    max_input: int | None
    max_output: int | None


@dataclass(frozen=True)
class Usage:
    """Mean tokens per unit (a rollout, an editor call) measured in the store."""

    prompt_tokens: float
    completion_tokens: float
    samples: int


def _model_info(model: str) -> dict[str, Any]:
    from .llm import get_litellm

    try:
        return dict(get_litellm().get_model_info(model))
    except Exception:  # litellm knows nothing of it (a local or custom model)
        return {}


def price_of(model: str, params: dict[str, Any], *, option: str = "--param") -> Price | None:
    """``model``'s price: the run's ``input_cost_per_token``/``output_cost_per_token`` (both,
    finite, 0 or more: ``ConfigError`` naming ``option`` otherwise), else litellm's; None when
    neither knows it. An offline test double costs nothing."""
    from ..policies import is_offline

    if is_offline(model):
        return Price(0.0, 0.0, "offline")
    given = [name for name in PRICE_PARAMS if params.get(name) is not None]
    if given:
        if len(given) == 1:
            raise ConfigError(option, f"{given[0]} given without {_other(given[0])}: give both")
        values = [_usd(params[name], name, option) for name in PRICE_PARAMS]
        return Price(values[0], values[1], "params")
    info = _model_info(model)
    inp, out = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if inp is None or out is None:
        return None
    return Price(float(inp), float(out), "litellm")


def _other(name: str) -> str:
    return PRICE_PARAMS[1 - PRICE_PARAMS.index(name)]


def _usd(value: Any, name: str, option: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not (math.isfinite(number) and number >= 0):
        raise ConfigError(option, f"{name}={value!r} is not a finite price of 0 or more")
    return number


def window_of(model: str) -> Window:
    """``model``'s context window and reply cap from litellm's map (None where unknown)."""
    info = _model_info(model)
    cap = info.get("max_output_tokens") or info.get("max_tokens")
    return Window(info.get("max_input_tokens") or None, int(cap) if cap else None)


def measured_usage(store, policy_id: str, suite: str) -> Usage | None:
    """Mean prompt and completion tokens of the stored rollouts of ``policy_id`` on ``suite``
    that called the model; None when there are none."""
    rows = [r for r in store.rollouts(policy_id=policy_id, suite=suite) if r.model_calls > 0]
    if not rows:
        return None
    n = len(rows)
    return Usage(
        sum(r.prompt_tokens for r in rows) / n, sum(r.completion_tokens for r in rows) / n, n
    )


@dataclass(frozen=True)
class Part:
    """One paid model's share of a run: at most ``units`` rollouts or calls, each at most
    ``max_input`` prompt and ``max_output`` reply tokens (for a rollout, whose budget counts
    both together, ``max_tokens`` instead)."""

    role: str
    """``agent`` (the policy under evaluation) or ``editor``."""
    model: str
    unit: str
    """``rollout`` or ``call``."""
    units: int
    price: Price | None
    max_tokens: int | None = None
    """A rollout's token budget (prompt + completion over all its calls)."""
    max_calls: int | None = None
    max_input: int | None = None
    """An editor call's prompt tokens at most (None: unknown)."""
    max_output: int | None = None
    """An editor call's reply tokens at most (None: unknown)."""
    certain: int = 0
    """Units that run for sure (a command's first evaluation): the low end is theirs."""
    usage: Usage | None = None
    cap_usd: float | None = None
    """A spending limit that stops this share (``evolve --max-editor-cost``): checked before
    each round, so the bound is the cap plus one round's calls."""
    cap_slack_units: int = 0
    """The units that may still run once the cap is reached (one round's calls)."""
    how: str = ""
    """How ``units`` was counted, for the reader (``base 40 + 6 judgement(s) x up to 97``)."""

    @property
    def unit_bound_usd(self) -> float | None:
        """The most one unit can cost; None when the price or a token bound is unknown."""
        p = self.price
        if p is None:
            return None
        if self.max_tokens is not None:
            return self.max_tokens * max(p.input, p.output)
        if self.max_input is None or self.max_output is None:
            return None
        return self.max_input * p.input + self.max_output * p.output

    @property
    def bound_usd(self) -> float | None:
        """The most this share can cost (None: unknown)."""
        each = self.unit_bound_usd
        if each is None:  # a model litellm cannot price is recorded at $0: no cap applies
            return None
        bound = self.units * each
        if self.cap_usd is not None:
            bound = min(bound, self.cap_usd + self.cap_slack_units * each)
        return bound

    @property
    def low_usd(self) -> float | None:
        """What the ``certain`` units cost at the measured mean (None: nothing measured)."""
        if self.price is None or self.usage is None or not self.certain:
            return None
        u, p = self.usage, self.price
        return self.certain * (u.prompt_tokens * p.input + u.completion_tokens * p.output)


@dataclass(frozen=True)
class CostEstimate:
    """Every paid share of a run (offline test doubles have none)."""

    parts: tuple[Part, ...]

    @property
    def bound_usd(self) -> float | None:
        """The sum of the known bounds; None when no share has one."""
        known = [b for b in (p.bound_usd for p in self.parts) if b is not None]
        return sum(known) if known else None

    @property
    def unknown(self) -> list[Part]:
        """Shares whose bound is unknown (no price, or no token bound)."""
        return [p for p in self.parts if p.bound_usd is None]

    def above(self, threshold: float) -> bool:
        """Whether the known bound passes ``threshold`` (an unknown one never blocks)."""
        bound = self.bound_usd
        return bound is not None and bound > threshold


def agent_part(request, pending: int, store=None, *, certain: int | None = None, how: str = ""):
    """The agent's share of ``pending`` rollouts under ``request`` (an ``EvalRequest``: its
    policy and budgets); ``certain`` of them surely run (default: all); measured means from
    ``store`` when given. None for an offline test double."""
    from ..policies import is_offline

    policy = request.policy
    if is_offline(policy.model):
        return None
    usage = measured_usage(store, policy.id, request.suite.name) if store is not None else None
    return Part(
        role="agent",
        model=policy.model,
        unit="rollout",
        units=pending,
        price=price_of(policy.model, policy.call_params),
        max_tokens=request.max_tokens,
        max_calls=request.max_calls,
        certain=pending if certain is None else certain,
        usage=usage,
        how=how,
    )
